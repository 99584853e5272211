//! The crate's error type: why a configuration cannot be used.

use std::io;
use std::path::PathBuf;

/// Why a configuration file or period cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration file could not be read.
    #[error("{}: {source}", path.display())]
    ConfigRead {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The configuration is not valid JSON of the expected shape.
    #[error("configuration: {0}")]
    ConfigJson(#[from] serde_json::Error),
    /// A value in the configuration (or a period on the command line) is invalid.
    #[error("configuration: {0}")]
    Config(String),
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
