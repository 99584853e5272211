//! Wire format of the Neuron DataStore (NDS).
//!
//! The NDS is a 256 KiB shared-memory slab per (device, process). The kernel hands it out through
//! an ioctl and `mmap`; the runtime (the producer) writes counters and hashed records into it and
//! monitors (readers) map it read-only. This crate is the single source of truth for every number
//! of that contract: the 67,200-byte region map, counter addressing, record layouts, the header,
//! the ioctl ABI and the FNV-1a record hash.
//!
//! The module files are compiled unchanged by the kernel module (each one is included with a
//! `#[path]` attribute), so they use only `core`, `zerocopy` and `zerocopy_derive`, refer to each
//! other through `super::`, allocate nothing and have no panicking paths.

#![no_std]

pub mod counters;
pub mod fnv;
pub mod ioctl;
pub mod layout;
pub mod ledger;
pub mod metrics;
pub mod records;
pub mod sysfs;
pub mod text;
