//! The host and instance readers of the monitor: the `vcpu_usage` and `memory_info` groups and
//! each process's CPU share from `/proc` ([`host`]), the device type and ECC counters from the
//! Neuron driver's sysfs ([`hardware`]), `instance_info` from EC2 instance metadata
//! ([`imds`]), the exporter's own process metrics ([`process_metrics`]), and where all of it is
//! read ([`HostSource`]). It imports the document types of `nds-document` that its readers
//! fill, and `nds-sysfs`; nothing of the slabs, the exporter or the sampling loop.

#![warn(missing_docs)]

// Floor 0: the readers.
pub mod hardware;
pub mod host;
pub mod imds;
// Floor 1: the process metrics (from host's clock), and where the host is read.
pub mod process_metrics;
pub mod source;

pub use source::HostSource;
