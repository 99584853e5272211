//! The command line of the `nds-loadgen` tool: its binary parses it, and `nds-dist` generates the
//! manual page and shell completions from the same definitions. Built with the `cli` feature
//! only, so the library without it carries no CLI dependency.

use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use nds_sysfs::{DEFAULT_MODULE_DIR, DEFAULT_SYSFS_ROOT};

use crate::mix::DEFAULT_MIX;

/// Load generator for the Neuron DataStore.
#[derive(Debug, Parser)]
#[command(name = "nds-loadgen", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start producer processes; print every producer's report as one JSON summary.
    Run(Box<RunArgs>),
    /// Print the kernel's current sysfs totals as JSON (a baseline for `compare`).
    Baseline {
        /// Root of the module's sysfs devices.
        #[arg(long, default_value = DEFAULT_SYSFS_ROOT)]
        sysfs_root: PathBuf,
    },
    /// Print the producers' reports next to the kernel's sysfs totals; fail if they differ.
    Compare {
        /// The summary `run` printed.
        #[arg(long)]
        summary: PathBuf,
        /// Totals captured with `baseline` before the run (default: all zero).
        #[arg(long)]
        baseline: Option<PathBuf>,
        /// Root of the module's sysfs devices.
        #[arg(long, default_value = DEFAULT_SYSFS_ROOT)]
        sysfs_root: PathBuf,
    },
    /// Run one producer (started by `run`).
    #[command(hide = true)]
    Producer {
        /// The pid of the `run` that started it: the producer ends with it.
        #[arg(long)]
        parent: u32,
        /// The producer's spec as JSON.
        #[arg(long)]
        spec: String,
    },
}

/// The options of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Devices to load, e.g. `0,1` (default: every device the module has, else 0).
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<u32>,
    /// Producer processes per device.
    #[arg(long, default_value_t = 3)]
    pub procs_per_device: usize,
    /// NeuronCores each producer writes (default: the device's cores in sysfs, else 2).
    #[arg(long)]
    pub cores: Option<usize>,
    /// Executions per producer.
    #[arg(long, conflicts_with = "duration")]
    pub count: Option<u64>,
    /// How long each producer runs, e.g. `5s`.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Executions per second per producer; 0 runs flat out.
    #[arg(long, default_value_t = 500)]
    pub rate: u64,
    /// Status mix as `STATUS=WEIGHT,…` (names with or without NRT_, or numbers).
    #[arg(long, default_value = DEFAULT_MIX)]
    pub mix: String,
    /// Picoseconds per unit of the NDS_NC_COUNTER_TIME_IN_USE written (1: picoseconds,
    /// 1000000: microseconds); default: the loaded module's time_in_use_unit_ps, else 1.
    #[arg(long, value_name = "PS")]
    pub time_in_use_unit_ps: Option<NonZeroU64>,
    /// The module's directory (for the default of --time-in-use-unit-ps).
    #[arg(long, default_value = DEFAULT_MODULE_DIR)]
    pub module_dir: PathBuf,
    /// Tag prefix; tags are `<prefix>-d<device>-p<index>`.
    #[arg(long, default_value = "loadgen")]
    pub tag_prefix: String,
    /// Number of producers (the last ones) that crash halfway: report, then SIGKILL themselves.
    #[arg(long, default_value_t = 0)]
    pub crash: usize,
    /// After the streams, print `ready` and keep the slabs until standard input closes.
    #[arg(long)]
    pub hold: bool,
    /// Directory for the per-producer reports (default: a temporary one, removed after).
    #[arg(long)]
    pub report_dir: Option<PathBuf>,
    /// Use slab files in this directory instead of the kernel's devices.
    #[arg(long)]
    pub slab_dir: Option<PathBuf>,
    /// Directory of the device nodes.
    #[arg(long, default_value = "/dev")]
    pub dev_dir: PathBuf,
    /// Root of the module's sysfs devices (for the defaults of --devices and --cores).
    #[arg(long, default_value = DEFAULT_SYSFS_ROOT)]
    pub sysfs_root: PathBuf,
    /// Base random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the summary to this file instead of standard output.
    #[arg(long)]
    pub summary: Option<PathBuf>,
}
