//! What the sampler observes, as a stream of events to its consumers ([`Consumer`]): a
//! tenure began (the monitor attached to a slab), a reading of it, the tenure ended with its
//! final values (the kernel's ledger record of it, when there is one), a report was made, and
//! what the monitor noticed about itself. The JSON document and the Prometheus exporter are
//! views of this one stream; the ledger's records enter it as endings.
//!
//! A tenure is known by its [`TenureId`], unique for the life of the monitor: a slot reused by
//! the next owner is another tenure, even while the first still awaits its ledger record.

use std::collections::BTreeMap;
use std::time::Instant;

use nds::CounterSnapshot;
use nds_abi::ledger::TenureRecord;
use nds_abi::sysfs::CounterSource;
use nds_document::document::MonitorDocument;
use nds_document::groups::CoreIndexing;
use nds_host::hardware::EccTotals;
use nds_slabs::snapshot::SlabReading;
use nds_sysfs::{CoreTotals, TimeInUseUnit};

/// A tenure's number in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TenureId(pub u64);

/// Who a tenure is: fixed for its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenure {
    /// Its number.
    pub id: TenureId,
    /// The device.
    pub device: u32,
    /// The slot (none for slab files).
    pub slot: Option<usize>,
    /// The slab generation during the tenure (slab files: what their word holds).
    pub generation: Option<u64>,
    /// The owner, in the monitor's pid namespace (0: outside it).
    pub pid: i32,
    /// Where its slab is: `/dev/neuron0:slot3`, or the slab file.
    pub address: String,
    /// Whether the owner ran before this monitor started: what it counted before the first
    /// reading may be in a previous monitor's series already.
    pub ran_before_monitor: bool,
    /// The owner's cgroup v2 path (`/proc/<pid>/cgroup`, or the ledger record's), which names
    /// a Kubernetes pod by its UID.
    pub cgroup: Option<String>,
}

/// Which series of a process its rule (the plan's, for its tag) wants fed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wants {
    /// `execution_stats`: outcomes, error classes and latencies.
    pub execution: bool,
    /// `nds_counters`: every counter of every core.
    pub nds: bool,
}

/// One look at a tenure's slab.
#[derive(Clone, Copy, Debug)]
pub struct Reading<'a> {
    /// When.
    pub now: Instant,
    /// The process tag, as last read.
    pub tag: &'a str,
    /// What its rule wants (nothing when its tag is filtered out).
    pub wants: Wants,
    /// How its cores are numbered instance-wide.
    pub indexing: CoreIndexing,
    /// What one unit of busy time is worth.
    pub time_unit: TimeInUseUnit,
    /// Every counter, when a consumer follows counters ([`Consumer::follows_counters`]) and the
    /// read was the tenure's.
    pub counters: Option<&'a CounterSnapshot>,
    /// Latencies `(total, device)` in microseconds sampled since the last reading (only where
    /// the rule wants `execution_stats`).
    pub latencies: &'a [(u64, u64)],
    /// Every counter and record: at the tenure's start and at each report.
    pub slab: Option<&'a SlabReading>,
}

/// Why a tenure ended, as the monitor found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The owner gave the slab back (or its file went away).
    Released,
    /// Another process (or another tenure) has the slab now.
    Reused,
    /// The slab file shrank under the reader.
    Truncated,
}

impl EndReason {
    /// Every reason.
    pub const ALL: [Self; 3] = [Self::Released, Self::Reused, Self::Truncated];

    /// A short lowercase name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::Reused => "reused",
            Self::Truncated => "truncated",
        }
    }
}

/// A tenure's end.
#[derive(Clone, Copy, Debug)]
pub struct Ending<'a> {
    /// When the monitor learnt it.
    pub now: Instant,
    /// Why.
    pub reason: EndReason,
    /// What the document says of it.
    pub note: &'a str,
    /// The process tag, as last read (a tenure known only from its record: the record's tag,
    /// else the pid).
    pub tag: &'a str,
    /// What its rule wants.
    pub wants: Wants,
    /// How its cores are numbered instance-wide.
    pub indexing: CoreIndexing,
    /// What one unit of busy time is worth.
    pub time_unit: TimeInUseUnit,
    /// The kernel's record of the tenure, with the final value of every counter a sysfs node
    /// reads; `None` when there is none to be had (slab files, a record lost or redacted):
    /// then the last reading stands.
    pub record: Option<&'a TenureRecord>,
    /// Whether the tenure began in this stream; `false` for one known only from its record
    /// (it began after the monitor started and ended before the monitor could read it).
    pub seen: bool,
}

