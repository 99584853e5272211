//! The crate's error type.

use std::io;
use std::path::PathBuf;

/// Everything that can stop the load generator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A datastore operation failed.
    #[error("datastore: {0}")]
    Datastore(#[from] nds::Error),
    /// Reading the kernel's sysfs tree failed.
    #[error("sysfs: {0}")]
    Sysfs(#[from] nds_sysfs::Error),
    /// A file could not be read or written, or a process could not be started.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A JSON document could not be parsed or produced.
    #[error("{}: {source}", path.display())]
    Json {
        /// The file (or `-` for a pipe).
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A `--mix` specification was malformed.
    #[error("invalid status mix {spec:?}: {reason}")]
    Mix {
        /// The specification.
        spec: String,
        /// What was wrong.
        reason: String,
    },
    /// The producer's slab does not hold what it recorded writing.
    #[error("self-check failed: {0}")]
    SelfCheck(String),
    /// `compare` found counters where the kernel disagrees with the reports.
    #[error("{0} counters differ between the reports and the kernel's totals")]
    Mismatch(usize),
    /// A producer process failed.
    #[error("producer {tag} failed: {reason}")]
    Producer {
        /// Its tag.
        tag: String,
        /// What happened.
        reason: String,
    },
}

impl Error {
    /// An [`Error::Io`] with context.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
