// SPDX-License-Identifier: GPL-2.0

//! One Neuron device: its 16 slabs, who owns them, who may map them, and the release of a slab
//! from its owner to the totals.
//!
//! * [`ownership`]: the slot pool at the device level: ACQUIRE, a thread group's open files,
//!   and the reaping of owners that died.
//! * [`mapping`]: the mapping authority: what a caller may map (`mmap`), where each view's
//!   mappings are kept and how many there may be, and what each page of a mapping shows when
//!   it is touched (the fault handler).
//! * [`release`]: the release pipeline, from the owner to the totals, and the zeroing.
//! * [`events`]: what wakes consumers that wait: a metric post past a reader's position
//!   (`read`, `poll`), and a change of a sysfs counter (`sysfs_notify`, `info/notify_delay`).
//!
//! # Tenures and views
//!
//! A slab is owned by one thread group at a time (a tenure), and every mapping of it is made
//! for one view of it (the slot pool's `shows`), and kept
//! at that view's place in the device's offsets (`state::windows`). All the device's files
//! share one address space ([`SharedMapping`]); a mapping gets no page at `mmap`, and each page
//! is inserted by the fault handler, under the slot's [`DeviceState::fault_views`] lock, only
//! while the mapping's view is the slot's. A release moves the view on under that lock and then
//! removes the pages of the owner's mappings of the view: from then on the owner's mapping of
//! that tenure faults (`SIGBUS`) and nobody writes the slab. The readers' pages are removed
//! when the slab is zeroed, which comes before any new owner gets it: until then a reader's old
//! mapping shows the tenure as it ended (its generation word moved on), afterwards zeros (its
//! generation word reads 0, not the generation it attached to), and nothing of a later tenure
//! ever shows through it. So no page is reachable between a check and an insert that the check
//! did not cover, nor after its view ended beyond the bytes that view was for.
//!
//! # Lock order
//!
//! mmap lock or VMA lock (the core holds one around `mmap`, `munmap`'s VMA closes and the fault
//! handler) → [`DeviceState::snapshot`] → [`DeviceState::inner`] → a slot's
//! [`DeviceState::fault_views`] lock → a slab's `kernel_access` spinlock, and the page-table
//! locks of an insert (which may allocate page tables and wait for reclaim). No two slots'
//! fault locks are held together. The address space's own lock (taken to remove pages) is only
//! taken with no device lock held. A file's grants lock is never held together with
//! [`DeviceState::inner`], nor is [`DeviceState::notifiers`] (sysfs takes its own locks to
//! notify, which a sysfs `show` waiting for `inner` may be holding).

mod events;
mod ledger;
mod mapping;
mod ownership;
mod release;

pub(crate) use ownership::Acquired;

use crate::{
    abi::ledger::TENURE_CGROUP_PATH_SIZE,
    shim::{
        cgroup::CgroupName,
        clock::MonotonicNs,
        kcov::CoverageHandle,
        shared_mapping::SharedMapping,
        shared_pages::SharedPages,
        sysfs::{
            SysfsNotifier,
            SysfsText, //
        },
        thread_group::{
            Credentials,
            ThreadGroup, //
        },
    },
    state::{
        core_index::CoreIndex,
        ledger::Ledger,
        metrics::MetricsState,
        notify::NotifyPolicy,
        slab_values::{
            LiveSlab,
            Slab,
            SlabSnapshot,
            GENERATION_WORD, //
        },
        slots::{
            PerSlot,
            SlotIndex,
            SlotPool, //
        },
        totals::{
            CounterNode,
            DeviceTotals,
            Shown, //
        },
        view_mappings::ViewMappings,
    },
};
use core::fmt::Write;
use kernel::{
    mm::Mm,
    new_condvar, new_mutex, new_poll_condvar,
    prelude::*,
    sync::{
        aref::ARef,
        poll::PollCondVar,
        Arc,
        CondVar,
        Mutex, //
    },
    workqueue::{
        impl_has_delayed_work,
        new_delayed_work,
        DelayedWork, //
    },
};

/// Bytes in one slab.
pub(crate) const SLAB_SIZE: usize = crate::abi::layout::NEURON_DATASTORE_SIZE;

