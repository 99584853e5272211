// SPDX-License-Identifier: GPL-2.0

//! What a character device's mappings need beyond 7.3's `mm::virt`: the file offset of a new
//! mapping, making a new mapping read-only for good, making its entries special, and answering
//! a page fault of it with a page or a signal.
//!
//! C header: [`include/linux/mm.h`](srctree/include/linux/mm.h)
//!
//! Pages go in as `VM_PFNMAP` entries (`vmf_insert_pfn`, as DRM's GEM shmem helpers do), not
//! as ordinary refcounted pages: the core marks them special, so no
//! `get_user_pages` path, fast or slow, finds a page behind them. Nothing (`vmsplice`,
//! `O_DIRECT`, io_uring fixed buffers) can take a reference that outlives the mapping, and
//! removing the mapping's entries removes every way to the page. The price is that the mapping
//! holds no reference either: a page must outlive every mapping of it, which [`Fault`] gets
//! from its lifetime (see [`Fault::insert`]).

use core::marker::PhantomData;
use kernel::{
    bindings,
    mm::virt::{
        flags,
        VmaNew,
        VmaRef, //
    },
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
};

/// Bytes per page, as a file offset.
const PAGE_BYTES: u64 = PAGE_SIZE as u64;
const _: () = assert!(PAGE_SIZE.is_power_of_two() && PAGE_BYTES as usize == PAGE_SIZE);

/// The page of its file's offsets that a mapping starts at.
pub(crate) fn first_page(vma: &VmaRef) -> usize {
    // SAFETY: `vma` is read-locked or more (`VmaRef`'s invariant), and `vm_pgoff` only changes
    // with the VMA's bounds, under its write lock (a split or a move), or is set before or in an
    // `mmap` hook ([`place_at`]).
    unsafe { (*vma.as_ptr()).vm_pgoff }
}

/// The file offset, in bytes, that a mapping starts at; `None` if it does not fit a `u64`.
pub(crate) fn offset(vma: &VmaRef) -> Option<u64> {
    u64::try_from(first_page(vma)).ok()?.checked_mul(PAGE_BYTES)
}

/// Moves a new mapping to page `first_page` of its file's offsets, whatever offset it was asked
/// at: its pages are found there from now on (by the fault handler's offsets, by
/// `unmap_mapping_pages` of the file's address space, in `/proc/<pid>/maps`). `EINVAL` if the
/// mapping would end past the last page offset.
///
/// A driver moves a mapping where it wants to find it again, as DRM's GEM objects are mapped
/// at their fake offsets: here, a range of offsets per view of a slab.
pub(crate) fn place_at(vma: &VmaNew, first_page: usize) -> Result {
    let pages = (vma.end() - vma.start()) / PAGE_SIZE;
    first_page.checked_add(pages).ok_or(EINVAL)?;
    // SAFETY: the VMA is undergoing initial setup under the mmap write lock, and the core links
    // it into its file's address space (by this offset) only after the `mmap` hook returns, so
    // nothing reads its offset concurrently or has found it by the old one; the offset of the
    // last page fits (checked above).
    unsafe { (*vma.as_ptr()).vm_pgoff = first_page };
    Ok(())
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

/// Makes a new mapping's entries special for good: `VM_PFNMAP`, so that its pages can only be
/// inserted by [`Fault`], and `VM_IO`, so that even the slow `get_user_pages` path and
/// `madvise(MADV_DOFORK)` refuse the VMA. `EINVAL` for a copy-on-write mapping (private and
/// possibly writable), which `VM_PFNMAP` cannot be: a private mapping must be made read-only for
/// good first ([`make_read_only`], or clearing `VM_MAYWRITE`).
pub(crate) fn set_pfnmap(vma: &VmaNew) -> Result {
    let vm_flags = vma.flags();
    if vm_flags & (flags::SHARED | flags::MAYWRITE) == flags::MAYWRITE {
        return Err(EINVAL);
    }
    if vm_flags & flags::MIXEDMAP != 0 {
        // `VM_PFNMAP` and `VM_MIXEDMAP` together are refused by the core's insertion.
        return Err(EINVAL);
    }
    // SAFETY: the VMA is undergoing initial setup under the mmap write lock, so nothing else
    // reads or writes its flags. The flags stay valid: the mapping is not copy-on-write nor
    // `VM_MIXEDMAP` (checked above), which is all `VM_PFNMAP` requires, and `VM_IO` is always
    // allowed. The page protection does not depend on either flag.
    unsafe { (*vma.as_ptr()).__bindgen_anon_2.vm_flags = vm_flags | flags::PFNMAP | flags::IO };
    Ok(())
}

/// The page frame number of `page`.
///
/// `page_to_pfn` is a macro, which the bindings cannot offer; this is its definition for the
/// memory model of every x86-64 kernel (`SPARSEMEM_VMEMMAP`): the page's index in the virtual
/// memory map, which starts at `vmemmap_base` (moved at boot by KASLR, hence read here).
#[cfg(all(CONFIG_X86_64, CONFIG_SPARSEMEM_VMEMMAP))]
pub(crate) fn page_frame(page: &Page) -> usize {
    // SAFETY: `vmemmap_base` is written once at early boot and read-only afterwards
    // (`__ro_after_init`).
    let vmemmap: usize = unsafe { bindings::vmemmap_base };
    (page.as_ptr() as usize - vmemmap) / core::mem::size_of::<bindings::page>()
}

/// A page fault of a mapping that a driver's fault handler answers.
///
/// `'a` is the fault's: the handler runs for `'a`, with the VMA (or mmap) read lock held. A
/// page it inserts is borrowed for `'a`, so it cannot be one made during the handler: it is
/// reached through whatever the handler was given for `'a` (in [`super::misc`], the open file's
/// data, which the VMA keeps open), and so it outlives every mapping of the file.
///
/// # Invariants
///
/// `vma` is the faulting VMA, valid and read-locked for `'a`, `VM_PFNMAP` and not
/// copy-on-write; `address` is the page-aligned faulting address inside it and `page` the page
/// of the file's offsets it maps.
pub(crate) struct Fault<'a> {
    vma: *mut bindings::vm_area_struct,
    address: usize,
    page: usize,
    _locked: PhantomData<&'a bindings::vm_area_struct>,
}

