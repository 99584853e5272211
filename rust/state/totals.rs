// SPDX-License-Identifier: GPL-2.0

//! The per-NeuronCore totals behind the sysfs counters: what released slabs left behind, plus
//! what the slabs still owned have counted so far.
//!
//! A write to a counter's file resets it: from then on `total` reads what was counted after the
//! reset. For that, each live slot remembers, per counter, what its slab held at the reset (its
//! baseline), which neither its live part nor its release adds again.

use crate::{
    abi::sysfs::{
        SysfsCounter,
        SYSFS_COUNTERS, //
    },
    state::{
        slab_values::SlabValues,
        slot_index::{
            PerSlot,
            SlotIndex, //
        },
    },
};
use kernel::prelude::*;

/// Number of aggregated counters per core.
pub(crate) const NODE_COUNT: usize = SYSFS_COUNTERS.len();

/// What one slab contributes to `counter` (e.g. FLOPs from MACs); modular, like the original's
/// `u64` arithmetic.
fn contribution(counter: &SysfsCounter, slab: &dyn SlabValues, core: usize) -> u64 {
    slab.nc(core, counter.source.index())
        .wrapping_mul(counter.scale)
}

/// A counter's two values as sysfs shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Shown {
    /// Everything counted since load or the last reset, released and live.
    pub(crate) total: u64,
    /// What the last release added.
    pub(crate) present: u64,
}

/// The totals of every core of one device.
pub(crate) struct DeviceTotals {
    core_count: usize,
    /// Per core and counter: what released slabs added since load or the last reset.
    released: KVec<[u64; NODE_COUNT]>,
    /// Per core and counter: what the last release added.
    present: KVec<[u64; NODE_COUNT]>,
    /// Per slot, core and counter: what the slot's slab held at the last reset while it was
    /// live.
    baselines: KBox<PerSlot<KVec<[u64; NODE_COUNT]>>>,
}

impl DeviceTotals {
    /// Zeroed totals for `core_count` cores.
    pub(crate) fn new(core_count: usize) -> Result<Self> {
        let zeroed = |count| KVec::from_elem([0u64; NODE_COUNT], count, GFP_KERNEL);
        Ok(Self {
            core_count,
            released: zeroed(core_count)?,
            present: zeroed(core_count)?,
            baselines: KBox::init(PerSlot::try_init(|_| Ok(zeroed(core_count)?)), GFP_KERNEL)?,
        })
    }

    /// Counter `node` (an index into `SYSFS_COUNTERS`) of `core`, with `live` the slots whose
    /// slabs are still counted live and their slabs.
    pub(crate) fn shown(
        &self,
        core: usize,
        node: usize,
        live: impl Iterator<Item = (SlotIndex, impl SlabValues)>,
    ) -> Option<Shown> {
        let counter = SYSFS_COUNTERS.get(node)?;
        let released = *self.released.get(core)?.get(node)?;
        let present = *self.present.get(core)?.get(node)?;
        let live = live
            .map(|(slot, slab)| {
                let baseline = self.baselines[slot]
                    .get(core)
                    .and_then(|b| b.get(node))
                    .copied()
                    .unwrap_or(0);
                contribution(counter, &slab, core).wrapping_sub(baseline)
            })
            .fold(0u64, u64::wrapping_add);
        Some(Shown {
            total: released.wrapping_add(live),
            present,
        })
    }

    /// Adds what released slot `slot` counted (`slab`, its final values) to every counter of
    /// every core, less its baselines, which are forgotten.
    pub(crate) fn add_release(&mut self, slot: SlotIndex, slab: &dyn SlabValues) {
        for core in 0..self.core_count {
            let baseline = self.baselines[slot]
                .get_mut(core)
                .map(core::mem::take)
                .unwrap_or([0; NODE_COUNT]);
            let (Some(released), Some(present)) =
                (self.released.get_mut(core), self.present.get_mut(core))
            else {
                continue;
            };
            for (node, counter) in SYSFS_COUNTERS.iter().enumerate() {
                let added = contribution(counter, slab, core)
                    .wrapping_sub(baseline.get(node).copied().unwrap_or(0));
                if let (Some(total), Some(last)) = (released.get_mut(node), present.get_mut(node)) {
                    *total = total.wrapping_add(added);
                    *last = added;
                }
            }
        }
    }

