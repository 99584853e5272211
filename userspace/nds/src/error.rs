//! The library's error type and its errno mapping.

use std::io;

use nds_abi::layout::{NDS_REQUIRED_SIZE, NEURON_DATASTORE_SIZE};

/// Everything that can go wrong talking to a datastore.
///
/// Every variant maps to the errno libnds would return (see [`Error::errno`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A negative pid was given.
    #[error("invalid pid {0}")]
    InvalidPid(i32),
    /// The ND counter index is not below 31.
    #[error("ND counter index {index} is out of range")]
    InvalidNdCounter {
        /// Index asked for.
        index: usize,
    },
    /// The NeuronCore index is not below 16.
    #[error("NeuronCore {core} is out of range")]
    InvalidCore {
        /// Core asked for.
        core: usize,
    },
    /// The NC counter index is beyond the core's band.
    #[error("counter {index} is out of range for NeuronCore {core}")]
    InvalidNcCounter {
        /// Core asked for.
        core: usize,
        /// Index asked for.
        index: usize,
    },
    /// An OR was asked for a bit outside the 64-bit counter.
    #[error("bit index {bit} is out of range (0..64)")]
    InvalidBit {
        /// Bit asked for.
        bit: u64,
    },
    /// The model slot is not below 64.
    #[error("model slot {slot} is out of range")]
    InvalidModelSlot {
        /// Slot asked for.
        slot: usize,
    },
    /// A model record was committed to a slot that is not allocated.
    #[error("model slot {slot} is not allocated")]
    ModelSlotNotAllocated {
        /// Slot asked for.
        slot: usize,
    },
    /// The slab does not start with the committed header, even after the retry.
    #[error("slab header {found:#018x} is not \"nds\\0\" version 100000")]
    BadHeader {
        /// The header word found, little-endian.
        found: u64,
    },
    /// A slab file's path names something other than a regular file (a FIFO, a device, a
    /// directory), which is never opened for good: opening a FIFO would wait for a writer.
    #[error("{} is not a regular file", path.display())]
    NotASlabFile {
        /// The path.
        path: std::path::PathBuf,
    },
    /// The mapping cannot hold the region map.
    #[error("slab of {size} bytes is smaller than the {NDS_REQUIRED_SIZE} bytes required")]
    SlabTooSmall {
        /// Bytes available.
        size: u64,
    },
    /// The kernel reported a slab size other than 262,144 bytes.
    #[error("kernel reported a {size}-byte slab, expected {NEURON_DATASTORE_SIZE}")]
    UnexpectedSlabSize {
        /// Size reported.
        size: u32,
    },
    /// A mutator was called on a reader handle.
    #[error("datastore handle is read-only")]
    ReadOnly,
    /// All 64 model slots are in use.
    #[error("all model slots are in use")]
    NoFreeModelSlot,
    /// A datastore ioctl failed.
    #[error("{request} ioctl failed with errno {errno}")]
    Ioctl {
        /// `"ACQUIRE"` or `"RELEASE"`.
        request: &'static str,
        /// errno from the driver.
        errno: i32,
    },
    /// Opening, sizing or mapping the backing file or device failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// The positive errno this error corresponds to (libnds functions return its negation).
    #[must_use]
    pub fn errno(&self) -> i32 {
        match self {
            Self::InvalidPid(_)
            | Self::InvalidNdCounter { .. }
            | Self::InvalidCore { .. }
            | Self::InvalidNcCounter { .. }
            | Self::InvalidBit { .. }
            | Self::InvalidModelSlot { .. }
            | Self::ModelSlotNotAllocated { .. }
            | Self::BadHeader { .. }
            | Self::SlabTooSmall { .. }
            | Self::NotASlabFile { .. }
            | Self::UnexpectedSlabSize { .. } => libc::EINVAL,
            Self::ReadOnly => libc::EPERM,
            Self::NoFreeModelSlot => libc::ENOSPC,
            Self::Ioctl { errno, .. } => *errno,
            Self::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