/// The thread group that owns a slab.
pub(crate) struct Owner {
    /// The group, by its TGID: it survives an `execve` from any of its threads, and its number
    /// is read in each reader's pid namespace.
    group: ThreadGroup,
    /// The address space the group had when the view of the slab began (none for a kernel
    /// thread): an `execve` gives the group a new one, and the new image's first mapping of its
    /// slab starts a new view.
    image: Option<ARef<Mm>>,
    /// The group's credentials when the tenure began: an `execve` that changes them ends the
    /// tenure ([`Owner::outlived`]).
    credentials: Credentials,
    /// Whether the group was dumpable when the tenure began (for the ledger's readers).
    dumpable: bool,
    /// When the tenure began, in real-time nanoseconds.
    started_ns: u64,
    /// The group's cgroup when the tenure began.
    cgroup: KBox<CgroupName<TENURE_CGROUP_PATH_SIZE>>,
}

/// What a slot's faults may show: the slab, to mappings made for `view`, while it is `owned`.
/// The slot pool's, copied under [`DeviceState::inner`] at every move of the view, so that a
/// fault needs only its slot's lock.
#[derive(Clone, Copy, Default)]
struct FaultView {
    view: u64,
    owned: bool,
}

/// Fixed settings of a device.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceConfig {
    /// Device index: `/dev/<name><index>`.
    pub(crate) index: u8,
    /// NeuronCores whose counters are aggregated.
    pub(crate) core_count: usize,
    /// Picoseconds per unit of `NC_COUNTER_TIME_IN_USE`.
    pub(crate) time_unit_ps: u32,
    /// Refuse readers' writable `mmap` requests instead of making such mappings read-only.
    pub(crate) strict_reader_mappings: bool,
    /// Let only `perfmon_capable()` callers attach to another process's slab.
    pub(crate) attach_requires_perfmon: bool,
    /// Answer `METRICS_CTRL` with an unknown mode with 0 (the original's) instead of `EINVAL`.
    pub(crate) accept_unknown_metrics_modes: bool,
}

/// State guarded by [`DeviceState::inner`].
///
/// Its bulky parts are boxed: [`DeviceState::new`] builds it on the stack and moves it into
/// the mutex's initializer, and each copy is one more of a frame that must fit, with the
/// module loader's, in a 16 KiB kernel stack (a frame of about 15 KiB overflowed it).
struct Inner {
    pool: KBox<SlotPool<Owner>>,
    /// Open files of this device per thread group: a group's slab is released when its count
    /// drops to zero (its last file is closed and unmapped, or it died).
    openers: KVec<(ThreadGroup, usize)>,
    /// The VMAs of each slot's current view, and their bound.
    mappings: KBox<ViewMappings>,
    totals: DeviceTotals,
    metrics: KBox<MetricsState>,
    /// The record of every tenure that ended.
    ledger: Ledger<ledger::TenureOwner>,
    notify: NotifyPolicy,
}

// What `Inner` may weigh, so that a field added to it cannot silently bring the device's
// construction back near the end of the stack.
const _: () = assert!(core::mem::size_of::<Inner>() <= 2048);

/// Everything one device's files, ioctls, mappings, sysfs nodes and workers share.
///
/// # Invariants
///
/// Each slab's generation word equals its slot's generation whenever `inner` is unlocked,
/// except while the slot is being zeroed, and while it is being released until its owner's
/// mappings are gone (it then still holds the ended tenure's); `zeros` is never written.
#[pin_data]
pub(crate) struct DeviceState {
    config: DeviceConfig,
    slabs: PerSlot<Pin<KBox<Slab>>>,
    /// The page a reader's mapping shows once its view has ended.
    zeros: Pin<KBox<SharedPages<1>>>,
    /// The address space of every file of the device, where every mapping of a slab is found.
    mapping: SharedMapping,
    /// Per slot, what its faults may show; the lock a fault holds while it inserts pages.
    fault_views: PerSlot<Pin<KBox<Mutex<FaultView>>>>,
    /// Where a release copies the slab's counters; held across the copy and its aggregation.
    #[pin]
    snapshot: Mutex<SlabSnapshot>,
    #[pin]
    inner: Mutex<Inner>,
    /// Signalled whenever a slot finishes its release or its zeroing.
    #[pin]
    slot_freed: CondVar,
    #[pin]
    scrub_work: DelayedWork<DeviceState, SCRUB_WORK>,
    /// Signalled whenever metrics are posted: readers waiting for a post, and pollers.
    #[pin]
    posted: PollCondVar,
    /// Signalled whenever a tenure's record is in the ledger: its readers and pollers.
    #[pin]
    tenure_ended: PollCondVar,
    /// Per core and counter (at `core * NODE_COUNT + counter`), what wakes the pollers of its
    /// `total` and `present` files; empty until the sysfs tree registers them.
    #[pin]
    notifiers: Mutex<KVec<[SysfsNotifier; 2]>>,
    #[pin]
    notify_work: DelayedWork<DeviceState, NOTIFY_WORK>,
    /// The clock of the notification windows.
    started: MonotonicNs,
    /// Whose remote coverage session the workers' runs report to: that of the last task that
    /// acquired or released a slab, the one they work for.
    worker_coverage: CoverageHandle,
}

