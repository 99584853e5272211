//! The Prometheus side of the monitor: the text exposition of a report ([`prometheus`]) of the
//! families declared once in `nds-metric-table`, with the metric names and labels of
//! neuron-monitor's companion exporter and this monitor's own `nds_*` families, the counters
//! that stay monotonic for the life of the exporter ([`counters`], fed per slab by [`feeds`]),
//! and the pod, namespace and container labels of each slab's series from the kubelet's
//! PodResources API ([`pods`]). It imports the table of `nds-metric-table`, the document of
//! `nds-document`, the process metrics of `nds-host` and the mapping of `nds-podresources`;
//! never the sampling loop, which feeds it.
//!
//! The text encoder is this crate's own, not a crate's: the shape to match is what the
//! companion exporter's Python client writes, format 0.0.4 with `_created` as a gauge family of
//! its own beside the counter family (`# TYPE execution_status_created gauge`), which the
//! original's scrapers already see. The Rust crates' encoders write the families of their own
//! registries; `prometheus-client` was built for OpenMetrics, where `_created` is a sample
//! inside the counter's family, not a family.

#![warn(missing_docs)]

// Floor 0: the counters and label sets.
pub mod counters;
pub mod labels;
// Floor 1: the families, pod attribution.
pub mod families;
pub mod pods;
// Floor 2: what a slab feeds, the exposition.
pub mod feeds;
pub mod prometheus;
