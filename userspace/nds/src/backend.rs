//! Where a slab comes from: the kernel device or a plain file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use memmap2::{MmapOptions, MmapRaw};
use nds_abi::ioctl::{
    NeuronDsInfo, NEURON_IOCTL_ACQUIRE_NEURON_DS, NEURON_IOCTL_RELEASE_NEURON_DS,
};
use nds_abi::layout::{NDS_REQUIRED_SIZE, NEURON_DATASTORE_SIZE};

use crate::error::{Error, Result};
use crate::slab::{RegionMap, SlabView};
use crate::truncation::TruncationGuard;

/// The source of a datastore slab.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A Neuron device node such as `/dev/neuron0`: the slab is acquired with the ACQUIRE ioctl,
    /// mapped at the offset the driver returns, and released with RELEASE on close.
    Device {
        /// Path of the device node.
        path: PathBuf,
    },
    /// A regular file holding the slab, for hosts without the driver and for tests.
    ///
    /// A producer creates the file if needed and extends it to 262,144 bytes; existing contents
    /// are kept. A reader needs at least the 67,200 bytes of the region map.
    File {
        /// Path of the file.
        path: PathBuf,
    },
}

impl Backend {
    /// The device node `/dev/neuron<index>`.
    #[must_use]
    pub fn neuron_device(index: u32) -> Self {
        Self::Device {
            path: PathBuf::from(format!("/dev/neuron{index}")),
        }
    }

    /// A device node at `path`.
    #[must_use]
    pub fn device(path: impl Into<PathBuf>) -> Self {
        Self::Device { path: path.into() }
    }

    /// A slab file at `path`.
    #[must_use]
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self::File { path: path.into() }
    }
}

/// A slab acquired from the driver: the open node and the pid it was acquired for.
#[derive(Debug)]
struct DeviceLease {
    node: File,
    pid: i32,
}

impl DeviceLease {
    /// Issues RELEASE and closes the node (the mapping must already be gone).
    fn release(self) -> Result<()> {
        let mut arg = NeuronDsInfo::for_pid(self.pid);
        datastore_ioctl(&self.node, NEURON_IOCTL_RELEASE_NEURON_DS, &mut arg).map_err(|errno| {
            Error::Ioctl {
                request: "RELEASE",
                errno,
            }
        })
    }
}

/// Issues a datastore ioctl; `Err` carries the errno.
fn datastore_ioctl(node: &File, request: u32, arg: &mut NeuronDsInfo) -> Result<(), i32> {
    // glibc takes the request as `unsigned long`, musl as `int`: the cast widens or
    // reinterprets the 32-bit number as each C library expects.
    let request = request as libc::Ioctl;
    // SAFETY: both datastore requests take a pointer to a `struct neuron_ioctl_neuron_ds_info`,
    // which `NeuronDsInfo` mirrors byte for byte; `arg` is valid for reads and writes for the call.
    let rc = unsafe { libc::ioctl(node.as_raw_fd(), request, std::ptr::from_mut(arg)) };
    match rc {
        0 => Ok(()),
        // The driver reports a failed user copy as a positive count of uncopied bytes.
        1.. => Err(libc::EFAULT),
        _ => Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)),
    }
}

/// An open slab: the mapping, its view, and the lease to give back on close.
#[derive(Debug)]
pub(crate) struct Mapping {
    view: SlabView,
    // Kept only to unmap on drop; all access goes through `view`. `MmapRaw` hands out raw
    // pointers only, never a `&[u8]` of memory that other processes write.
    memory: Option<MmapRaw>,
    lease: Option<DeviceLease>,
    /// For a slab file: its range in the SIGBUS handler's registry (a file can shrink).
    truncation: Option<TruncationGuard>,
}

impl Mapping {
    /// Opens `backend` for `pid` (0: producer, read-write; otherwise reader, read-only).
    pub(crate) fn open(backend: &Backend, pid: i32) -> Result<Self> {
        let writable = pid == 0;
        match backend {
            Backend::Device { path } => Self::open_device(path, pid, writable),
            Backend::File { path } => Self::open_file(path, writable),
        }
    }

    fn open_device(path: &Path, pid: i32, writable: bool) -> Result<Self> {
        let node = open_node(path, writable)?;
        let mut arg = NeuronDsInfo::for_pid(pid);
        datastore_ioctl(&node, NEURON_IOCTL_ACQUIRE_NEURON_DS, &mut arg).map_err(|errno| {
            Error::Ioctl {
                request: "ACQUIRE",
                errno,
            }
        })?;
        let lease = DeviceLease { node, pid };
        let mapped = if usize::try_from(arg.size) == Ok(NEURON_DATASTORE_SIZE) {
            map(
                &lease.node,
                arg.mmap_offset,
                NEURON_DATASTORE_SIZE,
                writable,
            )
        } else {
            Err(Error::UnexpectedSlabSize { size: arg.size })
        };
        match mapped {
            Ok(memory) => Self::new(memory, writable, Some(lease)),
            Err(error) => {
                // Hand the slab back; the mapping error is the one worth reporting.
                let _ = lease.release();
                Err(error)
            }
        }
    }

