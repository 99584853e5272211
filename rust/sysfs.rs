// SPDX-License-Identifier: GPL-2.0

//! The device's sysfs tree, named as in the original driver:
//!
//! ```text
//! …/neuronN/neuron_core<c>/stats/status/<name>/{total,present}
//! …/neuronN/neuron_core<c>/stats/other_info/<name>/{total,present}
//! …/neuronN/datastore/slots
//! ```

use crate::{
    abi::sysfs::{
        SysfsGroup,
        SYSFS_COUNTERS, //
    },
    device::DeviceState,
    edge::{
        DeviceNode,
        SysfsDir,
        SysfsNode,
        SysfsNodeKind, //
    },
};
use kernel::{
    prelude::*,
    str::CString,
    sync::Arc, //
};

/// Every directory the module added for one device; dropping it removes them.
pub(crate) struct SysfsTree {
    /// Kept only to hold their references: a directory disappears when its last child does.
    _dirs: KVec<SysfsDir>,
    _nodes: KVec<SysfsNode>,
}

impl SysfsTree {
    /// Builds the tree of `node`'s device, served by `state`.
    pub(crate) fn build(
        node: &DeviceNode,
        state: Arc<DeviceState>,
        core_count: usize,
    ) -> Result<Self> {
        let mut dirs = KVec::new();
        let mut nodes = KVec::new();
        nodes.push(
            SysfsNode::in_device(node, c"datastore", state.clone(), SysfsNodeKind::Datastore)?,
            GFP_KERNEL,
        )?;
        for core in 0..core_count {
            let core_dir =
                SysfsDir::in_device(node, &CString::try_from_fmt(fmt!("neuron_core{core}"))?)?;
            let stats = core_dir.child(c"stats")?;
            let status = stats.child(c"status")?;
            let other_info = stats.child(c"other_info")?;
            for (index, counter) in SYSFS_COUNTERS.iter().enumerate() {
                let parent = match counter.group {
                    SysfsGroup::Status => &status,
                    SysfsGroup::OtherInfo => &other_info,
                };
                let name = CString::try_from_fmt(fmt!("{}", counter.name))?;
                let kind = SysfsNodeKind::Counter { core, node: index };
                nodes.push(parent.node(&name, state.clone(), kind)?, GFP_KERNEL)?;
            }
            for dir in [core_dir, stats, status, other_info] {
                dirs.push(dir, GFP_KERNEL)?;
            }
        }
        Ok(Self {
            _dirs: dirs,
            _nodes: nodes,
        })
    }
}
