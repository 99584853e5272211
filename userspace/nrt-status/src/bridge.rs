//! The status → counter bridge as lookup tables, and pure functions returning the counters an
//! event increments (each by one), so tools can compute expected sums without a datastore.
//!
//! Four runtime paths write the per-NeuronCore counters:
//!
//! * **generic status** ([`GENERIC_STATUS_COUNTERS`]): the 0..=15 core band; 3 and every code not
//!   listed are skipped;
//! * **execution result** ([`EXECUTION_COUNTERS`]): one outcome counter per listed status;
//!   statuses not listed (3, 4, 9–11, 13–15, 101, 1005, 1100, 1206, unknown) have no outcome
//!   counter;
//! * **error-subtype flags** ([`ERROR_FLAG_COUNTERS`]): the four SW subtypes with no public status
//!   of their own;
//! * **latencies** ([`Latencies`]): written with *set*, never added.
//!
//! ## `NDS_NC_COUNTER_INFERENCE_COUNT`
//!
//! Our sources only infer this counter from its name, so the rule is a decision: every
//! **finished execution** counts once, whatever its outcome — success, error or unknown code —
//! and only the retry sentinel `NRT_COLL_PENDING` does not (the execution has not finished and
//! will be reported again). Reasons: successes already have their own counter (`success`), so a
//! success-only inference count would carry no information; the driver files
//! `inference_count` with the usage totals (`model_load_count`, `flop_count`, `nc_time_in_use`)
//! rather than with the per-status nodes; and counting every execution makes
//! `success / inference_count` a success rate.

use nds_abi::counters::{ExtNcCounter, NcCounter};

use crate::decode::{InferErrorFlags, InferErrorSubtype};
use crate::{Counter, NrtStatus};

/// Generic-status path: status → the counter it increments.
pub const GENERIC_STATUS_COUNTERS: [(NrtStatus, Counter); 5] = [
    (NrtStatus::FAILURE, Counter::Nc(NcCounter::GenericFail)),
    (NrtStatus::INVALID, Counter::Nc(NcCounter::ErrInvalid)),
    (NrtStatus::RESOURCE, Counter::Nc(NcCounter::ErrResource)),
    (
        NrtStatus::LOAD_NOT_ENOUGH_NC,
        Counter::Nc(NcCounter::ErrResourceNc),
    ),
    (
        NrtStatus::UNSUPPORTED_NEFF_VERSION,
        Counter::Nc(NcCounter::ErrUnsupportedNeffVersion),
    ),
];

/// Execution-result path: status → its outcome counter.
pub const EXECUTION_COUNTERS: [(NrtStatus, Counter); 16] = [
    (NrtStatus::SUCCESS, Counter::Nc(NcCounter::InferCompleted)),
    (
        NrtStatus::EXEC_COMPLETED_WITH_ERR,
        Counter::Nc(NcCounter::InferCompletedWithErr),
    ),
    (
        NrtStatus::EXEC_COMPLETED_WITH_NUM_ERR,
        Counter::Nc(NcCounter::InferCompletedWithNumErr),
    ),
    (NrtStatus::TIMEOUT, Counter::Nc(NcCounter::InferTimedOut)),
    (
        NrtStatus::EXEC_BAD_INPUT,
        Counter::Nc(NcCounter::InferIncorrectInput),
    ),
    (
        NrtStatus::QUEUE_FULL,
        Counter::Nc(NcCounter::InferFailedToQueue),
    ),
    (NrtStatus::HW_ERROR, Counter::Nc(NcCounter::ErrHw)),
    (NrtStatus::FAILURE, Counter::Nc(NcCounter::GenericFail)),
    (NrtStatus::INVALID, Counter::Nc(NcCounter::ErrInvalid)),
    (NrtStatus::EXEC_OOB, Counter::Nc(NcCounter::Oob)),
    (
        NrtStatus::EXEC_HW_ERR_COLLECTIVES,
        Counter::Ext(ExtNcCounter::HwErrCollectives),
    ),
    (
        NrtStatus::EXEC_HW_ERR_HBM_UE,
        Counter::Ext(ExtNcCounter::HwErrHbmUe),
    ),
    (
        NrtStatus::EXEC_HW_ERR_NC_UE,
        Counter::Ext(ExtNcCounter::HwErrNcUe),
    ),
    (
        NrtStatus::EXEC_HW_ERR_DMA_ABORT,
        Counter::Ext(ExtNcCounter::HwErrDmaAbort),
    ),
    (
        NrtStatus::EXEC_SW_NQ_OVERFLOW,
        Counter::Ext(ExtNcCounter::ErrSwNqOverflow),
    ),
    (
        NrtStatus::EXEC_HW_ERR_REPAIRABLE_HBM_UE,
        Counter::Ext(ExtNcCounter::HwErrRepairableHbmUe),
    ),
];