    fn open_file(path: &Path, writable: bool) -> Result<Self> {
        // Non-blocking, so that a FIFO (or a device) placed where a slab file should be is
        // refused below instead of waiting in `open` for a writer; for a regular file the flag
        // changes nothing.
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .create(writable)
            .truncate(false)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let metadata = file
            .metadata()
            .map_err(|e| Error::io(format!("reading size of {}", path.display()), e))?;
        if !metadata.is_file() {
            return Err(Error::NotASlabFile {
                path: path.to_path_buf(),
            });
        }
        let file_len = metadata.len();
        let slab_len = u64::try_from(NEURON_DATASTORE_SIZE).unwrap_or(u64::MAX);
        if writable && file_len < slab_len {
            file.set_len(slab_len)
                .map_err(|e| Error::io(format!("extending {}", path.display()), e))?;
        }
        let mapped_len = if writable {
            NEURON_DATASTORE_SIZE
        } else {
            usize::try_from(file_len.min(slab_len)).unwrap_or(NEURON_DATASTORE_SIZE)
        };
        if mapped_len < NDS_REQUIRED_SIZE {
            return Err(Error::SlabTooSmall { size: file_len });
        }
        let memory = map(&file, 0, mapped_len, writable)?;
        let truncation = TruncationGuard::register(memory.as_ptr(), memory.len(), writable);
        let mut mapping = Self::new(memory, writable, None)?;
        mapping.truncation = Some(truncation);
        Ok(mapping)
    }

    /// Wraps a fresh mapping (writable or not), which must cover the region map.
    fn new(memory: MmapRaw, writable: bool, lease: Option<DeviceLease>) -> Result<Self> {
        let len = memory.len();
        let view = match NonNull::new(memory.as_mut_ptr()) {
            Some(base) if len >= NDS_REQUIRED_SIZE => {
                // SAFETY: the pointer and length describe a live, page-aligned mapping, writable
                // exactly when `writable` (both callers map with the `writable` they pass here);
                // `memory` is stored next to the view and unmapped only in `close`, after which
                // the view is never used.
                unsafe { SlabView::new(base, len, writable) }
            }
            // Callers map at least the region map, and mmap never returns null on success.
            _ => {
                let size = u64::try_from(len).unwrap_or(u64::MAX);
                if let Some(lease) = lease {
                    drop(memory);
                    let _ = lease.release();
                }
                return Err(Error::SlabTooSmall { size });
            }
        };
        Ok(Self {
            view,
            memory: Some(memory),
            lease,
            truncation: None,
        })
    }

    pub(crate) fn view(&self) -> &SlabView {
        &self.view
    }

    /// Whether the slab is the kernel's (acquired through a device node), not a file.
    pub(crate) fn is_device(&self) -> bool {
        self.lease.is_some()
    }

    /// The region map, which every mapping covers (checked in [`Mapping::new`]).
    pub(crate) fn region_map(&self) -> RegionMap<'_> {
        // SAFETY: `new` refused mappings shorter than the region map, and the view keeps that
        // length until `close`, which only runs when the handle owning this mapping goes away.
        unsafe { RegionMap::new(&self.view) }
    }

    /// Whether the slab file shrank under the mapping (its vanished pages now read as zeros).
    pub(crate) fn truncated(&self) -> bool {
        self.truncation
            .as_ref()
            .is_some_and(TruncationGuard::truncated)
    }

    /// Unmaps the slab, then releases it to the driver and closes the node.
    pub(crate) fn close(&mut self) -> Result<()> {
        // Out of the handler's registry before the range can be mapped again by anyone.
        drop(self.truncation.take());
        drop(self.memory.take());
        self.view = empty_view();
        match self.lease.take() {
            Some(lease) => lease.release(),
            None => Ok(()),
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; `Datastore::close` surfaces them.
        let _ = self.close();
    }
}

/// A view of nothing, left behind once the mapping is gone.
fn empty_view() -> SlabView {
    // SAFETY: a zero-length view never dereferences its base.
    unsafe { SlabView::new(NonNull::dangling(), 0, false) }
}

fn open_node(path: &Path, writable: bool) -> Result<File> {
    let read_write = OpenOptions::new().read(true).write(true).open(path);
    let node = match read_write {
        // Readers never write the slab, so a node they may only read is enough.
        Err(error) if !writable && error.kind() == io::ErrorKind::PermissionDenied => {
            OpenOptions::new().read(true).open(path)
        }
        other => other,
    };
    node.map_err(|e| Error::io(format!("opening {}", path.display()), e))
}

/// A shared mapping of `len` bytes of `file` at `offset`, read-write or read-only.
fn map(file: &File, offset: u64, len: usize, writable: bool) -> Result<MmapRaw> {
    let mut options = MmapOptions::new();
    options.offset(offset).len(len);
    let mapped = if writable {
        options.map_raw(file)
    } else {
        options.map_raw_read_only(file)
    };
    mapped.map_err(|e| Error::io(format!("mapping {len} bytes at offset {offset:#x}"), e))
}
