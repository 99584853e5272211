// SPDX-License-Identifier: GPL-2.0

//! The SMP write barrier, spelled the same on every supported release.
//!
//! Rust header: [`rust/kernel/sync/barrier.rs`](srctree/rust/kernel/sync/barrier.rs)
//!
//! 7.3 has one `smp_mb` that takes the ordering (`smp_mb(Write)`); 7.2 has `smp_wmb()`.

/// A write-write memory barrier (`smp_wmb()`): other CPUs see the stores before it before the
/// stores after it.
#[inline(always)]
pub(crate) fn smp_wmb() {
    #[cfg(kernel_version = "7.2")]
    kernel::sync::barrier::smp_wmb();
    #[cfg(not(kernel_version = "7.2"))]
    kernel::sync::barrier::smp_mb(kernel::sync::barrier::Write);
}
