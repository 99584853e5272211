//! The per-NeuronCore datastore counters a status can feed, and the sysfs node each one is
//! aggregated into when its process releases the datastore.
//!
//! Counter indices are owned by `nds_abi`; this module only names which of its counters are
//! meant and never spells an index itself.

use std::fmt;

use nds_abi::counters::{ExtNcCounter, NcCounter};

/// A per-NeuronCore counter: an original NC counter (`NDS_NC_COUNTER_*`) or an extended one
/// (`NDS_EXT_NC_COUNTER_*`). Both live in one per-core index space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counter {
    /// An original per-NeuronCore counter.
    Nc(NcCounter),
    /// An extended per-NeuronCore counter.
    Ext(ExtNcCounter),
}

/// The sysfs directory (under `neuron_core<N>/stats/`) holding a counter's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SysfsGroup {
    /// `stats/status/`: the per-status counters.
    Status,
    /// `stats/other_info/`: usage totals.
    OtherInfo,
}

impl SysfsGroup {
    /// The directory name.
    pub const fn dir(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::OtherInfo => "other_info",
        }
    }
}

/// Where a counter surfaces in sysfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SysfsNode {
    /// The directory under `stats/`.
    pub group: SysfsGroup,
    /// The node name, e.g. `execute_completed_with_error`.
    pub name: &'static str,
}

impl fmt::Display for SysfsNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.group.dir(), self.name)
    }
}

/// The driver's counter → sysfs node table. `flop_count` is aggregated as twice the MAC count.
/// Counters absent here (latencies, NC time, CC time, memory usage, legacy error classes but
/// `ERR_GENERIC`) have no sysfs node.
pub const SYSFS_NODES: [(Counter, SysfsGroup, &str); 28] = [
    (
        Counter::Nc(NcCounter::InferCompleted),
        SysfsGroup::Status,
        "success",
    ),
    (
        Counter::Nc(NcCounter::GenericFail),
        SysfsGroup::Status,
        "failure",
    ),
    (
        Counter::Nc(NcCounter::InferTimedOut),
        SysfsGroup::Status,
        "timeout",
    ),
    (
        Counter::Nc(NcCounter::InferIncorrectInput),
        SysfsGroup::Status,
        "exec_bad_input",
    ),
    (
        Counter::Nc(NcCounter::ErrHw),
        SysfsGroup::Status,
        "hw_error",
    ),
    (
        Counter::Nc(NcCounter::InferCompletedWithErr),
        SysfsGroup::Status,
        "execute_completed_with_error",
    ),
    (
        Counter::Nc(NcCounter::InferCompletedWithNumErr),
        SysfsGroup::Status,
        "execute_completed_with_num_error",
    ),
    (
        Counter::Nc(NcCounter::ErrGeneric),
        SysfsGroup::Status,
        "generic_error",
    ),
    (
        Counter::Nc(NcCounter::ErrResource),
        SysfsGroup::Status,
        "resource_error",
    ),
    (
        Counter::Nc(NcCounter::ErrResourceNc),
        SysfsGroup::Status,
        "resource_nc_error",
    ),
    (
        Counter::Nc(NcCounter::InferFailedToQueue),
        SysfsGroup::Status,
        "execute_failed_to_queue",
    ),
    (
        Counter::Nc(NcCounter::ErrInvalid),
        SysfsGroup::Status,
        "invalid_error",
    ),
    (
        Counter::Nc(NcCounter::ErrUnsupportedNeffVersion),
        SysfsGroup::Status,
        "unsupported_neff_version",
    ),
    (Counter::Nc(NcCounter::Oob), SysfsGroup::Status, "oob_error"),
    (
        Counter::Ext(ExtNcCounter::HwErrCollectives),
        SysfsGroup::Status,
        "hw_collectives_error",
    ),
    (
        Counter::Ext(ExtNcCounter::HwErrHbmUe),
        SysfsGroup::Status,
        "hw_hbm_ue_error",
    ),
    (
        Counter::Ext(ExtNcCounter::HwErrNcUe),
        SysfsGroup::Status,
        "hw_nc_ue_error",
    ),
    (
        Counter::Ext(ExtNcCounter::HwErrDmaAbort),
        SysfsGroup::Status,
        "hw_dma_abort_error",
    ),
    (
        Counter::Ext(ExtNcCounter::ErrSwNqOverflow),
        SysfsGroup::Status,
        "execute_sw_nq_overflow",
    ),
    (
        Counter::Ext(ExtNcCounter::ErrSwSemaphoreError),
        SysfsGroup::Status,
        "execute_sw_semaphore_error",
    ),
    (
        Counter::Ext(ExtNcCounter::ErrSwEventError),
        SysfsGroup::Status,
        "execute_sw_event_error",
    ),
    (
        Counter::Ext(ExtNcCounter::ErrSwPsumCollision),
        SysfsGroup::Status,
        "execute_sw_psum_collision",
    ),
    (
        Counter::Ext(ExtNcCounter::ErrSwSequencerFatal),
        SysfsGroup::Status,
        "execute_sw_sequencer_fatal",
    ),
    (
        Counter::Ext(ExtNcCounter::HwErrRepairableHbmUe),
        SysfsGroup::Status,
        "hw_repairable_hbm_ue_error",
    ),
    (
        Counter::Nc(NcCounter::ModelLoadCount),
        SysfsGroup::OtherInfo,
        "model_load_count",
    ),
    (
        Counter::Nc(NcCounter::InferenceCount),
        SysfsGroup::OtherInfo,
        "inference_count",
    ),
    (
        Counter::Nc(NcCounter::MacCount),
        SysfsGroup::OtherInfo,
        "flop_count",
    ),
    (
        Counter::Nc(NcCounter::TimeInUse),
        SysfsGroup::OtherInfo,
        "nc_time_in_use",
    ),
];

impl Counter {
    /// The per-core counter index (what `nds_increment_nc_counter` takes).
    pub const fn index(self) -> usize {
        match self {
            Self::Nc(counter) => counter.index(),
            Self::Ext(counter) => counter.index(),
        }
    }

    /// The C enumerator name, e.g. `NDS_NC_COUNTER_INFER_COMPLETED`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Nc(counter) => counter.name(),
            Self::Ext(counter) => counter.name(),
        }
    }

    /// The sysfs node this counter is aggregated into, if it has one.
    pub fn sysfs_node(self) -> Option<SysfsNode> {
        SYSFS_NODES
            .iter()
            .find(|(counter, _, _)| *counter == self)
            .map(|&(_, group, name)| SysfsNode { group, name })
    }
}

impl From<NcCounter> for Counter {
    fn from(counter: NcCounter) -> Self {
        Self::Nc(counter)
    }
}

impl From<ExtNcCounter> for Counter {
    fn from(counter: ExtNcCounter) -> Self {
        Self::Ext(counter)
    }
}

impl fmt::Display for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
