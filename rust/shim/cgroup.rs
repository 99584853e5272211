// SPDX-License-Identifier: GPL-2.0

//! The control group (cgroup v2, the default hierarchy) of the current task: its id and its
//! path from the hierarchy's root.
//!
//! C headers: [`include/linux/cgroup.h`](srctree/include/linux/cgroup.h),
//! [`include/linux/kernfs.h`](srctree/include/linux/kernfs.h)
//!
//! A cgroup is a directory of kernfs: its id is the directory's node id (the inode number
//! userspace sees under `/sys/fs/cgroup`), and its path the node's path from the root
//! (`kernfs_path_from_node`, which `cgroup_path_ns` calls for the initial namespace). Neither
//! `task_dfl_cgroup` nor `cgroup_id` is exported: both are inline reads of the task's
//! `css_set`, which this reads the same way. A kernel without `CONFIG_CGROUPS` has no
//! hierarchy: every task is in the root, with id 0 and an empty path.

#[cfg(CONFIG_CGROUPS)]
use kernel::{
    bindings,
    sync::{
        atomic::{
            atomic_load,
            ordering::Relaxed, //
        },
        rcu,
    },
    task::Task,
};

/// A cgroup as a task was found in: its id and up to `N - 1` bytes of its path.
pub(crate) struct CgroupName<const N: usize> {
    /// The cgroup's id; 0 if unknown.
    pub(crate) id: u64,
    /// The path, NUL-terminated and NUL-padded.
    pub(crate) path: [u8; N],
    /// Whether the path was longer than `N - 1` bytes, and is cut.
    pub(crate) cut: bool,
}

impl<const N: usize> CgroupName<N> {
    /// No cgroup: id 0, an empty path.
    pub(crate) const fn none() -> Self {
        Self {
            id: 0,
            path: [0; N],
            cut: false,
        }
    }

    /// The cgroup the current task is in, in the default hierarchy.
    #[cfg(not(CONFIG_CGROUPS))]
    pub(crate) fn of_current() -> Self {
        Self::none()
    }

    /// The cgroup the current task is in, in the default hierarchy.
    #[cfg(CONFIG_CGROUPS)]
    pub(crate) fn of_current() -> Self {
        let node = {
            let _rcu = rcu::read_lock();
            // SAFETY: `current`'s css_set pointer is RCU-protected and never NULL; it is read
            // once, as `rcu_dereference` does, under the RCU read lock, which keeps the
            // css_set, its default cgroup and that cgroup's kernfs node alive until it is
            // dropped. The node is referenced before then (`kernfs_get` of a live node).
            unsafe {
                let set = atomic_load(&raw mut (*Task::current_raw()).cgroups, Relaxed);
                let node = (*(*set).dfl_cgrp).kn;
                bindings::kernfs_get(node);
                node
            }
        };
        let mut name = Self::none();
        // SAFETY: `node` is referenced (above) until the `kernfs_put`; its id is set when it
        // is made and never changed. `kernfs_path_from_node` writes at most `N` bytes into the
        // buffer, NUL-terminated, and returns the full path's length or a negative error.
        let length = unsafe {
            name.id = (*node).id;
            let length = bindings::kernfs_path_from_node(
                node,
                core::ptr::null_mut(),
                name.path.as_mut_ptr().cast(),
                N,
            );
            bindings::kernfs_put(node);
            length
        };
        match usize::try_from(length) {
            Ok(length) => name.cut = length >= N,
            Err(_) => name.path = [0; N],
        }
        name
    }
}
