//! The HTTP side of `serve`: hyper on a single-threaded tokio runtime, answering from the
//! published exposition only.
//!
//! Every connection is its own task, so a client that is slow to send or never reads holds
//! nothing but its connection, and each connection is bounded ([`LIMITS`], [`Deadline`]): an
//! idle keep-alive connection lasts `idle_timeout`, a request must arrive within
//! `head_timeout` of its first byte and fit in `max_head_bytes` (hyper answers 431 beyond),
//! its answer be read within `write_timeout`, a TLS handshake take at most
//! `handshake_timeout`. At most `max_connections` are open at once, `max_connections_per_peer`
//! from one address; a new connection is always admitted and closes the quietest one when a
//! bound is reached ([`Admission`]), so no client can keep `/healthz` from being answered.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use nds_exporter::encoder::CONTENT_TYPE as EXPOSITION_TYPE;
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::admission::{Admission, ConnectionId};
use super::deadline::{Deadline, Phases};
use super::Published;

/// What bounds one connection.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Time for an idle keep-alive connection to send its next request.
    pub idle_timeout: Duration,
    /// Time for a request's line and headers to arrive, from its first byte.
    pub head_timeout: Duration,
    /// Time for a response to be read by the client, from its first byte.
    pub write_timeout: Duration,
    /// Time for a TLS handshake.
    pub handshake_timeout: Duration,
    /// Bytes of request line and headers (hyper's smallest read buffer).
    pub max_head_bytes: usize,
    /// Header lines.
    pub max_headers: usize,
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections open at once from one address.
    pub max_connections_per_peer: usize,
    /// How long in-flight requests may finish after SIGTERM.
    pub shutdown_grace: Duration,
}

/// The limits of `serve`.
pub const LIMITS: Limits = Limits {
    // Past Prometheus's common 15 s and 30 s intervals and its server default of 1 min.
    idle_timeout: Duration::from_secs(120),
    head_timeout: Duration::from_secs(10),
    write_timeout: Duration::from_secs(10),
    handshake_timeout: Duration::from_secs(10),
    max_head_bytes: 8192,
    max_headers: 64,
    max_connections: 256,
    max_connections_per_peer: 32,
    shutdown_grace: Duration::from_secs(2),
};

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";
const NDJSON: &str = "application/x-ndjson";

fn body(content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The parameters of `/api/v1/events`: the last number the client saw (0: none), and the
/// stream it belongs to, if the client names one.
fn events_query(query: Option<&str>) -> Result<(u64, Option<&str>), String> {
    let mut since = 0;
    let mut stream = None;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("since", value) => {
                since = value.parse().map_err(|_| {
                    format!("since={value:?}: the last sequence number seen, 0 or more")
                })?;
            }
            ("stream", value) => stream = Some(value),
            (name, _) => return Err(format!("{name:?}: the parameters are since and stream")),
        }
    }
    Ok((since, stream))
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT));
    response
}

/// The answer to `request`, from what is published; nothing else is read or changed.
fn respond(request: &Request<Incoming>, published: &Published) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    let known = matches!(
        path,
        "/" | "/metrics" | "/healthz" | "/readyz" | "/api/v1/devices" | "/api/v1/events"
    );
    if !known {
        return text(StatusCode::NOT_FOUND, format!("not found: {path}\n"));
    }
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let mut response = text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{} is not served; GET or HEAD\n", request.method()),
        );
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match path {
        "/metrics" => body(EXPOSITION_TYPE, published.exposition()),
        "/healthz" => match published.health() {
            Ok(()) => text(StatusCode::OK, "ok\n".to_owned()),
            Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        },
        "/readyz" => match published.readiness() {
            Ok(()) => text(StatusCode::OK, "ready\n".to_owned()),
            Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        },
        "/api/v1/devices" => body(JSON, published.devices()),
        "/api/v1/events" => match events_query(request.uri().query()) {
            Err(why) => text(StatusCode::BAD_REQUEST, format!("{why}\n")),
            Ok((since, stream)) => match published.events_since(since, stream) {
                Some(lines) => body(NDJSON, Bytes::from(lines)),
                None => text(
                    StatusCode::NOT_FOUND,
                    "no event stream is served (--events-capacity 0)\n".to_owned(),
                ),
            },
        },
        _ => text(
            StatusCode::OK,
            "nds-monitor: the exposition at /metrics, liveness at /healthz, readiness at \
             /readyz, verdicts at /api/v1/devices, events at /api/v1/events?since=SEQ\n"
                .to_owned(),
        ),
    }
}

