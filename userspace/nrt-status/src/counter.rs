//! The per-NeuronCore datastore counters a status can feed, and the sysfs node each one is
//! aggregated into when its process releases the datastore.
//!
//! Counter indices and sysfs node names are owned by `nds_abi`; this module only names which
//! of its counters are meant and never spells an index or a node name itself.

use std::fmt;

use nds_abi::counters::{ExtNcCounter, NcCounter};
use nds_abi::sysfs::{CounterSource, SYSFS_COUNTERS};
pub use nds_abi::sysfs::{SysfsCounter, SysfsGroup};

/// A per-NeuronCore counter: an original NC counter (`NDS_NC_COUNTER_*`) or an extended one
/// (`NDS_EXT_NC_COUNTER_*`). Both live in one per-core index space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counter {
    /// An original per-NeuronCore counter.
    Nc(NcCounter),
    /// An extended per-NeuronCore counter.
    Ext(ExtNcCounter),
}

/// Where a counter surfaces in sysfs: one entry of `nds_abi`'s node table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SysfsNode(&'static SysfsCounter);

impl SysfsNode {
    /// The node name, e.g. `execute_completed_with_error`.
    pub const fn name(self) -> &'static str {
        self.0.name
    }

    /// The directory under `neuron_core<N>/stats/` holding the node.
    pub const fn group(self) -> SysfsGroup {
        self.0.group
    }

    /// The full table entry (including the aggregation scale, 2 for `flop_count`).
    pub const fn entry(self) -> &'static SysfsCounter {
        self.0
    }
}

/// `<group>/<name>`, e.g. `status/success`.
impl fmt::Display for SysfsNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.group().dir_name(), self.name())
    }
}

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

    /// The named counter at a per-core index; `None` for reserved or out-of-range indices.
    pub const fn from_index(index: usize) -> Option<Self> {
        match NcCounter::from_index(index) {
            Some(counter) => Some(Self::Nc(counter)),
            None => match ExtNcCounter::from_index(index) {
                Some(counter) => Some(Self::Ext(counter)),
                None => None,
            },
        }
    }

    /// The sysfs node this counter is aggregated into, if it has one. Counters with none:
    /// latencies, NC time, CC time, device memory usage, and the legacy error classes other
    /// than `ERR_GENERIC`.
    pub fn sysfs_node(self) -> Option<SysfsNode> {
        let source = CounterSource::from(self);
        SYSFS_COUNTERS
            .iter()
            .find(|node| node.source == source)
            .map(SysfsNode)
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

impl From<CounterSource> for Counter {
    fn from(source: CounterSource) -> Self {
        match source {
            CounterSource::Nc(counter) => Self::Nc(counter),
            CounterSource::Ext(counter) => Self::Ext(counter),
        }
    }
}

impl From<Counter> for CounterSource {
    fn from(counter: Counter) -> Self {
        match counter {
            Counter::Nc(counter) => Self::Nc(counter),
            Counter::Ext(counter) => Self::Ext(counter),
        }
    }
}

impl fmt::Display for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
