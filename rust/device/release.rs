// SPDX-License-Identifier: GPL-2.0

//! The release of a slab, from its owner to the totals, and the zeroing that frees it.
//!
//! Every release (RELEASE, the group's last file going away, or a dead owner being reaped) runs
//! [`DeviceState::release_slot`]:
//!
//! 1. Under the lock, the slot leaves its owner, and its generation and view move on. No mapping
//!    is given a page of the slab from now on.
//! 2. Without the lock, the pages of the owner's mappings of the slab are removed: the owner
//!    can write it no more. Only then is the new generation written into the slab, so a reader
//!    that sees it sees no write of the ended tenure after it.
//! 3. One snapshot of the slab (final: nobody can write it any more) is taken without the lock,
//!    so sysfs readers never wait for it; then, under the lock, it feeds the sysfs totals, the
//!    metrics and the tenure ledger (a record in place, which neither allocates nor waits), and
//!    the slot becomes free to zero. Until then sysfs counts the slab as live, reading the same
//!    final values.
//! 4. Without the lock, by a work item or by the next owner if it comes first, the pages of
//!    the readers' mappings are removed, in every process, and then the slab is zeroed page by
//!    page; then it is free. A new owner always gets the free slot released longest ago.
//!
//! Until step 4 a reader's old mapping shows the ended tenure as it ended: written by nobody
//! since step 2, its generation already moved on, so the reader learns nothing it could not
//! read while the tenure lasted, and nothing of a later tenure can show through it (see the
//! `device` module). The release's cost does not grow with the number of readers, nor with the
//! mappings a reader makes to slow it.

use super::{
    ledger::TenureOwner,
    DeviceState,
    Owner,
    SCRUB_WORK, //
};
use crate::{
    abi::ledger::TenureEnd,
    shim::{
        barrier::smp_wmb,
        clock::realtime_ns, //
    },
    state::{
        ledger::Ended,
        slab_values::{
            LiveSlab,
            GENERATION_WORD, //
        },
        slots::{
            Scrubbing,
            SlotIndex, //
        },
        windows::Access,
    },
};
use kernel::{
    sync::{
        atomic::{
            ordering::Relaxed,
            Atomic, //
        },
        Arc,
    },
    workqueue::{
        self,
        WorkItem, //
    },
};

/// Jiffies from a release to the work that zeroes its slab.
const ZEROING_DELAY: kernel::time::Jiffies = 1;

/// The LRU clock: one tick per release, shared by every device as in the original driver.
static CLEAR_TICK: Atomic<u64> = Atomic::new(1);

/// Zeroes released slabs, oldest release first, until none is left.
impl WorkItem<SCRUB_WORK> for DeviceState {
    type Pointer = Arc<DeviceState>;

    #[inline]
    fn run(this: Arc<DeviceState>) {
        this.worker_coverage.run(|| this.zero_every_dirty_slab());
    }
}

impl DeviceState {
    /// Releases the first owned slot for which `matches` holds of its index and owner, if there
    /// is one: see the module documentation. Picking and leaving the owner happen under one
    /// lock, so two paths releasing the same owner (its last close and the reaper) never both
    /// do.
    pub(super) fn release_slot(
        self: &Arc<Self>,
        end: TenureEnd,
        matches: impl FnMut(SlotIndex, &Owner) -> bool,
    ) {
        let (releasing, owner) = {
            let mut inner = self.inner.lock();
            let Some(released) = inner.pool.begin_release(matches) else {
                return;
            };
            self.view_moved(&mut inner, released.0.slot());
            released
        };
        let ended = Ended {
            // CAST: below `SLOT_COUNT`, 16.
            slot: releasing.slot().get() as u8,
            end,
            generation: releasing.generation().wrapping_sub(1),
            started_ns: owner.started_ns,
            ended_ns: realtime_ns(),
            owner: TenureOwner::from(owner),
        };
        let slot = releasing.slot();
        self.unmap_window(slot, Access::Owner, releasing.ended_view());
        // Only now, with no way left for the owner to write the slab: a reader that sees the new
        // generation sees nothing written after it.
        self.publish_generation(slot, releasing.generation());
        let due = {
            let mut snapshot = self.snapshot.lock();
            snapshot.take(&LiveSlab::of(self.slab(slot)));
            let mut inner = self.inner.lock();
            inner.totals.add_release(slot, &*snapshot);
            inner.metrics.on_release(&*snapshot);
            inner.ledger.record(ended, &snapshot);
            self.tenure_ended.notify_all();
            inner
                .pool
                .finish_release(releasing, CLEAR_TICK.fetch_add(1, Relaxed));
            // An ACQUIRE that found every other slot owned waits for this one.
            self.slot_freed.notify_all();
            Self::counters_changed(&mut inner, self.now_ms())
        };
        self.schedule_notify(due);
        // Already queued is fine: the queued run zeroes every dirty slab. One tick later and
        // unbound, so that the release neither wakes a worker nor is preempted by one: a timer
        // costs the releasing task nothing, and a new owner that comes first zeroes the slab
        // itself.
        self.worker_coverage.record_current();
        let _ = workqueue::system_unbound()
            .enqueue_delayed::<_, SCRUB_WORK>(self.clone(), ZEROING_DELAY);
    }

    /// Ends the readers' mappings of the slot `scrubbing` claimed, zeroes it, and frees it.
    pub(super) fn scrub(&self, scrubbing: Scrubbing) {
        // Before the slot can be handed on: from here a reader's old mapping reads zeros.
        self.unmap_window(scrubbing.slot(), Access::Read, scrubbing.ended_view());
        let slab = self.slab(scrubbing.slot());
        let generation = scrubbing.generation();
        // A reader that sees any zeroed word must also see that the generation moved on, which
        // the release wrote; it is written again around the zeroing, which covers the
        // generation's page too.
        slab.store(GENERATION_WORD, generation);
        smp_wmb();
        slab.zero_all();
        slab.store(GENERATION_WORD, generation);
        let mut inner = self.inner.lock();
        inner.pool.finish_scrub(scrubbing);
        self.slot_freed.notify_all();
    }

    /// Zeroes every dirty slot, oldest release first: what the work item does, and what the
    /// device does last when it goes away, so that no slab goes back to the page allocator
    /// with a tenure's bytes in it.
    pub(crate) fn zero_every_dirty_slab(&self) {
        while self.scrub_oldest_dirty() {}
    }

    /// Zeroes the dirty slot released longest ago; `false` if there is none.
    fn scrub_oldest_dirty(&self) -> bool {
        let claimed = self.inner.lock().pool.begin_scrub_oldest();
        match claimed {
            Some(scrubbing) => {
                self.scrub(scrubbing);
                true
            }
            None => false,
        }
    }
}
