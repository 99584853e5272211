//! The command line of every installed tool, from the very files its binary is built from.
//!
//! Each tool keeps its clap definitions in `src/cli.rs`, a module of its binary only (so its
//! library depends on no CLI crate). This module compiles the same files by path: the pages
//! and completions cannot drift from what the tools parse.

use clap::{Command, CommandFactory};

#[path = "../../nrt-status/src/cli.rs"]
mod nrt_status_cli;

#[path = "../../nds-loadgen/src/cli.rs"]
mod nds_loadgen_cli;

#[path = "../../nds-metrics/src/cli.rs"]
mod nds_metrics_cli;

#[path = "../../nds-monitor/src/cli.rs"]
mod nds_monitor_cli;

#[path = "../../nds-top/src/cli.rs"]
mod nds_top_cli;

#[path = "../../nds-ls/src/cli.rs"]
mod nds_ls_cli;

/// The command line of every installed tool.
#[must_use]
pub fn tools() -> Vec<Command> {
    vec![
        with_own_about(
            nrt_status_cli::Cli::command(),
            include_str!("../../nrt-status/Cargo.toml"),
        ),
        with_own_about(
            nds_loadgen_cli::Cli::command(),
            include_str!("../../nds-loadgen/Cargo.toml"),
        ),
        with_own_about(
            nds_metrics_cli::Cli::command(),
            include_str!("../../nds-metrics/Cargo.toml"),
        ),
        with_own_about(
            nds_monitor_cli::Cli::command(),
            include_str!("../../nds-monitor/Cargo.toml"),
        ),
        with_own_about(
            nds_top_cli::Cli::command(),
            include_str!("../../nds-top/Cargo.toml"),
        ),
        with_own_about(
            nds_ls_cli::Cli::command(),
            include_str!("../../nds-ls/Cargo.toml"),
        ),
    ]
}

/// `command` with the about its own binary shows.
///
/// A bare `#[command(about)]` takes the description of the package being compiled: the tool's
/// in its binary, but nds-dist's here. Such an about is replaced by the `description` of the
/// tool's manifest.
fn with_own_about(command: Command, manifest: &'static str) -> Command {
    let inherited = command
        .get_about()
        .is_some_and(|about| about.to_string() == env!("CARGO_PKG_DESCRIPTION"));
    let description = manifest
        .lines()
        .find_map(|line| line.strip_prefix("description = \"")?.strip_suffix('"'));
    match description {
        Some(description) if inherited => command.about(description),
        _ => command,
    }
}
