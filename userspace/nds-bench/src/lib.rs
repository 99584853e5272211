//! Benchmarks of the Neuron DataStore client, measured against the physical floor and its
//! peers, and the report that prints them as one table.
//!
//! `make bench` runs three things and joins them:
//!
//! * the criterion benches in `benches/host.rs` (counter increments, reader snapshots, records),
//!   built on the helpers of this crate: [`counters`] names what is incremented, [`slab`] makes
//!   the slabs and the `memcpy` reference, [`threads`] runs two-thread and hammering scenarios,
//!   and `mmv` wraps PCP's Memory Mapped Values (with the `mmv` feature);
//! * the guest timing binary in `tests/bench-guest` (the kernel paths, inside QEMU);
//! * `nds-bench-report`, which reads both result sets and prints the table defined in
//!   [`report`].
//!
//! Nothing here asserts a timing: benchmarks only print.

#![warn(missing_docs)]

// Floor 0: what is incremented.
pub mod counters;
// Floor 1: the slabs.
pub mod slab;
// Floor 2: the peers, the scenarios and the table.
#[cfg(feature = "mmv")]
pub mod mmv;
pub mod report;
pub mod threads;
