//! A neuron-monitor for the Neuron DataStore.
//!
//! The [`Monitor`] discovers every owned slab through the module's slot tables (or a directory
//! of slab files), attaches read-only through the `nds` crate, and builds a
//! [`MonitorDocument`] whenever a metric group of its [`Plan`] is due: neuron-monitor's runtime
//! groups per process, with per-period deltas and lifetime totals, and the kernel's aggregated
//! sysfs totals per device and core. A slab whose generation moves (its owner released it, or
//! another process got it) is reported as such and its numbers are withheld.
//!
//! Host groups come from `/proc` ([`host`]), device type and ECC counters from the Neuron
//! driver's sysfs where it exists ([`hardware`]), and `instance_info` from EC2 instance
//! metadata ([`imds`]).
//!
//! [`prometheus::render`] turns a report into the Prometheus text format, with the metric names
//! and labels of neuron-monitor's companion exporter, and [`serve`] answers scrapes over HTTP.
//! [`pods`] labels the series with the pod, namespace and container of each slab from the
//! kubelet's PodResources API.

#![warn(missing_docs)]

pub mod attachment;
pub mod error;
pub mod monitor;
pub mod report;
#[cfg(feature = "serve")]
pub mod serve;
pub mod source;

pub use error::{Error, Result};
pub use monitor::Monitor;
pub use source::Source;