    /// Resets counter `node` of `core` (a write to its file): it reads 0 now, and counts from
    /// here on. `live` as in [`Self::shown`].
    pub(crate) fn reset(
        &mut self,
        core: usize,
        node: usize,
        live: impl Iterator<Item = (SlotIndex, impl SlabValues)>,
    ) -> Result {
        let counter = SYSFS_COUNTERS.get(node).ok_or(EINVAL)?;
        *self
            .released
            .get_mut(core)
            .and_then(|c| c.get_mut(node))
            .ok_or(EINVAL)? = 0;
        *self
            .present
            .get_mut(core)
            .and_then(|c| c.get_mut(node))
            .ok_or(EINVAL)? = 0;
        for (slot, slab) in live {
            if let Some(baseline) = self.baselines[slot]
                .get_mut(core)
                .and_then(|b| b.get_mut(node))
            {
                *baseline = contribution(counter, &slab, core);
            }
        }
        Ok(())
    }
}

#[kunit_tests(neuron_ds_totals)]
mod tests {
    use super::*;
    use crate::abi::{
        counters::NdCounter,
        sysfs::{
            sysfs_counter,
            SysfsGroup, //
        },
    };

    fn node(group: SysfsGroup, name: &str) -> Result<usize> {
        let wanted = sysfs_counter(group, name).ok_or(EINVAL)?;
        SYSFS_COUNTERS
            .iter()
            .position(|c| c == wanted)
            .ok_or(EINVAL)
    }

    /// A slab where counter `index` of `core` holds `base + core * 1000 + index`.
    struct Synthetic(u64);

    impl SlabValues for Synthetic {
        fn nc(&self, core: usize, index: usize) -> u64 {
            self.0
                .wrapping_add(u64::try_from(core * 1000 + index).unwrap_or(0))
        }

        fn nd(&self, _: NdCounter) -> u64 {
            0
        }
    }

