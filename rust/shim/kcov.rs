// SPDX-License-Identifier: GPL-2.0

//! Remote coverage: KCOV for the code a kernel worker runs on a task's behalf.
//!
//! KCOV traces the task that enabled it, so the work a task hands to a kernel thread is
//! invisible to it unless the thread brackets that work with `kcov_remote_start` and
//! `kcov_remote_stop`, naming the handle of the task's remote session. The task's handle
//! (`kcov_common_handle`, 0 when it has none) must be taken while the task is current and
//! carried to the work, the way vhost carries its owner's. Without `CONFIG_KCOV` a
//! [`CoverageHandle`] holds nothing and runs its work as is.
//!
//! C header: [`include/linux/kcov.h`](srctree/include/linux/kcov.h)

#[cfg(CONFIG_KCOV)]
use kernel::{
    bindings,
    sync::atomic::{
        ordering::Relaxed,
        Atomic, //
    },
};

// 7.3's generated bindings have the handle's type but not these functions (tests/packaging.sh
// checks their signatures against every supported release's header).
#[cfg(CONFIG_KCOV)]
extern "C" {
    fn kcov_common_handle() -> bindings::kcov_common_handle_id;
    fn kcov_remote_start(handle: u64);
    fn kcov_remote_stop();
}

/// The remote-coverage handle of the last task that recorded itself, for the work done on its
/// behalf.
pub(crate) struct CoverageHandle {
    /// 0 until a task with a remote session records itself.
    #[cfg(CONFIG_KCOV)]
    handle: Atomic<u64>,
}

impl CoverageHandle {
    /// A holder with no handle: work runs untraced until a task records itself.
    pub(crate) const fn new() -> Self {
        Self {
            #[cfg(CONFIG_KCOV)]
            handle: Atomic::new(0),
        }
    }

    /// Records the current task's handle, if it has one: a task without a remote session
    /// (or a kernel thread, or interrupt context) leaves the last one in place.
    pub(crate) fn record_current(&self) {
        #[cfg(CONFIG_KCOV)]
        {
            // SAFETY: `kcov_common_handle` may be called from any context; it reads the
            // current task's own handle, or returns 0 outside task context.
            let handle = unsafe { kcov_common_handle() }.val;
            if handle != 0 {
                self.handle.store(handle, Relaxed);
            }
        }
    }

    /// Runs `work` with the coverage it reaches reported to the recorded task's session (a
    /// no-op bracket when there is none). Must be called from a kernel thread, never from a
    /// task that has KCOV enabled, and never nested.
    pub(crate) fn run<R>(&self, work: impl FnOnce() -> R) -> R {
        #[cfg(CONFIG_KCOV)]
        {
            let handle = self.handle.load(Relaxed);
            if handle != 0 {
                // A common handle is already a full remote handle (its subsystem bits are
                // KCOV_SUBSYSTEM_COMMON's, 0), what `kcov_remote_start_common` would pass.
                // SAFETY: called in task context; the matching `kcov_remote_stop` follows in
                // the same task, with nothing between them that starts a second section. An
                // unknown or stale handle makes both no-ops.
                unsafe { kcov_remote_start(handle) };
                let result = work();
                // SAFETY: ends the section started above, in the same task.
                unsafe { kcov_remote_stop() };
                return result;
            }
        }
        work()
    }
}
