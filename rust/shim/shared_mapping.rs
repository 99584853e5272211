// SPDX-License-Identifier: GPL-2.0

//! An address space that the files of a device share, so that every mapping of a range of the
//! device, in every process, can be found and removed at once.
//!
//! C headers: [`include/linux/shmem_fs.h`](srctree/include/linux/shmem_fs.h),
//! [`include/linux/mm.h`](srctree/include/linux/mm.h)
//!
//! A VMA is kept in the address space of its file (`file->f_mapping`), which for a device node
//! is the node's inode's: one per node, and a container's `mknod` makes another. DRM and VFIO
//! give their files the address space of an inode of a pseudo filesystem of their own instead;
//! a module that owns a filesystem type pins itself while it is mounted, so this one borrows a
//! private inode of the kernel's own internal shmem mount (`shmem_kernel_file_setup`, which no
//! path reaches and no security module checks). Its page cache stays empty: the mappings'
//! pages come from a fault handler, never from a lookup in the address space.

use core::ptr::NonNull;
use kernel::{
    bindings,
    error::from_err_ptr,
    prelude::*, //
};

extern "C" {
    // Exported by mm/shmem.c; not in the kernel crate's bindings. It returns a `struct file *`
    // or an error pointer.
    fn shmem_kernel_file_setup(
        name: *const c_char,
        size: bindings::loff_t,
        flags: bindings::vma_flags_t,
    ) -> *mut c_void;
}

/// The address space of a private, empty shmem inode.
///
/// # Invariants
///
/// `file` is a file from `shmem_kernel_file_setup` on which `self` holds one reference; its
/// `f_mapping` (its inode's pages) lives as long as the file.
pub(crate) struct SharedMapping {
    file: NonNull<bindings::file>,
}

// SAFETY: a file reference may be dropped from any thread.
unsafe impl Send for SharedMapping {}
// SAFETY: `&SharedMapping` only hands out the address space, which the kernel locks itself.
unsafe impl Sync for SharedMapping {}

impl SharedMapping {
    /// A new address space; `name` only shows in the kernel's own bookkeeping.
    pub(crate) fn new(name: &CStr) -> Result<Self> {
        let flags = bindings::vma_flags_t {
            // No memory is reserved for the (empty) inode.
            __vma_flags: [bindings::VM_NORESERVE as c_ulong],
        };
        // SAFETY: `name` is NUL-terminated and copied by the call; size 0 is valid.
        let file = from_err_ptr(unsafe { shmem_kernel_file_setup(name.as_char_ptr(), 0, flags) })?
            .cast::<bindings::file>();
        // INVARIANT: a file from `shmem_kernel_file_setup`, referenced for us.
        NonNull::new(file).map(|file| Self { file }).ok_or(ENOMEM)
    }

    /// The address space, for a file's `f_mapping`.
    pub(crate) fn as_raw(&self) -> *mut bindings::address_space {
        // SAFETY: the file is referenced (type invariant), and its `f_mapping` is set when it is
        // created and never changed.
        unsafe { (*self.file.as_ptr()).f_mapping }
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
    #[inline]
    fn drop(&mut self) {
        // SAFETY: by the type invariant we hold one reference, given back exactly once here.
        unsafe { bindings::fput(self.file.as_ptr()) };
    }
}
