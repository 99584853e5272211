//! The `nds-monitor` binary: JSON lines that validate against the schema, a Prometheus
//! exposition that a real parser reads back with the producers' numbers, and the HTTP endpoint.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use common::*;
use prometheus_parse::{Scrape, Value};

/// The monitor over the scratch directory; instance metadata off, so that no test ever sends
/// a packet off this machine, whatever machine it runs on.
fn monitor(scratch: &Scratch) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nds-monitor"));
    command
        .arg("--slab-dir")
        .arg(scratch.slabs())
        .arg("--sysfs-root")
        .arg(scratch.sys())
        .arg("--hardware-sysfs-root")
        .arg(scratch.hardware_root())
        .args(["--period", "100ms", "--instance-metadata", "off"]);
    command
}

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).expect("a valid exposition")
}

fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no {metric} {labels:?}"));
    match sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        _ => panic!("unexpected value type for {metric}"),
    }
}

#[test]
fn json_lines_validate_against_the_schema() {
    let scratch = Scratch::new("cli-json");
    scratch.sysfs(1, 2, 3, 1);
    produce(&scratch.slabs(), 0, 5001, "json-a", 150);
    let output = monitor(&scratch).args(["--count", "2"]).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let documents: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("one document per line"))
        .collect();
    assert_eq!(documents.len(), 2);
    assert_eq!(
        documents[0]["neuron_runtime_data"][0]["neuron_runtime_tag"],
        "json-a"
    );
    validate(&documents);
}

#[test]
fn prometheus_output_parses_and_carries_the_counters() {
    let scratch = Scratch::new("cli-prom");
    scratch.sysfs(1, 2, 11, 2);
    let report = produce(&scratch.slabs(), 0, 5101, "tag \"quoted\" \\ odd", 300);
    let output = monitor(&scratch)
        .args(["--format", "prometheus", "--count", "1"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let scrape = parse(&text);
    // prometheus-parse keeps label values as written: escaped per the format.
    let tag = r#"tag \"quoted\" \\ odd"#;
    for core in ["0", "1"] {
        let labels = [
            ("pid", "5101"),
            ("runtime_tag", tag),
            ("neuroncore", core),
            ("neuron_device_index", "0"),
        ];
        let mut success = labels.to_vec();
        success.push(("status", "success"));
        let expected = report.nc(core.parse().unwrap(), "NDS_NC_COUNTER_INFER_COMPLETED");
        assert_eq!(
            value(&scrape, "nds_runtime_status_total", &success),
            expected as f64
        );
        let macs = report.nc(core.parse().unwrap(), "NDS_NC_COUNTER_MAC_COUNT");
        assert_eq!(
            value(&scrape, "nds_runtime_flop_count_total", &labels),
            (2 * macs) as f64
        );
    }
    // The ecosystem's families: lifetime outcomes per tag, with the instance labels.
    let completed = [
        ("runtime_tag", tag),
        ("status_type", "completed"),
        ("instance_id", ""),
    ];
    assert_eq!(
        value(&scrape, "execution_status_total", &completed),
        report.statuses["NRT_SUCCESS"] as f64
    );
    let system = [
        ("neuron_device_index", "0"),
        ("neuroncore", "1"),
        ("status", "timeout"),
    ];
    assert_eq!(value(&scrape, "nds_device_status_total", &system), 11.0);
    assert_eq!(
        value(
            &scrape,
            "nds_device_slots_owned",
            &[("neuron_device_index", "0")]
        ),
        2.0
    );
    assert!(text.contains("# TYPE nds_runtime_status_total counter"));
    // Every counter family is named *_total.
    for line in text
        .lines()
        .filter(|l| l.starts_with("# TYPE") && l.ends_with(" counter"))
    {
        assert!(
            line.split_whitespace().nth(2).unwrap().ends_with("_total"),
            "{line}"
        );
    }
}

#[test]
fn serve_answers_metrics_over_http() {
    let scratch = Scratch::new("cli-serve");
    produce(&scratch.slabs(), 0, 5201, "served", 80);
    let mut child = monitor(&scratch)
        .args(["serve", "--listen", "127.0.0.1:0", "--max-requests", "2"])
        .stdout(Stdio::piped())
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
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    let get = |path: &str| {
        let mut stream = TcpStream::connect(&address).unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    };
    let missing = get("/nothing");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let response = get("/metrics");
    assert!(child.wait().unwrap().success());
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"));
    let scrape = parse(body);
    let info = value(
        &scrape,
        "nds_runtime_info",
        &[("runtime_tag", "served"), ("state", "ok")],
    );
    assert_eq!(info, 1.0);
}