/// The counter every finished execution increments (see the module docs).
pub const INFERENCE_COUNT: Counter = Counter::Nc(NcCounter::InferenceCount);

/// Error-flags path: infer-error subtype → the counter its flag increments.
pub const ERROR_FLAG_COUNTERS: [(InferErrorSubtype, Counter); 4] = [
    (
        InferErrorSubtype::SwSemaphoreError,
        Counter::Ext(ExtNcCounter::ErrSwSemaphoreError),
    ),
    (
        InferErrorSubtype::SwEventError,
        Counter::Ext(ExtNcCounter::ErrSwEventError),
    ),
    (
        InferErrorSubtype::SwPsumCollisionError,
        Counter::Ext(ExtNcCounter::ErrSwPsumCollision),
    ),
    (
        InferErrorSubtype::SwSequencerError,
        Counter::Ext(ExtNcCounter::ErrSwSequencerFatal),
    ),
];

/// Latencies of one execution, each *set* into its counter. The unit is the producer's
/// choice; the counters carry whatever value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Latencies {
    /// Device latency → `NDS_NC_COUNTER_LATENCY_DEVICE`.
    pub device: u64,
    /// End-to-end latency → `NDS_NC_COUNTER_LATENCY_TOTAL`.
    pub total: u64,
    /// NeuronCore time → `NDS_NC_COUNTER_NC_TIME`.
    pub nc_time: u64,
    /// Collective-communication time → `NDS_NC_COUNTER_CC_TIME`.
    pub cc_time: u64,
}

impl Latencies {
    /// Each value paired with the counter it is set into.
    pub const fn counter_values(&self) -> [(Counter, u64); 4] {
        [
            (Counter::Nc(NcCounter::LatencyDevice), self.device),
            (Counter::Nc(NcCounter::LatencyTotal), self.total),
            (Counter::Nc(NcCounter::NcTime), self.nc_time),
            (Counter::Nc(NcCounter::CcTime), self.cc_time),
        ]
    }
}

/// Looks a key up in a bridge table.
fn lookup<K: PartialEq + Copy>(table: &[(K, Counter)], key: K) -> Option<Counter> {
    table
        .iter()
        .find(|(entry, _)| *entry == key)
        .map(|(_, counter)| *counter)
}

/// The counter the generic-status path increments for `status`, if any.
pub fn generic_counter(status: NrtStatus) -> Option<Counter> {
    lookup(&GENERIC_STATUS_COUNTERS, status)
}

/// The outcome counter the execution path increments for `status`, if any (not including
/// [`INFERENCE_COUNT`]; see [`execution_counters`]).
pub fn execution_outcome_counter(status: NrtStatus) -> Option<Counter> {
    lookup(&EXECUTION_COUNTERS, status)
}

/// Whether reporting `status` as an execution result bumps [`INFERENCE_COUNT`]: every status
/// but the retry sentinel.
pub const fn counts_as_inference(status: NrtStatus) -> bool {
    !status.is_retry()
}

/// Every counter reporting `status` as an execution result increments by one: its outcome
/// counter (if any), then [`INFERENCE_COUNT`] (unless it is the retry sentinel).
pub fn execution_counters(status: NrtStatus) -> impl Iterator<Item = Counter> {
    execution_outcome_counter(status)
        .into_iter()
        .chain(counts_as_inference(status).then_some(INFERENCE_COUNT))
}

/// Every counter reporting `flags` increments by one: one per set SW-subtype flag.
pub fn error_flag_counters(flags: &InferErrorFlags) -> impl Iterator<Item = Counter> + '_ {
    ERROR_FLAG_COUNTERS
        .iter()
        .filter(|(subtype, _)| flags.is_set(*subtype))
        .map(|(_, counter)| *counter)
}
