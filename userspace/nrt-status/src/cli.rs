//! The command line of the `nrt-status` tool: its binary parses it, and `nds-dist` generates the
//! manual page and shell completions from the same definitions. Built with the `cli` feature
//! only, so the library without it carries no CLI dependency.

use clap::{ArgGroup, Parser};

use crate::NrtStatus;

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
