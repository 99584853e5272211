//! Pre-resolved counter handles: a counter named by the enums of [`nds_abi::counters`] and a
//! [`NeuronCore`] is turned into its slab word once, and every later access is the bare atomic.
//!
//! A runtime resolves its handles when it starts (`producer.nc(core, NcCounter::InferCompleted)`)
//! and increments through them on every execution: [`CounterWord::add`] is one `lock add`, with
//! no index check, no writability check and no `Result`. Nothing is left to check: the enums
//! only hold existing counters, a [`NeuronCore`] is below 16, and a [`Producer`](crate::Producer)
//! always maps its slab writable and large enough.

use std::sync::atomic::{AtomicU64, Ordering};

use nds_abi::counters::{ExtNcCounter, NcCounter, NdCounter};
use nds_abi::layout::{nc_counter_offset, nd_counter_offset, NDS_TOTAL_NEURONCORE_COUNT};
use nds_abi::sysfs::CounterSource;

use crate::slab::RegionMap;

/// One of the 16 NeuronCores a slab describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NeuronCore(u8);

impl NeuronCore {
    /// Every NeuronCore, in index order.
    pub const ALL: [Self; NDS_TOTAL_NEURONCORE_COUNT] = {
        let mut all = [Self(0); NDS_TOTAL_NEURONCORE_COUNT];
        let mut index = 0;
        while index < NDS_TOTAL_NEURONCORE_COUNT {
            // Below 16: the low byte is the whole index.
            all[index] = Self(index.to_le_bytes()[0]);
            index += 1;
        }
        all
    };

    /// The core with index `index`, if it is below 16.
    #[must_use]
    pub const fn new(index: usize) -> Option<Self> {
        if index < NDS_TOTAL_NEURONCORE_COUNT {
            Some(Self::ALL[index])
        } else {
            None
        }
    }

    /// The core's index, 0..16.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for nds_abi::counters::NcCounter {}
    impl Sealed for nds_abi::counters::ExtNcCounter {}
    impl Sealed for nds_abi::sysfs::CounterSource {}
}

/// A named per-NeuronCore counter: [`NcCounter`], [`ExtNcCounter`] or either as a
/// [`CounterSource`]. Every one of them exists on every core.
pub trait CoreCounter: Copy + sealed::Sealed {
    /// The per-core counter index, 0..95.
    fn core_index(self) -> usize;
}

impl CoreCounter for NcCounter {
    #[inline]
    fn core_index(self) -> usize {
        self.index()
    }
}

impl CoreCounter for ExtNcCounter {
    #[inline]
    fn core_index(self) -> usize {
        self.index()
    }
}

impl CoreCounter for CounterSource {
    #[inline]
    fn core_index(self) -> usize {
        self.index()
    }
}

/// The word of ND `counter`.
pub(crate) fn nd_word(map: RegionMap<'_>, counter: NdCounter) -> &AtomicU64 {
    match nd_counter_offset(counter.index()).and_then(|offset| map.word(offset)) {
        Some(word) => word,
        // Every NdCounter is below NDS_ND_COUNTER_COUNT, so its word is in the region map.
        None => unreachable!("ND counter {counter:?} outside the region map"),
    }
}

/// The word of `counter` on `core`.
pub(crate) fn nc_word(
    map: RegionMap<'_>,
    core: NeuronCore,
    counter: impl CoreCounter,
) -> &AtomicU64 {
    let offset = nc_counter_offset(core.index(), counter.core_index()).ok();
    match offset.and_then(|offset| map.word(offset)) {
        Some(word) => word,
        // A NeuronCore is below 16 and every named counter below 95: the address exists.
        None => unreachable!(
            "counter {} of core {} outside the region map",
            counter.core_index(),
            core.index()
        ),
    }
}

/// A producer's handle on one counter word: every method is a single atomic instruction.
///
/// Resolved with [`Producer::nd`](crate::Producer::nd) or [`Producer::nc`](crate::Producer::nc);
/// it borrows the producer, so it cannot outlive the mapping. It is `Copy`, `Send` and `Sync`:
/// hand it to every thread that counts.
#[derive(Clone, Copy, Debug)]
pub struct CounterWord<'a> {
    word: &'a AtomicU64,
}

impl<'a> CounterWord<'a> {
    pub(crate) fn new(word: &'a AtomicU64) -> Self {
        Self { word }
    }

    /// Atomically adds `delta` (wrapping).
    #[inline]
    pub fn add(self, delta: u64) {
        self.word.fetch_add(delta, Ordering::Relaxed);
    }

    /// Atomically subtracts `delta` (wrapping).
    #[inline]
    pub fn sub(self, delta: u64) {
        self.word.fetch_sub(delta, Ordering::Relaxed);
    }

    /// Atomically stores `value` (gauges such as latencies and memory usage).
    #[inline]
    pub fn set(self, value: u64) {
        self.word.store(value, Ordering::Relaxed);
    }

    /// Atomically ORs `mask` into the word (bitmaps such as the feature bitmap).
    #[inline]
    pub fn or(self, mask: u64) {
        self.word.fetch_or(mask, Ordering::Relaxed);
    }

    /// The current value, with one 8-byte load.
    #[inline]
    #[must_use]
    pub fn get(self) -> u64 {
        self.word.load(Ordering::Relaxed)
    }
}

/// A reader's handle on one counter word: it can only be read, with one 8-byte load.
///
/// Resolved with [`Reader::nd`](crate::Reader::nd) or [`Reader::nc`](crate::Reader::nc). For
/// every counter at once, [`Reader::snapshot`](crate::Reader::snapshot) is faster and checks
/// that the slab did not change owner meanwhile.
#[derive(Clone, Copy, Debug)]
pub struct CounterView<'a> {
    word: &'a AtomicU64,
}

impl<'a> CounterView<'a> {
    pub(crate) fn new(word: &'a AtomicU64) -> Self {
        Self { word }
    }

    /// The current value, with one 8-byte load.
    #[inline]
    #[must_use]
    pub fn get(self) -> u64 {
        self.word.load(Ordering::Relaxed)
    }
}
