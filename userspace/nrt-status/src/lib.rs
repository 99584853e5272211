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
//!
//! ```
//! use nrt_status::{most_severe, report_execution, bridge, MemorySink, NrtStatus};
//!
//! let status = NrtStatus::from_u32(1004);
//! assert_eq!(status.as_str(), "NRT_EXEC_COMPLETED_WITH_ERR");
//! assert_eq!(status.priority().rank(), 3);
//! // 1004 outranks the numerically larger 1206 when the two race.
//! let racing = [NrtStatus::NETWORK_PROXY_FAILURE, status];
//! assert_eq!(most_severe(racing), Some(status));
//!
//! // The bridge: what an execution result adds to NeuronCore 0's counters.
//! let sink = MemorySink::new();
//! report_execution(&sink, 0, status).unwrap();
//! let outcome = bridge::execution_outcome_counter(status).unwrap();
//! assert_eq!(outcome.sysfs_node().unwrap().to_string(), "status/execute_completed_with_error");
//! assert_eq!(sink.get(0, outcome), 1);
//! assert_eq!(sink.get(0, bridge::INFERENCE_COUNT), 1);
//! ```

#![warn(missing_docs)]

// Floor 0: the status space, the counters, the mailbox byte.
pub mod counter;
pub mod mailbox;
pub mod status;
// Floor 1: what is known about one status.
pub mod band;
pub mod errno;
pub mod message;
pub mod priority;
// Floor 2: the decode chain.
pub mod decode;
// Floor 3: the bridge.
pub mod bridge;
// Floor 4: writing bridge events into a datastore.
pub mod sink;
// Floor 5: the in-memory sink of expected totals.
pub mod memory;
// Floor 6: the nrt-status tool's command line.
#[cfg(feature = "cli")]
pub mod cli;

pub use band::Band;
pub use bridge::Latencies;
pub use counter::{Counter, SysfsNode};
pub use memory::MemorySink;
pub use priority::{most_severe, Priority};
pub use sink::{
    report_error_flags, report_execution, report_generic, report_latencies, CounterSink,
};
pub use status::{NrtStatus, ParseStatusError};
