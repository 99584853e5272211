//! `instance_info` from the EC2 instance metadata service (IMDSv2), queried in the background
//! and cached, so that a slow or absent service never delays or breaks a report.
//!
//! The service is queried only on an EC2 instance (its DMI data says so) or when an endpoint is
//! configured; elsewhere the fields stay empty and `error` says why. IMDSv2 is a `PUT` for a
//! session token, then one `GET` per field with that token; each request, from resolving the
//! endpoint's name to the last byte of the answer, has one short deadline. A query that
//! failed, or left a required field empty (the service answered an error for it), is retried,
//! after 1 s, then twice as long each time up to a minute; the first complete answer is kept
//! for the life of the process (these values do not change while an instance runs).
//!
//! The requests are hyper's HTTP/1 client (already the exporter's HTTP stack) on a
//! current-thread tokio runtime owned by the query's thread, so the public API stays
//! synchronous; tokio resolves names off that thread, which lets one timeout cover
//! resolution too (`getaddrinfo` itself has none).

use std::path::Path;
use std::pin::pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper::header::{CONNECTION, CONTENT_LENGTH, HOST};
use hyper::http::uri::Scheme;
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

use nds_document::document::InstanceInfo;

/// The metadata service's link-local address.
pub const DEFAULT_ENDPOINT: &str = "http://169.254.169.254";

/// Where the kernel publishes the machine's DMI strings.
pub const DEFAULT_DMI_DIR: &str = "/sys/class/dmi/id";

/// Limit of one request: resolving the name, connecting, sending and reading the answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the first retry waits; each later one waits twice as long, up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two queries.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// Larger answers are not metadata values.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Whether and where to query instance metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataSetting {
    /// Query [`DEFAULT_ENDPOINT`] if DMI says this is an EC2 instance.
    Auto,
    /// Never query.
    Off,
    /// Query this `http://host[:port]` endpoint, whatever DMI says.
    Endpoint(String),
}

impl FromStr for MetadataSetting {
    type Err = MetadataError;

    /// `auto`, `off`, or an `http://host[:port]` endpoint.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(Self::Auto),
            "off" => Ok(Self::Off),
            url => {
                Endpoint::parse(url)?;
                Ok(Self::Endpoint(url.to_owned()))
            }
        }
    }
}

/// Why instance metadata could not be had.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The endpoint is not `http://host[:port]`.
    #[error("{0:?} is not auto, off or an http://host[:port] endpoint")]
    BadEndpoint(String),
    /// Resolving the endpoint's name or connecting to it failed.
    #[error("{path}: {source}")]
    Io {
        /// The request path.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The exchange failed after connecting: not HTTP, cut short, or the connection broke.
    #[error("{path}: {source}")]
    Http {
        /// The request path.
        path: String,
        /// hyper's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The request could not be made from what an earlier answer said (a token or MAC that
    /// is no header value or path).
    #[error("{path}: cannot be requested: {source}")]
    Request {
        /// The request path.
        path: String,
        /// Why the request is not valid HTTP.
        #[source]
        source: hyper::http::Error,
    },
    /// No complete answer came within the request's deadline.
    #[error("{path}: no complete answer within {}", humantime::format_duration(*.limit))]
    TimedOut {
        /// The request path.
        path: String,
        /// The deadline, from name resolution to the end of the body.
        limit: Duration,
    },
    /// The answer's body is larger than any metadata value.
    #[error("{path}: answer larger than {limit} bytes")]
    TooLarge {
        /// The request path.
        path: String,
        /// The largest body read.
        limit: usize,
    },
    /// The service answered something that is not a metadata value.
    #[error("{path}: malformed answer ({reason})")]
    Malformed {
        /// The request path.
        path: String,
        /// What was wrong.
        reason: &'static str,
    },
    /// The service refused the session token request.
    #[error("{path}: HTTP status {status}")]
    Status {
        /// The request path.
        path: String,
        /// The status code.
        status: u16,
    },
}

/// A parsed `http://host[:port]` endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Endpoint {
    /// `host:port`, for connecting and for the `Host` header.
    authority: String,
}

