//! The table `make bench` prints: which measurement is compared with which, against what goal.
//!
//! Host results come from criterion's `estimates.json` files (the median, which a busy machine
//! disturbs least); guest results from the `BENCH` lines the guest timing binary prints (see
//! [`GuestBench`]). A ratio is always ours divided by the reference, both from the same run.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::counters::{Band, Sharing};

/// Criterion group of the snapshot benchmarks.
pub const SNAPSHOT_GROUP: &str = "snapshot";
/// Criterion group of the record benchmarks.
pub const RECORD_GROUP: &str = "record";

/// Criterion group of the increment benchmarks for one threading mode.
#[must_use]
pub fn counter_group(sharing: Sharing) -> String {
    format!("counter-{}", sharing.id())
}

/// Criterion function id of our increment of a counter in `band` through the integer-index
/// API (libnds' calls).
#[must_use]
pub fn ours_increment(band: Band) -> String {
    format!("ours-{}", band.id())
}

/// Criterion function id of our increment of a counter in `band` through its pre-resolved
/// handle.
#[must_use]
pub fn typed_increment(band: Band) -> String {
    format!("typed-{}", band.id())
}

/// Criterion function ids of the increment references.
pub mod peer {
    /// `AtomicU64::fetch_add` on a local: the physical floor.
    pub const RAW: &str = "raw";
    /// `AtomicU64::fetch_add` on the slab's counter word, mapped without the library (one
    /// thread only): tells the memory's share of a miss from the API's.
    pub const RAW_SLAB: &str = "raw-slab";
    /// PCP MMV's `mmv_inc_value`.
    pub const MMV: &str = "mmv";
    /// `prometheus_client::metrics::counter::Counter::inc_by`.
    pub const PROMETHEUS: &str = "prometheus";
}

/// Criterion function ids of the snapshot benchmarks.
pub mod snapshot {
    /// Every counter through `Reader::snapshot`.
    pub const OURS: &str = "ours";
    /// Every counter through 1,551 integer-index calls.
    pub const INTEGER: &str = "integer";
    /// `memcpy` of the 67,200-byte region map.
    pub const MEMCPY: &str = "memcpy";
    /// [`OURS`] while a producer hammers the slab from the other core.
    pub const OURS_HAMMERED: &str = "ours-hammered";
    /// [`INTEGER`] while a producer hammers the slab from the other core.
    pub const INTEGER_HAMMERED: &str = "integer-hammered";
    /// [`MEMCPY`] while a producer hammers the slab from the other core.
    pub const MEMCPY_HAMMERED: &str = "memcpy-hammered";
}

/// Criterion function ids of the record benchmarks.
pub mod record {
    /// Publishing a model record.
    pub const COMMIT: &str = "commit";
    /// Reading and verifying a model record.
    pub const READ: &str = "read";
    /// FNV-1a-32 over 672 bytes.
    pub const FNV: &str = "fnv";
}

