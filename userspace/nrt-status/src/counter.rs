//! The per-NeuronCore datastore counters a status can feed, and the sysfs node each one is
//! aggregated into when its process releases the datastore.
//!
//! Both are `nds_abi`'s own types, re-exported under the names this crate's tables use, so
//! that no counter index, name or node is spelled twice.

pub use nds_abi::sysfs::{
    CounterSource as Counter, SysfsCounter as SysfsNode, SysfsCounter, SysfsGroup,
};