impl Endpoint {
    /// `url` read by http's URI parser: the scheme `http`, an authority that is a host
    /// (a name, an IPv4 address or a bracketed IPv6 one) with or without a port, and no more
    /// than a `/` after it.
    fn parse(url: &str) -> Result<Self, MetadataError> {
        let bad = || MetadataError::BadEndpoint(url.to_owned());
        // The parser drops a fragment without a word; an endpoint has none.
        if url.contains('#') {
            return Err(bad());
        }
        let uri: Uri = url.parse().map_err(|_| bad())?;
        let bare = uri.path_and_query().is_none_or(|rest| rest == "/");
        let authority = match uri.authority() {
            Some(authority) if uri.scheme() == Some(&Scheme::HTTP) && bare => authority,
            _ => return Err(bad()),
        };
        let host = authority.host();
        // After the host, only `:port` may follow (a user before it is refused too).
        let port = match authority.as_str().strip_prefix(host) {
            Some("") => 80,
            Some(_) => authority.port_u16().ok_or_else(bad)?,
            None => return Err(bad()),
        };
        Ok(Self {
            authority: format!("{host}:{port}"),
        })
    }

    /// One request with one extra header; the status and the body. Everything from name
    /// resolution to the end of the body is within [`REQUEST_TIMEOUT`].
    async fn request(
        &self,
        method: Method,
        path: &str,
        header: (&str, &str),
    ) -> Result<(u16, String), MetadataError> {
        tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(method, path, header))
            .await
            .unwrap_or_else(|_| {
                Err(MetadataError::TimedOut {
                    path: path.to_owned(),
                    limit: REQUEST_TIMEOUT,
                })
            })
    }

    /// [`Self::request`] without its deadline.
    async fn exchange(
        &self,
        method: Method,
        path: &str,
        header: (&str, &str),
    ) -> Result<(u16, String), MetadataError> {
        let http = |source: hyper::Error| MetadataError::Http {
            path: path.to_owned(),
            source: source.into(),
        };
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, &self.authority)
            .header(header.0, header.1)
            // No body, and one request per connection: the service's close ends the connection.
            .header(CONTENT_LENGTH, "0")
            .header(CONNECTION, "close")
            .body(Empty::<Bytes>::new())
            .map_err(|source| MetadataError::Request {
                path: path.to_owned(),
                source,
            })?;
        // Tries each address the name resolves to, in turn.
        let stream = TcpStream::connect(self.authority.as_str())
            .await
            .map_err(|source| MetadataError::Io {
                path: path.to_owned(),
                source,
            })?;
        let (mut sender, connection) =
            http1::handshake(TokioIo::new(stream)).await.map_err(http)?;
        let answer = async {
            let response = sender.send_request(request).await.map_err(http)?;
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|source| {
                    if source.is::<LengthLimitError>() {
                        MetadataError::TooLarge {
                            path: path.to_owned(),
                            limit: MAX_RESPONSE_BYTES,
                        }
                    } else {
                        MetadataError::Http {
                            path: path.to_owned(),
                            source,
                        }
                    }
                })?;
            Ok::<_, MetadataError>((status, body.to_bytes()))
        };
        // The connection is driven here rather than spawned, so that dropping this future at
        // the deadline closes the socket at once. Once it has ended (all read, or failed), the
        // answer has what it needs, or the error.
        let (mut answer, mut connection) = (pin!(answer), pin!(connection));
        let (status, body) = tokio::select! {
            answer = &mut answer => answer?,
            _ = &mut connection => answer.await?,
        };
        let text = String::from_utf8(body.into()).map_err(|_| malformed(path, "not UTF-8"))?;
        Ok((status, text))
    }
}

fn malformed(path: &str, reason: &'static str) -> MetadataError {
    MetadataError::Malformed {
        path: path.to_owned(),
        reason,
    }
}

/// A metadata value as `instance_info` shows it: one printable line of at most 255 bytes.
fn value_of(path: &str, body: &str) -> Result<String, MetadataError> {
    let value = body.trim();
    if value.len() > 255 || value.chars().any(|c| c.is_control()) {
        return Err(malformed(path, "not a single short line"));
    }
    Ok(value.to_owned())
}

