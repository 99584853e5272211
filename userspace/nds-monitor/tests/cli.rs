//! The `nds-monitor` binary: JSON lines that validate against the schema, a Prometheus
//! exposition that a real parser reads back with the producers' numbers, and the HTTP endpoint.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};

use common::*;
use nds_metric_table::{DocTable, FAMILIES, INSTANCE_LABELS};
use nds_sysfs::TimeInUseUnit;
use prometheus_parse::{Scrape, Value};

/// The monitor over the scratch directory; instance metadata off, so that no test ever sends
/// a packet off this machine, whatever machine it runs on.
fn monitor(scratch: &Scratch) -> Command {
    monitor_every(scratch, "100ms")
}

/// The same with every group every `period`.
fn monitor_every(scratch: &Scratch, period: &str) -> Command {
    scratch.monitor_command(period)
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
    // The chart gives every pod NODE_NAME (for OTLP's k8s.node.name): without a collector
    // it changes nothing.
    let served = Served::start(
        monitor(&scratch)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("NODE_NAME", "ip-10-0-0-1.ec2.internal"),
    );
    let missing = served.get("/nothing");
    assert!(missing.status.starts_with("HTTP/1.0 404"), "{missing:?}");
    // Even the first exposition, before any period has passed, has the process.
    let response = served.get("/metrics");
    assert!(response.status.contains(" 200 "), "{response:?}");
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let scrape = parse(&response.body);
    assert_eq!(
        value(&scrape, "nds_runtime_info", &[("runtime_tag", "served")]),
        1.0
    );
    assert!(
        served.stop_with(libc::SIGTERM).success(),
        "SIGTERM is a clean exit"
    );
}

