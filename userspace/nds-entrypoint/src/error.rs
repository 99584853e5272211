//! The entrypoint's errors.

use std::path::PathBuf;

/// What can stop the entrypoint before the monitor runs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or changing this process's capability sets failed.
    #[error("passing CAP_PERFMON on to nds-monitor: {0}")]
    Capability(#[from] caps::errors::CapsError),
    /// The path of this program, next to which the monitor is looked for, is unknown.
    #[error("locating this program (to find nds-monitor next to it): {0}")]
    OwnPath(#[source] std::io::Error),
    /// As process 1, the termination signals could not be blocked for forwarding.
    #[error("blocking the signals to pass on to nds-monitor: {0}")]
    Init(#[source] std::io::Error),
    /// `execve` of the monitor failed.
    #[error("starting {}: {source}", monitor.display())]
    Exec {
        /// The program that could not be started.
        monitor: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The entrypoint's result type.
pub type Result<T> = std::result::Result<T, Error>;
