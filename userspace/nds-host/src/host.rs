//! The host's CPU and memory from `/proc`: the `vcpu_usage` and `memory_info` system groups
//! and each process's `neuron_runtime_vcpu_usage`.
//!
//! CPU numbers are cumulative clock ticks in `/proc`; a group is the change between two
//! readings over the captured period, as percentages rounded to two decimals like
//! neuron-monitor's. A process's share is taken of all online vCPUs (so it is comparable with
//! the system's `average_usage` and never above 100).
//!
//! The monitor's own start and the clock tick come from the `procfs` crate. The files under
//! the configurable proc root are parsed here, as `procfs` cannot read them the same way: its
//! `KernelStats` keeps the `cpuN` lines in order but drops `N` (an offline vCPU would shift
//! every later key) and requires `btime` and `processes`; its `Meminfo` requires fourteen
//! lines besides the four used; its `Stat` requires 37 fields where three are read, calls a
//! short line a procfs bug, and panics on a line that ends at the command name.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use nds_document::document::{CpuShares, MemoryInfo, ProcessCpuShare, RuntimeVcpuUsage, VcpuUsage};

/// Why a `/proc` file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// The file could not be read (for `/proc/<pid>/stat`: the process is gone or not
    /// visible from this pid namespace).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file did not have the expected shape.
    #[error("{}: {what}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was missing or malformed.
        what: String,
    },
}

fn read(path: PathBuf) -> Result<(PathBuf, String), ProcError> {
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok((path, text)),
        Err(source) => Err(ProcError::Io { path, source }),
    }
}

/// One CPU line of `/proc/stat`, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// User mode.
    pub user: u64,
    /// Niced user mode.
    pub nice: u64,
    /// Kernel mode.
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Waiting for I/O.
    pub io_wait: u64,
    /// Hardware interrupts.
    pub irq: u64,
    /// Software interrupts.
    pub soft_irq: u64,
    /// Stolen by the hypervisor (counted in the total, not shown).
    pub steal: u64,
}

impl CpuTimes {
    fn parse(fields: &[&str]) -> Option<Self> {
        let value = |index: usize| match fields.get(index) {
            Some(field) => field.parse().ok(),
            // Kernels before steal time have seven columns.
            None if index >= 7 => Some(0),
            None => None,
        };
        Some(Self {
            user: value(0)?,
            nice: value(1)?,
            system: value(2)?,
            idle: value(3)?,
            io_wait: value(4)?,
            irq: value(5)?,
            soft_irq: value(6)?,
            steal: value(7)?,
        })
    }

    fn columns(&self) -> [u64; 8] {
        [
            self.user,
            self.nice,
            self.system,
            self.idle,
            self.io_wait,
            self.irq,
            self.soft_irq,
            self.steal,
        ]
    }

    /// Percentages of the time elapsed between `before` and `self`.
    fn shares_since(&self, before: &Self) -> CpuShares {
        let deltas: Vec<u64> = self
            .columns()
            .iter()
            .zip(before.columns())
            .map(|(now, then)| now.saturating_sub(then))
            .collect();
        let total: u64 = deltas.iter().sum();
        let share = |index: usize| percent(deltas.get(index).copied().unwrap_or(0), total);
        CpuShares {
            user: share(0),
            nice: share(1),
            system: share(2),
            idle: share(3),
            io_wait: share(4),
            irq: share(5),
            soft_irq: share(6),
        }
    }
}

/// `part / whole` as a percentage with two decimals; 0 for an empty whole.
fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 * 10_000.0 / whole as f64).round() / 100.0
}

/// One reading of `/proc/stat`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    /// The aggregate `cpu` line.
    pub total: CpuTimes,
    /// The `cpuN` lines by `N`.
    pub cpus: BTreeMap<u32, CpuTimes>,
    /// `ctxt`: context switches since boot.
    pub context_switches: u64,
}

