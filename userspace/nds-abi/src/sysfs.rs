//! The per-NeuronCore counters the kernel aggregates from released slabs, with the sysfs
//! node names of the original driver.
//!
//! The kernel module builds its tree
//! `…/neuronN/neuron_core<c>/stats/{status,other_info}/<name>/{total,present}` from these
//! tables, and monitors read it back by the same names, so the names live here once.

use super::counters::{
    ExtNcCounter,
    NcCounter, //
};

/// A per-NeuronCore slab counter, as the sysfs nodes and the metrics path name it: an
/// original NC counter or an extended one, in one per-core index space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterSource {
    /// One of the original 31 NeuronCore counters.
    Nc(NcCounter),
    /// One of the extended NeuronCore counters (index 31 and up).
    Ext(ExtNcCounter),
}

impl CounterSource {
    /// The per-core counter index, as the three-band address function takes it.
    #[must_use]
    pub const fn index(self) -> usize {
        match self {
            Self::Nc(counter) => counter.index(),
            Self::Ext(counter) => counter.index(),
        }
    }

    /// The C enumerator's name, e.g. `NDS_NC_COUNTER_INFER_COMPLETED`.
    #[must_use]
    #[inline]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Nc(counter) => counter.name(),
            Self::Ext(counter) => counter.name(),
        }
    }

    /// The named counter at per-core `index`; `None` for reserved or out-of-range indices.
    #[must_use]
    pub const fn from_index(index: usize) -> Option<Self> {
        match NcCounter::from_index(index) {
            Some(counter) => Some(Self::Nc(counter)),
            None => match ExtNcCounter::from_index(index) {
                Some(counter) => Some(Self::Ext(counter)),
                None => None,
            },
        }
    }

    /// The sysfs node this counter is aggregated into, if it has one.
    #[must_use]
    pub fn sysfs_node(self) -> Option<&'static SysfsCounter> {
        SYSFS_COUNTERS.iter().find(|node| node.source == self)
    }
}

impl core::fmt::Display for CounterSource {
    #[inline]
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which directory under `neuron_core<c>/stats/` a node lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysfsGroup {
    /// `stats/status/`: execution outcomes and errors.
    Status,
    /// `stats/other_info/`: load counts, inference counts, FLOPs, busy time.
    OtherInfo,
}

impl SysfsGroup {
    /// The directory name.
    #[must_use]
    pub const fn dir_name(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::OtherInfo => "other_info",
        }
    }
}

/// One aggregated counter node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysfsCounter {
    /// The node's directory name, e.g. `success`.
    pub name: &'static str,
    /// The directory it lives in.
    pub group: SysfsGroup,
    /// The slab counter it sums.
    pub source: CounterSource,
    /// What one unit of the slab counter is worth: 2 for `flop_count`, since the runtime counts
    /// multiply-accumulates and one MAC is two floating-point operations; 1 otherwise.
    pub scale: u64,
}

/// `<group>/<name>`, e.g. `status/success`.
impl core::fmt::Display for SysfsCounter {
    #[inline]
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}/{}", self.group.dir_name(), self.name)
    }
}

const fn status(name: &'static str, source: CounterSource) -> SysfsCounter {
    SysfsCounter {
        name,
        group: SysfsGroup::Status,
        source,
        scale: 1,
    }
}

const fn other_info(name: &'static str, source: CounterSource, scale: u64) -> SysfsCounter {
    SysfsCounter {
        name,
        group: SysfsGroup::OtherInfo,
        source,
        scale,
    }
}

/// Number of status nodes per core.
pub const SYSFS_STATUS_COUNTER_COUNT: usize = 24;

/// Number of other_info nodes per core that the datastore feeds.
pub const SYSFS_OTHER_INFO_COUNTER_COUNT: usize = 4;

/// Every aggregated node per core: the status table in the original driver's order, then
/// other_info.
pub const SYSFS_COUNTERS: [SysfsCounter;
    SYSFS_STATUS_COUNTER_COUNT + SYSFS_OTHER_INFO_COUNTER_COUNT] = {
    use CounterSource::{
        Ext,
        Nc, //
    };
    [
        status("success", Nc(NcCounter::InferCompleted)),
        status("failure", Nc(NcCounter::GenericFail)),
        status("timeout", Nc(NcCounter::InferTimedOut)),
        status("exec_bad_input", Nc(NcCounter::InferIncorrectInput)),
        status("hw_error", Nc(NcCounter::ErrHw)),
        status(
            "execute_completed_with_error",
            Nc(NcCounter::InferCompletedWithErr),
        ),
        status(
            "execute_completed_with_num_error",
            Nc(NcCounter::InferCompletedWithNumErr),
        ),
        status("generic_error", Nc(NcCounter::ErrGeneric)),
        status("resource_error", Nc(NcCounter::ErrResource)),
        status("resource_nc_error", Nc(NcCounter::ErrResourceNc)),
        status("execute_failed_to_queue", Nc(NcCounter::InferFailedToQueue)),
        status("invalid_error", Nc(NcCounter::ErrInvalid)),
        status(
            "unsupported_neff_version",
            Nc(NcCounter::ErrUnsupportedNeffVersion),
        ),
        status("oob_error", Nc(NcCounter::Oob)),
        status("hw_collectives_error", Ext(ExtNcCounter::HwErrCollectives)),
        status("hw_hbm_ue_error", Ext(ExtNcCounter::HwErrHbmUe)),
        status("hw_nc_ue_error", Ext(ExtNcCounter::HwErrNcUe)),
        status("hw_dma_abort_error", Ext(ExtNcCounter::HwErrDmaAbort)),
        status("execute_sw_nq_overflow", Ext(ExtNcCounter::ErrSwNqOverflow)),
        status(
            "execute_sw_semaphore_error",
            Ext(ExtNcCounter::ErrSwSemaphoreError),
        ),
        status("execute_sw_event_error", Ext(ExtNcCounter::ErrSwEventError)),
        status(
            "execute_sw_psum_collision",
            Ext(ExtNcCounter::ErrSwPsumCollision),
        ),
        status(
            "execute_sw_sequencer_fatal",
            Ext(ExtNcCounter::ErrSwSequencerFatal),
        ),
        status(
            "hw_repairable_hbm_ue_error",
            Ext(ExtNcCounter::HwErrRepairableHbmUe),
        ),
        other_info("model_load_count", Nc(NcCounter::ModelLoadCount), 1),
        other_info("inference_count", Nc(NcCounter::InferenceCount), 1),
        other_info("flop_count", Nc(NcCounter::MacCount), 2),
        other_info("nc_time_in_use", Nc(NcCounter::TimeInUse), 1),
    ]
};

/// The node named `name` in `group`, if there is one.
#[must_use]
pub fn sysfs_counter(group: SysfsGroup, name: &str) -> Option<&'static SysfsCounter> {
    SYSFS_COUNTERS
        .iter()
        .find(|counter| counter.group == group && counter.name == name)
}
