//! A minimal HTTP endpoint for Prometheus scrapes: `GET /metrics` renders a fresh report.
//!
//! One connection at a time on the calling thread; requests are small and scrapes rare.
//! Between connections the monitor keeps attaching and sampling ([`Monitor::tick`]), so a
//! scrape reports utilization and latencies over the whole interval since the last one.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::monitor::Monitor;
use crate::prometheus::{render, CONTENT_TYPE};

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers requests on `listener` until `max_requests` were served (forever if `None`).
///
/// # Errors
///
/// The listener cannot be made non-blocking.
pub fn serve(
    listener: &TcpListener,
    monitor: &mut Monitor,
    max_requests: Option<usize>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let step = monitor.sampling_step();
    let mut served = 0;
    while max_requests.is_none_or(|max| served < max) {
        match listener.accept() {
            Ok((stream, _)) => {
                // A client that hangs up is that client's problem, not the server's.
                let _ = stream
                    .set_nonblocking(false)
                    .and_then(|()| answer(stream, monitor));
                served += 1;
            }
            Err(error) if error.kind() == ErrorKind::WouldBlock => {
                monitor.tick(Instant::now());
                std::thread::sleep(step);
            }
            // A failed accept (the client gave up, or descriptors ran out) is retried later.
            Err(_) => std::thread::sleep(step),
        }
    }
    Ok(())
}

fn answer(mut stream: TcpStream, monitor: &mut Monitor) -> std::io::Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Skip the headers; nothing in them changes the answer.
    let mut header = String::new();
    while reader.read_line(&mut header)? > 2 {
        header.clear();
    }
    let mut parts = request.split_whitespace();
    let (status, content_type, body) = match (parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics")) => (
            "200 OK",
            CONTENT_TYPE,
            render(&monitor.report_all(Instant::now())),
        ),
        (Some("GET"), Some("/")) => (
            "200 OK",
            "text/plain; charset=utf-8",
            "nds-monitor: metrics at /metrics\n".to_owned(),
        ),
        _ => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found\n".to_owned(),
        ),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}
