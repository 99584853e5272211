// SPDX-License-Identifier: GPL-2.0

//! One device: its state, its sysfs tree in the device class, its workers, and its node
//! `/dev/<name><index>`.
//!
//! A device is built in two steps, so that a module can make every device before any node
//! appears: [`NeuronDevice::new`] makes everything but the node, [`NeuronDevice::register_node`]
//! registers the node, refusing opens until [`NeuronDevice::start_serving`].

use crate::{
    device::{
        DeviceConfig,
        DeviceState,
        NOTIFY_WORK,
        SCRUB_WORK, //
    },
    file::OpenFile,
    metrics_worker::MetricsHandle,
    shim::{
        class::Class,
        misc::MiscRegistration,
        workqueue::cancel_delayed_work_sync, //
    },
    sysfs_tree::SysfsTree,
};
use kernel::{
    prelude::*,
    str::CString,
    sync::Arc, //
};

/// One device.
///
/// Its parts go away in declaration order: the node first (no file opens any more, and none is
/// open: each holds the module), then the metrics worker (it releases slabs), then the sysfs
/// tree; the zeroing work a release may have queued is cancelled last, and the slabs it had
/// not zeroed yet are zeroed then.
pub(crate) struct NeuronDevice {
    node: Option<Pin<KBox<MiscRegistration<OpenFile>>>>,
    metrics: Option<MetricsHandle>,
    _sysfs: SysfsTree,
    state: ZeroingWork,
}

/// The device's state, whose work items (zeroing, notifying) are cancelled when dropped, and
/// whose slabs are all zeroed then: none goes back to the page allocator with a tenure's
/// bytes in it.
struct ZeroingWork(Arc<DeviceState>);

impl Drop for ZeroingWork {
    #[inline]
    fn drop(&mut self) {
        cancel_delayed_work_sync::<_, SCRUB_WORK>(&self.0);
        cancel_delayed_work_sync::<_, NOTIFY_WORK>(&self.0);
        // No file is open and no mapping exists any more: nothing can write a slab again.
        self.0.zero_every_dirty_slab();
    }
}

impl NeuronDevice {
    /// Makes device `config.index` with the device `<base_name><index>` in `class`, posting
    /// metrics every `metrics_period_ms` (never if 0); it has no node yet.
    pub(crate) fn new(
        class: Arc<Class>,
        base_name: &str,
        config: DeviceConfig,
        metrics_period_ms: u32,
    ) -> Result<Self> {
        let index = config.index;
        let state = DeviceState::new(config)?;
        let name = CString::try_from_fmt(fmt!("{base_name}{index}"))?;
        let sysfs = SysfsTree::build(class, &name, &state)?;
        let metrics = match metrics_period_ms {
            0 => None,
            period => Some(MetricsHandle::start(state.clone(), period)?),
        };
        Ok(Self {
            node: None,
            metrics,
            _sysfs: sysfs,
            state: ZeroingWork(state),
        })
    }

    /// Registers the node `/dev/<base_name><index>`; it refuses opens until
    /// [`Self::start_serving`].
    pub(crate) fn register_node(&mut self, base_name: &str) -> Result {
        let index = self.state.0.config().index;
        let name = CString::try_from_fmt(fmt!("{base_name}{index}"))?;
        self.node = Some(KBox::pin_init(
            MiscRegistration::register(name, self.state.0.clone()),
            GFP_KERNEL,
        )?);
        Ok(())
    }

    /// Lets the node's files be opened.
    pub(crate) fn start_serving(&self) {
        if let Some(node) = &self.node {
            node.start_serving();
        }
    }
}

impl Drop for NeuronDevice {
    fn drop(&mut self) {
        // The node before everything else, whatever the field order.
        drop(self.node.take());
        drop(self.metrics.take());
    }
}