impl ProcStat {
    /// Reads `<proc_root>/stat`.
    ///
    /// # Errors
    ///
    /// [`ProcError`] if it cannot be read or lacks the `cpu` or `ctxt` line.
    pub fn read(proc_root: &Path) -> Result<Self, ProcError> {
        let (path, text) = read(proc_root.join("stat"))?;
        let parse_error = |what: &str| ProcError::Parse {
            path: path.clone(),
            what: what.to_owned(),
        };
        let mut stat = Self::default();
        let (mut total, mut ctxt) = (false, false);
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let Some((&name, values)) = fields.split_first() else {
                continue;
            };
            if name == "cpu" {
                stat.total = CpuTimes::parse(values).ok_or_else(|| parse_error("bad cpu line"))?;
                total = true;
            } else if let Some(number) = name.strip_prefix("cpu") {
                let number = number
                    .parse()
                    .map_err(|_| parse_error("bad cpuN line name"))?;
                let times = CpuTimes::parse(values).ok_or_else(|| parse_error("bad cpuN line"))?;
                stat.cpus.insert(number, times);
            } else if name == "ctxt" {
                stat.context_switches = values
                    .first()
                    .and_then(|value| value.parse().ok())
                    .ok_or_else(|| parse_error("bad ctxt line"))?;
                ctxt = true;
            }
        }
        match (total, ctxt) {
            (true, true) => Ok(stat),
            (false, _) => Err(parse_error("no cpu line")),
            (_, false) => Err(parse_error("no ctxt line")),
        }
    }
}

/// `vcpu_usage` between two readings `seconds` apart.
#[must_use]
pub fn vcpu_usage(now: &ProcStat, before: &ProcStat, seconds: f64) -> VcpuUsage {
    let usage_data = now
        .cpus
        .iter()
        .map(|(number, times)| {
            // A vCPU that came online during the period is measured from zero.
            let start = before.cpus.get(number).copied().unwrap_or_default();
            (number.to_string(), times.shares_since(&start))
        })
        .collect();
    VcpuUsage {
        period: seconds,
        error: String::new(),
        average_usage: now.total.shares_since(&before.total),
        usage_data,
        context_switch_count: now.context_switches.saturating_sub(before.context_switches),
    }
}

/// `memory_info` from `<proc_root>/meminfo`.
///
/// # Errors
///
/// [`ProcError`] if it cannot be read or lacks one of the four lines used.
pub fn memory_info(proc_root: &Path, seconds: f64) -> Result<MemoryInfo, ProcError> {
    let (path, text) = read(proc_root.join("meminfo"))?;
    let mut kib: BTreeMap<&str, u64> = BTreeMap::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if let Some(value) = rest.split_whitespace().next().and_then(|v| v.parse().ok()) {
            kib.insert(name.trim(), value);
        }
    }
    let bytes = |name: &str| {
        kib.get(name)
            .map(|value| value.saturating_mul(1024))
            .ok_or_else(|| ProcError::Parse {
                path: path.clone(),
                what: format!("no {name} line"),
            })
    };
    let (memory_total, available) = (bytes("MemTotal")?, bytes("MemAvailable")?);
    let (swap_total, swap_free) = (bytes("SwapTotal")?, bytes("SwapFree")?);
    Ok(MemoryInfo {
        period: seconds,
        error: String::new(),
        memory_total_bytes: memory_total,
        memory_used_bytes: memory_total.saturating_sub(available),
        swap_total_bytes: swap_total,
        swap_used_bytes: swap_total.saturating_sub(swap_free),
    })
}

/// A process's CPU time, from `/proc/<pid>/stat`, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessCpu {
    /// `utime`.
    pub user: u64,
    /// `stime`.
    pub system: u64,
}

