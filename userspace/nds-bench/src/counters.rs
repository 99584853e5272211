//! What the increment benchmarks increment, and how.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use nds::{CounterWord, NeuronCore, Producer, Reader};
use nds_abi::counters::{ExtNcCounter, NcCounter, NdCounter};
use nds_abi::layout::{nc_counter_offset, nd_counter_offset, NDS_MAX_NEURONCORE_COUNT};
use nds_abi::sysfs::CounterSource;

/// The part of the slab a benchmarked counter lives in: the ND counters and the three NC bands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Band {
    /// Per-device counters at 0x8.
    Nd,
    /// Counters 0..=30 of cores 0..=3, the original NC band at 0x100.
    Nc,
    /// Counters 31..=94 of cores 0..=3, the EXT counter band at 0xDA80.
    NcExt,
    /// Every counter of cores 4..=15, the EXT per-core data band at 0xE280.
    NcData,
}

impl Band {
    /// Every band, in slab order.
    pub const ALL: [Self; 4] = [Self::Nd, Self::Nc, Self::NcExt, Self::NcData];

    /// Short identifier used in benchmark ids.
    #[must_use]
    pub const fn id(self) -> &'static str {
        match self {
            Self::Nd => "nd",
            Self::Nc => "nc",
            Self::NcExt => "nc-ext",
            Self::NcData => "nc-data",
        }
    }

    /// Human-readable name used in the table.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Nd => "ND",
            Self::Nc => "NC band",
            Self::NcExt => "NC EXT band",
            Self::NcData => "NC EXT data band",
        }
    }

    /// The counter that lane `lane` (0 or 1) increments when two threads use different
    /// counters; lane 0's counter is also the one used by one thread alone or by two threads
    /// sharing a counter.
    ///
    /// The second lane does what a second runtime thread would: NC lanes count for another
    /// NeuronCore (so the two words are 248 to 768 bytes apart), the ND lane updates the
    /// neighbouring host-memory counter (the next word, on the same cache line: the ND band is
    /// packed by the ABI).
    #[must_use]
    pub const fn counter(self, lane: usize) -> Counter {
        match self {
            Self::Nd => Counter::Nd(NdCounter::MemUsageTensorsHost.index() + lane),
            Self::Nc => Counter::Nc {
                core: lane,
                index: NcCounter::InferCompleted.index(),
            },
            Self::NcExt => Counter::Nc {
                core: lane,
                index: ExtNcCounter::HwErrRepairableHbmUe.index(),
            },
            Self::NcData => Counter::Nc {
                core: NDS_MAX_NEURONCORE_COUNT + lane,
                index: NcCounter::InferCompleted.index(),
            },
        }
    }
}

/// How the increment benchmark is threaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// One thread.
    Single,
    /// Two threads, one per CPU, incrementing the same counter.
    SameCounter,
    /// Two threads, one per CPU, each incrementing its own counter.
    DifferentCounters,
}

impl Sharing {
    /// Every threading mode.
    pub const ALL: [Self; 3] = [Self::Single, Self::SameCounter, Self::DifferentCounters];

    /// Short identifier used in benchmark ids.
    #[must_use]
    pub const fn id(self) -> &'static str {
        match self {
            Self::Single => "1t",
            Self::SameCounter => "2t-same",
            Self::DifferentCounters => "2t-diff",
        }
    }

    /// Human-readable name used in the table.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Single => "1 thread",
            Self::SameCounter => "2 threads, same counter",
            Self::DifferentCounters => "2 threads, own counters",
        }
    }

    /// The counter of `band` that lane `lane` increments in this mode.
    #[must_use]
    pub const fn counter(self, band: Band, lane: usize) -> Counter {
        match self {
            Self::DifferentCounters => band.counter(lane),
            Self::Single | Self::SameCounter => band.counter(0),
        }
    }
}

/// One counter word of the slab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// ND counter `index`.
    Nd(usize),
    /// Counter `index` of NeuronCore `core`.
    Nc {
        /// NeuronCore.
        core: usize,
        /// Counter index, 0..=94.
        index: usize,
    },
}

