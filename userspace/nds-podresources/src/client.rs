//! `List` over the kubelet's unix socket.

use std::path::Path;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Endpoint, Uri};

use crate::error::Error;
use crate::v1::pod_resources_lister_client::PodResourcesListerClient;
use crate::v1::{ListPodResourcesRequest, ListPodResourcesResponse};

/// Asks the kubelet listening on `socket` which devices each container holds, on a connection
/// of its own, all within `deadline` (connecting included). Needs a tokio runtime with time
/// and I/O enabled.
///
/// # Errors
///
/// The socket cannot be connected to, the kubelet answered with an error, or nothing came
/// within `deadline`.
pub async fn list(socket: &Path, deadline: Duration) -> Result<ListPodResourcesResponse, Error> {
    tokio::time::timeout(deadline, call(socket, deadline))
        .await
        .unwrap_or_else(|_| {
            Err(Error::Deadline {
                socket: socket.to_owned(),
                deadline,
            })
        })
}

async fn call(socket: &Path, deadline: Duration) -> Result<ListPodResourcesResponse, Error> {
    let path = socket.to_owned();
    let connector = tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move { UnixStream::connect(path).await.map(TokioIo::new) }
    });
    // The endpoint's URI only names the HTTP/2 authority: the connector dials the socket.
    let channel = Endpoint::from_static("http://localhost")
        .connect_with_connector(connector)
        .await
        .map_err(|source| Error::Connect {
            socket: socket.to_owned(),
            source,
        })?;
    let mut request = tonic::Request::new(ListPodResourcesRequest {});
    // Sent as grpc-timeout, so that the kubelet can give up with us.
    request.set_timeout(deadline);
    PodResourcesListerClient::new(channel)
        .list(request)
        .await
        .map(tonic::Response::into_inner)
        .map_err(|status| {
            if timed_out(&status) {
                Error::Deadline {
                    socket: socket.to_owned(),
                    deadline,
                }
            } else {
                Error::List {
                    socket: socket.to_owned(),
                    source: Box::new(status),
                }
            }
        })
}

/// Whether `status` is the channel enforcing the request's own `grpc-timeout`, which races
/// the overall deadline and says the same.
fn timed_out(status: &tonic::Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<tonic::TimeoutExpired>() {
            return true;
        }
        source = error.source();
    }
    false
}
