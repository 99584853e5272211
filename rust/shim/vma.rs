// SPDX-License-Identifier: GPL-2.0

//! What a character device's `mmap` needs from VMAs beyond 7.3's `mm::virt`: the file offset of
//! a new mapping, making a new mapping read-only for good, and revoking the device's mappings of
//! a file range in an address space.
//!
//! C header: [`include/linux/mm.h`](srctree/include/linux/mm.h)

use kernel::{
    bindings,
    mm::{
        virt::{
            flags,
            VmaNew,
            VmaRef, //
        },
        MmWithUser,
    },
    page::PAGE_SIZE, //
};

fn page_bytes() -> u64 {
    // CAST-free: `PAGE_SIZE` is a small power of two.
    u64::try_from(PAGE_SIZE).unwrap_or(4096)
}

/// The file offset, in bytes, that a new mapping starts at; `None` if it does not fit a `u64`.
pub(crate) fn offset(vma: &VmaNew) -> Option<u64> {
    // SAFETY: `vma` is being set up by an `mmap` hook, which runs with the mmap lock held for
    // writing; the core set `vm_pgoff` before calling the hook and nothing changes it
    // concurrently.
    let pgoff = unsafe { (*vma.as_ptr()).vm_pgoff };
    u64::try_from(pgoff).ok()?.checked_mul(page_bytes())
}

/// Makes a new mapping read-only for good, whatever protection it was asked for.
///
/// Clears `VM_WRITE` and `VM_MAYWRITE` and recomputes the page protection from the new flags, so
/// that pages inserted afterwards are mapped read-only, a write through the mapping faults, and
/// `mprotect()` cannot make it writable. The `mmap` call itself succeeds.
pub(crate) fn make_read_only(vma: &VmaNew) {
    let raw = vma.as_ptr();
    let read_only = vma.flags() & !(flags::WRITE | flags::MAYWRITE);
    // SAFETY: the VMA is undergoing initial setup under the mmap write lock, so nothing else
    // reads or writes its flags or page protection concurrently. Dropping write permission never
    // makes the flags invalid, and the protection is recomputed from the very flags it goes with
    // (the core recomputes it again the same way once the hook returns).
    unsafe {
        (*raw).__bindgen_anon_2.vm_flags = read_only;
        (*raw).vm_page_prot = bindings::vm_get_page_prot(read_only);
    }
}

/// The device number of the character device file `vma` maps, and the file offset in bytes its
/// first page maps; `None` for any other mapping.
fn mapped_char_device(vma: &VmaRef) -> Option<(bindings::dev_t, u64)> {
    let raw = vma.as_ptr();
    // SAFETY: the caller of `VmaRef` holds the mmap lock at least for reading, so the VMA's file
    // and offset do not change; a mapped file holds a reference to itself and its inode.
    let (file, pgoff) = unsafe { ((*raw).vm_file, (*raw).vm_pgoff) };
    if file.is_null() {
        return None;
    }
    // SAFETY: `file` is the VMA's file, kept alive by the VMA; `f_inode` is set at open and
    // never changes.
    let inode = unsafe { (*file).f_inode };
    // SAFETY: an open file's inode is valid while the file is; its mode and device number do
    // not change once the inode is in use.
    let (mode, rdev) = unsafe { (u32::from((*inode).i_mode), (*inode).i_rdev) };
    if mode & bindings::S_IFMT != bindings::S_IFCHR {
        return None;
    }
    Some((rdev, u64::try_from(pgoff).ok()?.checked_mul(page_bytes())?))
}

/// Removes from every mapping in `mm` of the character device `devt` the pages that map file
/// offsets `start..end`; later accesses to those addresses fault (the device installs no fault
/// handler, so they get `SIGBUS`).
///
/// Takes `mm`'s mmap lock for reading, so a concurrent `mmap` in `mm` has either completed (and
/// its pages are removed) or not begun.
pub(crate) fn revoke_device_range(mm: &MmWithUser, devt: bindings::dev_t, start: u64, end: u64) {
    let _lock = mm.mmap_read_lock();
    let mut next: usize = 0;
    loop {
        // SAFETY: the mmap lock of `mm` is held for reading, as `find_vma` requires.
        let raw = unsafe { bindings::find_vma(mm.as_raw(), next) };
        if raw.is_null() {
            break;
        }
        // SAFETY: `raw` is a VMA of `mm`, which stays valid while its mmap lock is held.
        let vma = unsafe { VmaRef::from_raw(raw) };
        next = vma.end();
        let Some((rdev, vma_offset)) = mapped_char_device(vma) else {
            continue;
        };
        let Ok(len) = u64::try_from(vma.end() - vma.start()) else {
            continue;
        };
        let from = start.max(vma_offset);
        let to = end.min(vma_offset.saturating_add(len));
        if rdev != devt || from >= to {
            continue;
        }
        if let (Ok(skip), Ok(size)) = (
            usize::try_from(from - vma_offset),
            usize::try_from(to - from),
        ) {
            vma.zap_vma_range(vma.start() + skip, size);
        }
    }
}
