//! A real Prometheus server (Debian's `prometheus` package), started by this test on loopback
//! with a scratch configuration and data directory, scrapes `nds-monitor serve`; its query API
//! then answers for the families by the names the CloudWatch agent and the OpenTelemetry
//! receiver use, with the producers' exact numbers and instance-wide NeuronCore labels.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Kills and reaps its process when dropped (also when the test fails).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.0 GET (so the answer is not chunked); the status line and the body.
fn get(address: &str, path: &str) -> std::io::Result<(String, String)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Ok((
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    ))
}

/// A free port on loopback for the server to listen on.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `query`'s result vector once it has at least `series` series (waiting for the first
/// scrapes, up to a bound).
fn query(prometheus: &str, query: &str, series: usize) -> Vec<Value> {
    let path = format!("/api/v1/query?query={}", query.replace('"', "%22"));
    for _ in 0..240 {
        if let Ok((status, body)) = get(prometheus, &path) {
            if status.contains("200") {
                let answer: Value = serde_json::from_str(&body).unwrap();
                assert_eq!(answer["status"], "success", "{answer}");
                let result = answer["data"]["result"].as_array().unwrap().clone();
                if result.len() >= series {
                    return result;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("Prometheus never had {series} series for {query}");
}

#[test]
fn a_prometheus_server_scrapes_serve_and_answers_by_the_ecosystem_names() {
    let scratch = Scratch::new("prometheus-server");
    scratch.sysfs(2, 2, 3, 1);
    let first = produce(&scratch.slabs(), 0, 5401, "scraped-d0", 200);
    let second = produce(&scratch.slabs(), 1, 5402, "scraped-d1", 300);

    let mut serve = Command::new(env!("CARGO_BIN_EXE_nds-monitor"))
        .arg("--slab-dir")
        .arg(scratch.slabs())
        .arg("--sysfs-root")
        .arg(scratch.sys())
        .arg("--hardware-sysfs-root")
        .arg(scratch.hardware_root())
        .args([
            "--instance-metadata",
            "off",
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _serve = Running(serve);
    let target = line
        .trim()
        .strip_prefix("listening on http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();

    let config = scratch.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  \
             - job_name: nds-monitor\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let prometheus = format!("127.0.0.1:{}", free_port());
    let server = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            scratch.0.join("data").display()
        ))
        .arg(format!("--web.listen-address={prometheus}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus (Debian package prometheus; qemu/deps.sh installs it)");
    let _server = Running(server);

    // Lifetime outcomes per process, by the companion exporter's name and labels.
    let completed = query(
        &prometheus,
        r#"execution_status_total{status_type="completed"}"#,
        2,
    );
    for (tag, report) in [("scraped-d0", &first), ("scraped-d1", &second)] {
        let series = completed
            .iter()
            .find(|s| s["metric"]["runtime_tag"] == tag)
            .unwrap_or_else(|| panic!("no series for {tag}: {completed:?}"));
        assert_eq!(series["metric"]["job"], "nds-monitor");
        assert_eq!(
            series["metric"]["instance_id"],
            Value::Null,
            "empty labels drop"
        );
        let value: f64 = series["value"][1].as_str().unwrap().parse().unwrap();
        assert_eq!(value, report.statuses["NRT_SUCCESS"] as f64, "{tag}");
        println!(
            "execution_status_total{{status_type=\"completed\",runtime_tag=\"{tag}\"}} = {value}"
        );
    }
    // NeuronCores by instance-wide index: the device-1 process is on 2 and 3.
    let utilization = query(&prometheus, "neuroncore_utilization_ratio", 4);
    let mut cores: Vec<(String, String)> = utilization
        .iter()
        .map(|s| {
            (
                s["metric"]["runtime_tag"].as_str().unwrap().to_owned(),
                s["metric"]["neuroncore"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    cores.sort();
    assert_eq!(
        cores,
        [
            ("scraped-d0".into(), "0".into()),
            ("scraped-d0".into(), "1".into()),
            ("scraped-d1".into(), "2".into()),
            ("scraped-d1".into(), "3".into())
        ]
    );
    println!("neuroncore_utilization_ratio series: {cores:?}");
    let hardware = query(&prometheus, "neuron_hardware_info", 1);
    assert_eq!(hardware[0]["metric"]["neuroncore_per_device_count"], "2");
}
