//! The binary's error type.

use std::io;

/// Why the monitor cannot run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration file, or a period in it or on the command line, cannot be used.
    #[error(transparent)]
    Plan(#[from] nds_document::Error),
    /// A value on the command line is invalid.
    #[error("configuration: {0}")]
    Config(String),
    /// A report could not be written as JSON.
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A file of the module's sysfs tree or parameters could not be read or parsed.
    #[error("{0}")]
    Sysfs(#[from] nds_sysfs::Error),
    /// Writing the output failed (e.g. the reader of a pipe went away).
    #[error("output: {0}")]
    Output(#[source] io::Error),
    /// Reports were asked for with `--count`, and there was no Neuron device to report on
    /// (the reason was printed when it was found).
    #[error("the reports had no Neuron device to report on")]
    NoDevice,
    /// The certificate or key of `serve --cert-file/--key-file` cannot be used.
    #[error("serve: {0}")]
    Tls(#[from] crate::serve::TlsError),
    /// The thread asking the kubelet for pod attribution could not be started.
    #[error("pod attribution: {0}")]
    PodAttribution(#[source] io::Error),
    /// OTLP export (`serve --otlp-endpoint`) could not be started.
    #[error("serve: {0}")]
    Otlp(#[from] nds_otlp::Error),
    /// The HTTP endpoint could not be set up.
    #[error("serve {address}: {source}")]
    Serve {
        /// The listen address.
        address: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
