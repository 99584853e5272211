//! The command line of the `nds-monitor` tool, a module of its binary (the library carries no CLI
//! dependency). `nds-dist` compiles this same file by path to generate the manual page and
//! shell completions from these definitions.

use std::num::NonZeroU64;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use nds_sysfs::{DEFAULT_MODULE_DIR, DEFAULT_SYSFS_ROOT};

use nds_monitor::hardware::DEFAULT_HARDWARE_ROOT;
use nds_monitor::imds::MetadataSetting;

/// Reports every process's datastore counters and the kernel's totals, one document per period.
#[derive(Debug, Parser)]
#[command(name = "nds-monitor", version, about)]
pub struct Cli {
    /// Configuration file in neuron-monitor's format.
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Period of every group, overriding the configuration (e.g. `1s`, `500ms`).
    #[arg(long)]
    pub period: Option<String>,
    /// Report only processes whose tag matches this regular expression.
    #[arg(long)]
    pub tag_filter: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Stop after this many reports.
    #[arg(long)]
    pub count: Option<u64>,
    /// Indent the JSON (one document then spans several lines).
    #[arg(long)]
    pub pretty: bool,
    /// Root of the module's sysfs devices.
    #[arg(long, default_value = DEFAULT_SYSFS_ROOT)]
    pub sysfs_root: PathBuf,
    /// Directory of the device nodes.
    #[arg(long, default_value = "/dev")]
    pub dev_dir: PathBuf,
    /// Read slab files `neuron<device>-<pid>.slab` from this directory instead of the devices.
    #[arg(long)]
    pub slab_dir: Option<PathBuf>,
    /// Picoseconds per unit of NDS_NC_COUNTER_TIME_IN_USE (1: picoseconds, 1000000:
    /// microseconds); default: the loaded module's time_in_use_unit_ps, else 1.
    #[arg(long, value_name = "PS")]
    pub time_in_use_unit_ps: Option<NonZeroU64>,
    /// The module's directory (its parameters, and whether it is loaded).
    #[arg(long, default_value = DEFAULT_MODULE_DIR)]
    pub module_dir: PathBuf,
    /// EC2 instance metadata for `instance_info`: `auto` (queried only if DMI says this is an
    /// EC2 instance), `off`, or an `http://HOST[:PORT]` endpoint to query.
    #[arg(
        long,
        env = "NDS_MONITOR_INSTANCE_METADATA",
        default_value = "auto",
        value_name = "auto|off|URL"
    )]
    pub instance_metadata: MetadataSetting,
    /// Root of the Neuron driver's sysfs devices (device type and ECC counters, where present).
    #[arg(long, default_value = DEFAULT_HARDWARE_ROOT)]
    pub hardware_sysfs_root: PathBuf,
    /// What to do instead of printing reports.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Prometheus exposition over HTTP at /metrics.
    Serve {
        /// Address to listen on; port 0 picks a free one (the address is printed).
        #[arg(long, default_value = "127.0.0.1:9200")]
        listen: String,
        /// Exit after this many requests.
        #[arg(long)]
        max_requests: Option<usize>,
    },
}

/// The format of the reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON document per report (neuron-monitor's shape).
    Json,
    /// The Prometheus text exposition format, one exposition per report.
    Prometheus,
}