impl ProcessCpu {
    /// Reads `<proc_root>/<pid>/stat`.
    ///
    /// # Errors
    ///
    /// [`ProcError`] if the process is not visible or its line is malformed.
    pub fn read(proc_root: &Path, pid: i32) -> Result<Self, ProcError> {
        let (path, text) = read(proc_root.join(pid.to_string()).join("stat"))?;
        // utime and stime are fields 14 and 15 of the line.
        match (stat_field(&text, 14), stat_field(&text, 15)) {
            (Some(user), Some(system)) => Ok(Self { user, system }),
            _ => Err(ProcError::Parse {
                path,
                what: "no utime/stime fields".to_owned(),
            }),
        }
    }
}

/// When process `pid` started, in clock ticks since boot (`starttime`, field 22 of
/// `<proc_root>/<pid>/stat`); `None` if the process is not visible or its line is malformed.
#[must_use]
pub fn process_start_ticks(proc_root: &Path, pid: i32) -> Option<u64> {
    let (_, text) = read(proc_root.join(pid.to_string()).join("stat")).ok()?;
    stat_field(&text, 22)
}

/// The cgroup v2 path of process `pid` (the `0::` line of `<proc_root>/<pid>/cgroup`), which
/// names a Kubernetes pod by its UID; `None` if the process is not visible or is in no cgroup
/// v2.
#[must_use]
pub fn process_cgroup(proc_root: &Path, pid: i32) -> Option<String> {
    let (_, text) = read(proc_root.join(pid.to_string()).join("cgroup")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_owned)
}

/// When this process started, in clock ticks since boot, read from its own `/proc/self/stat`
/// (whatever root the other processes are read through: the boot clock is the kernel's).
#[must_use]
pub fn own_start_ticks() -> Option<u64> {
    let stat = procfs::process::Process::myself().ok()?.stat().ok()?;
    Some(stat.starttime)
}

/// Field `number` (1-based, as `proc(5)` numbers them) of a `/proc/<pid>/stat` line, from the
/// state (field 3) on: the command name before it is in parentheses and may hold spaces or
/// parentheses itself, so the fields that follow start after the last ')'.
fn stat_field(text: &str, number: usize) -> Option<u64> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    rest.split_whitespace()
        .nth(number.checked_sub(3)?)?
        .parse()
        .ok()
}

/// Clock ticks per second (the kernel's `AT_CLKTCK`, as `sysconf(_SC_CLK_TCK)` says it; 100
/// if it says nothing).
#[must_use]
pub fn clock_ticks_per_second() -> u64 {
    Some(procfs::ticks_per_second())
        .filter(|&ticks| ticks > 0)
        .unwrap_or(100)
}