impl Counter {
    /// Adds `delta` through the integer-index API (libnds' calls, checked every time).
    ///
    /// Every argument passes through [`black_box`], so the address is computed at run time as
    /// for a counter chosen at run time; which method is called is decided at compile time when
    /// `self` is a constant, as in a runtime's code.
    ///
    /// # Errors
    ///
    /// Those of [`Producer::increment_nd_counter`] and [`Producer::increment_nc_counter`].
    #[inline(always)]
    pub fn increment(self, datastore: &Producer, delta: u64) -> nds::Result<()> {
        match self {
            Self::Nd(index) => datastore.increment_nd_counter(black_box(index), black_box(delta)),
            Self::Nc { core, index } => {
                datastore.increment_nc_counter(black_box(core), black_box(index), black_box(delta))
            }
        }
    }

    /// The counter's byte offset in the slab, `None` if it does not exist.
    #[must_use]
    pub fn offset(self) -> Option<usize> {
        match self {
            Self::Nd(index) => nd_counter_offset(index),
            Self::Nc { core, index } => nc_counter_offset(core, index).ok(),
        }
    }

    /// The pre-resolved handle on the counter, from the counter enums as a runtime resolves it
    /// at start-up; `None` for a counter without a name.
    #[must_use]
    pub fn word(self, producer: &Producer) -> Option<CounterWord<'_>> {
        match self {
            Self::Nd(index) => NdCounter::from_index(index).map(|counter| producer.nd(counter)),
            Self::Nc { core, index } => {
                let core = NeuronCore::new(core)?;
                CounterSource::from_index(index).map(|counter| producer.nc(core, counter))
            }
        }
    }

    /// Reads the counter through the public API.
    ///
    /// # Errors
    ///
    /// Those of [`Reader::nd_counter`] and [`Reader::nc_counter`].
    pub fn read(self, datastore: &Reader) -> nds::Result<u64> {
        match self {
            Self::Nd(index) => datastore.nd_counter(index),
            Self::Nc { core, index } => datastore.nc_counter(core, index),
        }
    }
}

/// The physical floor: one relaxed `fetch_add` on `word`, hidden from the optimizer exactly as
/// [`Counter::increment`] hides its arguments.
#[inline(always)]
pub fn raw_increment(word: &AtomicU64, delta: u64) {
    black_box(word).fetch_add(black_box(delta), Ordering::Relaxed);
}

/// An increment through a pre-resolved handle, hidden from the optimizer as [`raw_increment`]
/// is: the handle (the word's address) and the delta pass through [`black_box`].
#[inline(always)]
pub fn typed_increment(word: CounterWord<'_>, delta: u64) {
    black_box(word).add(black_box(delta));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(counter: Counter) -> usize {
        counter.offset().unwrap()
    }

    #[test]
    fn each_band_lives_where_its_name_says() {
        assert_eq!(offset(Band::Nd.counter(0)), 0x8 + 7 * 8);
        assert_eq!(offset(Band::Nc.counter(0)), 0x100 + 8);
        assert_eq!(offset(Band::NcExt.counter(0)), 0xDA80 + 9 * 8);
        assert_eq!(offset(Band::NcData.counter(0)), 0xE280 + 8);
    }

    #[test]
    fn lanes_share_a_counter_only_when_asked_to() {
        for band in Band::ALL {
            let lanes = |sharing: Sharing| (sharing.counter(band, 0), sharing.counter(band, 1));
            let (a, b) = lanes(Sharing::SameCounter);
            assert_eq!(a, b);
            let (a, b) = lanes(Sharing::DifferentCounters);
            assert_ne!(a, b);
            assert_eq!(a, Sharing::Single.counter(band, 0));
            // NC lanes are on different cache lines; the packed ND band cannot be.
            let apart = offset(b).abs_diff(offset(a)) >= 64;
            assert_eq!(apart, band != Band::Nd, "{band:?}");
        }
    }
}
