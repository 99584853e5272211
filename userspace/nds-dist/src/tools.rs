//! The command line of every installed tool, from the very files its binary is built from.
//!
//! Each tool keeps its clap definitions in `src/cli.rs`, a module of its binary only (so its
//! library depends on no CLI crate). This module compiles the same files by path: the pages
//! and completions cannot drift from what the tools parse.

use clap::{Command, CommandFactory};

#[path = "../../nrt-status/src/cli.rs"]
mod nrt_status;

#[path = "../../nds-loadgen/src/cli.rs"]
mod nds_loadgen;

#[path = "../../nds-metrics/src/cli.rs"]
mod nds_metrics;

#[path = "../../nds-monitor/src/cli.rs"]
mod nds_monitor;

#[path = "../../nds-top/src/cli.rs"]
mod nds_top;

/// The command line of every installed tool.
#[must_use]
pub fn tools() -> Vec<Command> {
    vec![
        nrt_status::Cli::command(),
        nds_loadgen::Cli::command(),
        nds_metrics::Cli::command(),
        nds_monitor::Cli::command(),
        nds_top::Cli::command(),
    ]
}