/// The measurements of the guest timing binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GuestBench {
    /// ACQUIRE + mmap + touch 64 pages + munmap + RELEASE.
    AttachCycle,
    /// 2 null ioctls + mmap(MAP_POPULATE) of a 256 KiB memfd + touch 64 pages + munmap.
    AttachFloor,
    /// RELEASE (with aggregation) of the only live slab.
    ReleaseOneLive,
    /// RELEASE (with aggregation) of one slab while 15 more are live.
    ReleaseSixteenLive,
    /// RELEASE (with aggregation) of the only live slab while four other processes have it
    /// mapped, every page touched.
    ReleaseFourReaders,
    /// RELEASE (with aggregation) of the only live slab right after the same four processes
    /// mapped it, touched every page and unmapped it again: the same work, no mapping left.
    ReleaseFourReadersDetached,
    /// RELEASE (with aggregation) of the only live slab while another process reads every
    /// sysfs counter file in a loop.
    ReleaseUnderSysfsReads,
    /// RELEASE (with aggregation) of the only live slab while another process reads the misc
    /// device's `dev` attribute in a loop: the same load on the other CPU, with no module code.
    ReleaseUnderOtherReads,
    /// The next owner's ACQUIRE of a slot just released (the only one free), while a reader
    /// process holds as many VMAs of its reader window as it may (10,000 asked, 1,024 made):
    /// the ACQUIRE waits for all of them to be unmapped.
    AcquireAfterReaderMappings,
    /// The same ACQUIRE with no reader of the slot.
    AcquireAfterNoReader,
    /// An ACQUIRE that reaps a dead owner whose address space a `CLONE_VM` sibling of another
    /// thread group keeps, with as many mappings of its owner's window as it may have (60,000
    /// asked, 1,024 made): the reaping removes all of them.
    AcquireReapingOwnerMappings,
    /// The same ACQUIRE reaping a dead owner that kept one mapping.
    AcquireReapingOneOwnerMapping,
    /// open + read + close of a sysfs total with one live slab.
    SysfsTotalOneLive,
    /// open + read + close of a sysfs total with 16 live slabs.
    SysfsTotalSixteenLive,
    /// open + read + close of the node's misc device `dev` attribute.
    SysfsDev,
    /// `pread` of one whole tenure record from a file that follows the device's ledger.
    LedgerRecordRead,
    /// `pread` of as many bytes from `/dev/zero`: the system call and the copy alone.
    ZeroRead,
    /// Wakeup of a reader blocked in `read()` of the metric posts, from the period's stamp.
    PostWakeup,
    /// Wakeup of a reader blocked in `read()` of a pipe, from the stamp of the thread that
    /// writes it after sleeping one metrics period.
    PipeWakeup,
}

impl GuestBench {
    /// Every guest measurement.
    pub const ALL: [Self; 19] = [
        Self::AttachCycle,
        Self::AttachFloor,
        Self::ReleaseOneLive,
        Self::ReleaseSixteenLive,
        Self::ReleaseFourReaders,
        Self::ReleaseFourReadersDetached,
        Self::ReleaseUnderSysfsReads,
        Self::ReleaseUnderOtherReads,
        Self::AcquireAfterReaderMappings,
        Self::AcquireAfterNoReader,
        Self::AcquireReapingOwnerMappings,
        Self::AcquireReapingOneOwnerMapping,
        Self::SysfsTotalOneLive,
        Self::SysfsTotalSixteenLive,
        Self::SysfsDev,
        Self::LedgerRecordRead,
        Self::ZeroRead,
        Self::PostWakeup,
        Self::PipeWakeup,
    ];

    /// The key on its `BENCH` line.
    #[must_use]
    pub const fn key(self) -> &'static str {
        match self {
            Self::AttachCycle => "attach-cycle",
            Self::AttachFloor => "attach-floor",
            Self::ReleaseOneLive => "release-1",
            Self::ReleaseSixteenLive => "release-16",
            Self::ReleaseFourReaders => "release-4-readers",
            Self::ReleaseFourReadersDetached => "release-4-readers-detached",
            Self::ReleaseUnderSysfsReads => "release-sysfs-reads",
            Self::ReleaseUnderOtherReads => "release-other-reads",
            Self::AcquireAfterReaderMappings => "acquire-reader-vmas",
            Self::AcquireAfterNoReader => "acquire-no-reader",
            Self::AcquireReapingOwnerMappings => "acquire-reaping-owner-vmas",
            Self::AcquireReapingOneOwnerMapping => "acquire-reaping-owner-vma",
            Self::SysfsTotalOneLive => "sysfs-total-1",
            Self::SysfsTotalSixteenLive => "sysfs-total-16",
            Self::SysfsDev => "sysfs-dev",
            Self::LedgerRecordRead => "ledger-record-read",
            Self::ZeroRead => "zero-read",
            Self::PostWakeup => "post-wakeup",
            Self::PipeWakeup => "pipe-wakeup",
        }
    }

    /// The line the guest prints for a result: `BENCH <key> <ns per op> <samples>`.
    #[must_use]
    pub fn line(self, ns_per_op: f64, samples: usize) -> String {
        format!("BENCH {} {ns_per_op:.1} {samples}", self.key())
    }
}

