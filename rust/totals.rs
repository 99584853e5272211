// SPDX-License-Identifier: GPL-2.0

//! Per-NeuronCore totals of what released slabs left behind, behind the sysfs counters.

use crate::abi::sysfs::{
    SysfsCounter,
    SYSFS_COUNTERS, //
};
use kernel::prelude::*;

/// Number of aggregated counters per core.
pub(crate) const NODE_COUNT: usize = SYSFS_COUNTERS.len();

/// One aggregated counter, with the original driver's semantics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Aggregate {
    /// Sum of every delta since load or the last reset.
    pub(crate) total: u64,
    /// The last delta added.
    pub(crate) present: u64,
}

impl Aggregate {
    /// Adds one release's delta. Counters are modular, as in the original: a producer can
    /// write any value, so the sum wraps instead of overflowing.
    fn add(&mut self, delta: u64) {
        self.total = self.total.wrapping_add(delta);
        self.present = delta;
    }
}

/// What one slab's raw counter value contributes to `counter` (e.g. FLOPs from MACs).
pub(crate) fn contribution(counter: &SysfsCounter, raw: u64) -> u64 {
    raw.wrapping_mul(counter.scale)
}

/// The totals of every core of one device.
pub(crate) struct DeviceTotals {
    cores: KVec<[Aggregate; NODE_COUNT]>,
}

impl DeviceTotals {
    /// Zeroed totals for `core_count` cores.
    pub(crate) fn new(core_count: usize) -> Result<Self> {
        let mut cores = KVec::with_capacity(core_count, GFP_KERNEL)?;
        for _ in 0..core_count {
            cores.push([Aggregate::default(); NODE_COUNT], GFP_KERNEL)?;
        }
        Ok(Self { cores })
    }

    /// Adds a released slab: `read(core, index)` returns the slab's raw counter value.
    pub(crate) fn add_slab(&mut self, read: impl Fn(usize, usize) -> u64) {
        for (core, nodes) in self.cores.iter_mut().enumerate() {
            for (aggregate, counter) in nodes.iter_mut().zip(SYSFS_COUNTERS.iter()) {
                aggregate.add(contribution(counter, read(core, counter.source.index())));
            }
        }
    }

    /// Counter `node` (an index into `SYSFS_COUNTERS`) of `core`.
    pub(crate) fn get(&self, core: usize, node: usize) -> Option<Aggregate> {
        self.cores.get(core)?.get(node).copied()
    }

    /// Zeroes counter `node` of `core` (a write to its sysfs file).
    pub(crate) fn reset(&mut self, core: usize, node: usize) -> Result {
        let aggregate = self
            .cores
            .get_mut(core)
            .and_then(|c| c.get_mut(node))
            .ok_or(EINVAL)?;
        *aggregate = Aggregate::default();
        Ok(())
    }
}

#[kunit_tests(neuron_ds_totals)]
mod tests {
    use super::*;
    use crate::abi::sysfs::{
        sysfs_counter,
        SysfsGroup, //
    };

    fn node(group: SysfsGroup, name: &str) -> Result<usize> {
        let wanted = sysfs_counter(group, name).ok_or(EINVAL)?;
        SYSFS_COUNTERS
            .iter()
            .position(|c| c == wanted)
            .ok_or(EINVAL)
    }

    /// A synthetic slab where counter `index` of `core` holds `core * 1000 + index`.
    fn synthetic(core: usize, index: usize) -> u64 {
        u64::try_from(core * 1000 + index).unwrap_or(0)
    }

    #[test]
    fn a_release_adds_every_counter_of_every_core() -> Result {
        let mut totals = DeviceTotals::new(2)?;
        totals.add_slab(synthetic);
        totals.add_slab(synthetic);
        let success = node(SysfsGroup::Status, "success")?;
        // INFER_COMPLETED is NC counter 1.
        assert_eq!(totals.get(0, success).ok_or(EINVAL)?.total, 2);
        assert_eq!(totals.get(1, success).ok_or(EINVAL)?.total, 2 * 1001);
        // HW_ERR_REPAIRABLE_HBM_UE is EXT counter 40.
        let repairable = node(SysfsGroup::Status, "hw_repairable_hbm_ue_error")?;
        assert_eq!(totals.get(1, repairable).ok_or(EINVAL)?.total, 2 * 1040);
        Ok(())
    }

    #[test]
    fn flop_count_is_twice_the_mac_count() -> Result {
        let mut totals = DeviceTotals::new(1)?;
        totals.add_slab(synthetic);
        let flops = node(SysfsGroup::OtherInfo, "flop_count")?;
        // MAC_COUNT is NC counter 29.
        assert_eq!(totals.get(0, flops).ok_or(EINVAL)?.total, 58);
        Ok(())
    }

    #[test]
    fn present_is_the_last_delta_and_reset_zeroes_both() -> Result {
        let mut totals = DeviceTotals::new(1)?;
        let timeout = node(SysfsGroup::Status, "timeout")?;
        totals.add_slab(|_, _| 5);
        totals.add_slab(|_, _| 3);
        assert_eq!(
            totals.get(0, timeout),
            Some(Aggregate {
                total: 8,
                present: 3
            })
        );
        totals.reset(0, timeout)?;
        assert_eq!(totals.get(0, timeout), Some(Aggregate::default()));
        assert_eq!(totals.reset(1, timeout), Err(EINVAL));
        Ok(())
    }

    #[test]
    fn totals_wrap_instead_of_overflowing() -> Result {
        let mut totals = DeviceTotals::new(1)?;
        totals.add_slab(|_, _| u64::MAX);
        totals.add_slab(|_, _| 2);
        let success = node(SysfsGroup::Status, "success")?;
        assert_eq!(totals.get(0, success).ok_or(EINVAL)?.total, 1);
        Ok(())
    }

    #[test]
    fn cores_beyond_the_device_have_no_totals() -> Result {
        let totals = DeviceTotals::new(2)?;
        assert_eq!(totals.get(2, 0), None);
        assert_eq!(totals.get(0, NODE_COUNT), None);
        Ok(())
    }
}
