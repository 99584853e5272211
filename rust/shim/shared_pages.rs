// SPDX-License-Identifier: GPL-2.0

//! Memory shared with userspace: order-0 pages that processes map, and that the kernel reads and
//! writes one 8-byte word at a time.
//!
//! C header: [`include/linux/highmem.h`](srctree/include/linux/highmem.h)
//!
//! 7.3's [`Page`] only offers non-atomic accessors whose contract forbids racing accesses, while
//! a process may write the same memory through its mapping at any moment.

use core::mem::size_of;
use kernel::{
    bindings, new_spinlock,
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
    sync::{
        atomic::{
            atomic_load,
            atomic_store,
            ordering::Relaxed, //
        },
        SpinLock,
        SpinLockGuard, //
    },
};

const WORD: usize = size_of::<u64>();

/// The byte offset of an 8-byte word inside `PAGES` pages, checked once where it is made: a
/// word access through it cannot miss, so it has no failure to report.
///
/// # Invariants
///
/// The offset is a multiple of 8 below `PAGES * PAGE_SIZE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WordOffset<const PAGES: usize>(usize);

impl<const PAGES: usize> WordOffset<PAGES> {
    /// The word at byte `offset`, if `offset` is a multiple of 8 inside the pages.
    pub(crate) const fn new(offset: usize) -> Option<Self> {
        if offset % WORD == 0 && offset / PAGE_SIZE < PAGES {
            // INVARIANT: just checked.
            Some(Self(offset))
        } else {
            None
        }
    }

    /// The page the word is in, and its byte offset inside that page.
    fn place(self) -> (usize, usize) {
        // The mask changes nothing (type invariant, and `PAGES` is a power of two); it tells
        // the compiler that the page index is in bounds.
        ((self.0 / PAGE_SIZE) & (PAGES - 1), self.0 % PAGE_SIZE)
    }
}

/// `PAGES` order-0 pages shared with user mappings.
///
/// The kernel accesses a word with one atomic 8-byte load or store, which a concurrent user
/// store cannot tear; a whole page is zeroed by C's `__memset`. Every kernel access holds
/// `kernel_access`, so that no Rust access races with a zeroing and a reading of many words
/// ([`Words`]) is not interleaved with one.
///
/// # Invariants
///
/// `pages` are order-0 pages owned for the lifetime of `self`.
#[pin_data]
pub(crate) struct SharedPages<const PAGES: usize> {
    pages: [Page; PAGES],
    #[pin]
    kernel_access: SpinLock<()>,
}

impl<const PAGES: usize> SharedPages<PAGES> {
    const PAGES_ARE_A_POWER_OF_TWO: () = assert!(PAGES.is_power_of_two());

    /// Allocates `PAGES` zeroed pages.
    pub(crate) fn new_zeroed() -> Result<Pin<KBox<Self>>> {
        let () = Self::PAGES_ARE_A_POWER_OF_TWO;
        // INVARIANT: every page is allocated here and owned by `pages`.
        KBox::pin_init(
            try_pin_init!(Self {
                pages <- pin_init::init_array_from_fn(|_| {
                    Page::alloc_page(GFP_KERNEL | __GFP_ZERO).map_err(Error::from)
                }),
                kernel_access <- new_spinlock!(()),
            }),
            GFP_KERNEL,
        )
    }

    /// The pages in address order, for inserting them into a mapping.
    pub(crate) fn pages(&self) -> &[Page] {
        &self.pages
    }

    /// Word access to the pages, holding `kernel_access` until the returned value is dropped;
    /// reading many words through one [`Words`] takes the lock once.
    ///
    /// Two [`Words`] of different `SharedPages` must not be held at once (the locks are of one
    /// class, so lockdep would report the nesting).
    #[inline]
    pub(crate) fn words(&self) -> Words<'_, PAGES> {
        Words {
            pages: &self.pages,
            _access: self.kernel_access.lock(),
        }
    }

    /// The word at `offset`, read with one atomic load.
    #[cfg(neuron_ds_kunit)]
    pub(crate) fn load(&self, offset: WordOffset<PAGES>) -> u64 {
        self.words().load(offset)
    }

    /// Stores `value` at `offset` with one atomic store.
    pub(crate) fn store(&self, offset: WordOffset<PAGES>, value: u64) {
        self.words().store(offset, value)
    }

    /// Zeroes every page, one page at a time, with the kernel's `__memset`.
    ///
    /// Safe whatever processes do meanwhile: a process that still writes a page through a
    /// mapping leaves it not all zeros, which is the caller's correctness to prevent (remove
    /// the mappings first), not a condition of memory safety. Per-word atomic stores would
    /// say the same in Rust's terms, but cost ten times as much under emulation
    /// (`Documentation/performance.rst`).
    pub(crate) fn zero_all(&self) {
        for page in self.pages.iter() {
            let _access = self.kernel_access.lock();
            Words::<PAGES>::with_page(page, |base| {
                // SAFETY: `base` maps the whole page for the call (`with_page`). The stores
                // are C's (an FFI call to `__memset`, not a name the compiler takes for its own
                // builtin), and no Rust access of the page runs concurrently: every one holds
                // `kernel_access`, held here. A store a process makes through a mapping at the
                // same time is outside the kernel's memory model, as for every page a driver
                // shares with userspace.
                unsafe { bindings::__memset(base.cast(), 0, PAGE_SIZE) };
            });
        }
    }
}

/// Atomic access to single words of [`SharedPages`], with its `kernel_access` lock held.
pub(crate) struct Words<'a, const PAGES: usize> {
    pages: &'a [Page; PAGES],
    _access: SpinLockGuard<'a, ()>,
}

impl<const PAGES: usize> Words<'_, PAGES> {
    /// Runs `f` with a pointer to the first word of `page`, while it is mapped in the kernel.
    fn with_page<R>(page: &Page, f: impl FnOnce(*mut u64) -> R) -> R {
        // SAFETY: `page` is a valid order-0 page for the borrow.
        let base = unsafe { bindings::kmap_local_page(page.as_ptr()) };
        let result = f(base.cast::<u64>());
        // SAFETY: `base` came from `kmap_local_page` above and is unmapped exactly once, in the
        // reverse order of mapping (`f` cannot leave a local mapping of its own behind, as
        // `kmap_local_page` mappings are scoped to the functions that make them).
        unsafe { bindings::kunmap_local(base) };
        result
    }

    /// Runs `f` with a pointer to the word at `offset`, while its page is mapped in the kernel.
    fn with_word<R>(&self, offset: WordOffset<PAGES>, f: impl FnOnce(*mut u64) -> R) -> R {
        let (page, in_page) = offset.place();
        Self::with_page(&self.pages[page], |base| {
            f(base.cast::<u8>().wrapping_add(in_page).cast::<u64>())
        })
    }

    /// The word at `offset`, read with one atomic load.
    pub(crate) fn load(&self, offset: WordOffset<PAGES>) -> u64 {
        self.with_word(offset, |word| {
            // SAFETY: `word` points into a page `with_word` mapped, is 8-byte aligned (the page
            // is, and so is `offset`, by its type invariant), and no non-atomic kernel access
            // runs concurrently (the zeroing holds `kernel_access`, which `self` holds).
            unsafe { atomic_load(word, Relaxed) }
        })
    }

    /// Stores `value` at `offset` with one atomic store.
    pub(crate) fn store(&self, offset: WordOffset<PAGES>, value: u64) {
        self.with_word(offset, |word| {
            // SAFETY: as in `load`.
            unsafe { atomic_store(word, value, Relaxed) }
        })
    }
}