/// The line the guest prints to name its accelerator, read by [`Results::add_guest`].
pub const ACCEL_PREFIX: &str = "ACCEL ";

/// What a row's ratio must meet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    /// Ratio at most this.
    AtMost(f64),
    /// Ratio strictly below this.
    Below(f64),
    /// No goal: the row is for information.
    None,
}

impl Goal {
    fn label(self) -> String {
        match self {
            Self::AtMost(limit) => format!("<= {limit:.2}x"),
            Self::Below(limit) => format!("< {limit:.2}x"),
            Self::None => "-".into(),
        }
    }

    fn verdict(self, ratio: f64) -> &'static str {
        let pass = match self {
            Self::AtMost(limit) => ratio <= limit,
            Self::Below(limit) => ratio < limit,
            Self::None => return "info",
        };
        if pass {
            "pass"
        } else {
            "miss"
        }
    }
}

/// Where a row's number comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Measure {
    /// A criterion benchmark: group and function id.
    Host(String, String),
    /// The slowest of several criterion benchmarks of one group.
    SlowestHost(String, Vec<String>),
    /// A guest measurement.
    Guest(GuestBench),
}

impl Measure {
    fn host(group: &str, function: &str) -> Self {
        Self::Host(group.into(), function.into())
    }

    fn value(&self, results: &Results) -> Option<f64> {
        let host = |group: &String, function: &String| {
            results
                .host
                .get(&(group.clone(), function.clone()))
                .copied()
        };
        match self {
            Self::Host(group, function) => host(group, function),
            Self::SlowestHost(group, functions) => functions
                .iter()
                .map(|function| host(group, function))
                .try_fold(f64::MIN, |slowest, ns| ns.map(|ns| slowest.max(ns))),
            Self::Guest(bench) => results.guest.get(bench).copied(),
        }
    }

    fn is_guest(&self) -> bool {
        matches!(self, Self::Guest(_))
    }
}

/// One line of the table: ours against a reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// What is compared with what.
    pub name: String,
    /// Our measurement.
    pub ours: Measure,
    /// The reference it is divided by.
    pub reference: Measure,
    /// What the ratio must meet.
    pub goal: Goal,
}

impl Row {
    fn new(name: String, ours: Measure, reference: Measure, goal: Goal) -> Self {
        Self {
            name,
            ours,
            reference,
            goal,
        }
    }
}

