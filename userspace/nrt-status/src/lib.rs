//! `NRT_STATUS`, the Neuron Runtime's public status space, and everything a runtime that writes
//! the Neuron DataStore needs around it:
//!
//! * [`NrtStatus`]: all 28 codes of the public header (0–7, 9–11, 13–15, 101, 1002–1006,
//!   1100, 1200–1206), any other `u32` kept as-is;
//!   [`as_str`](NrtStatus::as_str) (the bare identifier, or `"UNKNOWN"`),
//!   [`message`](NrtStatus::message) and [`user_message`](NrtStatus::user_message);
//! * [`Band`]: the subsystem partition of the value space, and
//!   [`is_retry`](NrtStatus::is_retry);
//! * [`Priority`] and [`most_severe`]: the severity classifier used when statuses race;
//! * [`decode`]: hardware error notification → infer-error subtype → flags → status;
//! * [`mailbox`] and [`errno`]: the firmware mailbox byte and the ioctl errno, the other two
//!   inputs to a status decision;
//! * [`bridge`], [`sink`] and [`memory`]: the status → datastore-counter bridge as tables, the
//!   [`CounterSink`] a datastore handle implements, and an in-memory sink for expected sums;
//!   [`Counter`] names each counter (indices come from `nds_abi`) and its sysfs node.
//!
//! The layers are bridged by literal tables, never by arithmetic on the values.

pub mod band;
pub mod bridge;
pub mod counter;
pub mod decode;
pub mod errno;
pub mod mailbox;
pub mod memory;
pub mod message;
pub mod priority;
pub mod sink;
pub mod status;

pub use band::Band;
pub use bridge::Latencies;
pub use counter::{Counter, SysfsGroup, SysfsNode};
pub use memory::MemorySink;
pub use priority::{most_severe, Priority};
pub use sink::{
    report_error_flags, report_execution, report_generic, report_latencies, CounterSink,
};
pub use status::{NrtStatus, ParseStatusError};
