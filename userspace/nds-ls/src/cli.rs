//! The command line of the `nds-ls` tool: its binary parses it, and `nds-dist` generates the
//! manual page and shell completions from the same definitions. Built with the `cli` feature
//! only, so the library without it carries no CLI dependency.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use nds_sysfs::DEFAULT_SYSFS_ROOT;

/// Lists every Neuron device's NeuronCores and the processes holding a datastore slab on it.
#[derive(Debug, Parser)]
#[command(name = "nds-ls", version, about)]
pub struct Cli {
    /// Output format: a table, or neuron-ls's JSON (an array of device objects).
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub output_format: OutputFormat,
    /// The same as `--output-format json` (neuron-ls's spelling before 2.34).
    #[arg(short = 'j', long, conflicts_with = "output_format")]
    pub json_output: bool,
    /// Print whole commands and tags in the table (cut at 40 characters otherwise).
    #[arg(short, long)]
    pub wide: bool,
    /// Root of the module's sysfs devices.
    #[arg(long, default_value = DEFAULT_SYSFS_ROOT)]
    pub sysfs_root: PathBuf,
    /// Directory of the device nodes.
    #[arg(long, default_value = "/dev")]
    pub dev_dir: PathBuf,
    /// Read each slot's slab from DIR/neuron<device>-<pid>.slab instead of the device (the
    /// slot tables still say who holds a slab).
    #[arg(long, value_name = "DIR")]
    pub slab_dir: Option<PathBuf>,
    /// Where to read the processes' command lines.
    #[arg(long, default_value = "/proc")]
    pub proc_root: PathBuf,
    /// Print every device's tenure ledger instead, as lastcomm prints process accounting: one
    /// line (with --output-format json, one JSON object) per tenure that ended, oldest first,
    /// with its end, owner, times, completed and failed executions and tag.
    #[arg(long)]
    pub ledger: bool,
    /// With --ledger: keep printing the tenures that end, until interrupted.
    #[arg(long, requires = "ledger")]
    pub follow: bool,
}

/// What `--output-format` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// A table like neuron-ls's.
    Table,
    /// neuron-ls's JSON.
    Json,
}
