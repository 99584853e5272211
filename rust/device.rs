// SPDX-License-Identifier: GPL-2.0

//! One Neuron device: its 16 slabs, who owns them, and the release of a slab from the owner to
//! the totals.
//!
//! # Releasing a slab
//!
//! Every release (RELEASE, the group's last file going away, or a dead owner being reaped) runs
//! [`DeviceState::release_slot`]:
//!
//! 1. Under the lock, the slot leaves its owner and its generation moves on; the new value is
//!    written into the slab first, so a reader that later sees any other change of the slab also
//!    sees the generation move. No file can map the slab for writing from now on.
//! 2. Without the lock, the owner's writable mappings are revoked (their pages are removed, and
//!    later accesses fault). This takes each writer address space's mmap lock, so a writable
//!    `mmap` that passed its checks before step 1 has finished and is revoked too.
//! 3. One snapshot of the slab (final: nobody can write it any more) is taken without the lock,
//!    so sysfs readers never wait for it; then, under the lock, it feeds both the sysfs totals
//!    and the metrics, and the slot becomes free to zero. Until then sysfs counts the slab as
//!    live, reading the same final values.
//! 4. The slab is zeroed page by page without the lock, by a work item, or by the next owner if
//!    it comes first; then it is free. A new owner always gets the free slot released longest ago.
//!
//! # Lock order
//!
//! mmap lock (held by the core around `mmap`) → [`DeviceState::snapshot`] →
//! [`DeviceState::inner`] → a slab's `kernel_access` spinlock. A writer address space's mmap lock (step 2) is only taken with no
//! device lock held. A file's grants lock is never held together with [`DeviceState::inner`].

use crate::{
    abi::layout::SLAB_GENERATION_OFFSET,
    shim::{
        barrier::smp_wmb,
        capability::perfmon_capable,
        kcov::CoverageHandle,
        shared_pages::SharedPages,
        sysfs::SysfsText,
        task::thread_group_exited,
        vma::{
            revoke_device_range,
            VmaCount,
            VmaTicket, //
        },
    },
    state::{
        metrics::MetricsState,
        slab_values::{
            LiveSlab,
            SlabSnapshot, //
        },
        slots::{
            Choice,
            SlotPool,
            SLOT_COUNT, //
        },
        totals::{
            DeviceTotals,
            Shown, //
        },
    },
};
use core::fmt::Write;
use kernel::{
    bindings,
    mm::Mm,
    new_condvar, new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            ordering::Relaxed,
            Atomic, //
        },
        Arc, CondVar, Mutex,
    },
    task::{
        Kuid,
        Task, //
    },
    workqueue::{
        self,
        impl_has_delayed_work,
        new_delayed_work,
        DelayedWork,
        WorkItem, //
    },
};

/// Bytes in one slab.
pub(crate) const SLAB_SIZE: usize = crate::abi::layout::NEURON_DATASTORE_SIZE;

/// Jiffies from a release to the work that zeroes its slab.
const ZEROING_DELAY: kernel::time::Jiffies = 1;

/// The LRU clock: one tick per release, shared by every device as in the original driver.
static CLEAR_TICK: Atomic<u64> = Atomic::new(1);

/// How a mapping of a slab may use it; part of the mapping's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read-only, for any reader.
    Read,
    /// The owner's window, revoked at release.
    Owner,
}

/// The `mmap` offset of `access` to slot `slot` of device `device`: readers and the owner map
/// the same pages at different offsets, so that the owner's mappings can be found and revoked
/// without touching the readers'.
pub(crate) fn mmap_offset(device: usize, slot: usize, access: Access) -> u64 {
    let window = (device * SLOT_COUNT + slot) * 2 + usize::from(access == Access::Owner);
    u64::try_from(window * SLAB_SIZE).unwrap_or(u64::MAX)
}

