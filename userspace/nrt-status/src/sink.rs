//! Writing bridge events into a datastore: the [`CounterSink`] a datastore handle implements,
//! and the `report_*` functions that drive it from the bridge tables.
//!
//! This crate does not depend on the datastore crate; the datastore crate implements
//! [`CounterSink`] for its producer handle.

use crate::bridge::{error_flag_counters, execution_counters, generic_counter, Latencies};
use crate::decode::InferErrorFlags;
use crate::{Counter, NrtStatus};

/// Something per-NeuronCore counters can be written into (a producer's datastore handle, an
/// in-memory tally, …).
pub trait CounterSink {
    /// Why a write failed.
    type Error;

    /// Adds `delta` to `counter` of NeuronCore `core`.
    fn add_nc(&self, core: usize, counter: Counter, delta: u64) -> Result<(), Self::Error>;

    /// Sets `counter` of NeuronCore `core` to `value`.
    fn set_nc(&self, core: usize, counter: Counter, value: u64) -> Result<(), Self::Error>;
}

/// Adds one to each counter, stopping at the first failed write.
fn bump_each<S, I>(sink: &S, core: usize, counters: I) -> Result<(), S::Error>
where
    S: CounterSink + ?Sized,
    I: IntoIterator<Item = Counter>,
{
    counters
        .into_iter()
        .try_for_each(|counter| sink.add_nc(core, counter, 1))
}

/// Records an execution result on `core` (outcome counter and inference count; see
/// [`execution_counters`]). A status with no counter writes nothing.
pub fn report_execution<S>(sink: &S, core: usize, status: NrtStatus) -> Result<(), S::Error>
where
    S: CounterSink + ?Sized,
{
    bump_each(sink, core, execution_counters(status))
}

/// Records a generic (load / lifecycle) status on `core`; statuses the generic path skips
/// write nothing.
pub fn report_generic<S>(sink: &S, core: usize, status: NrtStatus) -> Result<(), S::Error>
where
    S: CounterSink + ?Sized,
{
    bump_each(sink, core, generic_counter(status))
}

/// Records an execution's infer-error flags on `core`: one increment per set SW-subtype flag.
pub fn report_error_flags<S>(sink: &S, core: usize, flags: &InferErrorFlags) -> Result<(), S::Error>
where
    S: CounterSink + ?Sized,
{
    bump_each(sink, core, error_flag_counters(flags))
}

/// Sets an execution's latencies on `core` (set, not added).
pub fn report_latencies<S>(sink: &S, core: usize, latencies: &Latencies) -> Result<(), S::Error>
where
    S: CounterSink + ?Sized,
{
    latencies
        .counter_values()
        .into_iter()
        .try_for_each(|(counter, value)| sink.set_nc(core, counter, value))
}