/// Queries every field of `instance_info` at `endpoint`. Transport failures fail the whole
/// query (it is retried); a field the service does not have is left empty, and named in
/// `error` unless neuron-monitor's guide lists it as unavailable on some instances (a
/// required field left empty makes the answer incomplete, so it is retried too).
async fn query(endpoint: &Endpoint) -> Result<InstanceInfo, MetadataError> {
    let token_path = "/latest/api/token";
    let (status, token) = endpoint
        .request(
            Method::PUT,
            token_path,
            ("X-aws-ec2-metadata-token-ttl-seconds", "21600"),
        )
        .await?;
    if status != 200 {
        return Err(MetadataError::Status {
            path: token_path.to_owned(),
            status,
        });
    }
    let token = value_of(token_path, &token)?;
    let mut missing = Vec::new();
    let mut get = async |field: &str, required: bool| -> Result<String, MetadataError> {
        let path = format!("/latest/meta-data/{field}");
        let (status, body) = endpoint
            .request(Method::GET, &path, ("X-aws-ec2-metadata-token", &token))
            .await?;
        match status {
            200 => value_of(&path, &body),
            _ => {
                if required {
                    missing.push(format!("{field} (HTTP {status})"));
                }
                Ok(String::new())
            }
        }
    };
    let mut info = InstanceInfo {
        instance_id: get("instance-id", true).await?,
        instance_type: get("instance-type", true).await?,
        instance_availability_zone: get("placement/availability-zone", true).await?,
        instance_availability_zone_id: get("placement/availability-zone-id", false).await?,
        instance_region: get("placement/region", false).await?,
        ami_id: get("ami-id", true).await?,
        // Needs instance tags in the metadata; neuron-monitor's guide lists it as optional.
        instance_name: get("tags/instance/Name", false).await?,
        ..InstanceInfo::default()
    };
    let mac = get("mac", true).await?;
    if !mac.is_empty() {
        info.subnet_id = get(&format!("network/interfaces/macs/{mac}/subnet-id"), true).await?;
    }
    if !missing.is_empty() {
        info.error = format!("instance metadata has no {}", missing.join(", "));
    }
    Ok(info)
}

/// What DMI says about the machine: `Ok` (why it is EC2) or `Err` (why not).
///
/// # Errors
///
/// A sentence saying why this does not look like an EC2 instance.
pub fn ec2_evidence(dmi_dir: &Path) -> Result<String, String> {
    let read = |name: &str| {
        std::fs::read_to_string(dmi_dir.join(name))
            .map(|text| text.trim().to_owned())
            .ok()
    };
    let vendor = read("sys_vendor");
    if vendor.as_deref() == Some("Amazon EC2") {
        return Ok("DMI sys_vendor is Amazon EC2".to_owned());
    }
    if let Some(tag) = read("board_asset_tag").filter(|tag| tag.starts_with("i-")) {
        return Ok(format!("DMI board_asset_tag is the instance id {tag}"));
    }
    // Xen-based instances predate the Amazon EC2 vendor string.
    if read("bios_version").is_some_and(|v| v.to_lowercase().contains("amazon")) {
        return Ok("DMI bios_version is Amazon's".to_owned());
    }
    Err(match vendor {
        Some(vendor) => format!(
            "not an EC2 instance ({}: {vendor:?})",
            dmi_dir.join("sys_vendor").display()
        ),
        None => format!("not an EC2 instance (no DMI data in {})", dmi_dir.display()),
    })
}

/// The cached `instance_info`, filled in by a background query.
#[derive(Debug)]
pub struct InstanceMetadata {
    current: Arc<Mutex<InstanceInfo>>,
}

