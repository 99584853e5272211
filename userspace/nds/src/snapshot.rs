//! Every counter of a slab at once: [`CounterSnapshot`] and the copy of the four counter bands
//! that [`Reader::snapshot`](crate::Reader::snapshot) guards with the slab generation.
//!
//! The 1,551 counters live in four bands of consecutive words (ND; NC counters 0..=30 of cores
//! 0..=3; EXT counters 31..=94 of cores 0..=3; all 95 counters of cores 4..=15, one pad word
//! apart), 12.4 KB of the 67 KB region map. The copy reads them as 29 runs of consecutive
//! words, each in one straight loop of relaxed 8-byte loads into caller storage: eight loads per
//! cache line back to back, nothing else of the map touched.

use nds_abi::counters::{
    NdCounter, NDS_NC_COUNTER_COUNT, NDS_ND_COUNTER_COUNT, NDS_TOTAL_NC_COUNTER_COUNT,
};
use nds_abi::layout::{
    nc_counter_offset, NDS_MAX_NEURONCORE_COUNT, NDS_ND_COUNTERS_START, NDS_TOTAL_NEURONCORE_COUNT,
};

use crate::handles::{CoreCounter, NeuronCore};
use crate::slab::RegionMap;

/// Every counter word of a slab: the ND counters and each core's 95 per-core counters.
///
/// 12,408 bytes; keep one per monitored slab and let [`Reader::snapshot`](crate::Reader::snapshot)
/// overwrite it every period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// ND counters by index.
    pub nd: [u64; NDS_ND_COUNTER_COUNT],
    /// Per-core counters: `nc[core][index]`, original and EXT indices in one space.
    pub nc: [[u64; NDS_TOTAL_NC_COUNTER_COUNT]; NDS_TOTAL_NEURONCORE_COUNT],
}

impl CounterSnapshot {
    /// All zeroes.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            nd: [0; NDS_ND_COUNTER_COUNT],
            nc: [[0; NDS_TOTAL_NC_COUNTER_COUNT]; NDS_TOTAL_NEURONCORE_COUNT],
        }
    }

    /// ND `counter`.
    #[must_use]
    pub fn nd(&self, counter: NdCounter) -> u64 {
        self.nd.get(counter.index()).copied().unwrap_or(0)
    }

    /// Per-core `counter` of `core`.
    #[must_use]
    pub fn nc(&self, core: NeuronCore, counter: impl CoreCounter) -> u64 {
        self.nc
            .get(core.index())
            .and_then(|counters| counters.get(counter.core_index()))
            .copied()
            .unwrap_or(0)
    }
}

impl Default for CounterSnapshot {
    fn default() -> Self {
        Self::new()
    }
}

/// Copies every counter of `map` into `out`, band by band, with relaxed loads.
#[inline]
pub(crate) fn copy_counters(map: RegionMap<'_>, out: &mut CounterSnapshot) {
    map.load_words(NDS_ND_COUNTERS_START, &mut out.nd);
    let (original_cores, extra_cores) = out.nc.split_at_mut(NDS_MAX_NEURONCORE_COUNT);
    // Cores 0..=3: counters 0..=30 in the NC band, 31..=94 in the EXT band.
    for (core, counters) in original_cores.iter_mut().enumerate() {
        let (nc, ext) = counters.split_at_mut(NDS_NC_COUNTER_COUNT);
        copy_run(map, core, 0, nc);
        copy_run(map, core, NDS_NC_COUNTER_COUNT, ext);
    }
    // Cores 4..=15: all 95 counters in a row of the EXT data band.
    for (core, counters) in (NDS_MAX_NEURONCORE_COUNT..).zip(extra_cores.iter_mut()) {
        copy_run(map, core, 0, counters);
    }
}

/// Copies `out.len()` counters of `core` starting at index `first`, consecutive words.
#[inline(always)]
fn copy_run(map: RegionMap<'_>, core: usize, first: usize, out: &mut [u64]) {
    if let Ok(start) = nc_counter_offset(core, first) {
        map.load_words(start, out);
    }
}

#[cfg(test)]
mod tests {
    use nds_abi::layout::nd_counter_offset;

    use super::*;

    #[test]
    fn each_run_is_consecutive_words_of_the_three_band_address_function() {
        // The copy assumes runs of consecutive words; the layout function is the authority.
        for core in 0..NDS_TOTAL_NEURONCORE_COUNT {
            let runs: &[(usize, usize)] = if core < NDS_MAX_NEURONCORE_COUNT {
                &[
                    (0, NDS_NC_COUNTER_COUNT),
                    (NDS_NC_COUNTER_COUNT, NDS_TOTAL_NC_COUNTER_COUNT),
                ]
            } else {
                &[(0, NDS_TOTAL_NC_COUNTER_COUNT)]
            };
            for &(first, end) in runs {
                let start = nc_counter_offset(core, first).unwrap();
                for index in first..end {
                    assert_eq!(
                        nc_counter_offset(core, index).unwrap(),
                        start + (index - first) * 8
                    );
                }
            }
        }
        for index in 0..NDS_ND_COUNTER_COUNT {
            assert_eq!(
                nd_counter_offset(index).unwrap(),
                NDS_ND_COUNTERS_START + index * 8
            );
        }
    }
}
