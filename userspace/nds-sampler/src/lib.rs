//! The sampling loop that nds-monitor and nds-top share: the [`Monitor`] follows every owned
//! slab of its [`Source`] between reports (attaching read-only, ending an attachment whose
//! slab moved to another owner and withholding its numbers, sampling latencies and, for an
//! exporter, feeding the counters) and builds a `MonitorDocument` whenever a group of its plan
//! falls due. It imports every crate below it: the slabs (`nds-slabs`), the document and its
//! groups (`nds-document`), the host readers (`nds-host`) and the exporter's counters, feeds
//! and pod attribution (`nds-exporter`); nothing imports it but the tools.

#![warn(missing_docs)]

// Floor 0: everything the monitor reads, and an attached slab.
pub mod attachment;
pub mod source;
// Floor 1: a report's groups from the attached slabs and the system.
pub mod report;
// Floor 2: the loop.
pub mod monitor;

pub use monitor::Monitor;
pub use source::Source;