/// The rows of the table, in order.
#[must_use]
pub fn rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for sharing in Sharing::ALL {
        let group = counter_group(sharing);
        // The issue's goals: one thread, and two threads on one counter. Two threads on their
        // own counters have none (the ND band's neighbours share a line by the ABI).
        let goal = match sharing {
            Sharing::Single => Goal::AtMost(1.03),
            Sharing::SameCounter => Goal::AtMost(1.05),
            Sharing::DifferentCounters => Goal::None,
        };
        for band in Band::ALL {
            for (api, function) in [
                ("handle", typed_increment(band)),
                ("int", ours_increment(band)),
            ] {
                rows.push(Row::new(
                    format!(
                        "inc {} {api}, {} / raw fetch_add",
                        band.label(),
                        sharing.label()
                    ),
                    Measure::Host(group.clone(), function),
                    Measure::host(&group, peer::RAW),
                    goal,
                ));
            }
        }
        if sharing == Sharing::Single {
            rows.push(Row::new(
                "fetch_add on the slab word, 1 thread / on a local".into(),
                Measure::host(&group, peer::RAW_SLAB),
                Measure::host(&group, peer::RAW),
                Goal::None,
            ));
        }
        let slowest = Measure::SlowestHost(group.clone(), Band::ALL.map(typed_increment).into());
        rows.push(Row::new(
            format!(
                "inc slowest band handle, {} / mmv_inc_value",
                sharing.label()
            ),
            slowest.clone(),
            Measure::host(&group, peer::MMV),
            Goal::Below(1.0),
        ));
        rows.push(Row::new(
            format!(
                "inc slowest band handle, {} / prometheus-client",
                sharing.label()
            ),
            slowest,
            Measure::host(&group, peer::PROMETHEUS),
            Goal::None,
        ));
    }
    rows.push(Row::new(
        "snapshot 1551 counters / memcpy 67,200 B".into(),
        Measure::host(SNAPSHOT_GROUP, snapshot::OURS),
        Measure::host(SNAPSHOT_GROUP, snapshot::MEMCPY),
        Goal::AtMost(1.0),
    ));
    rows.push(Row::new(
        "1551 int counter reads / memcpy 67,200 B".into(),
        Measure::host(SNAPSHOT_GROUP, snapshot::INTEGER),
        Measure::host(SNAPSHOT_GROUP, snapshot::MEMCPY),
        Goal::None,
    ));
    rows.push(Row::new(
        "snapshot, producer hammering / memcpy, same".into(),
        Measure::host(SNAPSHOT_GROUP, snapshot::OURS_HAMMERED),
        Measure::host(SNAPSHOT_GROUP, snapshot::MEMCPY_HAMMERED),
        Goal::AtMost(1.5),
    ));
    rows.push(Row::new(
        "1551 int reads, producer hammering / memcpy, same".into(),
        Measure::host(SNAPSHOT_GROUP, snapshot::INTEGER_HAMMERED),
        Measure::host(SNAPSHOT_GROUP, snapshot::MEMCPY_HAMMERED),
        Goal::None,
    ));
    rows.push(Row::new(
        "model record commit (672 B) / FNV-1a 672 B".into(),
        Measure::host(RECORD_GROUP, record::COMMIT),
        Measure::host(RECORD_GROUP, record::FNV),
        Goal::AtMost(1.05),
    ));
    rows.push(Row::new(
        "model record verified read / FNV-1a 672 B".into(),
        Measure::host(RECORD_GROUP, record::READ),
        Measure::host(RECORD_GROUP, record::FNV),
        Goal::AtMost(1.05),
    ));
    let guest = [
        (
            "attach cycle / 2 null ioctls + memfd mmap",
            GuestBench::AttachCycle,
            GuestBench::AttachFloor,
            Goal::AtMost(1.5),
        ),
        (
            "RELEASE+aggregation, 16 live / 1 live",
            GuestBench::ReleaseSixteenLive,
            GuestBench::ReleaseOneLive,
            Goal::AtMost(1.10),
        ),
        (
            "RELEASE+aggregation, four readers mapped / the four just unmapped",
            GuestBench::ReleaseFourReaders,
            GuestBench::ReleaseFourReadersDetached,
            Goal::AtMost(1.20),
        ),
        (
            "RELEASE+aggregation, four readers mapped / no reader",
            GuestBench::ReleaseFourReaders,
            GuestBench::ReleaseOneLive,
            Goal::None,
        ),
        (
            "RELEASE+aggregation, every sysfs counter read in a loop / alone",
            GuestBench::ReleaseUnderSysfsReads,
            GuestBench::ReleaseOneLive,
            Goal::AtMost(1.10),
        ),
        (
            "RELEASE+aggregation, every sysfs counter read in a loop / misc dev attr read in a loop",
            GuestBench::ReleaseUnderSysfsReads,
            GuestBench::ReleaseUnderOtherReads,
            Goal::AtMost(1.10),
        ),
        (
            "next owner's ACQUIRE, a reader's 10,000 mmaps of the slot (1,024 made) / no reader",
            GuestBench::AcquireAfterReaderMappings,
            GuestBench::AcquireAfterNoReader,
            Goal::None,
        ),
        (
            "ACQUIRE reaping a dead owner, 60,000 mmaps of its window kept by a CLONE_VM sibling (1,024 made) / one",
            GuestBench::AcquireReapingOwnerMappings,
            GuestBench::AcquireReapingOneOwnerMapping,
            Goal::None,
        ),
        (
            "a tenure record read from the ledger / as many bytes read from /dev/zero",
            GuestBench::LedgerRecordRead,
            GuestBench::ZeroRead,
            Goal::None,
        ),
        (
            "blocked read woken by a post / by a pipe write",
            GuestBench::PostWakeup,
            GuestBench::PipeWakeup,
            Goal::AtMost(1.5),
        ),
        (
            "sysfs total read, 1 live / misc dev attr",
            GuestBench::SysfsTotalOneLive,
            GuestBench::SysfsDev,
            Goal::None,
        ),
        (
            "sysfs total read, 16 live / misc dev attr",
            GuestBench::SysfsTotalSixteenLive,
            GuestBench::SysfsDev,
            Goal::None,
        ),
    ];
    for (name, ours, reference, goal) in guest {
        rows.push(Row::new(
            name.into(),
            Measure::Guest(ours),
            Measure::Guest(reference),
            goal,
        ));
    }
    rows
}

