//! The tools as processes: which binary a test runs (the shipped release build when
//! `NDS_TOOLS_BIN_DIR` names its directory, else the one cargo built for the tests), and
//! `nds-monitor serve` as a child with plain HTTP/1.0 requests to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The binary of tool `name` under test: `$NDS_TOOLS_BIN_DIR/<name>` if set (tests/run.sh
/// points it at the release binaries as shipped), else `fallback` (cargo's build).
pub fn tool(name: &str, fallback: &str) -> PathBuf {
    match std::env::var_os("NDS_TOOLS_BIN_DIR") {
        Some(dir) => PathBuf::from(dir).join(name),
        None => PathBuf::from(fallback),
    }
}

/// The `nds-monitor` binary under test.
pub fn nds_monitor() -> PathBuf {
    tool("nds-monitor", env!("CARGO_BIN_EXE_nds-monitor"))
}

/// A response: status line, header lines, body.
#[derive(Debug)]
pub struct Response {
    pub status: String,
    pub headers: Vec<String>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// Sends `request` (a whole HTTP request) to `address` and reads the answer to its end.
pub fn exchange(address: &str, request: &str) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(15)))?;
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    Ok(Response {
        status: lines.next().unwrap_or_default().to_owned(),
        headers: lines.map(str::to_owned).collect(),
        body: body.to_owned(),
    })
}

/// One HTTP/1.0 request (so that the server closes the connection after the answer).
pub fn request(address: &str, method: &str, path: &str) -> std::io::Result<Response> {
    exchange(
        address,
        &format!("{method} {path} HTTP/1.0\r\nHost: {address}\r\n\r\n"),
    )
}

/// `nds-monitor … serve` running, killed when dropped.
pub struct Served {
    child: Option<Child>,
    pub address: String,
    /// `http` or `https`.
    pub scheme: String,
}

impl Served {
    /// Spawns `command` (which ends with `serve …`) and waits for its listening line.
    pub fn start(command: &mut Command) -> Self {
        let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let (scheme, rest) = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|rest| rest.split_once("://"))
            .unwrap_or_else(|| panic!("no listening line: {line:?}"));
        let address = rest
            .strip_suffix("/metrics")
            .unwrap_or_else(|| panic!("{line:?}"))
            .to_owned();
        Self {
            scheme: scheme.to_owned(),
            child: Some(child),
            address,
        }
    }

    pub fn get(&self, path: &str) -> Response {
        request(&self.address, "GET", path).unwrap()
    }

    /// The exposition, once `ready` says it has what the test needs (bounded wait).
    pub fn scrape_until(&self, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let response = self.get("/metrics");
            if response.status.contains(" 200 ") && ready(&response.body) {
                return response.body;
            }
            assert!(Instant::now() < deadline, "never ready:\n{}", response.body);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Reports made so far, as the exposition counts them.
    pub fn reports(&self) -> u64 {
        let body = self.scrape_until(|body| body.contains("nds_monitor_reports_total{"));
        body.lines()
            .find(|line| line.starts_with("nds_monitor_reports_total{"))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
            .unwrap()
    }

    /// Waits for two more reports (bounded): the second began after everything the caller
    /// did before the call.
    pub fn two_more_reports(&self) {
        let wanted = self.reports() + 2;
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.reports() < wanted {
            assert!(Instant::now() < deadline, "no report for a minute");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The answer to `GET path` once `ready` accepts it (bounded wait).
    pub fn get_until(&self, path: &str, ready: impl Fn(&Response) -> bool) -> Response {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let response = self.get(path);
            if ready(&response) {
                return response;
            }
            assert!(
                Instant::now() < deadline,
                "{path} never ready: {response:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.as_ref().unwrap().id()).unwrap()
    }

    /// Sends `signal` and waits for the exit (bounded).
    pub fn stop_with(mut self, signal: i32) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(i32::try_from(child.id()).unwrap(), signal) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("no exit within 10 s of signal {signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the exit (the child stops by itself, e.g. `--max-requests`).
    pub fn wait(mut self) -> ExitStatus {
        self.child.take().unwrap().wait().unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
