// SPDX-License-Identifier: GPL-2.0

//! Values made in a zeroed allocation, never on the stack: for types too large to build on a
//! kernel stack and move, whose all-zero bytes are a valid value.
//!
//! Rust header: [`rust/kernel/alloc/kbox.rs`](srctree/rust/kernel/alloc/kbox.rs)

use kernel::{
    alloc::{
        flags::__GFP_ZERO,
        AllocError,
        Flags, //
    },
    prelude::*,
};
use zerocopy::FromZeros;

/// A new `T` whose every byte is zero, allocated with `flags`.
pub(crate) fn zeroed_box<T: FromZeros>(flags: Flags) -> Result<KBox<T>, AllocError> {
    let uninit = KBox::<T>::new_uninit(flags | __GFP_ZERO)?;
    // SAFETY: `__GFP_ZERO` zeroed the allocation, and every all-zero byte pattern is a valid
    // `T` (`FromZeros`).
    Ok(unsafe { uninit.assume_init() })
}

/// A new `T` whose every byte is zero, allocated with `flags` by `kvmalloc` (physically
/// contiguous if it can be, virtually otherwise: for a `T` of many pages).
pub(crate) fn zeroed_kvbox<T: FromZeros>(flags: Flags) -> Result<KVBox<T>, AllocError> {
    let uninit = KVBox::<T>::new_uninit(flags | __GFP_ZERO)?;
    // SAFETY: as in `zeroed_box`: `kvmalloc` zeroes on `__GFP_ZERO` on either path.
    Ok(unsafe { uninit.assume_init() })
}
