// SPDX-License-Identifier: GPL-2.0

//! The device's sysfs tree, where the original driver has it:
//!
//! ```text
//! /sys/class/<class>/neuronN -> /sys/devices/virtual/<class>/neuronN/
//!   core_count
//!   neuron_core<c>/stats/status/<name>/{total,present}
//!   neuron_core<c>/stats/other_info/<name>/{total,present}
//!   datastore/slots
//! ```
//!
//! Reading a file never changes any state.

use crate::{
    abi::sysfs::{
        SysfsGroup,
        SYSFS_COUNTERS, //
    },
    device::DeviceState,
    shim::{
        class::{
            Class,
            ClassDevice, //
        },
        sysfs::{
            SysfsDir,
            SysfsFile,
            SysfsFiles,
            SysfsNode,
            SysfsText, //
        },
    },
};
use core::fmt::Write;
use kernel::{
    prelude::*,
    str::CString,
    sync::Arc, //
};

/// The device directory's own files.
pub(crate) struct DeviceInfo {
    device: Arc<DeviceState>,
}

impl SysfsFiles for DeviceInfo {
    const FILES: &'static [SysfsFile] = &[SysfsFile {
        name: c"core_count",
        mode: 0o444,
    }];

    fn show(&self, _file: usize, text: &mut SysfsText<'_>) -> Result {
        writeln!(text, "{}", self.device.config().core_count).map_err(|_| EFBIG)
    }

    fn store(&self, _file: usize, _input: &[u8]) -> Result {
        Err(EACCES)
    }
}

/// One aggregated counter of one core.
pub(crate) struct CounterFiles {
    device: Arc<DeviceState>,
    core: usize,
    /// Index into `SYSFS_COUNTERS`.
    node: usize,
}

const TOTAL: usize = 0;

impl SysfsFiles for CounterFiles {
    const FILES: &'static [SysfsFile] = &[
        SysfsFile {
            name: c"total",
            mode: 0o644,
        },
        SysfsFile {
            name: c"present",
            mode: 0o644,
        },
    ];

    fn show(&self, file: usize, text: &mut SysfsText<'_>) -> Result {
        let shown = self.device.counter(self.core, self.node)?;
        let value = if file == TOTAL {
            shown.total
        } else {
            shown.present
        };
        writeln!(text, "{value}").map_err(|_| EFBIG)
    }

    /// Writing anything resets the counter, as in the original.
    fn store(&self, _file: usize, _input: &[u8]) -> Result {
        self.device.reset_counter(self.core, self.node)
    }
}

/// The slot table.
pub(crate) struct DatastoreFiles {
    device: Arc<DeviceState>,
}

impl SysfsFiles for DatastoreFiles {
    const FILES: &'static [SysfsFile] = &[SysfsFile {
        name: c"slots",
        mode: 0o444,
    }];

    fn show(&self, _file: usize, text: &mut SysfsText<'_>) -> Result {
        self.device.write_slot_table(text)
    }

    fn store(&self, _file: usize, _input: &[u8]) -> Result {
        Err(EACCES)
    }
}

/// Every sysfs directory of one device; dropping it removes them, children first (fields and
/// vector elements drop in order, and each core's directories are pushed innermost first).
pub(crate) struct SysfsTree {
    _counters: KVec<SysfsNode<CounterFiles>>,
    _dirs: KVec<SysfsDir>,
    _datastore: SysfsNode<DatastoreFiles>,
    _device: ClassDevice<DeviceInfo>,
}

impl SysfsTree {
    /// Creates `neuron<index>` in `class` with the tree of `device`.
    pub(crate) fn build(class: Arc<Class>, name: &CStr, device: &Arc<DeviceState>) -> Result<Self> {
        let dev = ClassDevice::new(
            class,
            name,
            DeviceInfo {
                device: device.clone(),
            },
        )?;
        let datastore = SysfsNode::new(
            &dev,
            c"datastore",
            DatastoreFiles {
                device: device.clone(),
            },
        )?;
        let mut dirs = KVec::new();
        let mut counters = KVec::new();
        for core in 0..device.config().core_count {
            let core_dir = SysfsDir::new(&dev, &CString::try_from_fmt(fmt!("neuron_core{core}"))?)?;
            let stats = SysfsDir::new(&core_dir, c"stats")?;
            let status = SysfsDir::new(&stats, c"status")?;
            let other_info = SysfsDir::new(&stats, c"other_info")?;
            for (node, counter) in SYSFS_COUNTERS.iter().enumerate() {
                let parent = match counter.group {
                    SysfsGroup::Status => &status,
                    SysfsGroup::OtherInfo => &other_info,
                };
                let files = CounterFiles {
                    device: device.clone(),
                    core,
                    node,
                };
                let name = CString::try_from_fmt(fmt!("{}", counter.name))?;
                counters.push(SysfsNode::new(parent, &name, files)?, GFP_KERNEL)?;
            }
            for dir in [other_info, status, stats, core_dir] {
                dirs.push(dir, GFP_KERNEL)?;
            }
        }
        Ok(Self {
            _counters: counters,
            _dirs: dirs,
            _datastore: datastore,
            _device: dev,
        })
    }
}