/// Measurements of one `make bench` run, in nanoseconds per operation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Results {
    host: HashMap<(String, String), f64>,
    guest: HashMap<GuestBench, f64>,
    accel: Option<String>,
}

impl Results {
    /// Reads every `<group>/<function>/new/estimates.json` under criterion's output directory.
    ///
    /// # Errors
    ///
    /// When a directory cannot be listed or an estimates file cannot be read or parsed.
    pub fn add_criterion(&mut self, dir: &Path) -> io::Result<()> {
        for group in std::fs::read_dir(dir)? {
            let group = group?;
            if !group.file_type()?.is_dir() {
                continue;
            }
            for function in std::fs::read_dir(group.path())? {
                let function = function?;
                let estimates = function.path().join("new").join("estimates.json");
                if !estimates.is_file() {
                    continue;
                }
                let text = std::fs::read_to_string(&estimates)?;
                let median = median_ns(&text).ok_or_else(|| {
                    io::Error::other(format!("no median in {}", estimates.display()))
                })?;
                self.host.insert(
                    (
                        group.file_name().to_string_lossy().into_owned(),
                        function.file_name().to_string_lossy().into_owned(),
                    ),
                    median,
                );
            }
        }
        Ok(())
    }

    /// Takes the `BENCH` and `ACCEL` lines out of the guest's output; other lines are ignored.
    pub fn add_guest(&mut self, output: &str) {
        for line in output.lines() {
            if let Some(accel) = line.strip_prefix(ACCEL_PREFIX) {
                self.accel = Some(accel.trim().to_uppercase());
                continue;
            }
            let mut fields = line.split_whitespace();
            if fields.next() != Some("BENCH") {
                continue;
            }
            let bench = fields
                .next()
                .and_then(|key| GuestBench::ALL.into_iter().find(|b| b.key() == key));
            let ns = fields.next().and_then(|ns| ns.parse::<f64>().ok());
            if let (Some(bench), Some(ns)) = (bench, ns) {
                self.guest.insert(bench, ns);
            }
        }
    }

