//! The command line of the `nds-top` tool: its binary parses it, and `nds-dist` generates the
//! manual page and shell completions from the same definitions. Built with the `cli` feature
//! only, so the library without it carries no CLI dependency.

use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use nds_document::config::period_argument;
use nds_host::hardware::DEFAULT_HARDWARE_ROOT;
use nds_host::imds::MetadataSetting;
use nds_sysfs::{DEFAULT_MODULE_DIR, DEFAULT_SYSFS_ROOT};

/// Shows every process's NeuronCores, executions, memory and models.
#[derive(Debug, Parser)]
#[command(name = "nds-top", version, about)]
pub struct Cli {
    /// Refresh period (e.g. `1s`, `500ms`; 1 ms to a day).
    #[arg(long, default_value = "1s", value_parser = period_argument)]
    pub period: Duration,
    /// Print one frame as plain text after one period, then exit.
    #[arg(long)]
    pub once: bool,
    /// Width of the `--once` frame.
    #[arg(long, default_value_t = 80)]
    pub width: u16,
    /// Height of the `--once` frame.
    #[arg(long, default_value_t = 24)]
    pub height: u16,
    /// Keys to apply before drawing the `--once` frame (e.g. `2x` for the first process,
    /// models unfolded).
    #[arg(long, default_value = "")]
    pub keys: String,
    /// Root of the module's sysfs devices.
    #[arg(long, default_value = DEFAULT_SYSFS_ROOT)]
    pub sysfs_root: PathBuf,
    /// Directory of the device nodes.
    #[arg(long, default_value = "/dev")]
    pub dev_dir: PathBuf,
    /// Read slab files from this directory instead of the devices.
    #[arg(long)]
    pub slab_dir: Option<PathBuf>,
    /// Picoseconds per unit of NDS_NC_COUNTER_TIME_IN_USE (1: picoseconds, 1000000:
    /// microseconds); default: the loaded module's time_in_use_unit_ps, else 1.
    #[arg(long, value_name = "PS")]
    pub time_in_use_unit_ps: Option<NonZeroU64>,
    /// The module's directory (its parameters, and whether it is loaded).
    #[arg(long, default_value = DEFAULT_MODULE_DIR)]
    pub module_dir: PathBuf,
    /// Root of the Neuron driver's sysfs devices (device type, where present).
    #[arg(long, default_value = DEFAULT_HARDWARE_ROOT)]
    pub hardware_sysfs_root: PathBuf,
    /// EC2 instance metadata for the title bar: `auto` (queried only if DMI says this is an
    /// EC2 instance), `off`, or an `http://HOST[:PORT]` endpoint to query.
    #[arg(
        long,
        env = "NDS_MONITOR_INSTANCE_METADATA",
        default_value = "auto",
        value_name = "auto|off|URL"
    )]
    pub instance_metadata: MetadataSetting,
}
