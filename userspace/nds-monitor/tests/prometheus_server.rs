//! A real Prometheus server (Debian's `prometheus` package), started by this test on loopback
//! with a scratch configuration and data directory, scrapes `nds-monitor serve`; its query API
//! then answers for the families by the names the CloudWatch agent and the OpenTelemetry
//! receiver use, with the producers' exact numbers and instance-wide NeuronCore labels.

mod common;

use std::process::Command;
use std::time::Duration;

use common::prometheus::PrometheusServer;
use common::*;
use serde_json::Value;

/// `query`'s result vector once it has at least `series` series (waiting for the first
/// scrapes, up to a bound).
fn query(prometheus: &PrometheusServer, query: &str, series: usize) -> Vec<Value> {
    for _ in 0..240 {
        let result = prometheus.query(query, None);
        if result.len() >= series {
            return result;
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

    let served = Served::start(
        Command::new(nds_monitor())
            .arg("--slab-dir")
            .arg(scratch.slabs())
            .arg("--sysfs-root")
            .arg(scratch.sys())
            .arg("--hardware-sysfs-root")
            .arg(scratch.hardware_root())
            .arg("--proc-root")
            .arg(scratch.proc_root())
            .args([
                "--instance-metadata",
                "off",
                "serve",
                "--listen",
                "127.0.0.1:0",
            ]),
    );
    let prometheus = PrometheusServer::start(&scratch.0.join("prometheus"), &served.address, "1s");

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
