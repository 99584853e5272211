//! One consistent reading of a slab, and how a reading is told apart from a slab that moved
//! on to another owner.
//!
//! The kernel bumps the slab generation after zeroing a released slab and before a new owner
//! can write it. A reading is accepted only if the generation read before and after it equals
//! the one seen at attach time; the monitor additionally re-reads the slot table after its
//! readings (the kernel releases under the lock that also guards the table), so a reading taken
//! while a release was zeroing the slab is discarded too.

use nds::{Datastore, ModelEntry, Snapshot};
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

/// Reads every counter and record of `store`, provided its generation stays `attached`.
#[must_use]
pub fn observe(store: &Datastore, attached: Option<u64>) -> Observation {
    let before = store.slab_generation();
    if before != attached {
        return Observation::Moved { generation: before };
    }
    let mut reading = SlabReading::zeroed();
    for (index, value) in reading.nd.iter_mut().enumerate() {
        *value = store.nd_counter(index).unwrap_or(0);
    }
    for (core, counters) in reading.nc.iter_mut().enumerate() {
        for (index, value) in counters.iter_mut().enumerate() {
            *value = store.nc_counter(core, index).unwrap_or(0);
        }
    }
    reading.models = store.read_all_models().unwrap_or_default();
    reading.info = store.read_process_info().unwrap_or(Snapshot::Empty);
    reading.ext = store.read_process_info_ext().unwrap_or(Snapshot::Empty);
    let after = store.slab_generation();
    if after != attached {
        return Observation::Moved { generation: after };
    }
    Observation::Reading(Box::new(reading))
}

/// The latest latencies of cores whose inference count moved since `inferences`, which is
/// updated; `None` if the generation is not `attached`.
#[must_use]
pub fn sample_latencies(
    store: &Datastore,
    attached: Option<u64>,
    inferences: &mut [u64; NDS_TOTAL_NEURONCORE_COUNT],
) -> Option<Vec<(u64, u64)>> {
    if store.slab_generation() != attached {
        return None;
    }
    let mut samples = Vec::new();
    let mut seen = *inferences;
    for (core, last) in seen.iter_mut().enumerate() {
        let count = store
            .nc_counter(core, NcCounter::InferenceCount.index())
            .unwrap_or(0);
        if count != *last {
            *last = count;
            let total = store.nc_counter(core, NcCounter::LatencyTotal.index());
            let device = store.nc_counter(core, NcCounter::LatencyDevice.index());
            samples.push((total.unwrap_or(0), device.unwrap_or(0)));
        }
    }
    if store.slab_generation() != attached {
        return None;
    }
    *inferences = seen;
    Some(samples)
}
