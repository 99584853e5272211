//! Where nds-ls reads: the module's sysfs tree, the slabs, and `/proc`.

use std::path::PathBuf;

use nds_slabs::SlabSource;
use nds_sysfs::{SysfsRoot, DEFAULT_SYSFS_ROOT};

/// Everything nds-ls reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The module's sysfs tree: devices, `core_count`, slot tables.
    pub sysfs: SysfsRoot,
    /// The slabs of the slot tables' owners: acquired through the device node for the row's
    /// pid, as any reader of the module gets it, or read from the slab files `nds-loadgen run
    /// --slab-dir` writes (the slot tables still say who holds a slab, the files stand in for
    /// the kernel's slabs).
    pub slabs: SlabSource,
    /// `/proc`, for the processes' command lines.
    pub proc_root: PathBuf,
}

impl Default for Source {
    /// The system's paths: the module's class directory, `/dev`, `/proc`.
    fn default() -> Self {
        Self {
            sysfs: SysfsRoot::new(DEFAULT_SYSFS_ROOT),
            slabs: SlabSource::Kernel {
                dev_dir: PathBuf::from("/dev"),
            },
            proc_root: PathBuf::from("/proc"),
        }
    }
}
