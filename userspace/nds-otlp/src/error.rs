//! Why OTLP export could not start.

/// Why [`crate::OtlpExport::start`] failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The OTLP exporter could not be built (a malformed endpoint, its HTTP client).
    #[error("OTLP exporter for {endpoint}: {source}")]
    Exporter {
        /// The collector's endpoint.
        endpoint: String,
        /// What the SDK said.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// The export thread could not be started.
    #[error("OTLP export thread: {0}")]
    Thread(#[source] std::io::Error),
}
