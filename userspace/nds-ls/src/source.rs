//! Where nds-ls reads: the module's sysfs tree, the slabs, and `/proc`.

use std::path::PathBuf;

use nds::Backend;
use nds_sysfs::{SysfsRoot, DEFAULT_SYSFS_ROOT};

/// How the slab of a slot-table row is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlabLocation {
    /// Acquired through the device node `<dev_dir>/neuron<device>` for the row's pid, as any
    /// reader of the module gets it.
    Devices {
        /// Directory of the device nodes, normally `/dev`.
        dev_dir: PathBuf,
    },
    /// Read from `<dir>/neuron<device>-<pid>.slab`, the slab files `nds-loadgen run
    /// --slab-dir` writes: the slot tables still say who holds a slab, the files stand in for
    /// the kernel's slabs.
    Files {
        /// The directory.
        dir: PathBuf,
    },
}

impl SlabLocation {
    /// Where the slab of process `pid` on `device` is opened.
    #[must_use]
    pub fn backend(&self, device: u32, pid: i32) -> Backend {
        match self {
            Self::Devices { dev_dir } => Backend::device(dev_dir.join(format!("neuron{device}"))),
            Self::Files { dir } => Backend::file(dir.join(format!("neuron{device}-{pid}.slab"))),
        }
    }

    /// Whether the slabs are the kernel's, whose generation word is the slot table's.
    #[must_use]
    pub fn is_kernel(&self) -> bool {
        matches!(self, Self::Devices { .. })
    }
}

/// Everything nds-ls reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The module's sysfs tree: devices, `core_count`, slot tables.
    pub sysfs: SysfsRoot,
    /// The slabs.
    pub slabs: SlabLocation,
    /// `/proc`, for the processes' command lines.
    pub proc_root: PathBuf,
}

impl Default for Source {
    /// The system's paths: the module's class directory, `/dev`, `/proc`.
    fn default() -> Self {
        Self {
            sysfs: SysfsRoot::new(DEFAULT_SYSFS_ROOT),
            slabs: SlabLocation::Devices {
                dev_dir: PathBuf::from("/dev"),
            },
            proc_root: PathBuf::from("/proc"),
        }
    }
}
