// SPDX-License-Identifier: GPL-2.0

//! Thread-group state that 7.3's [`Task`] has no accessor for.
//!
//! C header: [`include/linux/sched/signal.h`](srctree/include/linux/sched/signal.h)

use kernel::{
    sync::atomic::{
        atomic_load,
        ordering::Relaxed, //
    },
    task::Task, //
};

/// Whether every thread of `task`'s thread group has exited (the group is dead, reaped or not).
pub(crate) fn thread_group_exited(task: &Task) -> bool {
    // SAFETY: `task` is valid for the borrow; a task's `signal` is set at creation and stays
    // valid while the task is referenced, and `live` is only ever changed atomically.
    let live = unsafe { &raw mut (*(*task.as_ptr()).signal).live.counter };
    // SAFETY: `live` is a valid, aligned `c_int` that the kernel only updates atomically.
    unsafe { atomic_load(live, Relaxed) == 0 }
}
