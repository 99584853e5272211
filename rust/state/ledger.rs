// SPDX-License-Identifier: GPL-2.0

//! The tenure ledger of one device: a record of every tenure that ended, with the final value
//! of every counter the totals fold in, appended at the release before the slab is zeroed
//! (`nds_abi::ledger` has the wire format and the rules). Bounded: the oldest record goes when
//! a new one comes and the ring is full, and a reader that fell behind sees the gap in the
//! sequence numbers. Appending fills a record in place: it allocates nothing and cannot fail,
//! so it never holds a release up.

use crate::{
    abi::{
        ledger::{
            TenureEnd,
            LEDGER_CAPACITY, //
        },
        records::NDS_PROCESS_INFO_TAG_SIZE,
        text::c_text,
    },
    state::{
        core_index::{
            CoreIndex,
            MAX_CORES, //
        },
        seq_ring::SeqRing,
        slab_values::{
            SlabSnapshot,
            SlabValues, //
        },
        totals::{
            NODE_COUNT,
            NODE_SOURCES, //
        },
    },
};
use kernel::prelude::*;

/// A tenure that ended, as its release knows it before the ledger numbers it. `O` is what the
/// device keeps of its owner (whom a reader's rights and namespaces are evaluated against).
pub(crate) struct Ended<O> {
    /// The slot's index.
    pub(crate) slot: u8,
    /// How it ended.
    pub(crate) end: TenureEnd,
    /// The slab's generation during the tenure.
    pub(crate) generation: u64,
    /// When it began and ended, in real-time nanoseconds.
    pub(crate) started_ns: u64,
    /// See `started_ns`.
    pub(crate) ended_ns: u64,
    /// Its owner.
    pub(crate) owner: O,
}

/// One record of the ledger, but for its counters ([`TenureCounters`]).
pub(crate) struct TenureEntry<O> {
    /// The tenure; `None` only in the places no record has been written to yet.
    pub(crate) ended: Option<Ended<O>>,
    /// The tag of the process-info record the owner published, if it published one.
    pub(crate) tag: Option<[u8; NDS_PROCESS_INFO_TAG_SIZE]>,
    /// The cores whose counters are filled in.
    pub(crate) core_count: usize,
}

/// A record's counters: the final value, per core and sysfs counter node, of the slab counter
/// the node reads. A few KiB: kept in a ring of their own, allocated zeroed.
pub(crate) type TenureCounters = [[u64; NODE_COUNT]; MAX_CORES];

/// The ledger of one device: each record's entry and counters, appended together, so that a
/// sequence number names both.
pub(crate) struct Ledger<O> {
    records: SeqRing<TenureEntry<O>, LEDGER_CAPACITY>,
    counters: SeqRing<TenureCounters, LEDGER_CAPACITY>,
}

impl<O> Ledger<O> {
    /// An empty ledger, its records' room allocated once.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            records: SeqRing::new(|| TenureEntry {
                ended: None,
                tag: None,
                core_count: 0,
            })?,
            counters: SeqRing::new_zeroed()?,
        })
    }

    /// Appends the record of `ended`, with the counters and the published tag that
    /// `snapshot` (the slab as the tenure left it) holds; returns its sequence number.
    pub(crate) fn record(&mut self, ended: Ended<O>, snapshot: &SlabSnapshot) -> u64 {
        self.counters.push_with(|counters, _| {
            for (core, values) in counters.iter_mut().enumerate() {
                let core = CoreIndex::new(core).filter(|core| core.get() < snapshot.core_count());
                for (value, source) in values.iter_mut().zip(NODE_SOURCES) {
                    *value = core.map_or(0, |core| snapshot.nc(core, source));
                }
            }
        });
        self.records.push_with(|entry, _| {
            entry.ended = Some(ended);
            entry.tag = snapshot.process_info().map(|info| {
                let mut tag = [0; NDS_PROCESS_INFO_TAG_SIZE];
                let text = c_text(&info.tag);
                tag[..text.len()].copy_from_slice(text);
                tag
            });
            entry.core_count = snapshot.core_count();
        })
    }

    /// Whether a record from sequence number `from` on is kept.
    pub(crate) fn has_from(&self, from: u64) -> bool {
        self.records.has_from(from)
    }

    /// Whether `from` is a position this ledger never gave out (see [`SeqRing::is_ahead`]).
    pub(crate) fn is_ahead(&self, from: u64) -> bool {
        self.records.is_ahead(from)
    }

    /// The first record kept from sequence number `from` on, with its number and counters.
    pub(crate) fn first_from(&self, from: u64) -> Option<(u64, &TenureEntry<O>, &TenureCounters)> {
        let (seq, entry) = self.records.first_from(from)?;
        // Appended together: the same number is kept in both.
        let (_, counters) = self.counters.first_from(seq)?;
        Some((seq, entry, counters))
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_ledger)]
mod tests {
    use super::*;
    use crate::{
        abi::{
            counters::NcCounter,
            layout::{
                nc_counter_offset,
                NDS_PROCESS_INFO_START, //
            },
            records::{
                record_hash,
                ProcessInfoRecord, //
            },
            sysfs::{
                sysfs_counter,
                SysfsGroup,
                SYSFS_COUNTERS, //
            },
        },
        state::slab_values::{
            LiveSlab,
            Slab,
            SlabWord, //
        },
    };
    use zerocopy::{FromZeros, IntoBytes};

