//! OTLP export of the monitor's metrics through the OpenTelemetry SDK (`opentelemetry`,
//! `opentelemetry_sdk`, `opentelemetry-otlp`): the same families and labels as the Prometheus
//! exposition, pushed to an OpenTelemetry or ADOT collector, counters with cumulative
//! temporality.
//!
//! It reads the exposition the monitor publishes ([`exposition`]) rather than the monitor's
//! state, so that a collector and a scraper of `/metrics` see the same series with the same
//! values at the same sample, and it depends on no crate of the workspace. [`OtlpExport`]
//! sends it ([`export`]), histograms replayed as measurements ([`replay`]).

#![warn(missing_docs)]

// Floor 0: the exposition read back, errors.
mod error;
pub mod exposition;
// Floor 1: histograms as measurements.
pub mod replay;
// Floor 2: the export.
pub mod export;

pub use error::Error;
pub use export::{OtlpExport, OtlpSettings};
