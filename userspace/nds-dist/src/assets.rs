//! Manual pages and shell completions of the neuron-ds tools, generated from their clap
//! command lines (see [`crate::tools`]), so that neither can drift from `--help`.
//!
//! [`write_assets`] lays them out the way the Debian package and `make install-tools`
//! install them:
//!
//! ```text
//! <out>/man/man1/<tool>.1             one page per tool ...
//! <out>/man/man1/<tool>-<command>.1   ... and per visible subcommand
//! <out>/completions/bash/<tool>
//! <out>/completions/zsh/_<tool>
//! <out>/completions/fish/<tool>.fish
//! ```

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Command;
use clap_complete::Shell;
use clap_mangen::Man;

use crate::tools::tools;

/// The manual's name in every page's footer.
const MANUAL: &str = "neuron-ds";

/// The shells completions are made for, each with its directory under `completions/`.
pub const SHELLS: [(Shell, &str); 3] = [
    (Shell::Bash, "bash"),
    (Shell::Zsh, "zsh"),
    (Shell::Fish, "fish"),
];

/// One generated file: its name in its directory and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// File name, e.g. `nds-loadgen-run.1` or `_nds-top`.
    pub file_name: String,
    /// The file's contents.
    pub contents: Vec<u8>,
}

/// The manual pages (section 1) of a tool: its own page first, then one per visible
/// subcommand, depth first. Hidden subcommands (internal re-executions) get none, and neither
/// does clap's `help` subcommand.
///
/// # Errors
/// Only if rendering into memory fails, which clap_mangen reports as an I/O error.
pub fn man_pages(tool: &Command) -> io::Result<Vec<Generated>> {
    let mut tool = tool.clone().disable_help_subcommand(true);
    // Building gives subcommands their display names (`nds-loadgen-run`).
    tool.build();
    let see_also = see_also(tool.get_name());
    let date = page_date();
    let mut pages = Vec::new();
    let mut pending = vec![tool];
    while let Some(command) = pending.pop() {
        let man = Man::new(command.clone())
            .manual(MANUAL)
            .date(&date)
            .source(format!("{MANUAL} {}", env!("CARGO_PKG_VERSION")));
        let mut contents = Vec::new();
        man.render(&mut contents)?;
        contents.extend_from_slice(see_also.as_bytes());
        pages.push(Generated {
            file_name: man.get_filename(),
            contents,
        });
        let mut children: Vec<Command> = command
            .get_subcommands()
            .filter(|sub| !sub.is_hide_set())
            .cloned()
            .collect();
        children.reverse();
        pending.extend(children);
    }
    Ok(pages)
}

/// The date in the pages' footers: `SOURCE_DATE_EPOCH` when set (reproducible builds set it
/// to the last commit's time), else today.
fn page_date() -> String {
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|value| value.parse::<u64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_secs())
        });
    let (year, month, day) = civil_date(seconds / 86_400);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil_date(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// A roff "SEE ALSO" section naming the other tools' pages.
fn see_also(own: &str) -> String {
    let others: Vec<String> = tools()
        .iter()
        .map(|tool| tool.get_name().to_owned())
        .filter(|name| name != own)
        .map(|name| format!("\\fB{}\\fR(1)", name.replace('-', "\\-")))
        .collect();
    format!(".SH \"SEE ALSO\"\n{}\n", others.join(",\n"))
}

/// The completion script of a tool for one shell, named as that shell's loader expects.
#[must_use]
pub fn completion(shell: Shell, tool: &Command) -> Generated {
    let name = tool.get_name().to_owned();
    let mut contents = Vec::new();
    clap_complete::generate(shell, &mut tool.clone(), &name, &mut contents);
    let file_name = match shell {
        Shell::Zsh => format!("_{name}"),
        Shell::Fish => format!("{name}.fish"),
        _ => name,
    };
    Generated {
        file_name,
        contents,
    }
}

/// Writes every tool's manual pages and completions under `out` (layout in the crate
/// documentation) and returns the paths written, in order.
///
/// # Errors
/// Any error creating the directories or writing the files.
pub fn write_assets(out: &Path) -> io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut write = |dir: PathBuf, file: Generated| -> io::Result<()> {
        fs::create_dir_all(&dir)?;
        let path = dir.join(file.file_name);
        fs::write(&path, file.contents)?;
        written.push(path);
        Ok(())
    };
    for tool in tools() {
        for page in man_pages(&tool)? {
            write(out.join("man/man1"), page)?;
        }
        for (shell, dir) in SHELLS {
            write(out.join("completions").join(dir), completion(shell, &tool))?;
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests;