/// The (device, slot, access) an `mmap` offset names, if it names one exactly.
pub(crate) fn decode_mmap_offset(offset: u64) -> Option<(usize, usize, Access)> {
    let slab = u64::try_from(SLAB_SIZE).ok()?;
    if offset % slab != 0 {
        return None;
    }
    let window = usize::try_from(offset / slab).ok()?;
    let access = if window % 2 == 1 {
        Access::Owner
    } else {
        Access::Read
    };
    let n = window / 2;
    Some((n / SLOT_COUNT, n % SLOT_COUNT, access))
}

/// The thread group that owns a slab.
pub(crate) struct Owner {
    /// The group leader; identity is by task, never by number, since pids are reused and
    /// namespace-relative.
    leader: ARef<Task>,
    /// The owner's effective uid when it acquired the slab, for readers' permission checks.
    euid: Kuid,
}

/// An address space that may hold a writable mapping of a slab.
pub(crate) struct Writer(ARef<Mm>);

impl PartialEq for Writer {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_raw() == other.0.as_raw()
    }
}

/// What an ACQUIRE grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Acquired {
    /// The slot.
    pub(crate) slot: usize,
    /// Its generation at the ACQUIRE.
    pub(crate) generation: u64,
    /// Granted to the slab's owner (which may map it writable) rather than to a reader.
    pub(crate) owner: bool,
}

/// Fixed settings of a device.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceConfig {
    /// Device index: `/dev/<name><index>`.
    pub(crate) index: usize,
    /// NeuronCores whose counters are aggregated.
    pub(crate) core_count: usize,
    /// Picoseconds per unit of `NC_COUNTER_TIME_IN_USE`.
    pub(crate) time_unit_ps: u32,
    /// Refuse readers' writable `mmap` requests instead of making such mappings read-only.
    pub(crate) strict_reader_mappings: bool,
}

/// State guarded by [`DeviceState::inner`].
struct Inner {
    pool: SlotPool<Owner, Writer>,
    /// Open files of this device per thread group: a group's slab is released when its count
    /// drops to zero (its last file is closed and unmapped, or it died).
    openers: KVec<(ARef<Task>, usize)>,
    totals: DeviceTotals,
    metrics: MetricsState,
    /// The device number of the node, once registered (mappings are found by it).
    devt: bindings::dev_t,
}

/// Everything one device's files, ioctls, sysfs nodes and workers share.
///
/// # Invariants
///
/// `slabs` holds exactly [`SLOT_COUNT`] slabs of [`SLAB_SIZE`] bytes, and each slab's
/// generation word equals its slot's generation whenever `inner` is unlocked, except while the
/// slot is being zeroed.
#[pin_data]
pub(crate) struct DeviceState {
    config: DeviceConfig,
    slabs: KVec<Pin<KBox<SharedPages>>>,
    /// Per slot: the live VMAs of its owner's window (of every tenure), and the owner mappings
    /// being set up. A release needs to revoke mappings only when it is not zero.
    owner_mappings: KVec<Arc<VmaCount>>,
    /// Where a release copies the slab's counters; held across the copy and its aggregation.
    #[pin]
    snapshot: Mutex<SlabSnapshot>,
    #[pin]
    inner: Mutex<Inner>,
    /// Signalled whenever a slot finishes zeroing.
    #[pin]
    slot_zeroed: CondVar,
    #[pin]
    scrub_work: DelayedWork<DeviceState>,
    /// Whose remote coverage session the workers' runs report to: the last releasing task's.
    worker_coverage: CoverageHandle,
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for DeviceState { self.scrub_work }
}

/// Zeroes released slabs, oldest release first, until none is left.
impl WorkItem for DeviceState {
    type Pointer = Arc<DeviceState>;

    fn run(this: Arc<DeviceState>) {
        this.worker_coverage
            .run(|| while this.scrub_oldest_dirty() {});
    }
}

