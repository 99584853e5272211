//! `v1.PodResourcesLister` served on a unix socket as the kubelet serves it (gRPC over
//! HTTP/2), for fakes of the kubelet.

use std::io;

use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio::net::UnixListener;

use crate::v1::pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer};

/// Answers every connection to `listener` with `lister`, each connection a task of its own,
/// until accepting fails. Needs a tokio runtime with I/O enabled.
///
/// # Errors
///
/// Accepting a connection failed.
pub async fn serve<L: PodResourcesLister>(listener: UnixListener, lister: L) -> io::Result<()> {
    let service = PodResourcesListerServer::new(lister);
    loop {
        let (stream, _) = listener.accept().await?;
        let service = TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            // A client that goes away ends its own connection only.
            let _ = http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
