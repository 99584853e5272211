//! Where the host is read: `/proc`, the module's directory, the Neuron driver's sysfs tree,
//! DMI and instance metadata.

use std::path::PathBuf;

use nds_sysfs::DEFAULT_MODULE_DIR;

use crate::hardware::HardwareTree;
use crate::imds::{MetadataSetting, DEFAULT_DMI_DIR};

/// The host's side: everything not about slabs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSource {
    /// `/proc` (CPU, memory, process CPU times).
    pub proc_root: PathBuf,
    /// The module's directory under `/sys/module` (present while it is loaded; its
    /// parameters name the unit of `NDS_NC_COUNTER_TIME_IN_USE`).
    pub module_dir: PathBuf,
    /// The Neuron driver's sysfs tree (device type, versions, ECC counters).
    pub hardware: HardwareTree,
    /// DMI strings, to tell an EC2 instance.
    pub dmi_dir: PathBuf,
    /// Whether and where to query instance metadata.
    pub instance_metadata: MetadataSetting,
}

impl Default for HostSource {
    /// The system's paths, with instance metadata off (the tools ask for
    /// [`MetadataSetting::Auto`] explicitly, so a library user or a test never sends a packet
    /// it did not ask for).
    fn default() -> Self {
        Self {
            proc_root: PathBuf::from("/proc"),
            module_dir: PathBuf::from(DEFAULT_MODULE_DIR),
            hardware: HardwareTree::default(),
            dmi_dir: PathBuf::from(DEFAULT_DMI_DIR),
            instance_metadata: MetadataSetting::Off,
        }
    }
}
