// SPDX-License-Identifier: GPL-2.0

//! SMP memory barriers, spelled the same on every supported release.
//!
//! Rust header: [`rust/kernel/sync/barrier.rs`](srctree/rust/kernel/sync/barrier.rs)
//!
//! 7.3 has one `smp_mb` that takes the ordering (`smp_mb(Write)`, `smp_mb(Read)`); 7.2 has
//! `smp_wmb()` and `smp_rmb()`.

/// A write-write memory barrier (`smp_wmb()`): other CPUs see the stores before it before the
/// stores after it.
#[inline(always)]
pub(crate) fn smp_wmb() {
    #[cfg(kernel_version = "7.2")]
    kernel::sync::barrier::smp_wmb();
    #[cfg(not(kernel_version = "7.2"))]
    kernel::sync::barrier::smp_mb(kernel::sync::barrier::Write);
}

/// A read-read memory barrier (`smp_rmb()`): the loads before it are done before the loads
/// after it.
#[inline(always)]
pub(crate) fn smp_rmb() {
    #[cfg(kernel_version = "7.2")]
    kernel::sync::barrier::smp_rmb();
    #[cfg(not(kernel_version = "7.2"))]
    kernel::sync::barrier::smp_mb(kernel::sync::barrier::Read);
}
