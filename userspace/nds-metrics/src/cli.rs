//! The command line of the `nds-metrics` tool: its binary parses it, and `nds-dist` generates the
//! manual page and shell completions from the same definitions. Built with the `cli` feature
//! only, so the library without it carries no CLI dependency.

use std::path::PathBuf;

use clap::Parser;

/// Print the neuron_ds metric posts (one JSON object per line).
#[derive(Parser, Debug)]
#[command(name = "nds-metrics", version)]
pub struct Cli {
    /// Read the posts of /dev/neuron<DEVICE>.
    #[arg(short, long, default_value_t = 0, conflicts_with = "input")]
    pub device: u32,
    /// Read posts from this file or device node instead (e.g. a saved stream).
    #[arg(short, long)]
    pub input: Option<PathBuf>,
    /// Keep reading: from a device node, wait for each new post (a read blocks until the
    /// next one); from a file, look for more every INTERVAL milliseconds at its end.
    #[arg(short, long)]
    pub follow: bool,
    /// How often --follow looks at the end of a file, in milliseconds (a device node needs no
    /// interval: it wakes the reader at each post).
    #[arg(long, default_value_t = 1000)]
    pub interval: u64,
}