/// What every connection task shares.
struct Shared {
    published: Arc<Published>,
    tls: Option<TlsAcceptor>,
    /// The open connections; a connection's sender is dropped to close it.
    admission: Mutex<Admission<oneshot::Sender<()>>>,
    /// Requests answered, and how many to answer before shutting down.
    answered: AtomicUsize,
    max_requests: Option<usize>,
    shutdown: watch::Sender<bool>,
}

impl Shared {
    fn admission(&self) -> MutexGuard<'_, Admission<oneshot::Sender<()>>> {
        self.admission
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn answered_one(&self) {
        let answered = self.answered.fetch_add(1, Ordering::Relaxed) + 1;
        if self.max_requests.is_some_and(|max| answered >= max) {
            self.shutdown.send_replace(true);
        }
    }
}

/// Returns once the shutdown flag is set.
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    // An error means the sender is gone, which also means stopping.
    let _ = shutdown.wait_for(|&stop| stop).await;
}

const PHASES: Phases = Phases {
    idle: LIMITS.idle_timeout,
    head: LIMITS.head_timeout,
    write: LIMITS.write_timeout,
};

/// Serves one connection until it ends, fails, times out, is evicted or the server shuts
/// down.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    id: ConnectionId,
    evicted: oneshot::Receiver<()>,
    shared: Arc<Shared>,
) {
    let served = async {
        let io = Deadline::new(stream, PHASES);
        match shared.tls.clone() {
            None => http(TokioIo::new(io), peer, id, Arc::clone(&shared)).await,
            Some(acceptor) => {
                match tokio::time::timeout(LIMITS.handshake_timeout, acceptor.accept(io)).await {
                    Ok(Ok(stream)) => {
                        http(TokioIo::new(stream), peer, id, Arc::clone(&shared)).await;
                    }
                    Ok(Err(error)) => log::debug!("{peer}: TLS handshake: {error}"),
                    Err(_) => log::debug!("{peer}: TLS handshake timed out"),
                }
            }
        }
    };
    tokio::select! {
        () = served => {}
        // The sender is dropped when another connection needs the room.
        _ = evicted => log::debug!("{peer}: closed to make room for a new connection"),
    }
    shared.admission().close(id);
}

async fn http<I>(io: I, peer: SocketAddr, id: ConnectionId, shared: Arc<Shared>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut shutdown = shared.shutdown.subscribe();
    let service_shared = Arc::clone(&shared);
    let service = service_fn(move |request: Request<Incoming>| {
        service_shared.admission().active(id);
        let response = respond(&request, &service_shared.published);
        log::trace!(
            "{peer}: {} {} {}",
            request.method(),
            request.uri(),
            response.status()
        );
        service_shared.answered_one();
        async move { Ok::<_, Infallible>(response) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // `Deadline` bounds the idle time and the head separately (see its module).
        .header_read_timeout(None)
        .max_buf_size(LIMITS.max_head_bytes)
        .max_headers(LIMITS.max_headers);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let outcome = tokio::select! {
        outcome = connection.as_mut() => outcome,
        () = stopped(&mut shutdown) => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = outcome {
        log::debug!("{peer}: {error}");
    }
}

/// Accepts connections on `listener` until SIGTERM or SIGINT, or `max_requests` answers;
/// then lets in-flight requests finish (for at most the shutdown grace).
pub async fn run(
    listener: std::net::TcpListener,
    published: Arc<Published>,
    tls: Option<TlsAcceptor>,
    max_requests: Option<usize>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let (shutdown, mut stopping) = watch::channel(false);
    let shared = Arc::new(Shared {
        published,
        tls,
        admission: Mutex::new(Admission::new(
            LIMITS.max_connections,
            LIMITS.max_connections_per_peer,
        )),
        answered: AtomicUsize::new(0),
        max_requests,
        shutdown,
    });
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let (handle, evicted) = oneshot::channel();
                    let admitted = shared.admission().admit(peer.ip(), handle);
                    // Dropping the evicted connection's sender closes it.
                    drop(admitted.evicted);
                    connections.spawn(connection(
                        stream,
                        peer,
                        admitted.id,
                        evicted,
                        Arc::clone(&shared),
                    ));
                }
                // Out of descriptors, or the client gave up: accepting again later may work.
                Err(error) => {
                    log::warn!("accept: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = terminate.recv() => {
                log::info!("SIGTERM: stopping");
                break;
            }
            _ = interrupt.recv() => {
                log::info!("SIGINT: stopping");
                break;
            }
            () = stopped(&mut stopping) => break,
            // Reaps ended connections, so the set holds only open ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    shared.shutdown.send_replace(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(LIMITS.shutdown_grace, drained)
        .await
        .is_err()
    {
        log::info!("connections still open after the shutdown grace were closed");
    }
    Ok(())
}
