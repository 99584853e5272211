//! The crate's error type.

use std::io;
use std::path::PathBuf;

/// Why a sysfs file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a file or listing a directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A file's contents did not have the expected shape.
    #[error("{}: cannot parse {text:?}: {reason}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The offending text (one line).
        text: String,
        /// What was expected.
        reason: &'static str,
    },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
