//! Leveled messages on standard error through the `log` facade, as neuron-monitor's
//! `--verbose 0..4` selects them; a module of the binary.

use std::io::Write;
use std::sync::OnceLock;

use log::{Level, LevelFilter, Log, Metadata, Record};
use nds_terminal::escape;

/// The crates this tool is made of: their records are its own messages (the libraries' are
/// shown at level 4 only).
const OWN_CRATES: [&str; 7] = [
    "nds_monitor",
    "nds_sampler",
    "nds_exporter",
    "nds_podresources",
    "nds_host",
    "nds_document",
    "nds_slabs",
];

/// Whether a record's `target` (a module path, by default) is in one of [`OWN_CRATES`].
fn is_own(target: &str) -> bool {
    let crate_name = target.split("::").next().unwrap_or(target);
    OWN_CRATES.contains(&crate_name)
}

/// Writes records of this tool's crates (and at level 4 every crate's) to standard error.
struct StderrLogger {
    level: LevelFilter,
    every_crate: bool,
}

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.level && (self.every_crate || is_own(metadata.target()))
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            Level::Error => String::new(),
            Level::Warn => "warning: ".to_owned(),
            other => format!("{}: ", other.as_str().to_lowercase()),
        };
        // Messages quote what other processes wrote (tags, paths), as they are: escaping them
        // for the terminal happens here, once.
        let message = escape(&record.args().to_string());
        // A closed standard error is no reason to stop monitoring.
        let _ = writeln!(std::io::stderr().lock(), "nds-monitor: {level}{message}");
    }

    fn flush(&self) {}
}

/// Installs the logger for `--verbose verbose`: 0 warnings and errors, 1 information, 2 debug
/// messages, 3 everything of this tool, 4 everything.
pub fn init(verbose: u8) {
    let level = match verbose {
        0 => LevelFilter::Warn,
        1 => LevelFilter::Info,
        2 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    };
    let logger = StderrLogger {
        level,
        every_crate: verbose >= 4,
    };
    static LOGGER: OnceLock<StderrLogger> = OnceLock::new();
    if log::set_logger(LOGGER.get_or_init(|| logger)).is_ok() {
        log::set_max_level(level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_own_crates_are_told_from_the_libraries() {
        assert!(is_own("nds_sampler::monitor"));
        assert!(is_own("nds_monitor"));
        assert!(is_own("nds_podresources::refresh"));
        assert!(!is_own("nds_sysfs"));
        assert!(
            !is_own("nds_samplers::x"),
            "a crate of a longer name is another crate"
        );
        assert!(!is_own("hyper::proto"));
    }
}
