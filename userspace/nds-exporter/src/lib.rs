//! The Prometheus side of the monitor, a view of the sampler's stream ([`exporter::Exporter`],
//! a `nds_sampler::Consumer`): the families declared once in `nds-metric-table`, with the
//! metric names and labels of neuron-monitor's companion exporter and this monitor's own
//! `nds_*` families; the counters that stay monotonic for the life of the exporter
//! ([`counters`]), fed per tenure ([`feeds`], exact to a tenure's end where the kernel's
//! ledger recorded it), per device ([`devices`]) and by the monitor itself ([`own`]); the pod,
//! namespace and container labels from the kubelet's PodResources API ([`pods`]); the gauges
//! of the latest report ([`prometheus`]); and the one text encoder that writes every line of
//! the exposition ([`encoder`]). It imports the stream of `nds-sampler`, the table of
//! `nds-metric-table`, the document of `nds-document`, the process metrics of `nds-host` and
//! the mapping of `nds-podresources`; only the tools that export import it.

#![warn(missing_docs)]

// Floor 0: the text encoder, the counters.
pub mod counters;
pub mod encoder;
// Floor 1: the families, pod attribution.
pub mod families;
pub mod pods;
// Floor 2: what a tenure, the devices and the monitor itself feed.
pub mod devices;
pub mod feeds;
pub mod own;
// Floor 3: the gauges and the exposition.
pub mod prometheus;
// Floor 4: the view of the stream.
pub mod exporter;

pub use exporter::Exporter;
