//! `nds-dist`: writes the manual pages and shell completions of the neuron-ds tools.
//!
//! A binary only: it takes each tool's command line from the tool's crate (see `tools`).

// Floor 0: the tools' command lines.
mod tools;
// Floor 1: the pages and completions generated from them.
mod assets;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Write the neuron-ds tools' manual pages and bash/zsh/fish completions under OUT_DIR
/// (man/man1/, completions/<shell>/).
#[derive(Debug, Parser)]
#[command(name = "nds-dist", version)]
struct Cli {
    /// Directory to write into (created if needed).
    out_dir: PathBuf,
    /// Print the paths written, one per line.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match assets::write_assets(&cli.out_dir) {
        Ok(paths) => {
            if cli.list {
                for path in paths {
                    println!("{}", path.display());
                }
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("nds-dist: {}: {error}", cli.out_dir.display());
            ExitCode::FAILURE
        }
    }
}