    fn none<'a>() -> impl Iterator<Item = (SlotIndex, &'a dyn SlabValues)> {
        core::iter::empty()
    }

    fn slot(index: usize) -> Result<SlotIndex> {
        SlotIndex::new(index).ok_or(EINVAL)
    }

    #[test]
    fn a_release_adds_every_counter_of_every_core() -> Result {
        let mut totals = DeviceTotals::new(2)?;
        totals.add_release(slot(0)?, &Synthetic(0));
        totals.add_release(slot(1)?, &Synthetic(0));
        let success = node(SysfsGroup::Status, "success")?;
        // INFER_COMPLETED is NC counter 1.
        assert_eq!(totals.shown(0, success, none()).ok_or(EINVAL)?.total, 2);
        assert_eq!(
            totals.shown(1, success, none()).ok_or(EINVAL)?.total,
            2 * 1001
        );
        // HW_ERR_REPAIRABLE_HBM_UE is EXT counter 40.
        let repairable = node(SysfsGroup::Status, "hw_repairable_hbm_ue_error")?;
        assert_eq!(
            totals.shown(1, repairable, none()).ok_or(EINVAL)?.total,
            2 * 1040
        );
        Ok(())
    }

    #[test]
    fn flop_count_is_twice_the_mac_count() -> Result {
        let mut totals = DeviceTotals::new(1)?;
        totals.add_release(slot(3)?, &Synthetic(0));
        let flops = node(SysfsGroup::OtherInfo, "flop_count")?;
        // MAC_COUNT is NC counter 29.
        assert_eq!(totals.shown(0, flops, none()).ok_or(EINVAL)?.total, 58);
        Ok(())
    }

    #[test]
    fn total_includes_live_slabs_and_present_is_the_last_release() -> Result {
        let mut totals = DeviceTotals::new(1)?;
        let timeout = node(SysfsGroup::Status, "timeout")?;
        totals.add_release(slot(0)?, &Synthetic(100));
        let live = Synthetic(10);
        let shown = totals
            .shown(
                0,
                timeout,
                [(slot(1)?, &live as &dyn SlabValues)].into_iter(),
            )
            .ok_or(EINVAL)?;
        // NC counter 4 (timeout): 104 released, 14 live.
        assert_eq!(
            shown,
            Shown {
                total: 118,
                present: 104
            }
        );
        Ok(())
    }

    #[test]
    fn a_reset_reads_zero_and_pre_reset_counts_never_come_back() -> Result {
        let mut totals = DeviceTotals::new(1)?;
        let timeout = node(SysfsGroup::Status, "timeout")?;
        totals.add_release(slot(0)?, &Synthetic(100));
        // Slot 5 is live with 14 timeouts when the counter is reset.
        let before = Synthetic(10);
        totals.reset(
            0,
            timeout,
            [(slot(5)?, &before as &dyn SlabValues)].into_iter(),
        )?;
        let shown = totals.shown(
            0,
            timeout,
            [(slot(5)?, &before as &dyn SlabValues)].into_iter(),
        );
        assert_eq!(shown, Some(Shown::default()));
        // It counts 3 more, then is released: only the 3 appear, live and after the release.
        let after = Synthetic(13);
        let shown = totals.shown(
            0,
            timeout,
            [(slot(5)?, &after as &dyn SlabValues)].into_iter(),
        );
        assert_eq!(shown.map(|s| s.total), Some(3));
        totals.add_release(slot(5)?, &after);
        assert_eq!(
            totals.shown(0, timeout, none()),
            Some(Shown {
                total: 3,
                present: 3
            })
        );
        // The next owner of slot 5 starts without a baseline.
        let next = Synthetic(1);
        let shown = totals.shown(
            0,
            timeout,
            [(slot(5)?, &next as &dyn SlabValues)].into_iter(),
        );
        assert_eq!(shown.map(|s| s.total), Some(3 + 5));
        Ok(())
    }

    #[test]
    fn a_reset_touches_only_its_counter() -> Result {
        let mut totals = DeviceTotals::new(1)?;
        let timeout = node(SysfsGroup::Status, "timeout")?;
        let success = node(SysfsGroup::Status, "success")?;
        totals.add_release(slot(0)?, &Synthetic(0));
        totals.reset(0, timeout, none())?;
        assert_eq!(totals.shown(0, success, none()).map(|s| s.total), Some(1));
        assert_eq!(totals.reset(1, timeout, none()), Err(EINVAL));
        assert_eq!(totals.reset(0, NODE_COUNT, none()), Err(EINVAL));
        Ok(())
    }

    #[test]
    fn totals_wrap_instead_of_overflowing() -> Result {
        let mut totals = DeviceTotals::new(1)?;
        totals.add_release(slot(0)?, &Synthetic(u64::MAX - 1));
        totals.add_release(slot(1)?, &Synthetic(1));
        let success = node(SysfsGroup::Status, "success")?;
        // (MAX - 1 + 1) + (1 + 1) wraps to 1.
        assert_eq!(totals.shown(0, success, none()).map(|s| s.total), Some(1));
        Ok(())
    }

    #[test]
    fn cores_beyond_the_device_have_no_totals() -> Result {
        let totals = DeviceTotals::new(2)?;
        assert_eq!(totals.shown(2, 0, none()), None);
        assert_eq!(totals.shown(0, NODE_COUNT, none()), None);
        Ok(())
    }
}