/// `neuron_runtime_vcpu_usage` between two readings of a process `seconds` apart, as a share
/// of `vcpus` vCPUs ticking `ticks_per_second`.
#[must_use]
pub fn runtime_vcpu_usage(
    now: ProcessCpu,
    before: ProcessCpu,
    seconds: f64,
    vcpus: usize,
    ticks_per_second: u64,
) -> RuntimeVcpuUsage {
    let capacity = seconds * vcpus.max(1) as f64 * ticks_per_second as f64;
    let share = |ticks: u64| {
        if capacity <= 0.0 {
            0.0
        } else {
            (ticks as f64 * 10_000.0 / capacity).round().min(10_000.0) / 100.0
        }
    };
    RuntimeVcpuUsage {
        period: seconds,
        error: String::new(),
        vcpu_usage: ProcessCpuShare {
            user: share(now.user.saturating_sub(before.user)),
            system: share(now.system.saturating_sub(before.system)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join(name).parent().unwrap()).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nds-host-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn vcpu_shares_over_a_period() {
        let dir = scratch("stat");
        write(
            &dir,
            "stat",
            "cpu  100 0 50 850 0 0 0 0 0 0\ncpu0 60 0 20 420 0 0 0 0 0 0\n\
             cpu1 40 0 30 430 0 0 0 0 0 0\nintr 1 2\nctxt 1000\nbtime 1\n",
        );
        let before = ProcStat::read(&dir).unwrap();
        write(
            &dir,
            "stat",
            "cpu  150 10 70 960 4 2 4 0 0 0\ncpu0 110 10 20 440 0 0 0 0 0 0\n\
             cpu1 40 0 50 520 4 2 4 0 0 0\nctxt 1234\n",
        );
        let now = ProcStat::read(&dir).unwrap();
        let usage = vcpu_usage(&now, &before, 1.0);
        // 200 ticks elapsed over both: 50 user, 10 nice, 20 system, 110 idle, ...
        assert_eq!(usage.average_usage.user, 25.0);
        assert_eq!(usage.average_usage.nice, 5.0);
        assert_eq!(usage.average_usage.idle, 55.0);
        assert_eq!(usage.average_usage.soft_irq, 2.0);
        assert_eq!(usage.usage_data["0"].user, 62.5);
        assert_eq!(usage.usage_data["1"].system, 16.67);
        assert_eq!(usage.context_switch_count, 234);
        write(&dir, "stat", "cpu 1 2 3\nctxt 5\n");
        assert!(ProcStat::read(&dir).is_err(), "three columns are too few");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn meminfo_and_process_times() {
        let dir = scratch("meminfo");
        write(
            &dir,
            "meminfo",
            "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n\
             SwapTotal:       200 kB\nSwapFree:        150 kB\n",
        );
        let info = memory_info(&dir, 2.0).unwrap();
        assert_eq!(info.memory_total_bytes, 1_024_000);
        assert_eq!(info.memory_used_bytes, 600 * 1024);
        assert_eq!(info.swap_used_bytes, 50 * 1024);
        write(&dir, "meminfo", "MemTotal: 1000 kB\n");
        let error = memory_info(&dir, 2.0).unwrap_err().to_string();
        assert!(error.contains("MemAvailable"), "{error}");

        // A command name with spaces and parentheses does not shift the fields.
        write(
            &dir,
            "42/stat",
            "42 (a (b) c) S 1 42 42 0 -1 0 0 0 0 0 300 120 0 0 20 0 1 0 777 1 1\n",
        );
        let cpu = ProcessCpu::read(&dir, 42).unwrap();
        assert_eq!((cpu.user, cpu.system), (300, 120));
        assert!(ProcessCpu::read(&dir, 43).is_err());
        assert_eq!(process_start_ticks(&dir, 42), Some(777));
        assert_eq!(process_start_ticks(&dir, 43), None);
        let usage = runtime_vcpu_usage(cpu, ProcessCpu::default(), 2.0, 4, 100);
        // 300 ticks of 800 available: 37.5 %.
        assert_eq!(usage.vcpu_usage.user, 37.5);
        assert_eq!(usage.vcpu_usage.system, 15.0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_process_cgroup_is_its_v2_line() {
        let dir = scratch("cgroup");
        write(
            &dir,
            "42/cgroup",
            "1:name=systemd:/x\n0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-a.scope\n",
        );
        assert_eq!(
            process_cgroup(&dir, 42).as_deref(),
            Some("/kubepods.slice/kubepods-pod1.slice/cri-containerd-a.scope")
        );
        write(&dir, "43/cgroup", "1:cpu:/v1-only\n");
        assert_eq!(process_cgroup(&dir, 43), None);
        assert_eq!(process_cgroup(&dir, 44), None, "not visible");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn own_start_and_clock_tick_agree_with_the_kernel() {
        let pid = i32::try_from(std::process::id()).unwrap();
        let own = own_start_ticks();
        assert!(own.is_some());
        assert_eq!(own, process_start_ticks(Path::new("/proc"), pid));
        // SAFETY: sysconf has no preconditions; it only reads a constant of the system.
        let sysconf = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        assert_eq!(clock_ticks_per_second(), u64::try_from(sysconf).unwrap());
    }
}
