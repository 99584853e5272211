//! The sampling loop that nds-monitor and nds-top share: the [`Monitor`] follows every owned
//! slab of its [`Source`] between reports (attaching read-only, ending an attachment whose
//! slab moved to another owner and withholding its numbers, sampling latencies and counters,
//! following the devices' tenure ledgers) and builds a `MonitorDocument` whenever a group of
//! its plan falls due. What it observes goes as one stream ([`stream`]) to its views: the
//! document's ([`document`]) and a [`Consumer`] of the tool's (the exporter). It imports the
//! slabs (`nds-slabs`), the document and its groups (`nds-document`) and the host readers
//! (`nds-host`); nothing of the exporter, and nothing imports it but the exporter and the
//! tools.

#![warn(missing_docs)]

// Floor 0: where the monitor reads, the ledgers, the stream's events.
pub mod ledger;
pub mod source;
pub mod stream;
// Floor 1: an attached slab, the document's view, the system groups.
pub mod attachment;
pub mod document;
pub mod system;
// Floor 2: the loop.
pub mod monitor;

pub use ledger::Ledger;
pub use monitor::Monitor;
pub use source::Source;
pub use stream::Consumer;
