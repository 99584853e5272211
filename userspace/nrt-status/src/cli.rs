//! The command line of the `nrt-status` tool, a module of its binary (the library carries no CLI
//! dependency). `nds-dist` compiles this same file by path to generate the manual page and
//! shell completions from these definitions.

use clap::{ArgGroup, Parser};

use nrt_status::NrtStatus;

/// Describe Neuron Runtime status codes (NRT_STATUS).
#[derive(Debug, Parser)]
#[command(name = "nrt-status", version)]
#[command(group(ArgGroup::new("what").required(true).args(["statuses", "all"])))]
pub struct Cli {
    /// Status values (decimal or 0x-hex, any u32) or identifiers (NRT_TIMEOUT, exec_oob, …).
    #[arg(value_name = "STATUS")]
    pub statuses: Vec<NrtStatus>,

    /// Describe every known status.
    #[arg(long, conflicts_with = "statuses")]
    pub all: bool,

    /// Print a JSON array with one object per status.
    #[arg(long)]
    pub json: bool,
}
