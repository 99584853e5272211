//! The command line of `/opt/bin/entrypoint.sh`, a module of its binary (the library carries no
//! CLI dependency): the options of AWS's neuron-monitor image entrypoint.

use std::ffi::OsString;
use std::net::IpAddr;
use std::path::PathBuf;

use clap::Parser;
use nds_entrypoint::command::{DEFAULT_ADDRESS, DEFAULT_PORT};

/// Starts `nds-monitor serve` with neuron-monitor's container command line.
#[derive(Debug, Parser)]
#[command(name = "entrypoint.sh", version, about)]
pub struct Cli {
    /// Port to serve /metrics and /healthz on.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value_t = DEFAULT_ADDRESS)]
    pub address: IpAddr,
    /// Configuration file in neuron-monitor's format (default: every group every 5 s).
    #[arg(long, value_name = "FILE")]
    pub neuron_monitor_config: Option<PathBuf>,
    /// Certificate (PEM) to serve HTTPS with; needs --key-file.
    #[arg(long, value_name = "FILE", requires = "key_file")]
    pub cert_file: Option<PathBuf>,
    /// Private key (PEM) of --cert-file.
    #[arg(long, value_name = "FILE", requires = "cert_file")]
    pub key_file: Option<PathBuf>,
    /// Also push the metrics by OTLP/HTTP to this collector URL (.../v1/metrics).
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<OsString>,
    /// How often to push them (nds-monitor's default when not given).
    #[arg(long, value_name = "DURATION", requires = "otlp_endpoint")]
    pub otlp_period: Option<OsString>,
    /// Keep the event stream's state in this directory (nds-monitor serve --state-dir), so
    /// that a restarted container resumes the stream.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The nds-monitor program (default: the one next to this program).
    #[arg(long, value_name = "PATH")]
    pub monitor: Option<PathBuf>,
    /// Options for nds-monitor itself, after `--` (e.g. `-- --slab-dir /slabs`).
    #[arg(last = true, value_name = "MONITOR_ARGS")]
    pub monitor_args: Vec<OsString>,
}