/// Why a slab discovery found could not be attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AttachFailure {
    /// The module (or the file's mode) refused this monitor: the kernel's ptrace read rule,
    /// or no `CAP_PERFMON`.
    NoPermission,
    /// What is there is not a slab: not a regular file, too small, another size.
    NotASlab,
    /// The owner was gone by the time the monitor got to it.
    Vanished,
    /// The slot is owned by a process outside the monitor's pid namespace, which it cannot
    /// name (a pod without `hostPID`).
    NoPidView,
    /// Anything else (an I/O error).
    Other,
}

impl AttachFailure {
    /// Every reason.
    pub const ALL: [Self; 5] = [
        Self::NoPermission,
        Self::NotASlab,
        Self::Vanished,
        Self::NoPidView,
        Self::Other,
    ];

    /// A short lowercase name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::NoPermission => "no_permission",
            Self::NotASlab => "not_a_slab",
            Self::Vanished => "vanished",
            Self::NoPidView => "no_pid_view",
            Self::Other => "other",
        }
    }
}

/// What the monitor made of a ledger record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordOutcome {
    /// The end of a tenure the monitor read: its final values replace the last reading's.
    Final,
    /// A tenure that began after the monitor started and ended before it could be read:
    /// counted whole from the record.
    Unseen,
    /// A tenure that ended before the monitor started, or began before it and was never read:
    /// a previous monitor's to count, not added.
    History,
    /// The monitor may not read whose tenure it was: no counters, skipped.
    Redacted,
    /// It came after the monitor had given up waiting for it and closed the tenure with its
    /// last reading: not added.
    Late,
}

impl RecordOutcome {
    /// Every outcome.
    pub const ALL: [Self; 5] = [
        Self::Final,
        Self::Unseen,
        Self::History,
        Self::Redacted,
        Self::Late,
    ];

    /// A short lowercase name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Final => "final",
            Self::Unseen => "unseen",
            Self::History => "history",
            Self::Redacted => "redacted",
            Self::Late => "late",
        }
    }
}

/// What the monitor noticed about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// A slab could not be attached, for the first time since it was found.
    AttachFailed(AttachFailure),
    /// The monitor follows the devices' tenure ledgers (said once, before any record).
    LedgerFollowed,
    /// A ledger record was read, and what became of it.
    LedgerRecord(RecordOutcome),
    /// A device's ledger dropped records `first..=last` before the monitor read them.
    LedgerLost {
        /// The device.
        device: u32,
        /// First lost sequence number.
        first: u64,
        /// Last lost sequence number.
        last: u64,
    },
}

/// The kernel's totals of each device listed at a report: its cores' totals, or why they could
/// not be read.
pub type DeviceTotals = BTreeMap<u32, Result<Vec<CoreTotals>, String>>;

/// A report, with what was read from the system for it.
#[derive(Clone, Copy, Debug)]
pub struct Report<'a> {
    /// When.
    pub now: Instant,
    /// The document.
    pub document: &'a MonitorDocument,
    /// The kernel's totals per core, when `neuron_counters` was due.
    pub core_totals: Option<&'a [CoreTotals]>,
    /// The driver's ECC totals per device, when `neuron_hw_counters` was due.
    pub ecc_totals: Option<&'a [EccTotals]>,
    /// NeuronCores per device.
    pub per_device: usize,
    /// What one unit of busy time is worth.
    pub time_unit: TimeInUseUnit,
    /// The devices the module's sysfs tree lists now (`Err`: why it cannot be listed).
    pub devices: Result<&'a [u32], &'a str>,
    /// The kernel's totals of each of those devices, when `neuron_counters` was due or a
    /// consumer reads them at every report ([`Consumer::reads_totals`]).
    pub device_totals: Option<&'a DeviceTotals>,
    /// Devices with a slab the monitor found and cannot read, and why (the last refresh).
    pub unreadable_slabs: &'a BTreeMap<u32, String>,
    /// Why the module is not loaded, when the monitor reads the kernel's slabs and it is not.
    pub module_missing: Option<&'a str>,
}

