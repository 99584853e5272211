// SPDX-License-Identifier: GPL-2.0

//! An address space that the files of a device share, so that every mapping of a range of the
//! device, in every process, can be found and removed at once.
//!
//! C headers: [`include/linux/fs.h`](srctree/include/linux/fs.h),
//! [`include/linux/pseudo_fs.h`](srctree/include/linux/pseudo_fs.h),
//! [`include/linux/mm.h`](srctree/include/linux/mm.h)
//!
//! A VMA is kept in the address space of its file (`file->f_mapping`), which for a device node
//! is the node's inode's: one per node, and a container's `mknod` makes another. As DRM does
//! (`drm_fs_inode_new`), a [`SharedMapping`] is the address space of an inode of a pseudo
//! filesystem of its own, mounted inside the kernel: no path reaches it, and its address space
//! has the empty operations of anonymous inodes, so nothing that keys on `f_mapping` takes a
//! device file for another kind of file (`shmem_file()` is false, so `fcntl` seals, shmem's
//! `madvise` and `fadvise` paths never see a device). Its page cache stays empty: the mappings'
//! pages come from a fault handler, never from a lookup in the address space.
//!
//! The filesystem type is never registered (no name to clash with another module's, nothing in
//! `/proc/filesystems`) and has no owner: each [`SharedMapping`] mounts it with `kern_mount`,
//! and an internal mount is torn down synchronously by `kern_unmount`, before the module's code
//! can go away, so the mount need not pin the module (which would make unloading impossible).

use core::ptr::NonNull;
use kernel::{
    bindings,
    error::from_err_ptr,
    prelude::*,
    types::Opaque, //
};

extern "C" {
    // Exported by fs/libfs.c; include/linux/pseudo_fs.h is not among the kernel crate's
    // bindings (tests/packaging.sh checks this signature against every supported release's
    // header). It returns a `struct pseudo_fs_context *`, NULL when out of memory; only the
    // NULL test is used.
    fn init_pseudo(fc: *mut bindings::fs_context, magic: c_ulong) -> *mut c_void;
}

/// The superblock magic of the pseudo filesystem ("NDSm"), shown only by `statfs` of a file
/// of it, which no path reaches.
const MAGIC: c_ulong = 0x4e44_536d;

/// The pseudo filesystem's type, in static memory as lockdep requires of the lock class keys
/// it holds.
struct FsType(Opaque<bindings::file_system_type>);

// SAFETY: the type is only handed to `kern_mount`, which serializes its own updates of it
// (`fs_supers` under `sb_lock`); nothing here reads or writes it otherwise.
unsafe impl Sync for FsType {}

#[allow(
    clippy::disallowed_methods,
    reason = "a static's initializer can only call const functions, which `as_char_ptr` is not"
)]
static FS_TYPE: FsType = FsType(Opaque::new(bindings::file_system_type {
    name: c"shared_mapping".as_ptr().cast::<c_char>(),
    init_fs_context: Some(init_fs_context),
    kill_sb: Some(bindings::kill_anon_super),
    ..pin_init::zeroed()
}));

/// `init_fs_context` of [`FS_TYPE`]: a pseudo filesystem whose inodes are made by
/// `alloc_anon_inode`.
///
/// # Safety
///
/// Called by the VFS with a filesystem context being set up for a mount of [`FS_TYPE`].
unsafe extern "C" fn init_fs_context(fc: *mut bindings::fs_context) -> c_int {
    // SAFETY: `fc` is a context being set up (the function's contract), which is what
    // `init_pseudo` fills in.
    if unsafe { init_pseudo(fc, MAGIC) }.is_null() {
        ENOMEM.to_errno()
    } else {
        0
    }
}

/// The address space of an inode of a private, kernel-internal pseudo filesystem mount.
///
/// # Invariants
///
/// `mount` is an internal mount of [`FS_TYPE`] from `kern_mount`, and `inode` an inode of its
/// superblock from `alloc_anon_inode`; `self` holds one reference on each.
pub(crate) struct SharedMapping {
    mount: NonNull<bindings::vfsmount>,
    inode: NonNull<bindings::inode>,
}

// SAFETY: the references may be dropped from any thread.
unsafe impl Send for SharedMapping {}
// SAFETY: `&SharedMapping` only hands out the address space, which the kernel locks itself.
unsafe impl Sync for SharedMapping {}

impl SharedMapping {
    /// A new, empty address space.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: `FS_TYPE` is a complete filesystem type in static memory.
        let mount = from_err_ptr(unsafe { bindings::kern_mount(FS_TYPE.0.get()) })?;
        let mount = NonNull::new(mount).ok_or(ENOMEM)?;
        // SAFETY: `mount` is a live mount, whose superblock is set by `kern_mount`.
        let inode = from_err_ptr(unsafe { bindings::alloc_anon_inode((*mount.as_ptr()).mnt_sb) });
        match inode.map(NonNull::new) {
            // INVARIANT: both come from the calls the invariant names, referenced for us.
            Ok(Some(inode)) => Ok(Self { mount, inode }),
            failed => {
                // SAFETY: the mount was made above and nothing else holds it.
                unsafe { bindings::kern_unmount(mount.as_ptr()) };
                Err(failed.err().unwrap_or(ENOMEM))
            }
        }
    }

    /// The address space, for a file's `f_mapping`.
    pub(crate) fn as_raw(&self) -> *mut bindings::address_space {
        // SAFETY: the inode is referenced (type invariant), and its `i_mapping` is set when it
        // is made and never changed.
        unsafe { (*self.inode.as_ptr()).i_mapping }
    }

    /// Removes the pages of every mapping of the `count` pages of file offsets from page
    /// `first` on (private copies included): each later access of those addresses faults
    /// again.
    pub(crate) fn unmap_pages(&self, first: usize, count: usize) {
        // SAFETY: the address space is live (type invariant); `unmap_mapping_pages` takes the
        // locks it needs and may sleep, which callers allow by calling from process context.
        unsafe { bindings::unmap_mapping_pages(self.as_raw(), first, count, true) };
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we hold one reference on each, given back exactly once
        // here, the inode's before its superblock's mount; an internal mount's last reference
        // tears the superblock down synchronously.
        unsafe {
            bindings::iput(self.inode.as_ptr());
            bindings::kern_unmount(self.mount.as_ptr());
        }
    }
}