#[test]
fn no_device_says_what_was_looked_for_and_fails_with_count() {
    let scratch = Scratch::new("cli-nodev");
    let dev = scratch.0.join("dev");
    std::fs::create_dir_all(&dev).unwrap();
    let output = Command::new(nds_monitor())
        .arg("--sysfs-root")
        .arg(scratch.sys())
        .arg("--dev-dir")
        .arg(&dev)
        .args([
            "--period",
            "100ms",
            "--count",
            "2",
            "--instance-metadata",
            "off",
        ])
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "no device is a failure with --count"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let looked_for = [
        format!("{}/neuron<N>/datastore", scratch.sys().display()),
        format!("{}/neuron<N>", dev.display()),
        "the neuron_ds module is".to_owned(),
    ];
    for expected in &looked_for {
        assert!(stderr.contains(expected.as_str()), "{expected} in {stderr}");
    }
    // The documents were printed, and say the same.
    let documents: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(documents.len(), 2);
    for document in &documents {
        for error in [
            &document["neuron_hardware_info"]["error"],
            &document["system_data"]["neuron_counters"]["error"],
            &document["system_data"]["neuron_hw_counters"]["error"],
        ] {
            let error = error.as_str().unwrap();
            assert!(
                looked_for.iter().all(|p| error.contains(p.as_str())),
                "{error}"
            );
        }
        assert_eq!(document["neuron_hardware_info"]["neuron_device_count"], 0);
    }
    validate(&documents);

    // With a device, the same command succeeds.
    scratch.sysfs(1, 2, 0, 0);
    let output = Command::new(nds_monitor())
        .arg("--sysfs-root")
        .arg(scratch.sys())
        .arg("--dev-dir")
        .arg(&dev)
        .args([
            "--period",
            "100ms",
            "--count",
            "1",
            "--instance-metadata",
            "off",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The exposition of `serve` with a process per device of a 2 × 2 machine, as scraped once
/// every group was reported.
fn served_exposition(scratch: &Scratch) -> String {
    scratch.sysfs(2, 2, 6, 1);
    scratch.hardware(2, 1);
    produce(&scratch.slabs(), 0, 5301, "promtool-a", 120);
    produce(&scratch.slabs(), 1, 5302, "promtool-b", 120);
    // Pod attribution on (its kubelet absent): its own family is in the exposition too.
    let served = Served::start(
        monitor(scratch)
            .arg("--pod-resources-socket")
            .arg(scratch.0.join("no-kubelet.sock"))
            .args(["serve", "--listen", "127.0.0.1:0"]),
    );
    served.scrape_until(|body| body.contains("\nsystem_vcpu_count{"))
}

/// The one finding promtool's linter has on our exposition: `system_vcpu_count`, the
/// companion exporter's name (which AWS's Grafana dashboard queries), is a gauge ending in
/// `_count`.
const KNOWN_LINT: &str =
    "system_vcpu_count non-histogram and non-summary metrics should not have \"_count\" suffix";

#[test]
fn promtool_checks_the_served_exposition() {
    let scratch = Scratch::new("cli-promtool");
    let body = served_exposition(&scratch);
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; qemu/deps.sh installs it)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let output = promtool.wait_with_output().unwrap();
    let findings = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    let findings: Vec<&str> = findings.lines().map(str::trim).collect();
    println!(
        "promtool check metrics: exit {:?}, {} lines, {} families, findings {findings:?}",
        output.status.code(),
        body.lines().count(),
        body.lines().filter(|l| l.starts_with("# TYPE")).count()
    );
    // Exit 3 is "lint findings only"; a parse error would be 1.
    assert_eq!(output.status.code(), Some(3), "{findings:?}");
    assert_eq!(findings, [KNOWN_LINT]);

    // Without that one family, promtool accepts it outright.
    let rest: String = body
        .lines()
        .filter(|line| !line.contains("system_vcpu_count"))
        .map(|line| format!("{line}\n"))
        .collect();
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(rest.as_bytes())
        .unwrap();
    let output = promtool.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // Every ecosystem family is there.
    for family in [
        "neuroncore_utilization_ratio",
        "neuron_runtime_vcpu_usage_ratio",
        "neuron_runtime_memory_used_bytes",
        "neuroncore_memory_usage_constants",
        "neuroncore_memory_usage_model_code",
        "neuroncore_memory_usage_model_shared_scratchpad",
        "neuroncore_memory_usage_runtime_memory",
        "neuroncore_memory_usage_tensors",
        "execution_errors_total",
        "execution_status_total",
        "hardware_ecc_events_total",
        "system_vcpu_count",
        "system_vcpu_usage_ratio",
        "system_memory_total_bytes",
        "system_memory_used_bytes",
        "system_swap_total_bytes",
        "system_swap_used_bytes",
        "instance_info",
        "neuron_hardware_info",
    ] {
        assert!(
            body.contains(&format!("\n{family}{{")),
            "{family} missing from\n{body}"
        );
    }
}

/// Counts executions on core 0 of `pid`'s slab file (latencies with them, and 2 ms of busy
/// time in `unit`), every 5 ms, until `done` is set: a process running while the monitor
/// watches.
fn keep_producing(
    dir: std::path::PathBuf,
    pid: i32,
    unit: TimeInUseUnit,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use nds_abi::counters::NcCounter;
    let busy = unit.count(std::time::Duration::from_millis(2));
    std::thread::spawn(move || {
        let store = nds::Datastore::open(&nds::Backend::file(slab_path(&dir, 0, pid)), 0).unwrap();
        let mut latency = 1_000;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            latency = latency % 2_000 + 37;
            store
                .set_nc_counter(0, NcCounter::LatencyTotal.index(), latency)
                .unwrap();
            store
                .set_nc_counter(0, NcCounter::LatencyDevice.index(), latency / 2)
                .unwrap();
            store
                .increment_nc_counter(0, NcCounter::TimeInUse.index(), busy)
                .unwrap();
            store
                .increment_nc_counter(0, NcCounter::InferenceCount.index(), 1)
                .unwrap();
            // The producer's pace (not synchronisation): at most 2 ms busy in every 5 ms.
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    })
}

/// The ecosystem's utilization and latency series of the `live` process.
fn live_measures(text: &str) -> (f64, usize) {
    let scrape = parse(text);
    let utilization = value(
        &scrape,
        "neuroncore_utilization_ratio",
        &[("runtime_tag", "live"), ("neuroncore", "0")],
    );
    let latencies = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "execution_latency_seconds")
        .count();
    (utilization, latencies)
}

#[test]
fn prometheus_reports_measure_the_period_from_the_attach_not_from_the_report() {
    let scratch = Scratch::new("cli-live");
    produce(&scratch.slabs(), 0, 5501, "live", 10);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = keep_producing(
        scratch.slabs(),
        5501,
        TimeInUseUnit::default(),
        done.clone(),
    );
    // The format's one report is due after a period: the monitor attached long before.
    let output = monitor_every(&scratch, "2s")
        .args(["--format", "prometheus", "--count", "1"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (utilization, latencies) = live_measures(&String::from_utf8(output.stdout).unwrap());
    assert!(utilization > 0.0, "utilization {utilization}");
    assert_eq!(latencies, 7, "p0 … p100 of the sampled executions");

    // serve: the first report's exposition too, because the monitor samples between reports.
    let served =
        Served::start(monitor_every(&scratch, "1s").args(["serve", "--listen", "127.0.0.1:0"]));
    let body = served.scrape_until(|body| body.contains("\nneuroncore_utilization_ratio{"));
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.join().unwrap();
    let (utilization, latencies) = live_measures(&body);
    assert!(
        utilization > 0.0,
        "utilization {utilization} at the first scrape"
    );
    assert_eq!(latencies, 7);
}

/// The utilization ratio of core 0 of the `live` process, with a producer writing 2 ms busy
/// every 5 ms in `written`, seen by the monitor run with `args`.
fn live_utilization(scratch: &Scratch, written: TimeInUseUnit, args: &[&str]) -> f64 {
    produce(&scratch.slabs(), 0, 5502, "live", 10);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = keep_producing(scratch.slabs(), 5502, written, done.clone());
    let output = monitor_every(scratch, "1s")
        .args(["--format", "prometheus", "--count", "1"])
        .args(args)
        .output()
        .unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.join().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    live_measures(&String::from_utf8(output.stdout).unwrap()).0
}

#[test]
fn utilization_follows_the_modules_unit_or_the_option() {
    // At most 2 ms busy per 5 ms: 40 %; however slow the machine, at least one write of
    // 2 ms in the second measured, 0.2 % (a unit 10⁶ off reads below 10⁻⁶, or above 100 %).
    let plausible = |ratio: f64| (0.001..=0.4 + 1e-9).contains(&ratio);
    let scratch = Scratch::new("cli-unit");
    let microseconds = TimeInUseUnit::MICROSECOND;
    scratch.module_time_unit(microseconds);
    let ratio = live_utilization(&scratch, microseconds, &[]);
    assert!(plausible(ratio), "module in µs: {ratio}");
    // Without the module, the module's default: picoseconds.
    let scratch = Scratch::new("cli-unit-default");
    let ratio = live_utilization(&scratch, TimeInUseUnit::PICOSECOND, &[]);
    assert!(plausible(ratio), "no module, ps: {ratio}");
    // The option wins over the module.
    scratch.module_time_unit(TimeInUseUnit::PICOSECOND);
    let ratio = live_utilization(
        &scratch,
        microseconds,
        &["--time-in-use-unit-ps", "1000000"],
    );
    assert!(plausible(ratio), "option µs over a module in ps: {ratio}");
    // Disagreeing is 10⁶ off: microseconds read as picoseconds are next to nothing.
    let ratio = live_utilization(&scratch, microseconds, &[]);
    assert!(ratio > 0.0 && ratio < 1e-6, "µs read as ps: {ratio}");
}

#[test]
fn a_malformed_module_parameter_stops_the_monitor_with_its_path() {
    let scratch = Scratch::new("cli-unit-bad");
    write(
        &scratch.0.join("module/parameters/time_in_use_unit_ps"),
        "one\n",
    );
    let output = monitor(&scratch).args(["--count", "1"]).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("module/parameters/time_in_use_unit_ps") && stderr.contains("\"one\""),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "no report");
    // The option does not need the parameter.
    let output = monitor(&scratch)
        .args(["--count", "1", "--time-in-use-unit-ps", "1"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The `nds_*` families of `exposition`: name, type and the label names of their samples
/// beyond the instance labels.
fn our_families(exposition: &str) -> Vec<(String, String, BTreeSet<String>)> {
    let mut families: Vec<(String, String, BTreeSet<String>)> = exposition
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE nds_"))
        .map(|rest| {
            let (name, kind) = rest.split_once(' ').unwrap();
            (format!("nds_{name}"), kind.to_owned(), BTreeSet::new())
        })
        .collect();
    for line in exposition.lines().filter(|line| line.starts_with("nds_")) {
        let (sample, rest) = line.split_once('{').unwrap();
        let labels = rest.rsplit_once('}').unwrap().0;
        let (_, _, names) = families
            .iter_mut()
            .filter(|(name, _, _)| sample.starts_with(name.as_str()))
            .max_by_key(|(name, _, _)| name.len())
            .unwrap_or_else(|| panic!("{sample} has no # TYPE"));
        // Label values here are tags, numbers and words without quotes or commas.
        for pair in labels.split(',') {
            let name = pair.split_once('=').unwrap().0;
            if !INSTANCE_LABELS.contains(&name) {
                names.insert(name.to_owned());
            }
        }
    }
    families
}

#[test]
fn our_families_follow_the_naming_guide_and_are_each_documented() {
    let scratch = Scratch::new("cli-naming");
    let body = served_exposition(&scratch);
    let families = our_families(&body);
    for (name, kind, labels) in &families {
        println!("{name} {kind} {labels:?}");
        // `_total` on counters and only there; no gauge posing as a summary or histogram.
        assert_eq!(kind == "counter", name.ends_with("_total"), "{name} {kind}");
        assert!(
            ["counter", "gauge", "histogram"].contains(&kind.as_str()),
            "{name}"
        );
        for reserved in ["_count", "_sum", "_bucket", "_created"] {
            assert!(!name.ends_with(reserved), "{name}");
        }
        // Quantiles belong to summaries; `state` is the label that churned series, but on
        // a one-hot family, whose every state has its series for the life of its device
        // (tests/health.rs checks that each device has one series per state, one set).
        assert!(!labels.contains("quantile"), "{name}");
        let one_hot = name.ends_with("_health_state");
        assert_eq!(labels.contains("state"), one_hot, "{name}");
        assert_eq!(labels.contains("le"), kind == "histogram", "{name}");
        // Time is in seconds.
        if name
            .split('_')
            .any(|word| word == "time" || word == "latency")
        {
            assert!(name.contains("_seconds"), "{name}");
        }
    }
    // Exactly our families of the table, which the documentation's is generated from, but
    // those this exposition cannot have: slab files keep no tenure ledger, and no kubelet
    // names a pod here (tests/metrics.rs renders those too).
    let declared: BTreeSet<(String, String)> = FAMILIES
        .iter()
        .filter(|family| family.doc_table() == DocTable::Ours)
        .filter(|family| {
            !family.name.starts_with("nds_monitor_ledger_") && !family.name.starts_with("nds_pod_")
        })
        .map(|family| (family.name.to_owned(), family.metric_type.to_string()))
        .collect();
    let served: BTreeSet<(String, String)> = families
        .iter()
        .map(|(name, kind, _)| (name.clone(), kind.clone()))
        .collect();
    assert_eq!(served, declared);
}
