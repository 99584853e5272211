// SPDX-License-Identifier: GPL-2.0

//! The bottom layer: small generic safe abstractions over kernel APIs that Linux 7.3's `kernel`
//! crate lacks, one file per kernel API.
//!
//! Nothing here names a type of the rest of this module: each abstraction is written the way
//! `rust/kernel` writes its own (`# Invariants` on types, `# Safety` on unsafe functions and
//! traits, a `// SAFETY:` comment on every unsafe block) and could stand on its own upstream.
//! This is the only place in the module with `unsafe` code; every other module is
//! `#[deny(unsafe_code)]`.
//!
//! It is also the only place that knows which kernel release it is built against: Kbuild
//! passes `--cfg kernel_version="<VERSION>.<PATCHLEVEL>"`, and the files whose kernel API
//! differs between the supported releases (7.2 and 7.3) select theirs with it, offering the
//! same items on both ([`barrier`]: the barriers' names; [`param`]: `module!` parameter values
//! and `bool` parameters; [`sysfs`]: `kobj_attribute`'s unions).

pub(crate) mod barrier;
pub(crate) mod capability;
pub(crate) mod cgroup;
pub(crate) mod class;
pub(crate) mod clock;
pub(crate) mod kcov;
pub(crate) mod misc;
pub(crate) mod param;
pub(crate) mod shared_mapping;
pub(crate) mod shared_pages;
pub(crate) mod sysfs;
pub(crate) mod thread_group;
pub(crate) mod vma;
pub(crate) mod workqueue;
pub(crate) mod zeroed;