/// A consumer of the stream. Every method but [`Consumer::follows_counters`] is told of one
/// event; each does nothing unless the consumer cares.
pub trait Consumer {
    /// Whether it follows the tenures' counters: every counter at every reading (the monitor
    /// then copies each slab's counters at every tick) and each tenure's final values (the
    /// monitor then follows the devices' tenure ledgers).
    fn follows_counters(&self) -> bool {
        false
    }

    /// Whether it reads the kernel's totals at every report ([`Report::device_totals`]), not
    /// only when `neuron_counters` is due.
    fn reads_totals(&self) -> bool {
        false
    }

    /// A tenure began; `first` is the reading the monitor attached with.
    fn began(&mut self, _tenure: &Tenure, _first: &Reading<'_>) {}

    /// A reading of a tenure: at every tick, and with every record at each report.
    fn reading(&mut self, _tenure: &Tenure, _reading: &Reading<'_>) {}

    /// A tenure ended (`ending.seen` false: one that never began in this stream).
    fn ended(&mut self, _tenure: &Tenure, _ending: &Ending<'_>) {}

    /// A report was made.
    fn reported(&mut self, _report: &Report<'_>) {}

    /// The monitor noticed something about itself.
    fn noticed(&mut self, _notice: &Notice) {}

    /// A ledger record was read, and what became of it (told after the tenure's end, for a
    /// record that ended one).
    fn recorded(&mut self, _record: &TenureRecord, _outcome: RecordOutcome) {}
}

/// No consumer: the monitor's document only.
impl Consumer for () {}

/// Two consumers, each told of every event, the first first.
impl<A: Consumer, B: Consumer> Consumer for (A, B) {
    fn follows_counters(&self) -> bool {
        self.0.follows_counters() || self.1.follows_counters()
    }

    fn reads_totals(&self) -> bool {
        self.0.reads_totals() || self.1.reads_totals()
    }

    fn began(&mut self, tenure: &Tenure, first: &Reading<'_>) {
        self.0.began(tenure, first);
        self.1.began(tenure, first);
    }

    fn reading(&mut self, tenure: &Tenure, reading: &Reading<'_>) {
        self.0.reading(tenure, reading);
        self.1.reading(tenure, reading);
    }

    fn ended(&mut self, tenure: &Tenure, ending: &Ending<'_>) {
        self.0.ended(tenure, ending);
        self.1.ended(tenure, ending);
    }

    fn reported(&mut self, report: &Report<'_>) {
        self.0.reported(report);
        self.1.reported(report);
    }

    fn noticed(&mut self, notice: &Notice) {
        self.0.noticed(notice);
        self.1.noticed(notice);
    }

    fn recorded(&mut self, record: &TenureRecord, outcome: RecordOutcome) {
        self.0.recorded(record, outcome);
        self.1.recorded(record, outcome);
    }
}

/// The final value of counter `source` of core `core` in `record`: `None` for a counter no
/// sysfs node reads (the record does not carry it) or a core beyond the record's.
#[must_use]
pub fn recorded_value(record: &TenureRecord, core: usize, source: CounterSource) -> Option<u64> {
    if core >= usize::from(record.core_count) {
        return None;
    }
    let node = nds_abi::sysfs::SYSFS_COUNTERS
        .iter()
        .position(|node| node.source == source)?;
    record.counters.get(core)?.get(node).copied()
}

#[cfg(test)]
mod tests {
    use nds_abi::counters::NcCounter;
    use zerocopy::FromZeros;

    use super::*;

    #[test]
    fn a_record_carries_the_counters_sysfs_nodes_read_on_its_cores() {
        let mut record = TenureRecord::new_zeroed();
        record.core_count = 2;
        let success = nds_abi::sysfs::SYSFS_COUNTERS
            .iter()
            .position(|node| node.name == "success")
            .unwrap();
        record.counters[1][success] = 42;
        let completed = CounterSource::Nc(NcCounter::InferCompleted);
        assert_eq!(recorded_value(&record, 1, completed), Some(42));
        assert_eq!(recorded_value(&record, 0, completed), Some(0));
        assert_eq!(
            recorded_value(&record, 2, completed),
            None,
            "beyond its cores"
        );
        let numerical = CounterSource::Nc(NcCounter::ErrNumerical);
        assert_eq!(
            recorded_value(&record, 1, numerical),
            None,
            "no node reads it"
        );
    }
}
