// SPDX-License-Identifier: GPL-2.0

//! The per-NeuronCore totals behind the sysfs counters: what released slabs left behind, plus
//! what the slabs still owned have counted so far.
//!
//! A write to a counter's file resets it: from then on `total` reads what was counted after the
//! reset. For that, each live slot remembers, per counter, what its slab held at the reset (its
//! baseline), which neither its live part nor its release adds again.

use crate::{
    abi::sysfs::SYSFS_COUNTERS,
    state::{
        bounded_index::BoundedIndex,
        core_index::{
            CoreIndex,
            PerCore,
            MAX_CORES, //
        },
        nc_index::{
            nc_index,
            NcIndex, //
        },
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

/// The kind of thing a [`CounterNode`] names.
pub(crate) enum CounterNodes {}

/// One of a core's aggregated counters: an index into `SYSFS_COUNTERS`.
pub(crate) type CounterNode = BoundedIndex<NODE_COUNT, CounterNodes>;

/// Per node, the index of the slab counter it sums (`SYSFS_COUNTERS[node].source`).
pub(crate) const NODE_SOURCES: [NcIndex; NODE_COUNT] = {
    let mut sources = [nc_index(SYSFS_COUNTERS[0].source); NODE_COUNT];
    let mut node = 1;
    while node < NODE_COUNT {
        sources[node] = nc_index(SYSFS_COUNTERS[node].source);
        node += 1;
    }
    sources
};

/// What one slab contributes to counter `node` of `core` (e.g. FLOPs from MACs); modular,
/// like the original's `u64` arithmetic.
fn contribution(node: CounterNode, slab: &dyn SlabValues, core: CoreIndex) -> u64 {
    // PANIC: never, `node.get()` is below `NODE_COUNT`, the tables' length.
    slab.nc(core, NODE_SOURCES[node.get()])
        .wrapping_mul(SYSFS_COUNTERS[node.get()].scale)
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
    /// The device's cores; the totals of the others stay 0.
    core_count: usize,
    cores: KBox<PerCore<CoreTotals>>,
    /// Per core, the counters whose `total` or `present` changed since
    /// [`DeviceTotals::take_changed`]; all of a device's cores' fit, whatever its core count,
    /// so that they are taken in one copy.
    changed: [ChangedCounters; MAX_CORES],
    /// Per slot, core and counter: what the slot's slab held at the last reset while it was
    /// live; one entry per core of the device.
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
            core_count,
            cores: KBox::init(PerCore::try_init(|_| Ok(zero.clone())), GFP_KERNEL)?,
            changed: [0; MAX_CORES],
            baselines: KBox::init(
                PerSlot::try_init(|_| {
                    Ok(KVec::from_elem([0; NODE_COUNT], core_count, GFP_KERNEL)?)
                }),
                GFP_KERNEL,
            )?,
        })
    }

    /// What slot `slot`'s slab held of counter `node` of `core` at the last reset.
    fn baseline(&self, slot: SlotIndex, core: CoreIndex, node: CounterNode) -> u64 {
        // A core beyond the device has no baseline; nothing asks for one.
        self.baselines[slot]
            .get(core.get())
            .map_or(0, |baseline| baseline[node.get()])
    }

    /// Counter `node` of `core`, with `live` the slots whose slabs are still counted live and
    /// their slabs.
    pub(crate) fn shown(
        &self,
        core: CoreIndex,
        node: CounterNode,
        live: impl Iterator<Item = (SlotIndex, impl SlabValues)>,
    ) -> Shown {
        let totals = &self.cores[core];
        let live = live
            .map(|(slot, slab)| {
                contribution(node, &slab, core).wrapping_sub(self.baseline(slot, core, node))
            })
            .fold(0u64, u64::wrapping_add);
        Shown {
            total: totals.released[node.get()].wrapping_add(live),
            present: totals.present[node.get()],
        }
    }

    /// Adds what released slot `slot` counted (`slab`, its final values) to every counter of
    /// every core, less its baselines, which are forgotten.
    pub(crate) fn add_release(&mut self, slot: SlotIndex, slab: &dyn SlabValues) {
        // One baseline per core of the device.
        let baselines = self.baselines[slot].iter_mut();
        for (core, baseline) in CoreIndex::first(self.core_count).zip(baselines) {
            let baseline = core::mem::replace(baseline, [0; NODE_COUNT]);
            let totals = &mut self.cores[core];
            let changed = &mut self.changed[core.get()];
            let counters = CounterNode::all().zip(baseline);
            let sums = totals.released.iter_mut().zip(totals.present.iter_mut());
            for ((node, baseline), (total, last)) in counters.zip(sums) {
                let added = contribution(node, slab, core).wrapping_sub(baseline);
                if added != 0 || *last != 0 {
                    *changed |= 1 << node.get();
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
        core: CoreIndex,
        node: CounterNode,
        live: impl Iterator<Item = (SlotIndex, impl SlabValues)>,
    ) {
        let totals = &mut self.cores[core];
        totals.released[node.get()] = 0;
        totals.present[node.get()] = 0;
        self.changed[core.get()] |= 1 << node.get();
        for (slot, slab) in live {
            if let Some(baseline) = self.baselines[slot].get_mut(core.get()) {
                baseline[node.get()] = contribution(node, &slab, core);
            }
        }
    }

    /// Per core, the counters whose files changed since the last call (none for a core the
    /// device does not have), forgetting them.
    pub(crate) fn take_changed(&mut self) -> [ChangedCounters; MAX_CORES] {
        core::mem::take(&mut self.changed)
    }
}

#[cfg(neuron_ds_kunit)]
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

    fn node(group: SysfsGroup, name: &str) -> Result<CounterNode> {
        let wanted = sysfs_counter(group, name).ok_or(EINVAL)?;
        SYSFS_COUNTERS
            .iter()
            .position(|c| c == wanted)
            .and_then(CounterNode::new)
            .ok_or(EINVAL)
    }

    fn nth_core(index: usize) -> CoreIndex {
        CoreIndex::first(index + 1)
            .last()
            .unwrap_or_else(|| panic!("no core {index}"))
    }

    /// A slab where counter `index` of `core` holds `base + core * 1000 + index`.
    struct Synthetic(u64);

    impl SlabValues for Synthetic {
        fn nc(&self, core: CoreIndex, counter: NcIndex) -> u64 {
            self.0
                .wrapping_add(u64::try_from(core.get() * 1000 + counter.get()).unwrap_or(0))
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
        fn nc(&self, core: CoreIndex, counter: NcIndex) -> u64 {
            if (core.get(), counter.get()) == (self.core, self.index) {
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
        assert_eq!(totals.shown(nth_core(0), success, none()).total, 2);
        assert_eq!(totals.shown(nth_core(1), success, none()).total, 2 * 1001);
        // HW_ERR_REPAIRABLE_HBM_UE is EXT counter 40.
        let repairable = node(SysfsGroup::Status, "hw_repairable_hbm_ue_error")?;
        assert_eq!(
            totals.shown(nth_core(1), repairable, none()).total,
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
        assert_eq!(totals.shown(nth_core(0), flops, none()).total, 58);
        Ok(())
    }

    #[test]
    fn total_includes_live_slabs_and_present_is_the_last_release() -> Result {
        let mut totals = DeviceTotals::new(1)?;
        let timeout = node(SysfsGroup::Status, "timeout")?;
        totals.add_release(slot(0)?, &Synthetic(100));
        let live = Synthetic(10);
        let shown = totals.shown(
            nth_core(0),
            timeout,
            [(slot(1)?, &live as &dyn SlabValues)].into_iter(),
        );
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
            nth_core(0),
            timeout,
            [(slot(5)?, &before as &dyn SlabValues)].into_iter(),
        );
        let shown = totals.shown(
            nth_core(0),
            timeout,
            [(slot(5)?, &before as &dyn SlabValues)].into_iter(),
        );
        assert_eq!(shown, Shown::default());
        // It counts 3 more, then is released: only the 3 appear, live and after the release.
        let after = Synthetic(13);
        let shown = totals.shown(
            nth_core(0),
            timeout,
            [(slot(5)?, &after as &dyn SlabValues)].into_iter(),
        );
        assert_eq!(shown.total, 3);
        totals.add_release(slot(5)?, &after);
        assert_eq!(
            totals.shown(nth_core(0), timeout, none()),
            Shown {
                total: 3,
                present: 3
            }
        );
        // The next owner of slot 5 starts without a baseline.
        let next = Synthetic(1);
        let shown = totals.shown(
            nth_core(0),
            timeout,
            [(slot(5)?, &next as &dyn SlabValues)].into_iter(),
        );
        assert_eq!(shown.total, 3 + 5);
        Ok(())
    }

    #[test]
    fn a_reset_touches_only_its_counter() -> Result {
        let mut totals = DeviceTotals::new(2)?;
        let timeout = node(SysfsGroup::Status, "timeout")?;
        let success = node(SysfsGroup::Status, "success")?;
        totals.add_release(slot(0)?, &Synthetic(0));
        totals.add_release(slot(1)?, &Synthetic(0));
        totals.reset(nth_core(0), timeout, none());
        assert_eq!(totals.shown(nth_core(0), timeout, none()).total, 0);
        assert_eq!(totals.shown(nth_core(0), success, none()).total, 2);
        assert_eq!(totals.shown(nth_core(1), timeout, none()).total, 2 * 1004);
        Ok(())
    }

    #[test]
    fn totals_wrap_instead_of_overflowing() -> Result {
        let mut totals = DeviceTotals::new(1)?;
        totals.add_release(slot(0)?, &Synthetic(u64::MAX - 1));
        totals.add_release(slot(1)?, &Synthetic(1));
        let success = node(SysfsGroup::Status, "success")?;
        // (MAX - 1 + 1) + (1 + 1) wraps to 1.
        assert_eq!(totals.shown(nth_core(0), success, none()).total, 1);
        Ok(())
    }

    #[test]
    fn cores_beyond_the_device_count_nothing() -> Result {
        let mut totals = DeviceTotals::new(2)?;
        totals.add_release(slot(0)?, &Synthetic(7));
        let success = node(SysfsGroup::Status, "success")?;
        assert_eq!(totals.shown(nth_core(1), success, none()).total, 7 + 1001);
        assert_eq!(totals.shown(nth_core(2), success, none()), Shown::default());
        assert_eq!(totals.take_changed()[2], 0);
        assert!(CounterNode::new(NODE_COUNT).is_none());
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
        assert_eq!((changed[0], changed[1]), (0, 1 << success.get()));
        assert_eq!(totals.take_changed()[1], 0);
        // The next release adds nothing: `present` goes back to 0, which is a change.
        totals.add_release(slot(1)?, &only(0));
        assert_eq!(totals.take_changed()[1], 1 << success.get());
        totals.add_release(slot(2)?, &only(0));
        assert_eq!(totals.take_changed()[1], 0);
        totals.reset(nth_core(0), timeout, none());
        let changed = totals.take_changed();
        assert_eq!(changed[0], 1 << timeout.get());
        assert!(changed[1..].iter().all(|bits| *bits == 0));
        Ok(())
    }
}
