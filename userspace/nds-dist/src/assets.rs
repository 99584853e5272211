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

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    let date = footer_date(
        std::env::var("SOURCE_DATE_EPOCH").ok().as_deref(),
        SystemTime::now(),
    );
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

/// The date in the pages' footers: the day of `source_date_epoch` (the variable
/// `SOURCE_DATE_EPOCH`, which reproducible builds set to the last commit's time) when it is
/// seconds since 1970 that fall before the year 10000, else the day of `now`.
fn footer_date(source_date_epoch: Option<&str>, now: SystemTime) -> String {
    source_date_epoch
        .and_then(|value| value.parse().ok())
        .and_then(|seconds| UNIX_EPOCH.checked_add(Duration::from_secs(seconds)))
        .and_then(utc_day)
        .or_else(|| utc_day(now))
        // A clock set before 1970.
        .unwrap_or_else(|| "1970-01-01".to_owned())
}

/// `time`'s day in UTC, `YYYY-MM-DD`: the date of humantime's RFC 3339 timestamp, which it
/// writes for the years 1970 to 9999 only.
fn utc_day(time: SystemTime) -> Option<String> {
    // Before 1970 humantime would panic; after 9999 it fails to write.
    time.duration_since(UNIX_EPOCH).ok()?;
    let mut stamp = String::new();
    write!(stamp, "{}", humantime::format_rfc3339_seconds(time)).ok()?;
    stamp.truncate("YYYY-MM-DD".len());
    Some(stamp)
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
