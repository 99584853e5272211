//! One consistent reading of a slab, and how a reading is told apart from a slab that moved
//! on to another owner.
//!
//! The counters come from [`Reader::snapshot`], which copies them under the slab-generation
//! protocol of the `nds` crate; the records are read after it, and [`Reader::moved`] closes the
//! protocol over them too, so a reading is accepted only if the slab kept the generation the
//! reader attached with from before the counters to after the last record. The monitor
//! additionally re-reads the slot table after its readings (the kernel releases under the lock
//! that also guards the table).

use nds::{CounterSnapshot, ModelEntry, NeuronCore, Reader, SlabRead, Snapshot};
use nds_abi::counters::{
    ExtNcCounter, NcCounter, NdCounter, NDS_ND_COUNTER_COUNT, NDS_TOTAL_NC_COUNTER_COUNT,
};
use nds_abi::layout::NDS_TOTAL_NEURONCORE_COUNT;
use nds_abi::records::{ProcessInfo, ProcessInfoExt};

/// Every counter and record of a slab at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlabReading {
    /// ND counters by index.
    pub nd: [u64; NDS_ND_COUNTER_COUNT],
    /// Per-core counters: `nc[core][index]`.
    pub nc: [[u64; NDS_TOTAL_NC_COUNTER_COUNT]; NDS_TOTAL_NEURONCORE_COUNT],
    /// Model slots in use.
    pub models: Vec<ModelEntry>,
    /// The process-info record.
    pub info: Snapshot<ProcessInfo>,
    /// The process-info-ext record.
    pub ext: Snapshot<ProcessInfoExt>,
}

/// What looking at an attached slab found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// A reading of the attached owner's slab.
    Reading(Box<SlabReading>),
    /// The generation is no longer the attached one: the slab was released (even) or reused
    /// (odd), so nothing read from it belongs to the attached process.
    Moved {
        /// The generation found.
        generation: Option<u64>,
    },
}

impl SlabReading {
    /// An all-zero reading (the baseline of a slab nobody has written).
    #[must_use]
    pub fn zeroed() -> Self {
        Self {
            nd: [0; NDS_ND_COUNTER_COUNT],
            nc: [[0; NDS_TOTAL_NC_COUNTER_COUNT]; NDS_TOTAL_NEURONCORE_COUNT],
            models: Vec::new(),
            info: Snapshot::Empty,
            ext: Snapshot::Empty,
        }
    }

    /// ND `counter`.
    #[must_use]
    pub fn nd(&self, counter: NdCounter) -> u64 {
        self.nd.get(counter.index()).copied().unwrap_or(0)
    }

    /// Per-core counter `index` of `core` (0 outside the slab's range).
    #[must_use]
    pub fn nc_index(&self, core: usize, index: usize) -> u64 {
        self.nc
            .get(core)
            .and_then(|counters| counters.get(index))
            .copied()
            .unwrap_or(0)
    }

    /// NC `counter` of `core`.
    #[must_use]
    pub fn nc(&self, core: usize, counter: NcCounter) -> u64 {
        self.nc_index(core, counter.index())
    }

    /// EXT `counter` of `core`.
    #[must_use]
    pub fn ext(&self, core: usize, counter: ExtNcCounter) -> u64 {
        self.nc_index(core, counter.index())
    }

    /// Cores with any non-zero counter.
    #[must_use]
    pub fn cores_in_use(&self) -> Vec<usize> {
        (0..NDS_TOTAL_NEURONCORE_COUNT)
            .filter(|&core| self.nc.get(core).is_some_and(|c| c.iter().any(|&v| v != 0)))
            .collect()
    }
}

/// Reads every counter and record of `store`, provided the slab stays with the owner it
/// attached to.
#[must_use]
pub fn observe(store: &Reader) -> Observation {
    let mut counters = Box::new(CounterSnapshot::new());
    match store.snapshot(&mut counters) {
        SlabRead::Valid(_) => {}
        SlabRead::Moved { generation } => {
            return Observation::Moved {
                generation: Some(generation),
            }
        }
        // The generation word is being rewritten by a process: this slab's tenure cannot be
        // told any more, so the attachment ends as if it had moved.
        SlabRead::Torn => {
            return Observation::Moved {
                generation: store.slab_generation(),
            }
        }
    }
    let mut reading = SlabReading::zeroed();
    reading.nd = counters.nd;
    reading.nc = counters.nc;
    reading.models = store.read_all_models().unwrap_or_default();
    reading.info = store.read_process_info().unwrap_or(Snapshot::Empty);
    reading.ext = store.read_process_info_ext().unwrap_or(Snapshot::Empty);
    if let Some(generation) = store.moved() {
        return Observation::Moved {
            generation: Some(generation),
        };
    }
    Observation::Reading(Box::new(reading))
}

/// The latest latencies of cores whose inference count moved since `inferences`, which is
/// updated; `None` if the slab no longer is the attached owner's.
#[must_use]
pub fn sample_latencies(
    store: &Reader,
    inferences: &mut [u64; NDS_TOTAL_NEURONCORE_COUNT],
) -> Option<Vec<(u64, u64)>> {
    let mut samples = Vec::new();
    let mut seen = *inferences;
    for (core, last) in NeuronCore::ALL.into_iter().zip(seen.iter_mut()) {
        let count = store.nc(core, NcCounter::InferenceCount).get();
        if count != *last {
            *last = count;
            let total = store.nc(core, NcCounter::LatencyTotal).get();
            let device = store.nc(core, NcCounter::LatencyDevice).get();
            samples.push((total, device));
        }
    }
    // Covers the loads above: nothing read belonged to another tenure if this finds none.
    if store.moved().is_some() {
        return None;
    }
    *inferences = seen;
    Some(samples)
}