/// The work item that zeroes released slabs.
pub(crate) const SCRUB_WORK: u64 = 0;
/// The work item that notifies the pollers of changed sysfs counters.
pub(crate) const NOTIFY_WORK: u64 = 1;

impl_has_delayed_work! {
    impl HasDelayedWork<Self, SCRUB_WORK> for DeviceState { self.scrub_work }
    impl HasDelayedWork<Self, NOTIFY_WORK> for DeviceState { self.notify_work }
}

impl DeviceState {
    /// A device with 16 zeroed slabs.
    pub(crate) fn new(config: DeviceConfig) -> Result<Arc<Self>> {
        let inner = Inner {
            pool: KBox::new(SlotPool::new(), GFP_KERNEL)?,
            openers: KVec::new(),
            mappings: KBox::new(ViewMappings::new(), GFP_KERNEL)?,
            totals: DeviceTotals::new(config.core_count)?,
            metrics: KBox::new(
                MetricsState::new(
                    u32::from(config.index),
                    config.core_count,
                    config.time_unit_ps,
                )?,
                GFP_KERNEL,
            )?,
            ledger: Ledger::new()?,
            notify: NotifyPolicy::new(),
        };
        let snapshot = SlabSnapshot::new(config.core_count)?;
        // INVARIANT: zeroed slabs, matching the never-used slots' generation 0; `zeros` is only
        // ever mapped read-only.
        Arc::pin_init(
            try_pin_init!(Self {
                config,
                slabs <- PerSlot::try_init(|_| Slab::new_zeroed()),
                zeros: SharedPages::new_zeroed()?,
                mapping: SharedMapping::new()?,
                fault_views <- PerSlot::try_init(|_| {
                    KBox::pin_init(new_mutex!(FaultView::default()), GFP_KERNEL)
                }),
                snapshot <- new_mutex!(snapshot),
                inner <- new_mutex!(inner),
                slot_freed <- new_condvar!(),
                scrub_work <- new_delayed_work!("neuron_ds::scrub"),
                posted <- new_poll_condvar!("neuron_ds::posted"),
                tenure_ended <- new_poll_condvar!("neuron_ds::tenure_ended"),
                notifiers <- new_mutex!(KVec::new()),
                notify_work <- new_delayed_work!("neuron_ds::notify"),
                started: MonotonicNs::now(),
                worker_coverage: CoverageHandle::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The device's settings.
    pub(crate) fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// The address space every file of the device shares.
    pub(crate) fn mapping(&self) -> &SharedMapping {
        &self.mapping
    }

    /// The slab of slot `slot`.
    pub(crate) fn slab(&self, slot: SlotIndex) -> &Slab {
        &self.slabs[slot]
    }

    /// Writes `generation` into slot `slot`'s slab.
    fn publish_generation(&self, slot: SlotIndex, generation: u64) {
        self.slab(slot).store(GENERATION_WORD, generation);
    }

    /// Ends a metrics period of `elapsed_us` microseconds: reaps dead owners and posts every
    /// metric.
    pub(crate) fn post_metrics(self: &Arc<Self>, elapsed_us: u64) {
        self.reap_exited_owners();
        {
            let mut guard = self.inner.lock();
            // Taken under the lock, just before the values are: the time a post says it is of.
            let posted_ns = MonotonicNs::now().get();
            let Inner { pool, metrics, .. } = &mut *guard;
            metrics.post(
                self.live_slabs(pool).map(|(_, slab)| slab),
                elapsed_us,
                posted_ns,
            );
        }
        self.posted.notify_all();
    }

    /// Pauses (`true`) or resumes the periodic posting of metrics (`METRICS_CTRL`).
    pub(crate) fn set_metrics_paused(&self, paused: bool) {
        self.inner.lock().metrics.set_paused(paused);
    }

    /// Whose coverage session a worker's run on this device reports to: the last releasing
    /// task's (a worker runs because of releases, directly or through the period's posts).
    pub(crate) fn worker_coverage(&self) -> &CoverageHandle {
        &self.worker_coverage
    }

    /// Sysfs counter `node` of `core`: everything released plus every live slab's part.
    pub(crate) fn counter(&self, core: CoreIndex, node: CounterNode) -> Shown {
        let inner = self.inner.lock();
        let live = self.live_slabs(&inner.pool);
        inner.totals.shown(core, node, live)
    }

    /// Resets sysfs counter `node` of `core` (a write to its file).
    pub(crate) fn reset_counter(self: &Arc<Self>, core: CoreIndex, node: CounterNode) {
        let due = {
            let mut guard = self.inner.lock();
            let Inner { pool, totals, .. } = &mut *guard;
            totals.reset(core, node, self.live_slabs(pool));
            Self::counters_changed(&mut guard, self.now_ms())
        };
        self.schedule_notify(due);
    }

    /// The live slabs with their slots, each read under its own lock as it is reached.
    fn live_slabs<'a>(
        &'a self,
        pool: &'a SlotPool<Owner>,
    ) -> impl Iterator<Item = (SlotIndex, LiveSlab<'a>)> + 'a {
        pool.live()
            .map(move |slot| (slot, LiveSlab::of(self.slab(slot))))
    }

    /// Writes the slot table: one line per slot, owner pids in the reader's pid namespace.
    pub(crate) fn write_slot_table(&self, text: &mut SysfsText<'_>) -> Result {
        let reader = current!();
        let namespace = reader.active_pid_ns();
        let inner = self.inner.lock();
        writeln!(text, "slot pid clear_tick generation").map_err(|_| EFBIG)?;
        for (index, slot) in inner.pool.iter() {
            let pid = slot.owner().map_or(0, |owner| owner.group.nr_in(namespace));
            writeln!(
                text,
                "{} {pid} {} {}",
                index.get(),
                slot.clear_tick(),
                slot.generation()
            )
            .map_err(|_| EFBIG)?;
        }
        Ok(())
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_device)]
mod tests {
    use super::*;
    use crate::abi::ledger::TenureEnd;
    use crate::abi::{
        counters::NcCounter,
        layout::nc_counter_offset,
        sysfs::{
            sysfs_counter,
            SysfsGroup,
            SYSFS_COUNTERS, //
        },
    };
    use crate::state::{
        slab_values::SlabWord,
        view_mappings::MAPPINGS_PER_VIEW,
        windows::{
            Access,
            Placement, //
        },
    };

    fn node_of(group: SysfsGroup, name: &str) -> Result<CounterNode> {
        let wanted = sysfs_counter(group, name).ok_or(EINVAL)?;
        SYSFS_COUNTERS
            .iter()
            .position(|c| c == wanted)
            .and_then(CounterNode::new)
            .ok_or(EINVAL)
    }

    fn nth_core(index: usize) -> Result<CoreIndex> {
        CoreIndex::new(index).ok_or(EINVAL)
    }

    fn device(core_count: usize) -> Result<Arc<DeviceState>> {
        DeviceState::new(DeviceConfig {
            index: 0,
            core_count,
            time_unit_ps: 1,
            strict_reader_mappings: false,
            attach_requires_perfmon: false,
            accept_unknown_metrics_modes: false,
        })
    }

    /// Cancels the zeroing work a test's releases queued, before the test's device goes away.
    fn finish(device: &Arc<DeviceState>) {
        crate::shim::workqueue::cancel_delayed_work_sync::<_, SCRUB_WORK>(device);
        crate::shim::workqueue::cancel_delayed_work_sync::<_, NOTIFY_WORK>(device);
    }

    fn nc(core: usize, counter: NcCounter) -> Result<SlabWord> {
        nc_counter_offset(core, counter.index())
            .ok()
            .and_then(SlabWord::new)
            .ok_or(EINVAL)
    }

    #[test]
    fn a_release_aggregates_once_then_the_slab_is_zeroed_and_reused() -> Result {
        let device = device(2)?;
        let me = ThreadGroup::current()?;
        let acquired = device.acquire_own()?;
        assert_eq!(device.acquire_own()?, acquired);
        let generation = device.inner.lock().pool.get(acquired.slot).generation();
        assert_eq!(generation % 2, 1);
        let slab = device.slab(acquired.slot);
        // Core 1: 3 successes and 10 MACs.
        slab.store(nc(1, NcCounter::InferCompleted)?, 3);
        slab.store(nc(1, NcCounter::MacCount)?, 10);
        device.release_own(&me, TenureEnd::Release);
        assert_eq!(slab.load(GENERATION_WORD), generation + 1);
        {
            // The ledger's record of the tenure: its end, generation and final counters.
            let inner = device.inner.lock();
            let (seq, entry, counters) = inner.ledger.first_from(0).ok_or(EINVAL)?;
            let ended = entry.ended.as_ref().ok_or(EINVAL)?;
            assert_eq!(seq, 1);
            assert_eq!(
                (ended.end, ended.generation),
                (TenureEnd::Release, generation)
            );
            let success = crate::state::totals::NODE_SOURCES
                .iter()
                .position(|source| source.get() == NcCounter::InferCompleted.index())
                .ok_or(EINVAL)?;
            assert_eq!(counters[1][success], 3);
            assert!(ended.started_ns <= ended.ended_ns);
        }
        let success = node_of(SysfsGroup::Status, "success")?;
        let flops = node_of(SysfsGroup::OtherInfo, "flop_count")?;
        assert_eq!(
            device.counter(nth_core(1)?, success),
            Shown {
                total: 3,
                present: 3
            }
        );
        assert_eq!(device.counter(nth_core(1)?, flops).total, 20);
        // A release without a slab is a no-op.
        device.release_own(&me, TenureEnd::Release);
        assert_eq!(device.counter(nth_core(1)?, success).total, 3);
        // Zero every released slab now: stop the work item (waiting for a scrub it is in the
        // middle of), then scrub what it left dirty.
        finish(&device);
        device.zero_every_dirty_slab();
        assert_eq!(slab.load(nc(1, NcCounter::InferCompleted)?), 0);
        assert_eq!(slab.load(GENERATION_WORD), generation + 1);
        finish(&device);
        Ok(())
    }

    #[test]
    fn total_is_live_reset_reads_zero_and_the_release_adds_only_what_followed() -> Result {
        let device = device(1)?;
        let me = ThreadGroup::current()?;
        let success = node_of(SysfsGroup::Status, "success")?;
        let offset = nc(0, NcCounter::InferCompleted)?;
        let acquired = device.acquire_own()?;
        let slab = device.slab(acquired.slot);
        slab.store(offset, 4);
        assert_eq!(
            device.counter(nth_core(0)?, success),
            Shown {
                total: 4,
                present: 0
            }
        );
        device.reset_counter(nth_core(0)?, success);
        assert_eq!(device.counter(nth_core(0)?, success), Shown::default());
        slab.store(offset, 6);
        assert_eq!(device.counter(nth_core(0)?, success).total, 2);
        device.release_own(&me, TenureEnd::Release);
        assert_eq!(
            device.counter(nth_core(0)?, success),
            Shown {
                total: 2,
                present: 2
            }
        );
        finish(&device);
        Ok(())
    }

    #[test]
    fn a_grant_maps_only_within_its_view_and_an_own_acquire_by_pid_is_the_owners() -> Result {
        let device = device(1)?;
        let me = ThreadGroup::current()?;
        let acquired = device.acquire_own()?;
        let pid = me.nr_in(current!().active_pid_ns());
        assert_eq!(device.acquire_pid(pid)?, acquired);
        for access in Access::ALL {
            assert_eq!(
                device.authorize_mapping(acquired.slot, access, acquired.view)?,
                (
                    acquired.view,
                    Placement::of(acquired.slot, access, acquired.view)
                )
            );
        }
        // Each view has a bound of its own on its mappings, for either window.
        for access in Access::ALL {
            let counted = device.inner.lock().mappings.count(acquired.slot, access);
            for _ in counted..MAPPINGS_PER_VIEW {
                device.authorize_mapping(acquired.slot, access, acquired.view)?;
            }
            assert_eq!(
                device.authorize_mapping(acquired.slot, access, acquired.view),
                Err(ENOMEM)
            );
        }
        device.release_own(&me, TenureEnd::Release);
        // Released: the grant of that tenure maps nothing, for reading or writing.
        for access in [Access::Read, Access::Owner] {
            assert_eq!(
                device.authorize_mapping(acquired.slot, access, acquired.view),
                Err(EINVAL)
            );
        }
        assert_eq!(device.acquire_pid(pid), Err(ENOENT));
        finish(&device);
        Ok(())
    }
}