/// How a fault was answered.
pub(crate) struct FaultOutcome(bindings::vm_fault_t);

impl<'a> Fault<'a> {
    /// The fault described by `vmf`.
    ///
    /// # Safety
    ///
    /// `vmf` is the argument of a `vm_operations_struct::fault` call, valid for `'a`, which
    /// runs with the faulting VMA's read lock (or the mmap read lock) held, for a VMA that
    /// [`set_pfnmap`] set up. Every page inserted through the fault outlives every mapping of
    /// the VMA's file (what the borrow for `'a` gives the handler, see the type's doc).
    pub(crate) unsafe fn from_raw(vmf: *const bindings::vm_fault) -> Self {
        // SAFETY: `vmf` is valid for `'a` (the function's contract).
        let (vma, address, pgoff) = unsafe {
            let fault = &(*vmf).__bindgen_anon_1;
            (fault.vma, fault.address, fault.pgoff)
        };
        // INVARIANT: the core passes the faulting VMA, read-locked for the call, with the
        // page-aligned address and its file page offset; `set_pfnmap` made the VMA `VM_PFNMAP`
        // and refused copy-on-write ones, and nothing clears the flag afterwards (splitting or
        // moving a VMA keeps it; `mprotect` cannot make it writable without `VM_MAYWRITE`, and
        // with it the mapping is shared).
        Self {
            vma,
            address: address & !(PAGE_SIZE - 1),
            page: pgoff,
            _locked: PhantomData,
        }
    }

    /// The page of the file's offsets that the faulting address maps.
    pub(crate) fn page(&self) -> usize {
        self.page
    }

    /// The tag the mapping was made with (see the misc device's `mmap`).
    pub(crate) fn tag(&self) -> u64 {
        // SAFETY: the VMA is read-locked (type invariant); its private data was set when the
        // mapping was made and is never changed afterwards.
        let data = unsafe { (*self.vma).vm_private_data };
        data.addr() as u64
    }

    /// The VMA's first and end addresses.
    fn bounds(&self) -> (usize, usize) {
        // SAFETY: the VMA is valid and read-locked (the VMA's own lock or the mmap lock) for
        // `'a` (type invariant), which is what `VmaRef` requires.
        let vma = unsafe { VmaRef::from_raw(self.vma) };
        (vma.start(), vma.end())
    }

    /// Maps `page` at `address` with the mapping's protection, as a special entry.
    fn insert_at(&self, address: usize, page: &'a Page) -> bindings::vm_fault_t {
        // SAFETY: the VMA is valid, read-locked, `VM_PFNMAP` and not copy-on-write (type
        // invariant), which is what `vmf_insert_pfn` requires; it checks that `address` is
        // inside the VMA itself. The page outlives every mapping of it (borrowed for `'a`,
        // see the type's doc), so the entry never outlives the page.
        unsafe { bindings::vmf_insert_pfn(self.vma, address, page_frame(page)) }
    }

    /// Answers the fault with `page`, mapped at the faulting address with the mapping's
    /// protection (`VM_FAULT_NOPAGE` also when another fault of the same page mapped it first).
    pub(crate) fn insert(&self, page: &'a Page) -> FaultOutcome {
        FaultOutcome(self.insert_at(self.address, page))
    }

    /// Answers the fault with `pages[index]`, and maps the other pages of `pages` that fall
    /// inside the VMA at their places around it, as if `pages` were mapped contiguously with
    /// `pages[index]` at the faulting address (fault-around, as TTM prefaults a buffer object):
    /// a process touching every page of a range then faults once, not once per page. Only the
    /// faulting page's outcome is reported; a page that cannot be mapped (no memory) is left to
    /// its own fault. `SIGBUS` if `index` is outside `pages`.
    pub(crate) fn insert_around(&self, pages: &'a [Page], index: usize) -> FaultOutcome {
        let Some(faulting) = pages.get(index) else {
            return Self::sigbus();
        };
        // The faulting address is inside the VMA (type invariant): pages before and after it.
        let (start, end) = self.bounds();
        let before = self.address.saturating_sub(start) / PAGE_SIZE;
        let after = end.saturating_sub(self.address) / PAGE_SIZE;
        let first = index.saturating_sub(before);
        let last = index.saturating_add(after).min(pages.len());
        let mut address = self.address - (index - first) * PAGE_SIZE;
        for (at, page) in pages.iter().enumerate().take(last).skip(first) {
            if at != index {
                self.insert_at(address, page);
            }
            address += PAGE_SIZE;
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

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_vma)]
mod tests {
    use super::*;

    #[test]
    fn page_frame_is_the_direct_map_offset_in_pages() -> Result {
        let page = Page::alloc_page(GFP_KERNEL)?;
        // SAFETY: the page is valid; without high memory (x86-64) its local mapping is its
        // direct-map address, unmapped right after.
        let address = unsafe {
            let base = bindings::kmap_local_page(page.as_ptr());
            bindings::kunmap_local(base);
            base as usize
        };
        // SAFETY: written once at early boot and read-only afterwards (`__ro_after_init`).
        let direct_map: usize = unsafe { bindings::page_offset_base };
        assert_eq!(page_frame(&page), (address - direct_map) / PAGE_SIZE);
        Ok(())
    }
}
