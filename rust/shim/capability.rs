// SPDX-License-Identifier: GPL-2.0

//! Capability checks of the current task, and of the task that opened a file.
//!
//! C header: [`include/linux/capability.h`](srctree/include/linux/capability.h)

use kernel::{
    bindings,
    fs::LocalFile,
    prelude::*, //
};

/// A capability this module checks; the kernel stops (`BUG()`) on an invalid number, so only
/// valid ones can be named.
#[derive(Clone, Copy)]
enum Capability {
    SysAdmin,
    Perfmon,
    SysPtrace,
}

impl Capability {
    fn number(self) -> c_int {
        const SYS_ADMIN: c_int = bindings::CAP_SYS_ADMIN as c_int;
        const PERFMON: c_int = bindings::CAP_PERFMON as c_int;
        const SYS_PTRACE: c_int = bindings::CAP_SYS_PTRACE as c_int;
        const _: () = assert!(
            bindings::CAP_SYS_ADMIN <= bindings::CAP_LAST_CAP
                && bindings::CAP_PERFMON <= bindings::CAP_LAST_CAP
                && bindings::CAP_SYS_PTRACE <= bindings::CAP_LAST_CAP
        );
        match self {
            Self::SysAdmin => SYS_ADMIN,
            Self::Perfmon => PERFMON,
            Self::SysPtrace => SYS_PTRACE,
        }
    }
}

/// Whether the current task has `cap` in the initial user namespace (`capable()`).
fn capable(cap: Capability) -> bool {
    // SAFETY: `capable` may be called from any process context with a valid capability number,
    // which every `Capability` is (checked against `CAP_LAST_CAP` at compile time).
    unsafe { bindings::capable(cap.number()) }
}

/// Whether the current task may use performance monitoring: `perfmon_capable()`.
///
/// `CAP_PERFMON` is asked first and `CAP_SYS_ADMIN` only without it, in the kernel's order: a
/// task that has `CAP_PERFMON` is never checked for (and never logged as denied)
/// `CAP_SYS_ADMIN`.
pub(crate) fn perfmon_capable() -> bool {
    capable(Capability::Perfmon) || capable(Capability::SysAdmin)
}

/// Whether the task that opened `file` had `cap` in the initial user namespace when it opened
/// it (`file_ns_capable()`: the file's credentials, not the caller's).
fn opener_capable(file: &LocalFile, cap: Capability) -> bool {
    // SAFETY: `file` is valid for the borrow, and its credentials for as long as it is;
    // `init_user_ns` is a static namespace that is never freed; every `Capability` is a valid
    // capability number.
    unsafe {
        bindings::file_ns_capable(file.as_ptr(), &raw mut bindings::init_user_ns, cap.number())
    }
}

/// Whether the task that opened `file` was `perfmon_capable()` then, in the kernel's order.
///
/// What a file returns to a read is checked against its opener, as the kernel checks reads
/// that reveal more than the reader could open by itself: a descriptor handed to a privileged
/// process (a set-uid program's standard input) reads nothing its opener could not.
pub(crate) fn opener_perfmon_capable(file: &LocalFile) -> bool {
    opener_capable(file, Capability::Perfmon) || opener_capable(file, Capability::SysAdmin)
}

/// Whether the task that opened `file` could read any process's state then: `CAP_SYS_PTRACE`
/// in the initial user namespace, which the kernel's rule for reading another process accepts
/// whatever the ids.
pub(crate) fn opener_may_read_any_process(file: &LocalFile) -> bool {
    opener_capable(file, Capability::SysPtrace)
}