    fn ended(slot: u8, owner: u32) -> Ended<u32> {
        Ended {
            slot,
            end: TenureEnd::Release,
            generation: 1,
            started_ns: 10,
            ended_ns: 20,
            owner,
        }
    }

    fn node(group: SysfsGroup, name: &str) -> Result<usize> {
        let wanted = sysfs_counter(group, name).ok_or(EINVAL)?;
        SYSFS_COUNTERS
            .iter()
            .position(|c| c == wanted)
            .ok_or(EINVAL)
    }

    /// Writes `record` (with its hash, or a wrong one) into `slab` word by word.
    fn publish(slab: &Slab, record: &mut ProcessInfoRecord, hash_ok: bool) -> Result {
        record.hash = 0;
        record.hash = record_hash(record.as_bytes()) ^ u32::from(!hash_ok);
        for (at, chunk) in (NDS_PROCESS_INFO_START..)
            .step_by(8)
            .zip(record.as_bytes().chunks(8))
        {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            slab.store(SlabWord::new(at).ok_or(EINVAL)?, u64::from_ne_bytes(word));
        }
        Ok(())
    }

    #[test]
    fn a_record_holds_the_final_counters_and_the_published_tag() -> Result {
        let slab = Slab::new_zeroed()?;
        let success = NcCounter::InferCompleted.index();
        slab.store(
            SlabWord::new(nc_counter_offset(1, success).map_err(|_| EINVAL)?).ok_or(EINVAL)?,
            7,
        );
        let mut record = ProcessInfoRecord::new_zeroed();
        record.info.set_tag(b"model-a").map_err(|_| EINVAL)?;
        publish(&slab, &mut record, true)?;
        let mut snapshot = SlabSnapshot::new(2)?;
        snapshot.take(&LiveSlab::of(&slab));
        let mut ledger = Ledger::new()?;
        assert_eq!(ledger.record(ended(3, 9), &snapshot), 1);
        let (seq, entry, counters) = ledger.first_from(0).ok_or(EINVAL)?;
        assert_eq!(seq, 1);
        assert_eq!(
            entry.ended.as_ref().map(|e| (e.slot, e.owner)),
            Some((3, 9))
        );
        let tag = entry.tag.ok_or(EINVAL)?;
        assert_eq!(c_text(&tag), b"model-a");
        let success = node(SysfsGroup::Status, "success")?;
        assert_eq!(counters[1][success], 7);
        assert_eq!(counters[0][success], 0);
        assert_eq!(entry.core_count, 2);
        // A record whose hash does not check publishes no tag.
        publish(&slab, &mut record, false)?;
        snapshot.take(&LiveSlab::of(&slab));
        ledger.record(ended(3, 10), &snapshot);
        assert!(ledger.first_from(2).ok_or(EINVAL)?.1.tag.is_none());
        Ok(())
    }

    #[test]
    fn a_full_ledger_drops_the_oldest_and_a_slow_reader_sees_the_gap() -> Result {
        let snapshot = SlabSnapshot::new(1)?;
        let mut ledger = Ledger::new()?;
        let total = LEDGER_CAPACITY as u64 + 3;
        for owner in 0..total {
            ledger.record(ended(0, u32::try_from(owner)?), &snapshot);
        }
        let (seq, entry, _) = ledger.first_from(1).ok_or(EINVAL)?;
        // Records 1 to 3 were dropped although the reader asked for 1.
        assert_eq!(seq, 4);
        assert_eq!(entry.ended.as_ref().map(|e| e.owner), Some(3));
        assert!(ledger.has_from(total) && !ledger.has_from(total + 1));
        Ok(())
    }
}
