//! The library half of nds-monitor: its command line, which the binary parses and from which
//! `nds-dist` generates the manual pages and shell completions. Everything else of the monitor
//! is in the binary (src/main.rs) and the crates it wires.

#![warn(missing_docs)]

pub mod cli;