impl InstanceMetadata {
    /// Starts according to `setting` (looking at DMI in `dmi_dir` for [`MetadataSetting::Auto`]).
    #[must_use]
    pub fn start(setting: &MetadataSetting, dmi_dir: &Path) -> Self {
        let settled = |error: String| Self {
            current: Arc::new(Mutex::new(InstanceInfo {
                error,
                ..InstanceInfo::default()
            })),
        };
        let url = match setting {
            MetadataSetting::Off => {
                return settled("instance metadata not queried (--instance-metadata off)".into())
            }
            MetadataSetting::Endpoint(url) => url.clone(),
            MetadataSetting::Auto => match ec2_evidence(dmi_dir) {
                Ok(_) => DEFAULT_ENDPOINT.to_owned(),
                Err(why) => {
                    return settled(format!(
                        "{why}: instance metadata not queried (--instance-metadata \
                         http://HOST[:PORT] queries an endpoint)"
                    ))
                }
            },
        };
        let endpoint = match Endpoint::parse(&url) {
            Ok(endpoint) => endpoint,
            Err(error) => return settled(error.to_string()),
        };
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                return settled(format!(
                    "instance metadata not queried (no runtime for the query: {error})"
                ))
            }
        };
        let current = Arc::new(Mutex::new(InstanceInfo {
            error: format!("querying instance metadata at {url}"),
            ..InstanceInfo::default()
        }));
        let shared = Arc::downgrade(&current);
        // Detached: it ends after its first complete answer, or once the monitor is gone.
        let _ = std::thread::Builder::new()
            .name("instance-metadata".into())
            .spawn(move || refresh(&runtime, &shared, &endpoint, &url));
        Self { current }
    }

    /// The latest `instance_info` (never waits).
    #[must_use]
    pub fn current(&self) -> InstanceInfo {
        match self.current.lock() {
            Ok(info) => info.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// Queries until one answer is complete, publishing each outcome into `shared` (an
/// incomplete answer is published too: what it has is better than nothing meanwhile).
fn refresh(runtime: &Runtime, shared: &Weak<Mutex<InstanceInfo>>, endpoint: &Endpoint, url: &str) {
    let mut wait = RETRY_FIRST;
    loop {
        let outcome = runtime.block_on(query(endpoint));
        let Some(current) = shared.upgrade() else {
            return;
        };
        let mut info = match outcome {
            Ok(info) => info,
            Err(error) => InstanceInfo {
                error: format!("instance metadata at {url}: {error}"),
                ..InstanceInfo::default()
            },
        };
        let complete = info.error.is_empty();
        if !complete {
            info.error = format!("{} (retrying in {} s)", info.error, wait.as_secs());
            log::warn!("{}", info.error);
        }
        match current.lock() {
            Ok(mut slot) => *slot = info,
            Err(poisoned) => *poisoned.into_inner() = info,
        }
        drop(current);
        if complete {
            return;
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(RETRY_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:8080/").unwrap().authority,
            "127.0.0.1:8080"
        );
        assert_eq!(
            Endpoint::parse("http://169.254.169.254").unwrap().authority,
            "169.254.169.254:80"
        );
        assert_eq!(
            Endpoint::parse("http://[::1]").unwrap().authority,
            "[::1]:80"
        );
        assert_eq!(
            Endpoint::parse("http://[::1]:9").unwrap().authority,
            "[::1]:9"
        );
        // The scheme is case-insensitive; the host is kept as written.
        assert_eq!(
            Endpoint::parse("HTTP://Metadata.Local").unwrap().authority,
            "Metadata.Local:80"
        );
        for bad in [
            "https://x",
            "ftp://x",
            "http://",
            "http:///",
            "http:x",
            "x",
            "http://a b",
            "http://x/y",
            "http://x?y",
            "http://x/?",
            "http://x#f",
            "http://x/#",
            "http://user@x",
            "http://user:secret@x:80",
            "http://x:",
            "http://x:http",
            "http://x:65536",
            "http://[::1",
            "http://[::1]x",
            "http://x%41",
        ] {
            assert!(bad.parse::<MetadataSetting>().is_err(), "{bad}");
            assert_eq!(
                Endpoint::parse(bad).unwrap_err().to_string(),
                format!("{bad:?} is not auto, off or an http://host[:port] endpoint")
            );
        }
        assert_eq!(
            Endpoint::parse("http://x:65535").unwrap().authority,
            "x:65535"
        );
        assert_eq!(
            "off".parse::<MetadataSetting>().unwrap(),
            MetadataSetting::Off
        );
    }

    /// A service on loopback for one connection: it reads the request's head, then sends
    /// `answer` and closes, or (for `None`) sends nothing and waits for the client to go. The
    /// thread hands back the head and whether the client closed the connection.
    fn serve_once(answer: Option<Vec<u8>>) -> (u16, std::thread::JoinHandle<(String, bool)>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let thread = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            // Bounded, so that a client that never sends or never closes fails the test.
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut head = Vec::new();
            let mut buffer = [0u8; 1024];
            while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => head.extend_from_slice(&buffer[..read]),
                }
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            match answer {
                Some(answer) => {
                    // The client may close early (an answer too large): that is its right.
                    let _ = stream.write_all(&answer);
                    (head, false)
                }
                None => (head, matches!(stream.read(&mut buffer), Ok(0))),
            }
        });
        (port, thread)
    }

    fn runtime() -> Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// One `GET` of `/p` at `http://host:port`.
    fn get(runtime: &Runtime, host: &str, port: u16) -> Result<(u16, String), MetadataError> {
        let endpoint = Endpoint::parse(&format!("http://{host}:{port}")).unwrap();
        runtime.block_on(endpoint.request(Method::GET, "/p", ("X-Test", "1")))
    }

    fn answer_to_get(answer: &[u8]) -> Result<(u16, String), MetadataError> {
        let (port, server) = serve_once(Some(answer.to_vec()));
        let outcome = get(&runtime(), "127.0.0.1", port);
        server.join().unwrap();
        outcome
    }

    #[test]
    fn responses() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcdefg";
        assert_eq!(answer_to_get(ok).unwrap(), (200, "abcde".into()));
        let eof = b"HTTP/1.0 404 Not Found\r\nServer: x\r\n\r\nnothing";
        assert_eq!(answer_to_get(eof).unwrap(), (404, "nothing".into()));
        // hyper reads chunked bodies, which the service does not send but HTTP/1.1 allows.
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        assert_eq!(answer_to_get(chunked).unwrap(), (200, "abc".into()));
        for bad in [
            &b"garbage"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc",
        ] {
            let error = answer_to_get(bad).unwrap_err();
            assert!(
                matches!(error, MetadataError::Http { .. }),
                "{}: {error:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let latin1 = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n\xe9";
        assert!(answer_to_get(latin1)
            .unwrap_err()
            .to_string()
            .contains("not UTF-8"));
        assert!(value_of("p", "two\nlines").is_err());
        assert_eq!(value_of("p", " i-0123\n").unwrap(), "i-0123");
    }

    #[test]
    fn a_request_names_the_host_its_header_and_no_body() {
        let (port, server) = serve_once(Some(b"HTTP/1.1 200 OK\r\n\r\n".to_vec()));
        assert_eq!(
            get(&runtime(), "127.0.0.1", port).unwrap(),
            (200, String::new())
        );
        let head = server.join().unwrap().0.to_ascii_lowercase();
        assert!(head.starts_with("get /p http/1.1\r\n"), "{head}");
        for line in [
            format!("host: 127.0.0.1:{port}\r\n"),
            "x-test: 1\r\n".to_owned(),
            "content-length: 0\r\n".to_owned(),
            "connection: close\r\n".to_owned(),
        ] {
            assert!(head.contains(&line), "{line:?} in {head}");
        }
    }

    #[test]
    fn a_silent_service_is_abandoned_at_the_deadline() {
        // By name, so that resolving it is part of the request (through /etc/hosts: no DNS).
        let (port, server) = serve_once(None);
        // Kept until the end: the socket is closed by the request, not by the runtime's end.
        let runtime = runtime();
        let started = std::time::Instant::now();
        let error = get(&runtime, "localhost", port).unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(error, MetadataError::TimedOut { limit, .. } if limit == REQUEST_TIMEOUT),
            "{error:?}"
        );
        assert_eq!(error.to_string(), "/p: no complete answer within 1s");
        assert!(took >= REQUEST_TIMEOUT, "{took:?}");
        assert!(took < REQUEST_TIMEOUT * 3, "{took:?}");
        let (head, closed) = server.join().unwrap();
        assert!(head.starts_with("GET /p "), "{head}");
        assert!(closed, "the abandoned connection is closed");
        drop(runtime);
    }

    #[test]
    fn an_answer_larger_than_a_metadata_value_is_refused() {
        let answer = |length: usize, header: bool| {
            let head = if header {
                format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n")
            } else {
                "HTTP/1.0 200 OK\r\n\r\n".to_owned()
            };
            [head.into_bytes(), vec![b'x'; length]].concat()
        };
        let (status, body) = answer_to_get(&answer(MAX_RESPONSE_BYTES, true)).unwrap();
        assert_eq!((status, body.len()), (200, MAX_RESPONSE_BYTES));
        for header in [true, false] {
            let error = answer_to_get(&answer(MAX_RESPONSE_BYTES + 1, header)).unwrap_err();
            assert!(matches!(error, MetadataError::TooLarge { .. }), "{error:?}");
            assert_eq!(error.to_string(), "/p: answer larger than 65536 bytes");
        }
    }

    #[test]
    fn dmi_decides() {
        let dir = std::env::temp_dir().join(format!("nds-dmi-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(ec2_evidence(&dir).unwrap_err().contains("no DMI data"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("sys_vendor"), "QEMU\n").unwrap();
        assert!(ec2_evidence(&dir).unwrap_err().contains("\"QEMU\""));
        std::fs::write(dir.join("board_asset_tag"), "i-0abc\n").unwrap();
        assert!(ec2_evidence(&dir).is_ok());
        std::fs::write(dir.join("board_asset_tag"), "\n").unwrap();
        std::fs::write(dir.join("sys_vendor"), "Amazon EC2\n").unwrap();
        assert!(ec2_evidence(&dir).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
