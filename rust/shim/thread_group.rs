// SPDX-License-Identifier: GPL-2.0

//! Thread groups (processes) named by their TGID `struct pid`, and the kernel's rule for
//! whether the current task may read another process's state.
//!
//! C headers: [`include/linux/pid.h`](srctree/include/linux/pid.h),
//! [`include/linux/ptrace.h`](srctree/include/linux/ptrace.h)
//!
//! A group leader's `task_struct` does not name a process for its whole life: an `execve` from
//! a thread other than the leader makes that thread the leader (`de_thread()`), and the old
//! leader goes away. The TGID `struct pid` does: `de_thread()` hands it to the new leader, and a
//! reference to it keeps naming that one group (comparing numbers would not). It does not keep
//! its *number*: once the group is reaped, `free_pid()` gives the number back while references
//! remain, and a new process may get it. A group that has exited ([`ThreadGroup::has_exited`])
//! must therefore never answer for its number.

use core::ptr::NonNull;
use kernel::{
    bindings,
    cred::Credential,
    mm::Mm,
    pid_namespace::PidNamespace,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            atomic_load,
            ordering::Relaxed, //
        },
        rcu,
    },
    task::{
        Pid,
        Task, //
    },
};

/// A thread group.
///
/// # Invariants
///
/// `pid` is a TGID `struct pid` on which `self` holds one reference.
pub(crate) struct ThreadGroup {
    pid: NonNull<bindings::pid>,
}

// SAFETY: a `struct pid` reference may be used and dropped from any thread.
unsafe impl Send for ThreadGroup {}
// SAFETY: `&ThreadGroup` only reads the pid through functions that may run concurrently.
unsafe impl Sync for ThreadGroup {}

/// The TGID `struct pid` of `task`, not referenced.
fn tgid_pid(task: *mut bindings::task_struct) -> *mut bindings::pid {
    // SAFETY: `task` is a valid task (callers pass `current` or a task they hold); a task's
    // `signal` is set at creation and stays valid as long as the task is referenced, and its
    // TGID pid is only replaced when the group is created.
    unsafe { (*(*task).signal).pids[bindings::pid_type_PIDTYPE_TGID as usize] }
}

impl ThreadGroup {
    /// The current task's thread group.
    pub(crate) fn current() -> Result<Self> {
        // SAFETY: `current` is a valid task; `get_task_pid` returns its TGID pid with a new
        // reference, or NULL.
        let pid =
            unsafe { bindings::get_task_pid(Task::current_raw(), bindings::pid_type_PIDTYPE_TGID) };
        // INVARIANT: a non-NULL result is a TGID pid referenced for us.
        NonNull::new(pid).map(|pid| Self { pid }).ok_or(ESRCH)
    }

    /// Whether the current task belongs to this group.
    pub(crate) fn is_current(&self) -> bool {
        core::ptr::eq(tgid_pid(Task::current_raw()), self.pid.as_ptr())
    }

    /// Whether `other` is the same thread group.
    pub(crate) fn same_as(&self, other: &ThreadGroup) -> bool {
        self.pid == other.pid
    }

    /// The group's pid in `namespace`; 0 if it is not visible there (or has exited).
    pub(crate) fn nr_in(&self, namespace: Option<&PidNamespace>) -> Pid {
        let namespace = namespace.map_or(core::ptr::null_mut(), PidNamespace::as_ptr);
        // SAFETY: `pid` is referenced (type invariant); `pid_nr_ns` accepts any namespace, and
        // returns 0 for NULL or one the pid is not in.
        unsafe { bindings::pid_nr_ns(self.pid.as_ptr(), namespace) }
    }

    /// The group's leader, unless the group is gone (its leader was reaped).
    pub(crate) fn leader(&self) -> Option<ARef<Task>> {
        // SAFETY: `pid` is referenced; `get_pid_task` returns the task with a new reference, or
        // NULL.
        let task =
            unsafe { bindings::get_pid_task(self.pid.as_ptr(), bindings::pid_type_PIDTYPE_TGID) };
        // SAFETY: a non-NULL result is a task referenced for us, which `ARef` takes over.
        NonNull::new(task).map(|task| unsafe { ARef::from_raw(task.cast::<Task>()) })
    }

