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

/// The most NeuronCores a device has (the `cores_per_device` parameter's bound).
pub(crate) const MAX_CORES: usize = 16;

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

/// Counters whose files changed, one bit per index into `SYSFS_COUNTERS`.
pub(crate) type ChangedCounters = u64;

const _: () = assert!(NODE_COUNT <= ChangedCounters::BITS as usize);

/// The totals of one core.
#[derive(Clone)]
struct CoreTotals {
    /// Per counter: what released slabs added since load or the last reset.
    released: [u64; NODE_COUNT],
    /// Per counter: what the last release added.
    present: [u64; NODE_COUNT],
}

/// The totals of every core of one device.
pub(crate) struct DeviceTotals {
    cores: KVec<CoreTotals>,
    /// Per core, the counters whose `total` or `present` changed since
    /// [`DeviceTotals::take_changed`]; all of a device's cores' fit, whatever its core count,
    /// so that they are taken in one copy.
    changed: [ChangedCounters; MAX_CORES],
    /// Per slot, core and counter: what the slot's slab held at the last reset while it was
    /// live.
    baselines: KBox<PerSlot<KVec<[u64; NODE_COUNT]>>>,
}

impl DeviceTotals {
    /// Zeroed totals for `core_count` cores.
    pub(crate) fn new(core_count: usize) -> Result<Self> {
        let zero = CoreTotals {
            released: [0; NODE_COUNT],
            present: [0; NODE_COUNT],
        };
        Ok(Self {
            cores: KVec::from_elem(zero, core_count, GFP_KERNEL)?,
            changed: [0; MAX_CORES],
            baselines: KBox::init(
                PerSlot::try_init(|_| {
                    Ok(KVec::from_elem([0; NODE_COUNT], core_count, GFP_KERNEL)?)
                }),
                GFP_KERNEL,
            )?,
        })
    }

    /// Counter `node` (an index into `SYSFS_COUNTERS`) of `core`, with `live` the slots whose
    /// slabs are still counted live and their slabs; `None` for a counter the device lacks.
    pub(crate) fn shown(
        &self,
        core: usize,
        node: usize,
        live: impl Iterator<Item = (SlotIndex, impl SlabValues)>,
    ) -> Option<Shown> {
        let counter = SYSFS_COUNTERS.get(node)?;
        let totals = self.cores.get(core)?;
        let live = live
            .map(|(slot, slab)| {
                let baseline = self.baselines[slot]
                    .get(core)
                    .map_or(0, |baseline| baseline.get(node).copied().unwrap_or(0));
                contribution(counter, &slab, core).wrapping_sub(baseline)
            })
            .fold(0u64, u64::wrapping_add);
        Some(Shown {
            total: totals.released.get(node)?.wrapping_add(live),
            present: *totals.present.get(node)?,
        })
    }

    /// Adds what released slot `slot` counted (`slab`, its final values) to every counter of
    /// every core, less its baselines, which are forgotten.
    pub(crate) fn add_release(&mut self, slot: SlotIndex, slab: &dyn SlabValues) {
        let baselines = self.baselines[slot].iter_mut();
        let cores = self.cores.iter_mut().zip(self.changed.iter_mut());
        for (core, ((totals, changed), baseline)) in cores.zip(baselines).enumerate() {
            let baseline = core::mem::replace(baseline, [0; NODE_COUNT]);
            let counters = SYSFS_COUNTERS.iter().zip(baseline);
            let sums = totals.released.iter_mut().zip(totals.present.iter_mut());
            for (bit, ((counter, baseline), (total, last))) in counters.zip(sums).enumerate() {
                let added = contribution(counter, slab, core).wrapping_sub(baseline);
                if added != 0 || *last != 0 {
                    *changed |= 1 << bit;
                }
                *total = total.wrapping_add(added);
                *last = added;
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
        let totals = self.cores.get_mut(core).ok_or(EINVAL)?;
        let (Some(total), Some(last), Some(changed)) = (
            totals.released.get_mut(node),
            totals.present.get_mut(node),
            self.changed.get_mut(core),
        ) else {
            return Err(EINVAL);
        };
        (*total, *last) = (0, 0);
        *changed |= 1 << node;
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

    /// Per core, the counters whose files changed since the last call (none for a core the
    /// device does not have), forgetting them.
    pub(crate) fn take_changed(&mut self) -> [ChangedCounters; MAX_CORES] {
        core::mem::take(&mut self.changed)
    }
}

#[kunit_tests(neuron_ds_totals)]
mod tests {
    use super::*;
    use crate::abi::{
        counters::{
            NcCounter,
            NdCounter, //
        },
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

    /// A slab with one counter of one core set.
    struct Fixed {
        core: usize,
        index: usize,
        count: u64,
    }

    impl SlabValues for Fixed {
        fn nc(&self, core: usize, index: usize) -> u64 {
            if (core, index) == (self.core, self.index) {
                self.count
            } else {
                0
            }
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

    #[test]
    fn a_release_and_a_reset_mark_exactly_the_counters_whose_files_changed() -> Result {
        let mut totals = DeviceTotals::new(2)?;
        let success = node(SysfsGroup::Status, "success")?;
        let timeout = node(SysfsGroup::Status, "timeout")?;
        let only = |count| Fixed {
            core: 1,
            index: NcCounter::InferCompleted.index(),
            count,
        };
        totals.add_release(slot(0)?, &only(3));
        let changed = totals.take_changed();
        assert_eq!((changed[0], changed[1]), (0, 1 << success));
        assert_eq!(totals.take_changed()[1], 0);
        // The next release adds nothing: `present` goes back to 0, which is a change.
        totals.add_release(slot(1)?, &only(0));
        assert_eq!(totals.take_changed()[1], 1 << success);
        totals.add_release(slot(2)?, &only(0));
        assert_eq!(totals.take_changed()[1], 0);
        totals.reset(0, timeout, none())?;
        let changed = totals.take_changed();
        assert_eq!(changed[0], 1 << timeout);
        assert!(changed[1..].iter().all(|bits| *bits == 0));
        Ok(())
    }
}
