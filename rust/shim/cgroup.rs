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

/// Room for a path of `N` bytes and its NUL: one byte more than a [`CgroupName<N>`] keeps,
/// so that a path that fills it is known to be cut (`kernfs_path_from_node` returns how much
/// it wrote, never more than the buffer holds, not how long the path is).
#[cfg(CONFIG_CGROUPS)]
#[repr(C)]
struct PathBuffer<const N: usize> {
    path: [u8; N],
    spill: u8,
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
        let mut buffer = PathBuffer {
            path: [0; N],
            spill: 0,
        };
        // SAFETY: `node` is referenced (above) until the `kernfs_put`; its id is set when it
        // is made and never changed. `buffer` is `N + 1` contiguous bytes (`repr(C)`, byte
        // fields, no padding), and the pointer is derived from the whole of it.
        // `kernfs_path_from_node` writes at most that many bytes, NUL-terminated, and returns
        // the length it wrote or a negative error.
        let length = unsafe {
            name.id = (*node).id;
            let length = bindings::kernfs_path_from_node(
                node,
                core::ptr::null_mut(),
                (&raw mut buffer).cast(),
                N + 1,
            );
            bindings::kernfs_put(node);
            length
        };
        if let Ok(length) = usize::try_from(length) {
            // The path filled the spare byte too: it was longer than `N - 1` bytes.
            name.cut = length >= N;
            name.path = buffer.path;
            if let Some(last) = name.path.last_mut() {
                *last = 0;
            }
        }
        name
    }
}