    /// Whether the group's leader runs in `image` now (`None`: it has no address space, as when
    /// it is exiting). A comparison of identities only: `image` is referenced by the caller, so
    /// no other address space can be at its address.
    pub(crate) fn runs_image(&self, image: Option<&Mm>) -> bool {
        let wanted = image.map_or(core::ptr::null_mut(), Mm::as_raw);
        self.leader().is_some_and(|leader| {
            // SAFETY: `leader` is referenced, so its `mm` field may be read; it is written (by
            // `execve` and exit, under the task lock) with one store, read once here as
            // `READ_ONCE` would. The address is only compared, never followed.
            let mm = unsafe { atomic_load(&raw mut (*leader.as_ptr()).mm, Relaxed) };
            mm == wanted
        })
    }

    /// The credentials of the group's leader now (its objective ones); `None` if the group is
    /// gone.
    pub(crate) fn credentials(&self) -> Option<Credentials> {
        let leader = self.leader()?;
        let _rcu = rcu::read_lock();
        // SAFETY: `leader` is referenced; its objective credentials are RCU-protected, and the
        // RCU read lock is held while they are read. The pointer is read once, as
        // `rcu_dereference` does.
        let cred = unsafe { atomic_load(&raw mut (*leader.as_ptr()).real_cred, Relaxed) };
        // SAFETY: `cred` points to live credentials (above).
        Some(unsafe { Credentials::read(cred) })
    }

    /// Whether the group's leader is dumpable now (`SUID_DUMP_USER`: it runs as the user who
    /// started it, and did not make itself non-dumpable); `None` if the group is gone.
    pub(crate) fn is_dumpable(&self) -> Option<bool> {
        let leader = self.leader()?;
        let _rcu = rcu::read_lock();
        // SAFETY: `leader` is referenced; its exec state is RCU-protected and never NULL for a
        // live task, and the RCU read lock is held; `dumpable` is written with `WRITE_ONCE`.
        let dumpable = unsafe {
            let state = atomic_load(&raw mut (*leader.as_ptr()).exec_state, Relaxed)
                .cast::<TaskExecState>();
            atomic_load(&raw mut (*state).dumpable, Relaxed)
        };
        Some(dumpable == bindings::task_dumpable_TASK_DUMPABLE_OWNER)
    }

    /// Whether every thread of the group has exited (the group is dead, reaped or not).
    pub(crate) fn has_exited(&self) -> bool {
        self.leader().is_none_or(|leader| {
            // SAFETY: `leader` is referenced, so its `signal` is valid (see `tgid_pid`), and
            // `live` is only ever changed atomically.
            let live = unsafe { &raw mut (*(*leader.as_ptr()).signal).live.counter };
            // SAFETY: `live` is a valid, aligned `c_int`.
            unsafe { atomic_load(live, Relaxed) == 0 }
        })
    }