impl DeviceState {
    /// A device with 16 zeroed slabs.
    pub(crate) fn new(config: DeviceConfig) -> Result<Arc<Self>> {
        let mut slabs = KVec::with_capacity(SLOT_COUNT, GFP_KERNEL)?;
        let mut owner_mappings = KVec::with_capacity(SLOT_COUNT, GFP_KERNEL)?;
        for _ in 0..SLOT_COUNT {
            slabs.push(SharedPages::new_zeroed(SLAB_SIZE / PAGE_SIZE)?, GFP_KERNEL)?;
            owner_mappings.push(VmaCount::new()?, GFP_KERNEL)?;
        }
        let inner = Inner {
            pool: SlotPool::new(),
            openers: KVec::new(),
            totals: DeviceTotals::new(config.core_count)?,
            metrics: MetricsState::new(
                u32::try_from(config.index)?,
                config.core_count,
                config.time_unit_ps,
            )?,
            devt: 0,
        };
        let snapshot = SlabSnapshot::new(config.core_count)?;
        // INVARIANT: 16 zeroed slabs, matching the never-used slots' generation 0.
        Arc::pin_init(
            try_pin_init!(Self {
                config,
                slabs,
                owner_mappings,
                snapshot <- new_mutex!(snapshot),
                inner <- new_mutex!(inner),
                slot_zeroed <- new_condvar!(),
                scrub_work <- new_delayed_work!("neuron_ds::scrub"),
                worker_coverage: CoverageHandle::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The device's settings.
    pub(crate) fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// The slab of slot `slot`.
    pub(crate) fn slab(&self, slot: usize) -> Result<&SharedPages> {
        self.slabs.get(slot).map(|slab| &**slab).ok_or(EINVAL)
    }

    /// Records the device number the node got, by which mappings of it are found.
    pub(crate) fn set_devt(&self, devt: bindings::dev_t) {
        self.inner.lock().devt = devt;
    }

    /// Writes `generation` into slot `slot`'s slab.
    fn publish_generation(&self, slot: usize, generation: u64) -> Result {
        self.slab(slot)?
            .store(SLAB_GENERATION_OFFSET, generation)
            .ok_or(EINVAL)
    }

    /// Counts one more open file of `opener`'s thread group.
    pub(crate) fn add_opener(&self, opener: &ARef<Task>) -> Result {
        let mut inner = self.inner.lock();
        match inner
            .openers
            .iter_mut()
            .find(|(task, _)| **task == **opener)
        {
            Some((_, count)) => *count += 1,
            None => inner.openers.push((opener.clone(), 1), GFP_KERNEL)?,
        }
        Ok(())
    }

    /// Counts one file of `opener`'s group less; returns whether it was the group's last.
    pub(crate) fn remove_opener(&self, opener: &Task) -> bool {
        let mut inner = self.inner.lock();
        let Some(index) = inner.openers.iter().position(|(task, _)| **task == *opener) else {
            return false;
        };
        let last = inner.openers.get_mut(index).is_some_and(|(_, count)| {
            *count -= 1;
            *count == 0
        });
        if last {
            // `index` was just found, so the removal cannot fail.
            let _ = inner.openers.remove(index);
        }
        last
    }

    /// The slab of `leader`'s thread group, taking one if it has none: the first never-used
    /// slot, otherwise the one released longest ago; `ENOMEM` if all 16 are owned.
    pub(crate) fn acquire_own(self: &Arc<Self>, leader: &Task, euid: Kuid) -> Result<Acquired> {
        self.reap_exited_owners();
        let mut inner = self.inner.lock();
        loop {
            if let Some(slot) = inner.pool.find_owner(|owner| *owner.leader == *leader) {
                let generation = inner.pool.get(slot).ok_or(EINVAL)?.generation();
                return Ok(Acquired {
                    slot,
                    generation,
                    owner: true,
                });
            }
            match inner.pool.choose() {
                Choice::Ready(slot) => {
                    let owner = Owner {
                        leader: ARef::from(leader),
                        euid,
                    };
                    let generation = inner.pool.assign(slot, owner)?;
                    self.publish_generation(slot, generation)?;
                    return Ok(Acquired {
                        slot,
                        generation,
                        owner: true,
                    });
                }
                Choice::NeedsScrub(slot) => {
                    // The worker has not got to it yet: zero it here, then choose again.
                    let generation = inner.pool.begin_scrub(slot)?;
                    drop(inner);
                    self.scrub(slot, generation);
                    inner = self.inner.lock();
                }
                Choice::Wait => {
                    if self.slot_zeroed.wait_interruptible(&mut inner) {
                        return Err(ERESTARTSYS);
                    }
                }
                Choice::Full => return Err(ENOMEM),
            }
        }
    }

    /// The slab of the process `pid` (in the caller's pid namespace) for the caller: the
    /// owner's grant if it is the caller's own, otherwise a reader's. `ENOENT` if the process
    /// owns no slab here, `EPERM` if it is another user's and the caller may not monitor it.
    pub(crate) fn acquire_pid(&self, pid: i32) -> Result<Acquired> {
        let caller = current!();
        let namespace = caller.active_pid_ns();
        let leader = caller.group_leader();
        let (acquired, euid) = {
            let inner = self.inner.lock();
            let slot = inner
                .pool
                .find_owner(|owner| owner.leader.tgid_nr_ns(namespace) == pid)
                .ok_or(ENOENT)?;
            let state = inner.pool.get(slot).ok_or(ENOENT)?;
            let owner = state.owner().ok_or(ENOENT)?;
            let acquired = Acquired {
                slot,
                generation: state.generation(),
                owner: *owner.leader == *leader,
            };
            (acquired, owner.euid)
        };
        if !acquired.owner && euid != Kuid::current_euid() && !perfmon_capable() {
            return Err(EPERM);
        }
        Ok(acquired)
    }

    /// Checks that slot `slot` still has `generation`, and, for `writer`, that the caller's
    /// thread group owns it, recording the address space that will hold the writable mapping;
    /// an owner's mapping is counted from here on (the ticket is attached to its VMA).
    pub(crate) fn authorize_mapping(
        &self,
        slot: usize,
        generation: u64,
        writer: Option<&Mm>,
    ) -> Result<Option<VmaTicket>> {
        let mut inner = self.inner.lock();
        let state = inner.pool.get(slot).ok_or(EINVAL)?;
        if state.generation() != generation {
            // Released (and maybe reused) since the ACQUIRE.
            return Err(EINVAL);
        }
        if let Some(mm) = writer {
            let caller = current!();
            let leader = caller.group_leader();
            if !state.owner().is_some_and(|owner| *owner.leader == *leader) {
                return Err(EPERM);
            }
            inner.pool.add_writer(slot, Writer(ARef::from(mm)))?;
            let count = self.owner_mappings.get(slot).ok_or(EINVAL)?;
            return Ok(Some(count.reserve()));
        }
        Ok(None)
    }

    /// Releases the slab of `leader`'s thread group, if it has one.
    pub(crate) fn release_own(self: &Arc<Self>, leader: &Task) -> Result {
        self.release_slot(|pool| pool.find_owner(|owner| *owner.leader == *leader))
    }

    /// Releases every slab whose owner's thread group has exited.
    ///
    /// A group's slab is normally released when its last file on the device goes, but a group
    /// can own a slab through a file it did not open (inherited across `fork`, or passed over a
    /// socket), whose release waits for the other holders. This is the one place such slabs are
    /// released; it runs before a new owner takes a slot and once per metrics period.
    pub(crate) fn reap_exited_owners(self: &Arc<Self>) {
        let mut exited = [false; SLOT_COUNT];
        {
            let inner = self.inner.lock();
            for (slot, state) in inner.pool.iter() {
                if let Some(flag) = exited.get_mut(slot) {
                    *flag = state
                        .owner()
                        .is_some_and(|owner| thread_group_exited(&owner.leader));
                }
            }
        }
        for (slot, _) in exited.iter().enumerate().filter(|(_, exited)| **exited) {
            // Checked again under the lock: the group's last close may have released it since.
            let still_exited = |pool: &SlotPool<Owner, Writer>| {
                let owner = pool.get(slot)?.owner()?;
                thread_group_exited(&owner.leader).then_some(slot)
            };
            if let Err(err) = self.release_slot(still_exited) {
                pr_err!("releasing the slab of an exited owner failed: {err:?}\n");
            }
        }
    }

    /// Releases the owned slot that `select` picks under the lock, if it picks one: see the
    /// module documentation. Picking and leaving the owner happen under one lock, so two
    /// paths releasing the same owner (its last close and the reaper) never both try.
    fn release_slot(
        self: &Arc<Self>,
        select: impl FnOnce(&SlotPool<Owner, Writer>) -> Option<usize>,
    ) -> Result {
        let (slot, writers, devt, mapped) = {
            let mut inner = self.inner.lock();
            let Some(slot) = select(&inner.pool) else {
                return Ok(());
            };
            let (generation, writers) = inner.pool.begin_release(slot)?;
            self.publish_generation(slot, generation)?;
            // Counted under this lock before any owner mapping passes its checks.
            let mapped = self
                .owner_mappings
                .get(slot)
                .is_some_and(|count| count.live() > 0);
            (slot, writers, inner.devt, mapped)
        };
        let (start, end) = (
            mmap_offset(self.config.index, slot, Access::Owner),
            mmap_offset(self.config.index, slot, Access::Owner)
                .saturating_add(u64::try_from(SLAB_SIZE)?),
        );
        for Writer(mm) in writers.iter().filter(|_| mapped) {
            if let Some(mm) = mm.mmget_not_zero() {
                revoke_device_range(&mm, devt, start, end);
            }
        }
        drop(writers);
        {
            let mut snapshot = self.snapshot.lock();
            snapshot.take(&LiveSlab::of(self.slab(slot)?));
            let mut inner = self.inner.lock();
            inner.totals.add_release(slot, &*snapshot);
            inner.metrics.on_release(&*snapshot);
            inner
                .pool
                .finish_release(slot, CLEAR_TICK.fetch_add(1, Relaxed))?;
        }
        // Already queued is fine: the queued run zeroes every dirty slab. One tick later and
        // unbound, so that the release neither wakes a worker nor is preempted by one: a timer
        // costs the releasing task nothing, and a new owner that comes first zeroes the slab
        // itself.
        self.worker_coverage.record_current();
        let _ = workqueue::system_unbound().enqueue_delayed(self.clone(), ZEROING_DELAY);
        Ok(())
    }

    /// Zeroes slot `slot`, claimed with `begin_scrub` (its generation is `generation`), and
    /// frees it.
    fn scrub(&self, slot: usize, generation: u64) {
        if let Ok(slab) = self.slab(slot) {
            // A reader that sees any zeroed word must also see that the generation moved on,
            // which the release wrote; it is written again around the zeroing, which covers the
            // generation's page too.
            let _ = slab.store(SLAB_GENERATION_OFFSET, generation);
            smp_wmb();
            let _ = slab.zero_all();
            let _ = slab.store(SLAB_GENERATION_OFFSET, generation);
        }
        let mut inner = self.inner.lock();
        if inner.pool.finish_scrub(slot).is_ok() {
            self.slot_zeroed.notify_all();
        }
    }

    /// Zeroes the dirty slot released longest ago; `false` if there is none.
    fn scrub_oldest_dirty(&self) -> bool {
        let claimed = {
            let mut inner = self.inner.lock();
            inner
                .pool
                .oldest_dirty()
                .and_then(|slot| Some((slot, inner.pool.begin_scrub(slot).ok()?)))
        };
        match claimed {
            Some((slot, generation)) => {
                self.scrub(slot, generation);
                true
            }
            None => false,
        }
    }

    /// Ends a metrics period of `elapsed_us` microseconds: reaps dead owners and posts every
    /// metric.
    pub(crate) fn post_metrics(self: &Arc<Self>, elapsed_us: u64) {
        self.reap_exited_owners();
        let mut guard = self.inner.lock();
        let Inner { pool, metrics, .. } = &mut *guard;
        metrics.post(self.live_slabs(pool).map(|(_, slab)| slab), elapsed_us);
    }

    /// Whose coverage session a worker's run on this device reports to: the last releasing
    /// task's (a worker runs because of releases, directly or through the period's posts).
    pub(crate) fn worker_coverage(&self) -> &CoverageHandle {
        &self.worker_coverage
    }

    /// Up to `max` metric posts from sequence number `from` on.
    pub(crate) fn read_posts(
        &self,
        from: u64,
        max: usize,
    ) -> Result<KVec<crate::abi::metrics::MetricPost>> {
        self.inner.lock().metrics.ring().read(from, max)
    }

    /// Sysfs counter `node` of `core`: everything released plus every live slab's part.
    pub(crate) fn counter(&self, core: usize, node: usize) -> Result<Shown> {
        let inner = self.inner.lock();
        let live = self.live_slabs(&inner.pool);
        inner.totals.shown(core, node, live).ok_or(EINVAL)
    }

    /// Resets sysfs counter `node` of `core` (a write to its file).
    pub(crate) fn reset_counter(&self, core: usize, node: usize) -> Result {
        let mut guard = self.inner.lock();
        let Inner { pool, totals, .. } = &mut *guard;
        totals.reset(core, node, self.live_slabs(pool))
    }

    /// The live slabs with their slots, each read under its own lock as it is reached.
    fn live_slabs<'a>(
        &'a self,
        pool: &'a SlotPool<Owner, Writer>,
    ) -> impl Iterator<Item = (usize, LiveSlab<'a>)> + 'a {
        pool.live()
            .filter_map(move |slot| Some((slot, LiveSlab::of(self.slabs.get(slot)?))))
    }

    /// Writes the slot table: one line per slot, owner pids in the reader's pid namespace.
    pub(crate) fn write_slot_table(&self, text: &mut SysfsText<'_>) -> Result {
        let reader = current!();
        let namespace = reader.active_pid_ns();
        let inner = self.inner.lock();
        writeln!(text, "slot pid clear_tick generation").map_err(|_| EFBIG)?;
        for (index, slot) in inner.pool.iter() {
            let pid = slot
                .owner()
                .map_or(0, |owner| owner.leader.tgid_nr_ns(namespace));
            writeln!(
                text,
                "{index} {pid} {} {}",
                slot.clear_tick(),
                slot.generation()
            )
            .map_err(|_| EFBIG)?;
        }
        Ok(())
    }
}

#[kunit_tests(neuron_ds_device)]
mod tests {
    use super::*;
    use crate::abi::{
        counters::NcCounter,
        layout::nc_counter_offset,
        sysfs::{
            sysfs_counter,
            SysfsGroup,
            SYSFS_COUNTERS, //
        },
    };

    fn node_of(group: SysfsGroup, name: &str) -> Result<usize> {
        let wanted = sysfs_counter(group, name).ok_or(EINVAL)?;
        SYSFS_COUNTERS
            .iter()
            .position(|c| c == wanted)
            .ok_or(EINVAL)
    }

    fn device(core_count: usize) -> Result<Arc<DeviceState>> {
        DeviceState::new(DeviceConfig {
            index: 0,
            core_count,
            time_unit_ps: 1,
            strict_reader_mappings: false,
        })
    }

    /// Cancels the zeroing work a test's releases queued, before the test's device goes away.
    fn finish(device: &Arc<DeviceState>) {
        crate::shim::workqueue::cancel_delayed_work_sync(device);
    }

    fn nc(core: usize, counter: NcCounter) -> Result<usize> {
        nc_counter_offset(core, counter.index()).map_err(|_| EINVAL)
    }

    #[test]
    fn mmap_offsets_name_device_slot_and_access() {
        for (device, slot, access) in [(0, 0, Access::Read), (3, 15, Access::Owner)] {
            let offset = mmap_offset(device, slot, access);
            assert_eq!(decode_mmap_offset(offset), Some((device, slot, access)));
        }
        assert_ne!(
            mmap_offset(1, 2, Access::Read),
            mmap_offset(1, 2, Access::Owner)
        );
        assert_eq!(
            decode_mmap_offset(mmap_offset(1, 2, Access::Read) + 4096),
            None
        );
    }

    #[test]
    fn a_release_aggregates_once_then_the_slab_is_zeroed_and_reused() -> Result {
        let device = device(2)?;
        let task = current!();
        let leader = task.group_leader();
        let acquired = device.acquire_own(leader, Kuid::current_euid())?;
        assert_eq!(device.acquire_own(leader, Kuid::current_euid())?, acquired);
        assert_eq!(acquired.generation % 2, 1);
        let slab = device.slab(acquired.slot)?;
        // Core 1: 3 successes and 10 MACs.
        slab.store(nc(1, NcCounter::InferCompleted)?, 3)
            .ok_or(EINVAL)?;
        slab.store(nc(1, NcCounter::MacCount)?, 10).ok_or(EINVAL)?;
        device.release_own(leader)?;
        assert_eq!(
            slab.load(SLAB_GENERATION_OFFSET),
            Some(acquired.generation + 1)
        );
        let success = node_of(SysfsGroup::Status, "success")?;
        let flops = node_of(SysfsGroup::OtherInfo, "flop_count")?;
        assert_eq!(
            device.counter(1, success)?,
            Shown {
                total: 3,
                present: 3
            }
        );
        assert_eq!(device.counter(1, flops)?.total, 20);
        // A release without a slab is a no-op.
        device.release_own(leader)?;
        assert_eq!(device.counter(1, success)?.total, 3);
        // Zero every released slab now: stop the work item (waiting for a scrub it is in the
        // middle of), then scrub what it left dirty.
        finish(&device);
        while device.scrub_oldest_dirty() {}
        assert_eq!(slab.load(nc(1, NcCounter::InferCompleted)?), Some(0));
        assert_eq!(
            slab.load(SLAB_GENERATION_OFFSET),
            Some(acquired.generation + 1)
        );
        finish(&device);
        Ok(())
    }

    #[test]
    fn total_is_live_reset_reads_zero_and_the_release_adds_only_what_followed() -> Result {
        let device = device(1)?;
        let task = current!();
        let leader = task.group_leader();
        let success = node_of(SysfsGroup::Status, "success")?;
        let offset = nc(0, NcCounter::InferCompleted)?;
        let acquired = device.acquire_own(leader, Kuid::current_euid())?;
        let slab = device.slab(acquired.slot)?;
        slab.store(offset, 4).ok_or(EINVAL)?;
        assert_eq!(
            device.counter(0, success)?,
            Shown {
                total: 4,
                present: 0
            }
        );
        device.reset_counter(0, success)?;
        assert_eq!(device.counter(0, success)?, Shown::default());
        slab.store(offset, 6).ok_or(EINVAL)?;
        assert_eq!(device.counter(0, success)?.total, 2);
        device.release_own(leader)?;
        assert_eq!(
            device.counter(0, success)?,
            Shown {
                total: 2,
                present: 2
            }
        );
        finish(&device);
        Ok(())
    }
}
