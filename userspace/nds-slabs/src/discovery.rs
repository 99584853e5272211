//! What one look at the slabs finds: every owned slab by its key, with its owner and how to
//! open it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use nds::Backend;

/// Identifies one slab across polls.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SlabKey {
    /// Slot `slot` of device `device`.
    Slot {
        /// Device index.
        device: u32,
        /// Slot index.
        slot: usize,
    },
    /// A slab file.
    File(PathBuf),
}

/// Who owns a slab according to the kernel (or the file system).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Owner pid.
    pub pid: i32,
    /// Slot generation (`None` for slab files).
    pub generation: Option<u64>,
}

/// A slab file as discovery found it: which file it is, and how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileState {
    /// Its inode: a file removed and created again under the same name is another slab.
    pub inode: u64,
    /// Its length: a file shorter than what was mapped was truncated under the reader.
    pub len: u64,
}

/// An owned slab found by discovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Device index.
    pub device: u32,
    /// Its owner.
    pub owner: Owner,
    /// How to open it for reading.
    pub backend: Backend,
    /// Human-readable location.
    pub address: String,
    /// For a slab file, the file (`None` for the kernel's slabs).
    pub file: Option<FileState>,
}

/// What one look at the slabs found.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Every owned slab this monitor can name, by key.
    pub found: BTreeMap<SlabKey, Candidate>,
    /// Problems met while looking, one line each.
    pub problems: Vec<String>,
    /// Slots owned by a process outside this monitor's pid namespace, with their generation.
    pub hidden: Vec<(SlabKey, u64)>,
}
