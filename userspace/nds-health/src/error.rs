//! Why the event stream's state could not be kept.

use std::path::PathBuf;

/// An error of the state directory.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file of the state directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The state file is not one.
    #[error("{}: not an event stream state file: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}

/// A result of this crate.
pub type Result<T> = std::result::Result<T, Error>;
