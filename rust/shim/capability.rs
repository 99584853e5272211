// SPDX-License-Identifier: GPL-2.0

//! Capability checks of the current task.
//!
//! C header: [`include/linux/capability.h`](srctree/include/linux/capability.h)

use kernel::{
    bindings,
    prelude::*, //
};

/// Whether the current task has capability `cap` in the initial user namespace (`capable()`).
fn capable(cap: u32) -> bool {
    let Ok(cap) = c_int::try_from(cap) else {
        return false;
    };
    // SAFETY: `capable` may be called from any process context with any capability number.
    unsafe { bindings::capable(cap) }
}

/// Whether the current task may use performance monitoring: `perfmon_capable()`.
///
/// `CAP_PERFMON` is asked first and `CAP_SYS_ADMIN` only without it, in the kernel's order: a
/// task that has `CAP_PERFMON` is never checked for (and never logged as denied)
/// `CAP_SYS_ADMIN`.
pub(crate) fn perfmon_capable() -> bool {
    capable(bindings::CAP_PERFMON) || capable(bindings::CAP_SYS_ADMIN)
}
