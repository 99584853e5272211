//! A real Prometheus server (Debian's `prometheus` package) for the tests: started on a free
//! loopback port with a scratch configuration and data directory, scraping one target, and
//! asked through its HTTP query API.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::served::request;

/// A Prometheus server scraping one target; killed and reaped when dropped.
pub struct PrometheusServer {
    child: Child,
    /// Where its HTTP API listens (`127.0.0.1:<port>`).
    pub address: String,
}

/// A free port on loopback (another process could take it before the server binds it; the
/// server then fails to start and [`PrometheusServer::start`] says so).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `text` percent-encoded for a query string (everything but unreserved characters).
pub fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(byte).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

impl PrometheusServer {
    /// Starts a server with its data under `dir` scraping `target` (`host:port`) as job
    /// `nds-monitor` every `interval` (a Prometheus duration), and waits until it is ready.
    pub fn start(dir: &Path, target: &str, interval: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: {interval}\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: nds-monitor\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let address = format!("127.0.0.1:{}", free_port());
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian package prometheus; qemu/deps.sh installs it)");
        let mut server = Self { child, address };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(response) = request(&server.address, "GET", "/-/ready") {
                if response.status.contains(" 200 ") {
                    return server;
                }
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("prometheus on {} exited with {status}", server.address);
            }
            assert!(Instant::now() < deadline, "prometheus never got ready");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The `data.result` of instant query `query`, evaluated at Unix time `time` (now when
    /// `None`); panics unless the API answers with success.
    pub fn query(&self, query: &str, time: Option<f64>) -> Vec<Value> {
        let mut path = format!("/api/v1/query?query={}", url_encode(query));
        if let Some(time) = time {
            path += &format!("&time={time:.3}");
        }
        let response = request(&self.address, "GET", &path).unwrap();
        assert!(response.status.contains(" 200 "), "{query}: {response:?}");
        let answer: Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(answer["status"], "success", "{query}: {answer}");
        answer["data"]["result"].as_array().unwrap().clone()
    }
    /// Waits (at most 30 s) until the server stored a scrape of the exporter's
    /// `nds_monitor_reports_total` taken after Unix time `after`; returns when the latest
    /// stored scrape was taken (Unix time, to the millisecond as Prometheus keeps it).
    pub fn scraped_after(&self, after: f64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let latest = self.query("timestamp(nds_monitor_reports_total)", None);
            let taken = latest
                .first()
                .and_then(|sample| sample["value"][1].as_str()?.parse::<f64>().ok());
            if let Some(taken) = taken.filter(|&taken| taken > after) {
                return taken;
            }
            assert!(
                Instant::now() < deadline,
                "{} stored no scrape after {after}",
                self.address
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
