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

/// Pages shared with user mappings.
///
/// The kernel accesses a word with one atomic 8-byte load or store, which a concurrent user
/// store cannot tear. Zeroing a whole page uses the non-atomic page-zeroing primitive instead; it
/// holds `kernel_access`, as every kernel word access does, so no kernel access races with it
/// (whoever zeroes must also make sure no process still writes the page, or the zeroes are not
/// final).
///
/// # Invariants
///
/// `pages` holds order-0 pages owned for the lifetime of `self`.
#[pin_data]
pub(crate) struct SharedPages {
    pages: KVec<Page>,
    #[pin]
    kernel_access: SpinLock<()>,
}

impl SharedPages {
    /// Allocates `count` zeroed pages.
    pub(crate) fn new_zeroed(count: usize) -> Result<Pin<KBox<Self>>> {
        let mut pages = KVec::with_capacity(count, GFP_KERNEL)?;
        for _ in 0..count {
            pages.push(Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?, GFP_KERNEL)?;
        }
        // INVARIANT: every page was just allocated and is owned by `pages`.
        KBox::pin_init(
            try_pin_init!(Self {
                pages,
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
    pub(crate) fn words(&self) -> Words<'_> {
        Words {
            pages: &self.pages,
            _access: self.kernel_access.lock(),
        }
    }

    /// The word at byte `offset`, read with one atomic load; `None` if `offset` is misaligned or
    /// out of range.
    pub(crate) fn load(&self, offset: usize) -> Option<u64> {
        self.words().load(offset)
    }

    /// Stores `value` at byte `offset` with one atomic store; `None` if `offset` is misaligned or
    /// out of range.
    pub(crate) fn store(&self, offset: usize, value: u64) -> Option<()> {
        self.words().store(offset, value)
    }

    /// Zeroes every page, one page at a time, with the page-zeroing primitive.
    pub(crate) fn zero_all(&self) {
        for page in self.pages.iter() {
            let _access = self.kernel_access.lock();
            // SAFETY: every other kernel access to the page holds `kernel_access`, so none races
            // with this write; the whole page is in bounds.
            let _ = unsafe { page.fill_zero_raw(0, PAGE_SIZE) };
        }
    }
}

/// Atomic access to single words of [`SharedPages`], with its `kernel_access` lock held.
pub(crate) struct Words<'a> {
    pages: &'a [Page],
    _access: SpinLockGuard<'a, ()>,
}

impl Words<'_> {
    /// Runs `f` with a pointer to the 8-byte word at byte `offset`, while its page is mapped in
    /// the kernel; `None` if `offset` is misaligned or out of range.
    fn with_word<R>(&self, offset: usize, f: impl FnOnce(*mut u64) -> R) -> Option<R> {
        if offset % WORD != 0 {
            return None;
        }
        let page = self.pages.get(offset / PAGE_SIZE)?;
        // SAFETY: by the type invariant of `SharedPages`, `page` is a valid order-0 page that
        // outlives `self`.
        let base = unsafe { bindings::kmap_local_page(page.as_ptr()) };
        let word = base
            .cast::<u8>()
            .wrapping_add(offset % PAGE_SIZE)
            .cast::<u64>();
        let result = f(word);
        // SAFETY: `base` came from `kmap_local_page` above and is unmapped exactly once, in the
        // reverse order of mapping (no other local mapping was made in between).
        unsafe { bindings::kunmap_local(base) };
        Some(result)
    }

    /// The word at byte `offset`, read with one atomic load; `None` if `offset` is misaligned or
    /// out of range.
    pub(crate) fn load(&self, offset: usize) -> Option<u64> {
        self.with_word(offset, |word| {
            // SAFETY: `word` points into a page `with_word` mapped, is 8-byte aligned (the page is,
            // and `offset` is a multiple of 8), and no non-atomic kernel access runs concurrently
            // (`zero_page` holds `kernel_access`, which `self` holds).
            unsafe { atomic_load(word, Relaxed) }
        })
    }

    /// Stores `value` at byte `offset` with one atomic store; `None` if `offset` is misaligned or
    /// out of range.
    pub(crate) fn store(&self, offset: usize, value: u64) -> Option<()> {
        self.with_word(offset, |word| {
            // SAFETY: as in `load`.
            unsafe { atomic_store(word, value, Relaxed) }
        })
    }
}
