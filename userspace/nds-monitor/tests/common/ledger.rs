//! A tenure ledger the tests write ([`TestLedger`]): slab files have none, so a test pushes
//! the records the kernel would have written (built from the slab as it ended,
//! [`record_of_slab`]) and the gaps its ring would have left, and the monitor reads them as
//! it reads the devices' ledgers.

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use nds::{Backend, CounterSnapshot, LedgerEvent, Reader, SlabRead};
use nds_abi::ledger::{TenureEnd, TenureRecord, TENURE_REDACTED, TENURE_TAG_PUBLISHED};
use nds_abi::sysfs::SYSFS_COUNTERS;
use nds_sampler::Ledger;
use zerocopy::FromZeros;

#[derive(Debug, Default)]
struct Shared {
    events: VecDeque<(u32, LedgerEvent)>,
    followed: BTreeSet<u32>,
    /// The devices whose ledger the monitor asked to hold at its last read.
    held: BTreeSet<u32>,
}

/// The ledgers of some devices, written by the test; clones share them.
#[derive(Clone, Debug, Default)]
pub struct TestLedger(Arc<Mutex<Shared>>);

impl TestLedger {
    /// The ledgers of `devices`, empty.
    pub fn following(devices: &[u32]) -> Self {
        let ledger = Self::default();
        ledger.0.lock().unwrap().followed = devices.iter().copied().collect();
        ledger
    }

    /// The monitor's next read finds `record`.
    pub fn push(&self, record: TenureRecord) {
        let device = record.device;
        self.0
            .lock()
            .unwrap()
            .events
            .push_back((device, LedgerEvent::Tenure(Box::new(record))));
    }

    /// The monitor's next read finds that `device`'s ring dropped `first..=last`.
    pub fn lose(&self, device: u32, first: u64, last: u64) {
        self.0
            .lock()
            .unwrap()
            .events
            .push_back((device, LedgerEvent::Lost { first, last }));
    }

    /// The devices the monitor last asked to hold open.
    pub fn held(&self) -> BTreeSet<u32> {
        self.0.lock().unwrap().held.clone()
    }
}

impl Ledger for TestLedger {
    fn follows(&self, device: u32) -> bool {
        self.0.lock().unwrap().followed.contains(&device)
    }

    fn read(&mut self, hold: &BTreeSet<u32>) -> Vec<(u32, LedgerEvent)> {
        let mut shared = self.0.lock().unwrap();
        shared.held = hold.clone();
        shared.events.drain(..).collect()
    }
}

/// Now, on the ledger's clock (`CLOCK_REALTIME`, nanoseconds).
pub fn realtime_ns() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    )
    .unwrap()
}

/// The record the kernel writes when the tenure of `pid`'s slab file in `dir` on `device`
/// ends now, as it stands: sequence number `seq`, begun at `started_ns`, `cores` cores, the
/// tag `tag` (published), the final value of every counter a sysfs node reads, and the cgroup
/// path `cgroup`.
pub fn record_of_slab(
    dir: &Path,
    device: u32,
    pid: i32,
    seq: u64,
    started_ns: u64,
    tag: &str,
    cgroup: &str,
) -> TenureRecord {
    let slab = Reader::open(&Backend::file(super::slab_path(dir, device, pid)), pid).unwrap();
    let mut counters = CounterSnapshot::new();
    assert!(matches!(slab.snapshot(&mut counters), SlabRead::Valid(_)));
    let mut record = TenureRecord::new_zeroed();
    record.seq = seq;
    record.device = device;
    record.end = TenureEnd::LastClose as u8;
    record.flags = TENURE_TAG_PUBLISHED;
    record.core_count = 2;
    record.generation = 1;
    record.started_ns = started_ns;
    record.ended_ns = realtime_ns();
    record.pid = pid;
    record.tag[..tag.len()].copy_from_slice(tag.as_bytes());
    record.cgroup[..cgroup.len()].copy_from_slice(cgroup.as_bytes());
    for core in 0..usize::from(record.core_count) {
        for (node, counter) in SYSFS_COUNTERS.iter().enumerate() {
            record.counters[core][node] = counters.nc[core][counter.source.index()];
        }
    }
    record
}

/// `record` as a reader the owner's tenure is not readable by gets it: its sequence number,
/// device, slot, end, generation and times only.
pub fn redacted(record: &TenureRecord) -> TenureRecord {
    let mut bare = TenureRecord::new_zeroed();
    bare.seq = record.seq;
    bare.device = record.device;
    bare.slot = record.slot;
    bare.end = record.end;
    bare.generation = record.generation;
    bare.started_ns = record.started_ns;
    bare.ended_ns = record.ended_ns;
    bare.flags = TENURE_REDACTED;
    bare
}
