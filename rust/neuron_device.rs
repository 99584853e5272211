// SPDX-License-Identifier: GPL-2.0

//! One registered device: its node `/dev/<name><index>`, its sysfs tree in the device class,
//! and its workers.

use crate::{
    device::{
        DeviceConfig,
        DeviceState, //
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

/// One registered device.
///
/// Its parts go away in declaration order: the metrics worker first (it releases slabs), then
/// the sysfs tree, then the node. By then no file is open (each holds the module), so no
/// release is running; the zeroing work one may have queued is cancelled last.
#[pin_data]
pub(crate) struct NeuronDevice {
    metrics: Option<MetricsHandle>,
    sysfs: Option<SysfsTree>,
    #[pin]
    node: MiscRegistration<OpenFile>,
    zeroing: ZeroingWork,
}

/// Cancels a device's zeroing work when dropped.
struct ZeroingWork(Arc<DeviceState>);

impl Drop for ZeroingWork {
    fn drop(&mut self) {
        cancel_delayed_work_sync(&self.0);
    }
}

impl NeuronDevice {
    /// Registers device `config.index` as `/dev/<base_name><index>`, with the device of the same
    /// name in `class`, posting metrics every `metrics_period_ms` (never if 0).
    pub(crate) fn new(
        class: Arc<Class>,
        base_name: &CStr,
        config: DeviceConfig,
        metrics_period_ms: u32,
    ) -> Result<Pin<KBox<Self>>> {
        let index = config.index;
        let state = DeviceState::new(config)?;
        let name = || CString::try_from_fmt(fmt!("{}{index}", base_name.to_str()?));
        let node_name = name()?;
        let (node_state, zeroing_state) = (state.clone(), state.clone());
        let mut device = KBox::pin_init(
            try_pin_init!(Self {
                metrics: None,
                sysfs: None,
                node <- MiscRegistration::register(node_name, node_state),
                zeroing: ZeroingWork(zeroing_state),
            }),
            GFP_KERNEL,
        )?;
        state.set_devt(device.node.devt());
        let tree = SysfsTree::build(class, &name()?, &state)?;
        *device.as_mut().project().sysfs = Some(tree);
        if metrics_period_ms > 0 {
            *device.as_mut().project().metrics =
                Some(MetricsHandle::start(state, metrics_period_ms)?);
        }
        Ok(device)
    }
}
