//! `instance_info` from the EC2 instance metadata service (IMDSv2), queried in the background
//! and cached, so that a slow or absent service never delays or breaks a report.
//!
//! The service is queried only on an EC2 instance (its DMI data says so) or when an endpoint is
//! configured; elsewhere the fields stay empty and `error` says why. IMDSv2 is a `PUT` for a
//! session token, then one `GET` per field with that token; every connection has short
//! timeouts. A query that failed, or left a required field empty (the service answered an
//! error for it), is retried, after 1 s, then twice as long each time up to a minute; the
//! first complete answer is kept for the life of the process (these values do not change
//! while an instance runs).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use nds_document::document::InstanceInfo;

/// The metadata service's link-local address.
pub const DEFAULT_ENDPOINT: &str = "http://169.254.169.254";

/// Where the kernel publishes the machine's DMI strings.
pub const DEFAULT_DMI_DIR: &str = "/sys/class/dmi/id";

/// Limit of one request: connecting, sending and reading the answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the first retry waits; each later one waits twice as long, up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two queries.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// Larger answers are not metadata values.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024;

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
    /// Connecting, sending or receiving failed (or timed out).
    #[error("{path}: {source}")]
    Io {
        /// The request path.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The service answered something that is not a small HTTP response.
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
    fn parse(url: &str) -> Result<Self, MetadataError> {
        let bad = || MetadataError::BadEndpoint(url.to_owned());
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let host = rest.strip_suffix('/').unwrap_or(rest);
        let valid = |c: char| c.is_ascii_alphanumeric() || ".-:[]_".contains(c);
        if host.is_empty() || !host.chars().all(valid) {
            return Err(bad());
        }
        // A port is what follows the last ':' outside an IPv6 literal's brackets.
        let has_port = host
            .rsplit_once(':')
            .is_some_and(|(_, port)| !port.contains(']'));
        let authority = if has_port {
            host.to_owned()
        } else {
            format!("{host}:80")
        };
        Ok(Self { authority })
    }

    /// One request; the status and the body.
    fn request(
        &self,
        method: &str,
        path: &str,
        header: (&str, &str),
    ) -> Result<(u16, String), MetadataError> {
        let io = |source| MetadataError::Io {
            path: path.to_owned(),
            source,
        };
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let address = self
            .authority
            .to_socket_addrs()
            .map_err(io)?
            .next()
            .ok_or_else(|| io(std::io::ErrorKind::AddrNotAvailable.into()))?;
        let mut stream = TcpStream::connect_timeout(&address, REQUEST_TIMEOUT).map_err(io)?;
        let remaining = || {
            let left = deadline.saturating_duration_since(Instant::now());
            // A zero timeout means "none" to the socket: keep at least a millisecond.
            Some(left.max(Duration::from_millis(1)))
        };
        stream.set_write_timeout(remaining()).map_err(io)?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{}: {}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.authority, header.0, header.1
        )
        .map_err(io)?;
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            if Instant::now() >= deadline {
                return Err(io(std::io::ErrorKind::TimedOut.into()));
            }
            stream.set_read_timeout(remaining()).map_err(io)?;
            let read = stream.read(&mut buffer).map_err(io)?;
            if read == 0 {
                break;
            }
            answer.extend_from_slice(buffer.get(..read).unwrap_or_default());
            if answer.len() as u64 > MAX_RESPONSE_BYTES {
                return Err(malformed(path, "too large"));
            }
        }
        parse_response(path, &answer)
    }
}

fn malformed(path: &str, reason: &'static str) -> MetadataError {
    MetadataError::Malformed {
        path: path.to_owned(),
        reason,
    }
}

/// The status and body of an HTTP/1.x response read to the end of the connection.
fn parse_response(path: &str, answer: &[u8]) -> Result<(u16, String), MetadataError> {
    let text = std::str::from_utf8(answer).map_err(|_| malformed(path, "not UTF-8"))?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| malformed(path, "no end of headers"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .filter(|line| line.starts_with("HTTP/1."))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| malformed(path, "no status line"))?;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(malformed(path, "bad header line"));
        };
        if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(malformed(path, "transfer encodings are not supported"));
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| malformed(path, "bad Content-Length"))?,
            );
        }
    }
    let body = match length {
        Some(length) => body
            .get(..length)
            .ok_or_else(|| malformed(path, "shorter than its Content-Length"))?,
        None => body,
    };
    Ok((status, body.to_owned()))
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
fn query(endpoint: &Endpoint) -> Result<InstanceInfo, MetadataError> {
    let token_path = "/latest/api/token";
    let (status, token) = endpoint.request(
        "PUT",
        token_path,
        ("X-aws-ec2-metadata-token-ttl-seconds", "21600"),
    )?;
    if status != 200 {
        return Err(MetadataError::Status {
            path: token_path.to_owned(),
            status,
        });
    }
    let token = value_of(token_path, &token)?;
    let mut missing = Vec::new();
    let mut get = |field: &str, required: bool| -> Result<String, MetadataError> {
        let path = format!("/latest/meta-data/{field}");
        let (status, body) =
            endpoint.request("GET", &path, ("X-aws-ec2-metadata-token", &token))?;
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
        instance_id: get("instance-id", true)?,
        instance_type: get("instance-type", true)?,
        instance_availability_zone: get("placement/availability-zone", true)?,
        instance_availability_zone_id: get("placement/availability-zone-id", false)?,
        instance_region: get("placement/region", false)?,
        ami_id: get("ami-id", true)?,
        // Needs instance tags in the metadata; neuron-monitor's guide lists it as optional.
        instance_name: get("tags/instance/Name", false)?,
        ..InstanceInfo::default()
    };
    let mac = get("mac", true)?;
    if !mac.is_empty() {
        info.subnet_id = get(&format!("network/interfaces/macs/{mac}/subnet-id"), true)?;
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
        let current = Arc::new(Mutex::new(InstanceInfo {
            error: format!("querying instance metadata at {url}"),
            ..InstanceInfo::default()
        }));
        let shared = Arc::downgrade(&current);
        // Detached: it ends after its first complete answer, or once the monitor is gone.
        let _ = std::thread::Builder::new()
            .name("instance-metadata".into())
            .spawn(move || refresh(&shared, &endpoint, &url));
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
fn refresh(shared: &Weak<Mutex<InstanceInfo>>, endpoint: &Endpoint, url: &str) {
    let mut wait = RETRY_FIRST;
    loop {
        let outcome = query(endpoint);
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
        for bad in [
            "https://x",
            "ftp://x",
            "http://",
            "http://a b",
            "http://x/y",
        ] {
            assert!(bad.parse::<MetadataSetting>().is_err(), "{bad}");
        }
        assert_eq!(
            "off".parse::<MetadataSetting>().unwrap(),
            MetadataSetting::Off
        );
    }

    #[test]
    fn responses() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcdefg";
        assert_eq!(parse_response("p", ok).unwrap(), (200, "abcde".into()));
        let eof = b"HTTP/1.0 404 Not Found\r\nServer: x\r\n\r\nnothing";
        assert_eq!(parse_response("p", eof).unwrap().0, 404);
        for bad in [
            &b"garbage"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc",
        ] {
            assert!(parse_response("p", bad).is_err());
        }
        assert!(value_of("p", "two\nlines").is_err());
        assert_eq!(value_of("p", " i-0123\n").unwrap(), "i-0123");
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
