//! `nds-monitor health`: the node-problem-detector check. It asks a running `serve` for its
//! verdicts (`GET /api/v1/devices`, over HTTP or HTTPS) and says what they mean the way NPD's
//! custom plugin monitors read a check: exit 0 when every device is healthy, 1 when one is
//! unhealthy, 2 when one is unknown or the exporter cannot be asked, and the reason on the
//! first line of the output.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// What the check found, as its exit code says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every device is healthy.
    Ok = 0,
    /// A device is unhealthy.
    Problem = 1,
    /// A device is unknown, or the verdicts could not be had.
    Unknown = 2,
}

/// Where the exporter is.
struct Target<'a> {
    tls: bool,
    host: &'a str,
    port: u16,
}

fn target(url: &str) -> Result<Target<'_>, String> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(format!("{url}: not an http:// or https:// URL"));
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => {
            let port = port
                .parse()
                .map_err(|_| format!("{url}: {port:?} is not a port"))?;
            (host, port)
        }
        _ => (authority, if tls { 443 } else { 80 }),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("{url}: no host"));
    }
    Ok(Target { tls, host, port })
}

fn tls_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    let ca_file = ca_file.ok_or("an https URL needs --ca-file (the exporter's CA)")?;
    let mut roots = RootCertStore::empty();
    let certificates = CertificateDer::pem_file_iter(ca_file)
        .map_err(|e| format!("{}: {e}", ca_file.display()))?;
    for certificate in certificates {
        let certificate = certificate.map_err(|e| format!("{}: {e}", ca_file.display()))?;
        roots
            .add(certificate)
            .map_err(|e| format!("{}: {e}", ca_file.display()))?;
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Reads `reader` to its end, the socket under it (`socket`) waiting no longer than until
/// `deadline` in all: a server that answers slowly, a little at a time, is cut off too.
fn read_until<R: Read>(
    reader: &mut R,
    socket: impl Fn(&R) -> &TcpStream,
    deadline: Instant,
) -> std::io::Result<Vec<u8>> {
    let mut answer = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        socket(reader).set_read_timeout(Some(left))?;
        match reader.read(&mut buffer) {
            Ok(0) => return Ok(answer),
            Ok(read) => answer.extend_from_slice(&buffer[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

/// The body of `GET /api/v1/devices` at `url`, asked and answered within `timeout`.
fn fetch(url: &str, ca_file: Option<&Path>, timeout: Duration) -> Result<String, String> {
    let deadline = Instant::now() + timeout;
    let target = target(url)?;
    let address = (target.host, target.port)
        .to_socket_addrs()
        .map_err(|e| format!("{url}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url}: no address"))?;
    let stream =
        TcpStream::connect_timeout(&address, timeout).map_err(|e| format!("{url}: {e}"))?;
    // The TLS handshake reads and writes within the deadline too.
    let left = Some(
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1)),
    );
    let timeouts = stream
        .set_read_timeout(left)
        .and_then(|()| stream.set_write_timeout(left));
    timeouts.map_err(|e| format!("{url}: {e}"))?;
    let request = format!(
        "GET /api/v1/devices HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\n\
         Connection: close\r\n\r\n",
        target.host
    );
    let exchanged = if target.tls {
        let name =
            ServerName::try_from(target.host.to_owned()).map_err(|e| format!("{url}: {e}"))?;
        let connection =
            ClientConnection::new(tls_config(ca_file)?, name).map_err(|e| format!("{url}: {e}"))?;
        let mut tls = StreamOwned::new(connection, stream);
        tls.write_all(request.as_bytes())
            .and_then(|()| read_until(&mut tls, |tls| &tls.sock, deadline))
    } else {
        let mut stream = stream;
        stream
            .write_all(request.as_bytes())
            .and_then(|()| read_until(&mut stream, |stream| stream, deadline))
    };
    let answer = exchanged.map_err(|e| match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
            format!("{url}: no answer within {timeout:?}")
        }
        _ => format!("{url}: {e}"),
    })?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{url}: not an HTTP answer"))?;
    let status = head.split_whitespace().nth(1).unwrap_or_default();
    if status != "200" {
        let why = body.lines().next().unwrap_or_default();
        return Err(format!("{url} answered {status}: {why}"));
    }
    Ok(body.to_owned())
}

/// The outcome and first line of the verdicts in `body`.
fn judge(body: &str) -> (Outcome, String) {
    let Ok(document) = serde_json::from_str::<Value>(body) else {
        return (Outcome::Unknown, "the answer is not JSON".to_owned());
    };
    let Some(devices) = document["devices"].as_array() else {
        return (Outcome::Unknown, "the answer has no devices".to_owned());
    };
    if devices.is_empty() {
        return (Outcome::Unknown, "no Neuron device was judged".to_owned());
    }
    let describe = |device: &Value| {
        format!(
            "neuron{} {}: {} (action: {})",
            device["neuron_device_index"],
            device["state"].as_str().unwrap_or("?"),
            device["message"].as_str().unwrap_or_default(),
            device["action"].as_str().unwrap_or("?"),
        )
    };
    let with = |state: &str| -> Vec<&Value> {
        devices
            .iter()
            .filter(|device| device["state"] == state)
            .collect()
    };
    let more = |found: &[&Value]| match found.len() {
        0 | 1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    let unhealthy = with("unhealthy");
    if let Some(first) = unhealthy.first() {
        return (Outcome::Problem, describe(first) + &more(&unhealthy));
    }
    let unknown = with("unknown");
    if let Some(first) = unknown.first() {
        return (Outcome::Unknown, describe(first) + &more(&unknown));
    }
    let warned: Vec<&Value> = devices
        .iter()
        .filter(|device| device["reason"] != "no_errors")
        .collect();
    let mut message = format!("{} Neuron devices healthy", devices.len());
    if let Some(first) = warned.first() {
        message += &format!("; {}{}", describe(first), more(&warned));
    }
    (Outcome::Ok, message)
}

/// Checks the verdicts of the exporter at `url`.
#[must_use]
pub fn check(url: &str, ca_file: Option<&Path>, timeout: Duration) -> (Outcome, String) {
    match fetch(url, ca_file, timeout) {
        Ok(body) => judge(&body),
        Err(why) => (Outcome::Unknown, format!("cannot ask the exporter: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_scheme_a_host_and_a_port() {
        let plain = target("http://127.0.0.1:9200/ignored").unwrap();
        assert_eq!(
            (plain.tls, plain.host, plain.port),
            (false, "127.0.0.1", 9200)
        );
        let tls = target("https://[::1]").unwrap();
        assert_eq!((tls.tls, tls.host, tls.port), (true, "::1", 443));
        for bad in ["ftp://x", "http://:80", "http://h:port"] {
            assert!(target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_worst_device_decides_and_is_named_first() {
        let body = |states: &[(&str, &str)]| {
            let devices: Vec<Value> = states
                .iter()
                .enumerate()
                .map(|(index, (state, reason))| {
                    serde_json::json!({"neuron_device_index": index, "state": state,
                        "reason": reason, "action": "reset", "message": "m"})
                })
                .collect();
            serde_json::json!({ "devices": devices }).to_string()
        };
        let (outcome, message) = judge(&body(&[("healthy", "no_errors"); 2]));
        assert_eq!(
            (outcome, message.as_str()),
            (Outcome::Ok, "2 Neuron devices healthy")
        );
        let (outcome, message) = judge(&body(&[
            ("healthy", "no_errors"),
            ("unknown", "unreadable"),
            ("unhealthy", "dma_aborts"),
            ("unhealthy", "dma_aborts"),
        ]));
        assert_eq!(outcome, Outcome::Problem);
        assert_eq!(message, "neuron2 unhealthy: m (action: reset) (and 1 more)");
        let (outcome, _) = judge(&body(&[
            ("healthy", "no_errors"),
            ("unknown", "unreadable"),
        ]));
        assert_eq!(outcome, Outcome::Unknown);
        let (outcome, message) = judge(&body(&[("healthy", "repairable_hbm_errors")]));
        assert_eq!(outcome, Outcome::Ok);
        assert!(
            message.starts_with("1 Neuron devices healthy; neuron0 healthy"),
            "{message}"
        );
        assert_eq!(judge(&body(&[])).0, Outcome::Unknown);
        assert_eq!(judge("<html>").0, Outcome::Unknown);
    }
}