    /// Whether the current task may read this group's state by the kernel's rule for reading
    /// another process's environment, `/proc/<pid>/environ`'s
    /// (`ptrace_may_access(task, PTRACE_MODE_READ_FSCREDS)`, which is not exported to modules):
    /// it is the same group; or its filesystem uid and gid are the leader's real, effective
    /// and saved ones and the leader is dumpable (a set-id `execve` makes it not), and the
    /// leader's permitted capabilities are among the caller's effective ones in the same user
    /// namespace (the capability module's part); or it has `CAP_SYS_PTRACE` in the user
    /// namespace of the leader's credentials (and, for a non-dumpable leader, of its `execve`).
    /// The other security modules' hook (`security_ptrace_access_check`) is not exported, so
    /// SELinux, AppArmor, Smack and Landlock policies are not consulted. `false` for a group
    /// that is gone.
    pub(crate) fn may_be_read_by_current(&self) -> bool {
        if self.is_current() {
            return true;
        }
        let Some(leader) = self.leader() else {
            return false;
        };
        let task = leader.as_ptr();
        let _rcu = rcu::read_lock();
        // The credentials are read through raw places, never as `&cred`: the kernel changes
        // parts of them (their count) under RCU while they are read, which a Rust reference to
        // them would declare impossible.
        // SAFETY: `current`'s own credentials are only replaced by `current`.
        let caller = unsafe { (*Task::current_raw()).cred };
        // SAFETY: `task` is referenced; its objective credentials are RCU-protected, and the
        // RCU read lock is held until they are no longer used. The pointer is read once, as
        // `rcu_dereference` does.
        let target = unsafe { atomic_load(&raw mut (*task).real_cred, Relaxed) };
        // SAFETY: both point to live credentials (above), whose ids and user namespace are
        // written only before the credentials are published and never afterwards.
        let (caller_fs, target_uids, target_gids, target_ns) = unsafe {
            (
                ((*caller).fsuid.val, (*caller).fsgid.val),
                [(*target).uid.val, (*target).euid.val, (*target).suid.val],
                [(*target).gid.val, (*target).egid.val, (*target).sgid.val],
                (*target).user_ns,
            )
        };
        // SAFETY: as above.
        let (caller_effective, caller_ns, target_permitted) = unsafe {
            (
                (*caller).cap_effective.val,
                (*caller).user_ns,
                (*target).cap_permitted.val,
            )
        };
        let same_ids = target_uids.iter().all(|&uid| uid == caller_fs.0)
            && target_gids.iter().all(|&gid| gid == caller_fs.1);
        if !same_ids && !has_ptrace_capability(target_ns) {
            return false;
        }
        // The dumpability is read after the credentials, as `commit_creds()` writes them in the
        // other order (a task that drops privileges becomes non-dumpable first).
        crate::shim::barrier::smp_rmb();
        // SAFETY: a task's exec state is RCU-protected and never NULL for a live task; the RCU
        // read lock is held.
        let exec_state = unsafe { atomic_load(&raw mut (*task).exec_state, Relaxed) };
        let exec_state = exec_state.cast::<TaskExecState>();
        // SAFETY: `exec_state` is a live `struct task_exec_state`, which `TaskExecState` lays out;
        // `dumpable` is written with `WRITE_ONCE` (by `execve` and `prctl`), `user_ns` only when
        // the state is made.
        let (dumpable, user_ns) = unsafe {
            (
                atomic_load(&raw mut (*exec_state).dumpable, Relaxed),
                (*exec_state).user_ns,
            )
        };
        if dumpable != bindings::task_dumpable_TASK_DUMPABLE_OWNER
            && !has_ptrace_capability(user_ns)
        {
            return false;
        }
        // Last, what the capability security module (`cap_ptrace_access_check`, always the
        // first of the security hooks) adds: a process with capabilities the caller lacks (its
        // effective ones, for the filesystem-credential mode) is read only with
        // `CAP_SYS_PTRACE`.
        (core::ptr::eq(caller_ns, target_ns) && target_permitted & !caller_effective == 0)
            || has_ptrace_capability(target_ns)
    }
}

/// What a task's credentials say of whom it acts for, as the kernel's rule for reading a
/// process compares them: its real, effective and saved user and group ids, and its permitted
/// capabilities. Two tasks, or one task at two moments, with equal values are the same
/// principal to that rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Credentials {
    uids: [u32; 3],
    gids: [u32; 3],
    permitted: u64,
}

impl Credentials {
    /// Whether a process with these credentials, dumpable or not, is one that the task with
    /// credentials `reader` may read by the kernel's rule for reading another process
    /// (`ThreadGroup::may_be_read_by_current`'s), as far as credentials alone say it: the
    /// reader's filesystem uid and gid are these real, effective and saved ones, the process
    /// was `dumpable`, and these permitted capabilities are among the reader's effective
    /// ones. For a process that may be gone: `CAP_SYS_PTRACE`, which the rule also accepts,
    /// is for the caller to check of the reader.
    pub(crate) fn readable_by(&self, dumpable: bool, reader: &Credential) -> bool {
        let reader = reader.as_ptr();
        // SAFETY: `reader` is borrowed, so live; its ids and capabilities are written only
        // before credentials are published.
        let (fs, effective) = unsafe {
            (
                ((*reader).fsuid.val, (*reader).fsgid.val),
                (*reader).cap_effective.val,
            )
        };
        dumpable
            && self.uids.iter().all(|&uid| uid == fs.0)
            && self.gids.iter().all(|&gid| gid == fs.1)
            && self.permitted & !effective == 0
    }

    /// The real user and group ids as the user namespace of `reader` maps them (the overflow
    /// ids where it does not).
    pub(crate) fn ids_seen_by(&self, reader: &Credential) -> (u32, u32) {
        let reader = reader.as_ptr();
        // SAFETY: `reader` is borrowed, so live, and its user namespace with it (credentials
        // hold their namespace); the mapping functions take any id.
        unsafe {
            let namespace = (*reader).user_ns;
            (
                bindings::from_kuid_munged(namespace, bindings::kuid_t { val: self.uids[0] }),
                bindings::from_kgid_munged(namespace, bindings::kgid_t { val: self.gids[0] }),
            )
        }
    }

