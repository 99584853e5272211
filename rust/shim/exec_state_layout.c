// SPDX-License-Identifier: GPL-2.0
/*
 * The layout of struct task_exec_state that rust/shim/thread_group.rs reads through its own
 * TaskExecState (the kernel crate's bindings leave the struct opaque), checked against the
 * kernel's header at every build: Kbuild compiles this file (always-y) and links it into
 * nothing. TaskExecState's const assertions state the same numbers on the Rust side.
 */
#include <linux/build_bug.h>
#include <linux/stddef.h>
#include <linux/sched/exec_state.h>

static_assert(offsetof(struct task_exec_state, count) == 0);
static_assert(offsetof(struct task_exec_state, dumpable) == 4);
static_assert(sizeof(enum task_dumpable) == 4);
static_assert(offsetof(struct task_exec_state, user_ns) == 8);
static_assert(offsetof(struct task_exec_state, rcu) == 16);
static_assert(sizeof(struct task_exec_state) == 32);
