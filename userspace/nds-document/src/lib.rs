//! neuron-monitor's document and what fills it: the JSON [`MonitorDocument`] printed every
//! period (its runtime and system groups, with neuron-monitor's keys and types), the
//! configuration file and the [`Plan`] it resolves to, when each group is due, and the
//! building of the runtime groups from two readings of a slab (the period's start and end),
//! of the latency percentiles, and of the kernel's aggregated totals; and the words and rules
//! of the health verdicts (the configuration's `health` key, the document's `neuron_health`
//! group). It imports the slab
//! readings of `nds-slabs` and the datastore's own crates, never the host readers, the
//! exporter or the sampling loop.

#![warn(missing_docs)]

// Floor 0: errors.
pub mod error;
// Floor 1: health verdicts and their rules.
pub mod health;
// Floor 2: the document and the configuration.
pub mod config;
pub mod document;
// Floor 3: when groups are due, latency percentiles.
pub mod latency;
pub mod schedule;
// Floor 4: the runtime groups from slab readings.
pub mod groups;
// Floor 5: the kernel's totals per device and core.
pub mod system;

pub use config::Plan;
pub use document::MonitorDocument;
pub use error::{Error, Result};
