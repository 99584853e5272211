//! The command line of every installed tool, from the tool's own crate.
//!
//! Each tool's library has its clap definitions in its module `cli` (built with the feature
//! `cli`), which its binary parses: the pages and completions cannot drift from what the tools
//! parse.

use clap::{Command, CommandFactory};

/// The command line of every installed tool.
#[must_use]
pub fn tools() -> Vec<Command> {
    vec![
        nrt_status::cli::Cli::command(),
        nds_loadgen::cli::Cli::command(),
        nds_metrics::cli::Cli::command(),
        nds_monitor::cli::Cli::command(),
        nds_top::cli::Cli::command(),
        nds_ls::cli::Cli::command(),
    ]
}