    /// The current task's (its objective credentials, which others read it by).
    pub(crate) fn current() -> Self {
        // SAFETY: `current`'s objective credentials are only replaced by `current` itself, so
        // they stay live while it reads them.
        unsafe { Self::read((*Task::current_raw()).real_cred) }
    }

    /// Reads `cred`.
    ///
    /// # Safety
    ///
    /// `cred` points to live credentials for the call.
    unsafe fn read(cred: *const bindings::cred) -> Self {
        // SAFETY: live (the function's contract); the ids and capabilities are written only
        // before credentials are published, and never afterwards.
        unsafe {
            Self {
                uids: [(*cred).uid.val, (*cred).euid.val, (*cred).suid.val],
                gids: [(*cred).gid.val, (*cred).egid.val, (*cred).sgid.val],
                permitted: (*cred).cap_permitted.val,
            }
        }
    }
}

/// `struct task_exec_state` (`include/linux/sched/exec_state.h`, the same in 7.2 and 7.3):
/// a task's dumpability and the user namespace of its `execve`, which the kernel crate's
/// bindings leave opaque (their header is not among theirs). Its layout is checked at every
/// build: here on the Rust side, and by `exec_state_layout.c` against the kernel's header, with
/// the same numbers; the KUnit suite `neuron_ds_thread_group` also reads a live state with it.
#[repr(C)]
struct TaskExecState {
    count: bindings::refcount_t,
    dumpable: bindings::task_dumpable,
    user_ns: *mut bindings::user_namespace,
    rcu: bindings::callback_head,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(offset_of!(TaskExecState, count) == 0);
    assert!(offset_of!(TaskExecState, dumpable) == 4);
    assert!(size_of::<bindings::task_dumpable>() == 4);
    assert!(offset_of!(TaskExecState, user_ns) == 8);
    assert!(offset_of!(TaskExecState, rcu) == 16);
    assert!(size_of::<TaskExecState>() == 32);
};

/// Whether the current task has `CAP_SYS_PTRACE` in `namespace` (`ns_capable()`).
fn has_ptrace_capability(namespace: *mut bindings::user_namespace) -> bool {
    // SAFETY: `namespace` comes from credentials or an exec state that the caller keeps alive
    // (RCU), and `CAP_SYS_PTRACE` is a valid capability number.
    unsafe { bindings::ns_capable(namespace, bindings::CAP_SYS_PTRACE as c_int) }
}

impl Clone for ThreadGroup {
    #[inline]
    fn clone(&self) -> Self {
        // SAFETY: `pid` is referenced (type invariant), so its count is not zero and may be
        // raised (`get_pid()`).
        unsafe { bindings::refcount_inc(&raw mut (*self.pid.as_ptr()).count) };
        // INVARIANT: the new reference is the clone's.
        Self { pid: self.pid }
    }
}

impl Drop for ThreadGroup {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: by the type invariant we hold one reference, given back exactly once here.
        unsafe { bindings::put_pid(self.pid.as_ptr()) };
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_thread_group)]
mod tests {
    use super::*;

    /// The bindings leave `struct task_exec_state` opaque, so its hand-written layout is
    /// checked against a live one: the test's own task (a kernel thread) has the initial exec
    /// state, whose user namespace is its credentials' (the initial one).
    #[test]
    fn the_exec_state_layout_reads_the_tasks_own_state() {
        let task = Task::current_raw();
        let _rcu = rcu::read_lock();
        // SAFETY: the current task's exec state is RCU-protected and never NULL, and the RCU
        // read lock is held; its own credentials are only replaced by itself.
        let (state, cred_ns) = unsafe {
            (
                atomic_load(&raw mut (*task).exec_state, Relaxed).cast::<TaskExecState>(),
                (*(*task).cred).user_ns,
            )
        };
        // SAFETY: `state` is a live exec state (above); its count and dumpability are only
        // changed atomically, its user namespace only when it is made.
        let (count, dumpable, user_ns) = unsafe {
            (
                atomic_load(&raw mut (*state).count.refs.counter, Relaxed),
                atomic_load(&raw mut (*state).dumpable, Relaxed),
                (*state).user_ns,
            )
        };
        assert!(count >= 1);
        assert!(dumpable <= bindings::task_dumpable_TASK_DUMPABLE_ROOT);
        assert!(core::ptr::eq(user_ns, cred_ns));
    }
}
