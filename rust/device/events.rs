// SPDX-License-Identifier: GPL-2.0

//! What wakes consumers that wait instead of polling on a timer:
//!
//! * a metric post past a reader's position: `read` blocks until one exists (or fails with
//!   `EAGAIN` for a non-blocking file), and `poll` reports `POLLIN` then. Every period's posts
//!   signal [`DeviceState::posted`] after they are in the ring; a waiter checks the ring under
//!   the device lock after it is registered on the wait queue (the condition variable's wait,
//!   or `poll_wait`), so no post falls between its check and its sleep.
//! * a change of a sysfs counter, as in the original driver: with `info/notify_delay` 0 or
//!   more, a release or a reset that changes a counter's `total` or `present` wakes the
//!   pollers of those files (`sysfs_notify`: `POLLERR | POLLPRI`), at most once per window of
//!   that many milliseconds (`state::notify`).

use super::{
    DeviceState,
    Inner,
    NOTIFY_WORK, //
};
use crate::{
    abi::metrics::MetricPost,
    shim::{
        clock::MonotonicNs,
        sysfs::SysfsNotifier,
        workqueue::cancel_delayed_work_sync, //
    },
    state::{
        notify::Notify,
        totals::NODE_COUNT, //
    },
};
use kernel::{
    fs::File,
    prelude::*,
    sync::{
        poll::PollTable,
        Arc, //
    },
    time::msecs_to_jiffies,
    workqueue::{
        self,
        WorkItem, //
    },
};

/// Notifies the pollers of the sysfs counters that changed.
impl WorkItem<NOTIFY_WORK> for DeviceState {
    type Pointer = Arc<DeviceState>;

    #[inline]
    fn run(this: Arc<DeviceState>) {
        this.worker_coverage.run(|| this.notify_changed());
    }
}

impl DeviceState {
    /// Notifies the pollers of every counter file that changed since the last notification.
    fn notify_changed(&self) {
        let changed = {
            let mut inner = self.inner.lock();
            inner.notify.on_notify(self.now_ms());
            inner.totals.take_changed()
        };
        let notifiers = self.notifiers.lock();
        let files = notifiers.chunks(NODE_COUNT);
        for (bits, files) in changed.iter().zip(files) {
            let files = files.iter().enumerate();
            for (_, [total, present]) in files.filter(|(node, _)| bits & (1 << node) != 0) {
                total.notify();
                present.notify();
            }
        }
    }

    /// Milliseconds since the device was made, the clock of the notification windows.
    pub(super) fn now_ms(&self) -> u64 {
        MonotonicNs::now().since(self.started) / 1_000_000
    }

    /// Counters changed under `inner` at `now_ms`: whether and when to notify their pollers
    /// (with notification off, the changes are forgotten).
    pub(super) fn counters_changed(inner: &mut Inner, now_ms: u64) -> Notify {
        if !inner.notify.is_on() {
            // Forgotten: nobody is notified of them, now or later.
            inner.totals.take_changed();
        }
        inner.notify.on_change(now_ms)
    }

    /// Queues the notification `due` asks for.
    pub(super) fn schedule_notify(self: &Arc<Self>, due: Notify) {
        if let Notify::In(ms) = due {
            let delay = msecs_to_jiffies(u32::try_from(ms).unwrap_or(u32::MAX));
            // Already queued is fine: the queued run takes every change made until it runs.
            let _ = workqueue::system().enqueue_delayed::<_, NOTIFY_WORK>(self.clone(), delay);
        }
    }

    /// Registers what wakes the pollers of the counter files: for every core and every counter,
    /// in order, the `total` and `present` files' notifiers.
    pub(crate) fn set_counter_notifiers(&self, notifiers: KVec<[SysfsNotifier; 2]>) {
        *self.notifiers.lock() = notifiers;
    }

    /// Forgets the counter files' notifiers (their files are going away).
    pub(crate) fn clear_counter_notifiers(&self) {
        let old = core::mem::take(&mut *self.notifiers.lock());
        drop(old);
    }

    /// `info/notify_delay`.
    #[inline]
    pub(crate) fn notify_delay(&self) -> i64 {
        self.inner.lock().notify.delay_ms()
    }

    /// Sets `info/notify_delay`; `EINVAL` outside -1 to a day. A notification already queued
    /// is queued again where the new delay puts it.
    pub(crate) fn set_notify_delay(self: &Arc<Self>, delay_ms: i64) -> Result {
        let due = self
            .inner
            .lock()
            .notify
            .set_delay_ms(delay_ms, self.now_ms())?;
        if due != Notify::Nothing {
            // Queued work keeps its time, so it is taken off the queue first (waiting for a
            // run in progress, which takes the lock released above). If that run went out in
            // between, the one queued here finds nothing changed and notifies no one.
            cancel_delayed_work_sync::<_, NOTIFY_WORK>(self);
            self.schedule_notify(due);
        }
        Ok(())
    }

    /// Up to `max` metric posts from sequence number `from` on; if there is none yet, waits
    /// for one, or fails with `EAGAIN` when `nonblocking` (`ERESTARTSYS` if a signal comes).
    /// `ERANGE` for a position beyond the next post: none would ever come (it is from another
    /// load of the module).
    pub(crate) fn wait_for_posts(
        &self,
        from: u64,
        max: usize,
        nonblocking: bool,
    ) -> Result<KVec<MetricPost>> {
        let mut inner = self.inner.lock();
        // The ring only grows: a position not ahead now never is.
        if inner.metrics.ring().is_ahead(from) {
            return Err(ERANGE);
        }
        while !inner.metrics.ring().has_from(from) {
            if nonblocking {
                return Err(EAGAIN);
            }
            if self.posted.wait_interruptible(&mut inner) {
                return Err(ERESTARTSYS);
            }
        }
        inner.metrics.ring().read(from, max)
    }

    /// Registers `table` for the next posts and tells whether a post from `from` on exists.
    /// (`from` is the file's position, which reads only ever advance to the next post: never
    /// ahead.)
    #[inline]
    pub(crate) fn poll_posts(&self, file: &File, table: &PollTable<'_>, from: u64) -> bool {
        table.register_wait(file, &self.posted);
        self.inner.lock().metrics.ring().has_from(from)
    }
}
