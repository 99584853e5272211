//! A minimal HTTP endpoint for Prometheus scrapes: `GET /metrics` renders a fresh report.
//!
//! One connection at a time on the calling thread; requests are small and scrapes rare.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::monitor::Monitor;
use crate::prometheus::{render, CONTENT_TYPE};

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers requests on `listener` until `max_requests` were served (forever if `None`).
pub fn serve(listener: &TcpListener, monitor: &mut Monitor, max_requests: Option<usize>) {
    for (served, stream) in listener.incoming().enumerate() {
        // A failed accept or a client that hung up is that client's problem, not the server's.
        if let Ok(stream) = stream {
            let _ = answer(stream, monitor);
        }
        if max_requests.is_some_and(|max| served + 1 >= max) {
            break;
        }
    }
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
