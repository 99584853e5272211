//! The monitor's own process metrics, as the Prometheus client libraries' process collector
//! names them (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_open_fds`, …; the companion exporter's scrapes carry them too), read from
//! `/proc/self` when an exposition is rendered.

use std::fmt::Write;
use std::path::Path;

use crate::host::clock_ticks_per_second;

/// The process's numbers; a field is `None` when `/proc` could not say.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessMetrics {
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size, bytes.
    pub resident_bytes: Option<u64>,
    /// Virtual memory size, bytes.
    pub virtual_bytes: Option<u64>,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit on open file descriptors.
    pub max_fds: Option<u64>,
}

impl ProcessMetrics {
    /// Reads the numbers of the process whose `/proc` directory is `dir` (`/proc/self`),
    /// with `/proc/stat` in `proc_root` for the boot time.
    #[must_use]
    pub fn read(dir: &Path, proc_root: &Path) -> Self {
        let ticks = clock_ticks_per_second() as f64;
        // SAFETY: sysconf has no preconditions.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        // Fields after the command name, which ends at the last ')': state is field 3.
        let fields: Vec<&str> = stat
            .rfind(')')
            .and_then(|end| stat.get(end + 1..))
            .map(|rest| rest.split_whitespace().collect())
            .unwrap_or_default();
        let field = |number: usize| -> Option<u64> { fields.get(number - 3)?.parse().ok() };
        let boot_time = std::fs::read_to_string(proc_root.join("stat"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|line| line.strip_prefix("btime "))
                    .and_then(|value| value.trim().parse::<u64>().ok())
            });
        let max_fds = std::fs::read_to_string(dir.join("limits"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|line| line.starts_with("Max open files"))
                    .and_then(|line| line.split_whitespace().nth(3)?.parse().ok())
            });
        Self {
            cpu_seconds: field(14)
                .zip(field(15))
                .map(|(user, system)| (user + system) as f64 / ticks),
            resident_bytes: field(24).map(|pages| pages.saturating_mul(page)),
            virtual_bytes: field(23),
            start_time_seconds: boot_time
                .zip(field(22))
                .map(|(boot, start)| boot as f64 + start as f64 / ticks),
            open_fds: std::fs::read_dir(dir.join("fd"))
                .ok()
                .map(|entries| entries.count() as u64),
            max_fds,
        }
    }

    /// This process's numbers.
    #[must_use]
    pub fn current() -> Self {
        Self::read(Path::new("/proc/self"), Path::new("/proc"))
    }

    /// Appends the families (each one that `/proc` could say) to `text`, with `instance`
    /// labels (rendered).
    pub fn render_into(&self, text: &mut String, instance: &str) {
        let families: [(&str, &str, &str, Option<f64>); 6] = [
            (
                "process_cpu_seconds_total",
                "counter",
                "Total user and system CPU time spent in seconds.",
                self.cpu_seconds,
            ),
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                self.resident_bytes.map(|v| v as f64),
            ),
            (
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size in bytes.",
                self.virtual_bytes.map(|v| v as f64),
            ),
            (
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                self.start_time_seconds,
            ),
            (
                "process_open_fds",
                "gauge",
                "Number of open file descriptors.",
                self.open_fds.map(|v| v as f64),
            ),
            (
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
                self.max_fds.map(|v| v as f64),
            ),
        ];
        for (name, kind, help, value) in families {
            let Some(value) = value else {
                continue;
            };
            let _ = writeln!(text, "# HELP {name} {help}");
            let _ = writeln!(text, "# TYPE {name} {kind}");
            let _ = writeln!(text, "{name}{{{instance}}} {value}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_measured() {
        let metrics = ProcessMetrics::current();
        assert!(metrics.resident_bytes.is_some_and(|rss| rss > 1 << 20));
        assert!(metrics.open_fds.is_some_and(|fds| fds >= 3));
        assert!(metrics.max_fds.is_some_and(|max| max >= 3));
        assert!(metrics.cpu_seconds.is_some());
        assert!(metrics.start_time_seconds.is_some_and(|t| t > 1.5e9));
        let mut text = String::new();
        metrics.render_into(&mut text, "");
        assert!(text.contains("\nprocess_open_fds{} "), "{text}");
        let missing = ProcessMetrics::read(Path::new("/nonexistent"), Path::new("/nonexistent"));
        assert_eq!(missing, ProcessMetrics::default());
        let mut empty = String::new();
        missing.render_into(&mut empty, "");
        assert!(empty.is_empty());
    }
}
