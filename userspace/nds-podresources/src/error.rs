//! Why a call to the kubelet failed.

use std::path::PathBuf;
use std::time::Duration;

/// Why `List` gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket could not be connected to (absent, refused, not a gRPC server).
    #[error("cannot connect to the kubelet at {}: {source}", socket.display())]
    Connect {
        /// The socket.
        socket: PathBuf,
        /// The underlying error (its own source says why).
        #[source]
        source: tonic::transport::Error,
    },
    /// The kubelet answered with an error status.
    #[error("List at {}: {source}", socket.display())]
    List {
        /// The socket.
        socket: PathBuf,
        /// The status (boxed: it is large).
        #[source]
        source: Box<tonic::Status>,
    },
    /// No answer within the deadline.
    #[error("no answer from the kubelet at {} within {deadline:?}", socket.display())]
    Deadline {
        /// The socket.
        socket: PathBuf,
        /// The deadline.
        deadline: Duration,
    },
}