    /// Renders `rows` as a fixed-width text table; measurements that are missing show as `n/a`.
    #[must_use]
    pub fn table(&self, rows: &[Row]) -> String {
        let header = ["name", "ours", "reference", "ratio", "goal", "pass/miss"].map(String::from);
        let mut lines = vec![header];
        for row in rows {
            let ours = row.ours.value(self);
            let reference = row.reference.value(self);
            let ratio = ours
                .zip(reference)
                .map(|(ours, reference)| ours / reference);
            let name = if row.ours.is_guest() {
                let accel = self.accel.as_deref().unwrap_or("guest");
                format!("{} [{accel}]", row.name)
            } else {
                row.name.clone()
            };
            lines.push([
                name,
                ours.map_or_else(|| "n/a".into(), format_ns),
                reference.map_or_else(|| "n/a".into(), format_ns),
                ratio.map_or_else(|| "n/a".into(), |ratio| format!("{ratio:.2}x")),
                row.goal.label(),
                ratio.map_or("n/a", |ratio| row.goal.verdict(ratio)).into(),
            ]);
        }
        let mut widths = [0; 6];
        for line in &lines {
            for (width, cell) in widths.iter_mut().zip(line) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for (number, line) in lines.iter().enumerate() {
            for (column, (cell, width)) in line.iter().zip(widths).enumerate() {
                let pad = width - cell.chars().count();
                let sep = if column == 0 { "" } else { "  " };
                // The name column is left-aligned, numbers right-aligned.
                if column == 0 || column == 5 {
                    let _ = write!(out, "{sep}{cell}{}", " ".repeat(pad));
                } else {
                    let _ = write!(out, "{sep}{}{cell}", " ".repeat(pad));
                }
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
            if number == 0 {
                let total = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
                out.push_str(&"-".repeat(total));
                out.push('\n');
            }
        }
        out
    }
}

/// The median point estimate, in ns, of a criterion `estimates.json`.
fn median_ns(estimates: &str) -> Option<f64> {
    let json: serde_json::Value = serde_json::from_str(estimates).ok()?;
    json.get("median")?.get("point_estimate")?.as_f64()
}

/// `ns` with a unit that keeps three or four significant digits.
fn format_ns(ns: f64) -> String {
    match ns {
        ns if ns < 10.0 => format!("{ns:.2} ns"),
        ns if ns < 1_000.0 => format!("{ns:.1} ns"),
        ns if ns < 1_000_000.0 => format!("{:.2} us", ns / 1_000.0),
        ns => format!("{:.2} ms", ns / 1_000_000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimates(median: f64) -> String {
        format!(
            r#"{{"mean":{{"point_estimate":999.0}},"median":{{"confidence_interval":{{}},"point_estimate":{median}}}}}"#
        )
    }

    #[test]
    fn criterion_medians_and_guest_lines_are_read() {
        let dir = crate::slab::ScratchSlab::new("unit-report").unwrap();
        for (function, median) in [("ours-nd", 5.5), ("raw", 5.0)] {
            let path = dir.dir().join("counter-1t").join(function).join("new");
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("estimates.json"), estimates(median)).unwrap();
        }
        let mut results = Results::default();
        results.add_criterion(dir.dir()).unwrap();
        results.add_guest(&format!(
            "boot noise\nACCEL tcg\n{}\n{}\nBENCH bogus 1 1\n",
            GuestBench::ReleaseOneLive.line(100.0, 9),
            GuestBench::ReleaseSixteenLive.line(125.0, 9),
        ));
        let table = results.table(&rows());
        let line = |start: &str| {
            table
                .lines()
                .find(|line| line.starts_with(start))
                .unwrap_or_else(|| panic!("no row {start:?} in\n{table}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(line("inc ND int, 1 thread / raw").ends_with("5.50 ns 5.00 ns 1.10x <= 1.03x miss"));
        assert!(line("inc ND handle, 1 thread / raw").ends_with("n/a 5.00 ns n/a <= 1.03x n/a"));
        assert!(line("RELEASE+aggregation").contains("[TCG]"));
        assert!(line("RELEASE+aggregation").ends_with("125.0 ns 100.0 ns 1.25x <= 1.10x miss"));
        assert!(line("inc NC band int, 1 thread").ends_with("n/a 5.00 ns n/a <= 1.03x n/a"));
        // The slowest band is only known when every band was measured.
        assert!(line("inc slowest band handle, 1 thread / mmv").contains("n/a"));
    }

    #[test]
    fn goals_and_units() {
        assert_eq!(Goal::Below(1.0).verdict(0.99), "pass");
        assert_eq!(Goal::Below(1.0).verdict(1.0), "miss");
        assert_eq!(Goal::AtMost(2.0).verdict(2.0), "pass");
        assert_eq!(Goal::None.verdict(9.0), "info");
        assert_eq!(format_ns(4.321), "4.32 ns");
        assert_eq!(format_ns(2_500.0), "2.50 us");
        assert_eq!(format_ns(3_000_000.0), "3.00 ms");
    }

    #[test]
    fn guest_keys_are_unique_and_the_table_has_every_row() {
        let mut keys: Vec<_> = GuestBench::ALL.iter().map(|b| b.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), GuestBench::ALL.len());
        // Per threading mode: 4 bands × (handle, int), mmv, prometheus; the slab-word row; four
        // snapshot rows, two record rows, twelve guest rows.
        assert_eq!(rows().len(), 3 * 10 + 1 + 6 + 12);
    }
}
