// SPDX-License-Identifier: GPL-2.0

//! Readings of the monotonic clock whose differences need no overflow check, and of the
//! real-time clock as a plain count.
//!
//! Rust header: [`rust/kernel/time.rs`](srctree/rust/kernel/time.rs)
//!
//! 7.3's `Instant::elapsed` subtracts two `ktime_t`s with overflow checking, although both are
//! readings between 0 and `KTIME_MAX`, whose difference always fits.

use kernel::time::{
    ClockSource,
    Monotonic,
    RealTime, //
};

/// `CLOCK_REALTIME` now, in nanoseconds since the epoch (0 for a clock set before it).
pub(crate) fn realtime_ns() -> u64 {
    u64::try_from(RealTime::ktime_get()).unwrap_or(0)
}

/// A reading of `CLOCK_MONOTONIC`, in nanoseconds.
///
/// # Invariants
///
/// The value is between 0 and `KTIME_MAX`, as every reading of the clock is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MonotonicNs(i64);

impl MonotonicNs {
    /// The clock now.
    pub(crate) fn now() -> Self {
        // INVARIANT: a reading of the clock.
        Self(Monotonic::ktime_get())
    }

    /// The reading, in nanoseconds.
    pub(crate) fn get(self) -> u64 {
        // Never negative (type invariant).
        u64::try_from(self.0).unwrap_or(0)
    }

    /// Nanoseconds from `earlier` to `self`; 0 if `earlier` is the later reading.
    pub(crate) fn since(self, earlier: Self) -> u64 {
        // Both are between 0 and `KTIME_MAX` (type invariant), so the difference cannot wrap.
        u64::try_from(self.0.wrapping_sub(earlier.0)).unwrap_or(0)
    }
}
