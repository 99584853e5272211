//! The monitor's own process metrics, as the Prometheus client libraries' process collector
//! names them (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_open_fds`, …; the companion exporter's scrapes carry them too), read from
//! `/proc/self` through the `procfs` crate when an exposition is rendered; nds-exporter renders
//! them.

use std::path::Path;

use procfs::prelude::*;
use procfs::process::{LimitValue, Process};
use procfs::KernelStats;

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
        let process = Process::new_with_root(dir.to_path_buf()).ok();
        let stat = process.as_ref().and_then(|process| process.stat().ok());
        let boot_time =
            KernelStats::from_file(proc_root.join("stat"), procfs::current_system_info())
                .ok()
                .map(|kernel| kernel.btime);
        let max_fds = process
            .as_ref()
            .and_then(|process| process.limits().ok())
            .and_then(|limits| match limits.max_open_files.soft_limit {
                LimitValue::Value(soft) => Some(soft),
                LimitValue::Unlimited => None,
            });
        Self {
            cpu_seconds: stat
                .as_ref()
                .map(|stat| stat.utime.saturating_add(stat.stime) as f64 / ticks),
            resident_bytes: stat
                .as_ref()
                .map(|stat| stat.rss.saturating_mul(procfs::page_size())),
            virtual_bytes: stat.as_ref().map(|stat| stat.vsize),
            start_time_seconds: boot_time
                .zip(stat.as_ref())
                .map(|(boot, stat)| boot as f64 + stat.starttime as f64 / ticks),
            open_fds: process
                .as_ref()
                .and_then(|process| process.fd_count().ok())
                .map(|count| count as u64),
            max_fds,
        }
    }

    /// This process's numbers.
    #[must_use]
    pub fn current() -> Self {
        Self::read(Path::new("/proc/self"), Path::new("/proc"))
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
        let missing = ProcessMetrics::read(Path::new("/nonexistent"), Path::new("/nonexistent"));
        assert_eq!(missing, ProcessMetrics::default());
    }

    #[test]
    fn another_root_is_read_field_by_field() {
        let root = std::env::temp_dir().join(format!("nds-process-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("42");
        std::fs::create_dir_all(dir.join("fd")).unwrap();
        // Fields 1 to 37, as every kernel since 2.2 writes at least: utime 250, stime 150,
        // starttime 5000, vsize 123456789, rss 300 pages.
        std::fs::write(
            dir.join("stat"),
            "42 (nds (mon) itor) S 1 42 42 0 -1 0 0 0 0 0 250 150 0 0 20 0 3 0 5000 123456789 \
             300 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0\n",
        )
        .unwrap();
        let limits: String = [
            ("Max cpu time", "unlimited", "seconds"),
            ("Max file size", "unlimited", "bytes"),
            ("Max data size", "unlimited", "bytes"),
            ("Max stack size", "8388608", "bytes"),
            ("Max core file size", "0", "bytes"),
            ("Max resident set", "unlimited", "bytes"),
            ("Max processes", "96367", "processes"),
            ("Max open files", "1024", "files"),
            ("Max locked memory", "8388608", "bytes"),
            ("Max address space", "unlimited", "bytes"),
            ("Max file locks", "unlimited", "locks"),
            ("Max pending signals", "96367", "signals"),
            ("Max msgqueue size", "819200", "bytes"),
            ("Max nice priority", "0", ""),
            ("Max realtime priority", "0", ""),
            ("Max realtime timeout", "unlimited", "us"),
        ]
        .iter()
        .map(|(name, soft, unit)| format!("{name:<26}{soft:<21}unlimited            {unit}\n"))
        .collect();
        std::fs::write(
            dir.join("limits"),
            format!("Limit                     Soft Limit           Hard Limit           Units\n{limits}"),
        )
        .unwrap();
        std::fs::write(
            root.join("stat"),
            "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nctxt 5\nbtime 1700000000\n\
             processes 9\n",
        )
        .unwrap();
        let metrics = ProcessMetrics::read(&dir, &root);
        let ticks = clock_ticks_per_second() as f64;
        assert_eq!(metrics.cpu_seconds, Some(400.0 / ticks));
        assert_eq!(metrics.resident_bytes, Some(300 * procfs::page_size()));
        assert_eq!(metrics.virtual_bytes, Some(123_456_789));
        assert_eq!(metrics.start_time_seconds, Some(1.7e9 + 5000.0 / ticks));
        assert_eq!(metrics.max_fds, Some(1024));

        // Without a boot time, no start time; an unlimited soft limit is no number.
        std::fs::write(root.join("stat"), "cpu  1 2 3 4\nctxt 5\n").unwrap();
        let unlimited = limits.replace(
            "Max open files            1024 ",
            "Max open files            unlimited",
        );
        std::fs::write(
            dir.join("limits"),
            format!("Limit  Soft Limit  Hard Limit  Units\n{unlimited}"),
        )
        .unwrap();
        let metrics = ProcessMetrics::read(&dir, &root);
        assert_eq!(metrics.start_time_seconds, None);
        assert_eq!(metrics.max_fds, None);
        assert_eq!(metrics.virtual_bytes, Some(123_456_789));
        let _ = std::fs::remove_dir_all(&root);
    }
}
