// SPDX-License-Identifier: GPL-2.0

//! The periodic worker that ends a metrics period on one device.

use crate::{
    device::DeviceState,
    shim::{
        clock::MonotonicNs,
        workqueue::cancel_delayed_work_sync, //
    },
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{
            ordering::Relaxed,
            AtomicFlag, //
        },
        Arc, Mutex,
    },
    time::{
        msecs_to_jiffies,
        Jiffies, //
    },
    workqueue::{
        self,
        impl_has_delayed_work,
        new_delayed_work,
        DelayedWork,
        WorkItem, //
    },
};

/// Posts one device's metrics every period, re-arming itself until stopped.
#[pin_data]
pub(crate) struct MetricsWorker {
    device: Arc<DeviceState>,
    period: Jiffies,
    /// Set once, when the device goes away: the worker must not re-arm after that.
    stopping: AtomicFlag,
    #[pin]
    last_post: Mutex<MonotonicNs>,
    #[pin]
    work: DelayedWork<MetricsWorker>,
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for MetricsWorker { self.work }
}

impl WorkItem for MetricsWorker {
    type Pointer = Arc<MetricsWorker>;

    fn run(this: Arc<MetricsWorker>) {
        let device = this.device.clone();
        device.worker_coverage().run(|| {
            let elapsed_us = {
                let mut last = this.last_post.lock();
                let now = MonotonicNs::now();
                let elapsed_ns = now.since(*last);
                *last = now;
                elapsed_ns / 1000
            };
            this.device.post_metrics(elapsed_us);
            if !this.stopping.load(Relaxed) {
                let period = this.period;
                // An error means the work is being cancelled; the reference is dropped then.
                let _ = workqueue::system().enqueue_delayed(this, period);
            }
        });
    }
}

/// Owns a running worker; dropping it stops the worker and waits for it.
pub(crate) struct MetricsHandle {
    worker: Arc<MetricsWorker>,
}

impl MetricsHandle {
    /// Starts posting `device`'s metrics every `period_ms` milliseconds.
    pub(crate) fn start(device: Arc<DeviceState>, period_ms: u32) -> Result<Self> {
        let period = msecs_to_jiffies(period_ms);
        let worker = Arc::pin_init(
            try_pin_init!(MetricsWorker {
                device,
                period,
                stopping: AtomicFlag::new(false),
                last_post <- new_mutex!(MonotonicNs::now()),
                work <- new_delayed_work!("neuron_ds::metrics"),
            }),
            GFP_KERNEL,
        )?;
        // A work item just made is not queued yet, so this enqueues it.
        let _ = workqueue::system().enqueue_delayed(worker.clone(), period);
        Ok(Self { worker })
    }
}

impl Drop for MetricsHandle {
    #[inline]
    fn drop(&mut self) {
        self.worker.stopping.store(true, Relaxed);
        cancel_delayed_work_sync(&self.worker);
    }
}
