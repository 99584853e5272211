// SPDX-License-Identifier: GPL-2.0

//! What a character device's mappings need beyond 7.3's `mm::virt`: the file offset of a new
//! mapping, making a new mapping read-only for good, and answering a page fault of a mapping
//! with a page or a signal.
//!
//! C header: [`include/linux/mm.h`](srctree/include/linux/mm.h)

use kernel::{
    bindings,
    mm::virt::{
        flags,
        VmaMixedMap,
        VmaNew, //
    },
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
};

/// Pages [`Fault::insert_around`] maps per page-table lock.
const INSERT_BATCH: usize = 16;

/// Bytes per page, as a file offset.
const PAGE_BYTES: u64 = PAGE_SIZE as u64;
const _: () = assert!(PAGE_SIZE.is_power_of_two() && PAGE_BYTES as usize == PAGE_SIZE);

/// The file offset, in bytes, that a new mapping starts at; `None` if it does not fit a `u64`.
pub(crate) fn offset(vma: &VmaNew) -> Option<u64> {
    // SAFETY: `vma` is being set up by an `mmap` hook, which runs with the mmap lock held for
    // writing; the core set `vm_pgoff` before calling the hook and nothing changes it
    // concurrently.
    let pgoff = unsafe { (*vma.as_ptr()).vm_pgoff };
    u64::try_from(pgoff).ok()?.checked_mul(PAGE_BYTES)
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

/// A page fault of a mapping that a driver's fault handler answers.
///
/// # Invariants
///
/// `vma` is the faulting VMA, `address` the page-aligned faulting address inside it and
/// `offset` the file offset in bytes of that page; the VMA (or mmap) read lock is held for
/// `'a`.
pub(crate) struct Fault<'a> {
    vma: &'a VmaMixedMap,
    address: usize,
    offset: u64,
}

/// How a fault was answered.
pub(crate) struct FaultOutcome(bindings::vm_fault_t);

impl<'a> Fault<'a> {
    /// The fault described by `vmf`.
    ///
    /// # Safety
    ///
    /// `vmf` is the argument of a `vm_operations_struct::fault` call, valid for `'a`, which
    /// runs with the faulting VMA's read lock (or the mmap read lock) held, for a VMA that has
    /// `VM_MIXEDMAP` set.
    pub(crate) unsafe fn from_raw(vmf: *const bindings::vm_fault) -> Self {
        // SAFETY: `vmf` is valid for `'a` (the function's contract).
        let (vma, address, pgoff) = unsafe {
            let fault = &(*vmf).__bindgen_anon_1;
            (fault.vma, fault.address, fault.pgoff)
        };
        // SAFETY: the VMA is valid and read-locked for the duration of the fault, and has
        // `VM_MIXEDMAP` set (the function's contract).
        let vma = unsafe { VmaMixedMap::from_raw(vma) };
        // INVARIANT: the core passes the page-aligned address and its file page offset.
        Self {
            vma,
            address: address & !(PAGE_SIZE - 1),
            offset: u64::try_from(pgoff)
                .unwrap_or(u64::MAX)
                .saturating_mul(PAGE_BYTES),
        }
    }

    /// The file offset, in bytes, of the faulting page.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The tag the mapping was made with (see the misc device's `mmap`).
    pub(crate) fn tag(&self) -> u64 {
        // SAFETY: the VMA is read-locked (type invariant); its private data was set when the
        // mapping was made and is never changed afterwards.
        let data = unsafe { (*self.vma.as_ptr()).vm_private_data };
        data.addr() as u64
    }

    /// Answers the fault with `page`, mapped at the faulting address with the mapping's
    /// protection.
    pub(crate) fn insert(&self, page: &Page) -> FaultOutcome {
        match self.vma.vm_insert_page(self.address, page) {
            // Inserted, or another fault of the same page inserted it first.
            Ok(()) => FaultOutcome(bindings::vm_fault_reason_VM_FAULT_NOPAGE),
            Err(err) if err == EBUSY => FaultOutcome(bindings::vm_fault_reason_VM_FAULT_NOPAGE),
            Err(err) if err == ENOMEM => FaultOutcome(bindings::vm_fault_reason_VM_FAULT_OOM),
            Err(_) => Self::sigbus(),
        }
    }

    /// Answers the fault with `pages[index]`, and maps the other pages of `pages` that fall
    /// inside the VMA at their places around it, as if `pages` were mapped contiguously with
    /// `pages[index]` at the faulting address (fault-around, as TTM prefaults a buffer object):
    /// a process touching every page of a range then faults once, not once per page, and the
    /// pages go in by batches of [`INSERT_BATCH`] under one page-table lock. Only the faulting
    /// page's outcome is reported; a batch stops at a page that cannot be mapped (already
    /// mapped, no memory), and the pages after it in that batch are left to their own faults.
    /// `SIGBUS` if `index` is outside `pages`.
    pub(crate) fn insert_around(&self, pages: &[Page], index: usize) -> FaultOutcome {
        let Some(faulting) = pages.get(index) else {
            return Self::sigbus();
        };
        // The faulting address is inside the VMA (type invariant): pages before and after it.
        let before = self.address.saturating_sub(self.vma.start()) / PAGE_SIZE;
        let after = self.vma.end().saturating_sub(self.address) / PAGE_SIZE;
        let first = index.saturating_sub(before);
        let end = index.saturating_add(after).min(pages.len());
        let mut address = self.address - (index - first) * PAGE_SIZE;
        for batch in pages.get(first..end).unwrap_or(&[]).chunks(INSERT_BATCH) {
            let mut raw = [core::ptr::null_mut(); INSERT_BATCH];
            for (slot, page) in raw.iter_mut().zip(batch) {
                *slot = page.as_ptr();
            }
            let mut left = batch.len() as kernel::ffi::c_ulong;
            // SAFETY: the VMA is read-locked for the fault and is `VM_MIXEDMAP` (type
            // invariant); the `batch.len()` pages from `address` on lie inside it
            // (`first` and `end` are bounded by the pages before and after the faulting one);
            // `raw` holds that many pointers to pages borrowed from `pages` for the call, each
            // of which the core takes its own reference to when it maps it; `left` is the
            // in/out count. A failure only leaves pages of the batch unmapped.
            unsafe {
                bindings::vm_insert_pages(
                    self.vma.as_ptr(),
                    address as kernel::ffi::c_ulong,
                    raw.as_mut_ptr(),
                    &mut left,
                )
            };
            address += batch.len() * PAGE_SIZE;
        }
        self.insert(faulting)
    }

    /// Answers the fault with `SIGBUS` for the faulting task.
    pub(crate) fn sigbus() -> FaultOutcome {
        FaultOutcome(bindings::vm_fault_reason_VM_FAULT_SIGBUS)
    }
}

impl FaultOutcome {
    /// The value a fault handler returns.
    pub(crate) fn into_raw(self) -> bindings::vm_fault_t {
        self.0
    }
}
