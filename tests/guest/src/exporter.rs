//! `nds-monitor serve` as a test's child on a loopback port (the guest kernel has loopback TCP
//! and nothing else), its HTTP answers, and the samples of its exposition.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{helper_path, identity::Identity, EVENTUALLY};

/// A serving exporter; SIGTERM when dropped.
pub struct Exporter {
    child: Child,
    address: String,
}

impl Exporter {
    /// Starts `nds-monitor MONITOR_ARGS... serve --listen 127.0.0.1:0` (instance metadata
    /// off) as `identity` and waits until it listens. Its standard error goes to `stderr`.
    pub fn start(identity: Identity, monitor_args: &[&str], stderr: Stdio) -> Self {
        let mut command = Command::new(helper_path("nds-monitor"));
        // SAFETY: `assume` makes raw system calls only, which a forked child of a
        // multi-threaded process may.
        unsafe { command.pre_exec(move || identity.assume()) };
        let mut child = command
            .args(["--instance-metadata", "off"])
            .args(monitor_args)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line
            .trim()
            .strip_prefix("listening on http://")
            .and_then(|rest| rest.strip_suffix("/metrics"))
            .unwrap_or_else(|| panic!("nds-monitor serve printed {line:?}"))
            .to_owned();
        Self { child, address }
    }

    /// The exporter's process id.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    /// The status code and body of `GET path`, on a connection of its own.
    pub fn get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream.set_read_timeout(Some(EVENTUALLY)).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.address
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
        let body = response
            .split_once("\r\n\r\n")
            .map_or_else(String::new, |(_, body)| body.to_owned());
        (status, body)
    }

    /// Waits (at most [`EVENTUALLY`]) until `/healthz` answers `status` and the exposition has
    /// (or, with `present` false, has not) a line `wanted` accepts; panics naming `what`
    /// otherwise.
    pub fn wait_for(&self, what: &str, status: u16, present: bool, wanted: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + EVENTUALLY;
        loop {
            let (health, _) = self.get("/healthz");
            let (_, exposition) = self.get("/metrics");
            if health == status && exposition.lines().any(&wanted) == present {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {what} (/healthz {health}):\n{exposition}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (at most [`EVENTUALLY`]) until `GET path` answers `status` with a body `wanted`
    /// accepts, and returns that body; panics naming `what` otherwise.
    pub fn wait_until(
        &self,
        what: &str,
        path: &str,
        status: u16,
        wanted: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + EVENTUALLY;
        loop {
            let (answered, body) = self.get(path);
            if answered == status && wanted(&body) {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {what} ({path} answered {answered}):\n{body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The samples of the first exposition served for which `ready` holds (waiting at most
    /// `deadline` for it); panics naming `what` otherwise.
    pub fn samples_when(
        &self,
        what: &str,
        deadline: Duration,
        ready: impl Fn(&[Sample]) -> bool,
    ) -> Vec<Sample> {
        let until = Instant::now() + deadline;
        loop {
            let (status, exposition) = self.get("/metrics");
            assert_eq!(status, 200, "{exposition}");
            let samples = samples(&exposition);
            if ready(&samples) {
                return samples;
            }
            assert!(Instant::now() < until, "never saw {what}:\n{exposition}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// One line of an exposition: a series and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The metric name (with its `_total`, `_bucket`, ... suffix).
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

impl Sample {
    /// Whether the sample is of `name` and has every one of `labels`.
    pub fn is(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.name == name
            && labels
                .iter()
                .all(|(key, value)| self.labels.get(*key).map(String::as_str) == Some(*value))
    }
}

/// The samples of a text exposition (comments skipped; label values as written, which is
/// enough for the values the tests give: no quote, backslash or newline in them).
pub fn samples(exposition: &str) -> Vec<Sample> {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("no value: {line:?}"));
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (key, value) = pair
                        .split_once("=\"")
                        .unwrap_or_else(|| panic!("a label without a value: {line:?}"));
                    (key.to_owned(), value.trim_end_matches('"').to_owned())
                })
                .collect();
            Sample {
                name: name.to_owned(),
                labels,
                value: value
                    .parse()
                    .unwrap_or_else(|_| panic!("not a value: {line:?}")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_becomes_its_name_labels_and_value() {
        let parsed = samples(
            "# HELP x y\nexecution_status_total{runtime_tag=\"a-b\",status_type=\"completed\"} 12\nup 1\n",
        );
        assert_eq!(parsed.len(), 2);
        assert!(parsed[0].is(
            "execution_status_total",
            &[("runtime_tag", "a-b"), ("status_type", "completed")]
        ));
        assert_eq!(parsed[0].value, 12.0);
        assert!(parsed[1].is("up", &[]) && parsed[1].labels.is_empty());
    }
}
