//! A load generator for the Neuron DataStore: processes that behave like inference runtimes.
//!
//! The orchestrator ([`orchestrator::run`]) starts N producer processes per device (the same
//! binary, re-executed with a [`ProducerSpec`]). Each producer owns one slab and writes a
//! realistic stream through the `nds` crate ([`workload`]): execution results drawn from a
//! weighted [`StatusMix`] and counted through the `nrt-status` bridge, latencies, busy time and
//! MACs, per-core and host memory gauges, model records loaded and unloaded over time,
//! process-info and process-info-ext.
//!
//! Every write goes through a [`Recorder`], which writes the slab first and then adds the same
//! value to an in-process [`Tally`]. When the stream ends, the producer checks the tally against
//! its slab and writes a [`ProducerReport`]: exactly what it added to every counter. A producer
//! told to crash writes its report at the crash point and then sends itself SIGKILL, so nothing
//! lands after the report and the kernel's aggregate still equals the sum of the reports.

#![warn(missing_docs)]

// Floor 0: errors, the generator, the producer's spec.
pub mod error;
pub mod rng;
pub mod spec;
// Floor 1: recorded writes, the status mix, models.
pub mod mix;
pub mod models;
pub mod recorder;
// Floor 2: what a producer reports.
pub mod report;
// Floor 3: reports against the kernel's totals, the stream a producer writes.
pub mod compare;
pub mod workload;
// Floor 4: one producer process.
pub mod producer;
// Floor 5: the processes of all of them.
pub mod orchestrator;
// Floor 6: the nds-loadgen tool's command line.
#[cfg(feature = "cli")]
pub mod cli;

pub use error::{Error, Result};
pub use mix::StatusMix;
pub use recorder::{Recorder, Tally};
pub use report::{ProducerReport, Summary};
pub use spec::ProducerSpec;
