//! Verdicts judged from the kernel's per-core totals, which count every slab of the module,
//! including those the monitor cannot read (an owner outside its pid namespace, as in a pod
//! without `hostPID`, or a mapping the module refuses): such a device is judged from how much
//! its totals rise between reports, and is unknown only when its totals cannot be read or the
//! module is gone. A total that goes down (a write reset it) counts nothing. The event stream
//! gives each rise no tenure's event accounts for once, without an owner, so that each
//! counter's events add up to its total's rise.
//!
//! The `serve` tests read the kernel's slabs as the monitor does: a scratch sysfs tree whose
//! totals the test writes, and device nodes that are plain files (no slab can be mapped). The
//! last test plays the kernel for slab files the monitor reads, writing totals that count
//! them and a slab it cannot read, with the ledger records the kernel would write.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::error_counts::{errors_written, ERROR_MIX};
use common::ledger::{realtime_ns, record_of_slab, TestLedger};
use common::*;
use nds_abi::ledger::{TenureEnd, TenureRecord, TENURE_TAG_PUBLISHED};
use nds_abi::sysfs::{SysfsGroup, SYSFS_COUNTERS};
use nds_document::health::HealthRules;
use nds_document::Plan;
use nds_health::events::DEFAULT_CAPACITY;
use nds_health::writer::EventLog;
use nds_health::Health;
use nds_sampler::Monitor;
use serde_json::Value;
use zerocopy::FromZeros;

/// `nds-monitor` reading the kernel's slabs of `scratch`: its sysfs tree, device nodes that
/// are plain files (the module's ACQUIRE is no ioctl of theirs: the mapping is refused) and a
/// loaded module; no instance metadata. The caller adds the period or configuration.
fn kernel_command(scratch: &Scratch) -> Command {
    let dev = scratch.0.join("dev");
    for device in 0..2 {
        write(&dev.join(format!("neuron{device}")), "");
    }
    std::fs::create_dir_all(scratch.0.join("module/parameters")).unwrap();
    let mut command = Command::new(nds_monitor());
    command
        .arg("--sysfs-root")
        .arg(scratch.sys())
        .arg("--dev-dir")
        .arg(&dev)
        .arg("--module-dir")
        .arg(scratch.0.join("module"))
        .arg("--hardware-sysfs-root")
        .arg(scratch.hardware_root())
        .arg("--proc-root")
        .arg(scratch.proc_root())
        .args(["--instance-metadata", "off"]);
    command
}

/// `serve` of the kernel's slabs of `scratch` ([`kernel_command`]), reporting every 100 ms.
fn serve_kernel(scratch: &Scratch) -> Served {
    Served::start(kernel_command(scratch).args([
        "--period",
        "100ms",
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]))
}

/// Slot `slot` of `device` is owned by `pid` (0: a process outside the monitor's pid
/// namespace), its slab in generation `generation`.
fn own_slot(scratch: &Scratch, device: u32, slot: usize, pid: i32, generation: u64) {
    let path = scratch
        .sys()
        .join(format!("neuron{device}/datastore/slots"));
    let table = std::fs::read_to_string(&path).unwrap();
    let rows: Vec<String> = table
        .lines()
        .map(|row| {
            if row.split_whitespace().next() == Some(&slot.to_string()) {
                format!("{slot} {pid} 0 {generation}")
            } else {
                row.to_owned()
            }
        })
        .collect();
    write(&path, &(rows.join("\n") + "\n"));
}

/// Writes `value` into the `total` of status node `node` of core `core` of `device`.
fn set_total(scratch: &Scratch, device: u32, core: usize, node: &str, value: u64) {
    let path = scratch.sys().join(format!(
        "neuron{device}/neuron_core{core}/stats/status/{node}/total"
    ));
    write(&path, &format!("{value}\n"));
}

/// The value of the series of `family` with label `label` in exposition `body` (0 if none).
fn series(body: &str, family: &str, label: &str) -> f64 {
    body.lines()
        .filter(|line| line.starts_with(&format!("{family}{{")) && line.contains(label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The verdicts `/api/v1/devices` serves once `ready` accepts them (bounded wait).
fn devices_until(served: &Served, ready: impl Fn(&[Value]) -> bool) -> Value {
    let response = served.get_until("/api/v1/devices", |response| {
        response.status.contains(" 200 ")
            && serde_json::from_str::<Value>(&response.body)
                .is_ok_and(|body| ready(body["devices"].as_array().unwrap()))
    });
    let body: Value = serde_json::from_str(&response.body).unwrap();
    validate_with("devices.schema.json", std::slice::from_ref(&body));
    body
}

/// Device `index` of a list of verdicts.
fn device(devices: &[Value], index: u32) -> &Value {
    devices
        .iter()
        .find(|device| device["neuron_device_index"] == index)
        .unwrap_or_else(|| panic!("no verdict on neuron{index}: {devices:?}"))
}

/// `(state, reason, action)` of a verdict.
fn verdict(judged: &Value) -> (&str, &str, &str) {
    let field = |name: &str| judged[name].as_str().unwrap();
    (field("state"), field("reason"), field("action"))
}

/// The state of NeuronCore `index` (instance-wide) of `judged`.
fn core_state(judged: &Value, index: u64) -> &str {
    judged["neuroncores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|core| core["neuroncore_index"] == index)
        .and_then(|core| core["state"].as_str())
        .unwrap_or_else(|| panic!("no core {index}: {judged}"))
}

/// Every event `served` holds, checked against the schema.
fn events(served: &Served) -> Vec<Value> {
    let events: Vec<Value> = served
        .get("/api/v1/events?since=0")
        .body
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    validate_with("events.schema.json", &events);
    events
}

/// `(device, core, counter, delta, pid)` of every counter event of `events`.
fn counter_events(events: &[Value]) -> Vec<(u64, u64, String, u64, Option<i64>)> {
    events
        .iter()
        .filter(|event| event["kind"] == "counter")
        .map(|event| {
            (
                event["neuron_device_index"].as_u64().unwrap(),
                event["neuroncore_index"].as_u64().unwrap(),
                event["counter"].as_str().unwrap().to_owned(),
                event["delta"].as_u64().unwrap(),
                event["pid"].as_i64(),
            )
        })
        .collect()
}

fn all(devices: &[Value], state: &str) -> bool {
    devices.len() == 2 && devices.iter().all(|device| device["state"] == state)
}

#[test]
fn a_device_whose_slab_cannot_be_read_is_judged_from_its_totals() {
    let scratch = Scratch::new("totals-judged");
    scratch.sysfs(2, 2, 0, 0);
    // Device 0: a slot held by a process outside the monitor's pid namespace (a pod without
    // hostPID); device 1: a slot held by pid 100, whose slab the module does not map.
    own_slot(&scratch, 0, 3, 0, 7);
    own_slot(&scratch, 1, 0, 100, 1);
    let served = serve_kernel(&scratch);
    let failures = "nds_monitor_attach_failures_total";
    served.scrape_until(|body| {
        series(body, failures, "reason=\"no_pid_view\"") >= 1.0
            && series(body, failures, "reason=\"other\"") >= 1.0
    });
    let healthy = devices_until(&served, |devices| all(devices, "healthy"));
    let devices = healthy["devices"].as_array().unwrap();
    assert_eq!(
        verdict(device(devices, 0)),
        ("healthy", "no_errors", "monitor"),
        "judged although its slab cannot be read"
    );

    // An uncorrectable HBM error on core 1 of device 0, in the slab nobody here can read.
    set_total(&scratch, 0, 1, "hw_hbm_ue_error", 2);
    let judged = devices_until(&served, |devices| {
        device(devices, 0)["state"] == "unhealthy"
    });
    let devices = judged["devices"].as_array().unwrap();
    let zero = device(devices, 0);
    assert_eq!(
        verdict(zero),
        ("unhealthy", "hbm_uncorrectable_errors", "terminate"),
        "{zero}"
    );
    assert_eq!(zero["errors"]["hw_hbm_ue_error"], 2);
    assert_eq!(
        (core_state(zero, 0), core_state(zero, 1)),
        ("healthy", "unhealthy")
    );
    assert_eq!(device(devices, 1)["state"], "healthy");

    // A NeuronCore uncorrectable error on device 1, whose slab the module does not map.
    set_total(&scratch, 1, 0, "hw_nc_ue_error", 1);
    let judged = devices_until(&served, |devices| {
        device(devices, 1)["state"] == "unhealthy"
    });
    let one = device(judged["devices"].as_array().unwrap(), 1);
    assert_eq!(
        verdict(one),
        ("unhealthy", "nc_uncorrectable_errors", "reset"),
        "{one}"
    );
    assert_eq!(core_state(one, 2), "unhealthy");

    // The stream has each rise once, without an owner: no tenure was read.
    assert_eq!(
        counter_events(&events(&served)),
        [
            (0, 1, "hw_hbm_ue_error".to_owned(), 2, None),
            (1, 2, "hw_nc_ue_error".to_owned(), 1, None)
        ]
    );
}

#[test]
fn a_device_is_unknown_while_its_totals_cannot_be_read_or_the_module_is_gone() {
    let scratch = Scratch::new("totals-unknown");
    scratch.sysfs(2, 2, 0, 0);
    own_slot(&scratch, 0, 3, 0, 7);
    let served = serve_kernel(&scratch);
    devices_until(&served, |devices| all(devices, "healthy"));
    // A total of device 1 that is no number.
    let node = "neuron1/neuron_core1/stats/status/timeout/total";
    write(&scratch.sys().join(node), "garbage\n");
    let judged = devices_until(&served, |devices| device(devices, 1)["state"] == "unknown");
    let devices = judged["devices"].as_array().unwrap();
    let one = device(devices, 1);
    assert_eq!(verdict(one), ("unknown", "unreadable", "monitor"));
    assert!(
        one["message"].as_str().unwrap().contains("timeout/total"),
        "{one}"
    );
    assert_eq!(
        (core_state(one, 2), core_state(one, 3)),
        ("unknown", "unknown")
    );
    assert_eq!(
        device(devices, 0)["state"],
        "healthy",
        "its own totals are read, whatever its slab"
    );
    write(&scratch.sys().join(node), "0\n");
    devices_until(&served, |devices| all(devices, "healthy"));
    // The module goes (its sysfs tree stays readable here): nothing is known.
    std::fs::remove_dir_all(scratch.0.join("module")).unwrap();
    let gone = devices_until(&served, |devices| all(devices, "unknown"));
    for judged in gone["devices"].as_array().unwrap() {
        assert_eq!(verdict(judged), ("unknown", "module_unloaded", "monitor"));
    }
}

#[test]
fn a_reset_total_counts_nothing_and_changes_no_verdict() {
    let scratch = Scratch::new("totals-reset");
    // Every total at 5 before the monitor starts: its first report is the baseline.
    scratch.sysfs(2, 2, 5, 0);
    own_slot(&scratch, 0, 3, 0, 7);
    let served = serve_kernel(&scratch);
    devices_until(&served, |devices| all(devices, "healthy"));
    // Reset (a write to the total): it reads 0, lower than before.
    set_total(&scratch, 0, 0, "hw_hbm_ue_error", 0);
    served.two_more_reports();
    let after = devices_until(&served, |devices| all(devices, "healthy"));
    assert!(
        device(after["devices"].as_array().unwrap(), 0)["errors"]
            .as_object()
            .unwrap()
            .is_empty(),
        "{after}"
    );
    assert!(counter_events(&events(&served)).is_empty());
    // One error since the reset: counted from the new baseline.
    set_total(&scratch, 0, 0, "hw_hbm_ue_error", 1);
    let judged = devices_until(&served, |devices| {
        device(devices, 0)["state"] == "unhealthy"
    });
    assert_eq!(
        device(judged["devices"].as_array().unwrap(), 0)["errors"]["hw_hbm_ue_error"],
        1
    );
    // Reset again: the error stays within the window, and nothing more is counted.
    set_total(&scratch, 0, 0, "hw_hbm_ue_error", 0);
    served.two_more_reports();
    let judged = devices_until(&served, |_| true);
    let zero = device(judged["devices"].as_array().unwrap(), 0);
    assert_eq!(
        verdict(zero),
        ("unhealthy", "hbm_uncorrectable_errors", "terminate")
    );
    assert_eq!(zero["errors"]["hw_hbm_ue_error"], 1);
    assert_eq!(
        counter_events(&events(&served)),
        [(0, 0, "hw_hbm_ue_error".to_owned(), 1, None)]
    );
}

#[test]
fn the_totals_are_read_for_health_without_the_neuron_counters_group() {
    let scratch = Scratch::new("totals-no-group");
    scratch.sysfs(1, 2, 0, 0);
    own_slot(&scratch, 0, 3, 0, 7);
    let config = scratch.0.join("memory-only.json");
    write(
        &config,
        r#"{"period": "100ms", "system_metrics": [{"type": "memory_info"}]}"#,
    );
    let mut child = kernel_command(&scratch)
        .arg("--config-file")
        .arg(&config)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
    let mut documents = vec![next()];
    set_total(&scratch, 0, 1, "hw_nc_ue_error", 1);
    // The document after the rise: at most a minute of them, then the test fails.
    let deadline = Instant::now() + Duration::from_secs(60);
    while documents.last().unwrap()["neuron_health"]["devices"][0]["state"] != "unhealthy" {
        assert!(Instant::now() < deadline, "{:?}", documents.last());
        documents.push(next());
    }
    let _ = child.kill();
    let _ = child.wait();
    let judged = &documents.last().unwrap()["neuron_health"]["devices"][0];
    assert_eq!(
        verdict(judged),
        ("unhealthy", "nc_uncorrectable_errors", "reset")
    );
    for document in &documents {
        let system = document["system_data"].as_object().unwrap();
        assert!(
            !system.contains_key("neuron_counters"),
            "the document has only the groups configured: {document}"
        );
    }
    validate(&documents);
}

const SECOND: Duration = Duration::from_secs(1);
const TICK: Duration = Duration::from_millis(100);

/// The status nodes health follows (every one but `success`), by index.
fn error_node_indexes() -> impl Iterator<Item = (usize, &'static str)> {
    SYSFS_COUNTERS
        .iter()
        .enumerate()
        .filter(|(_, node)| node.group == SysfsGroup::Status && node.name != "success")
        .map(|(index, node)| (index, node.name))
}

/// The kernel, for device 0 of `scratch` with 2 cores: writes each error node's total as what
/// the slab files of `readable` pids hold now plus `unread` (by core and node name), and
/// returns those totals by node name, over the cores.
fn kernel_totals(
    scratch: &Scratch,
    readable: &[i32],
    unread: &BTreeMap<(usize, &str), u64>,
) -> BTreeMap<String, u64> {
    let slabs: Vec<TenureRecord> = readable
        .iter()
        .map(|&pid| record_of_slab(&scratch.slabs(), 0, pid, 1, 0, "", ""))
        .collect();
    let mut sums = BTreeMap::new();
    for core in 0..2 {
        for (index, name) in error_node_indexes() {
            let total = slabs
                .iter()
                .map(|slab| slab.counters[core][index])
                .sum::<u64>()
                + unread.get(&(core, name)).copied().unwrap_or(0);
            set_total(scratch, 0, core, name, total);
            if total > 0 {
                *sums.entry(name.to_owned()).or_insert(0) += total;
            }
        }
    }
    sums
}

/// The record the kernel writes when the tenure of `pid`, begun at `started_ns`, ends with
/// the `unread` counts on 2 cores of device 0.
fn record_of(
    pid: i32,
    seq: u64,
    started_ns: u64,
    unread: &BTreeMap<(usize, &str), u64>,
) -> TenureRecord {
    let mut record = TenureRecord::new_zeroed();
    record.seq = seq;
    record.end = TenureEnd::LastClose as u8;
    record.flags = TENURE_TAG_PUBLISHED;
    record.core_count = 2;
    record.generation = 1;
    record.started_ns = started_ns;
    record.ended_ns = realtime_ns();
    record.pid = pid;
    record.tag[..6].copy_from_slice(b"hidden");
    for (index, name) in error_node_indexes() {
        for core in 0..2 {
            record.counters[core][index] = unread.get(&(core, name)).copied().unwrap_or(0);
        }
    }
    record
}

/// Each counter's deltas in the counter events of `monitor`'s stream (those of `pid` only,
/// or without an owner, when `owner` says which).
fn evented(monitor: &Monitor<Health>, owner: Option<Option<i64>>) -> BTreeMap<String, u64> {
    let ring = monitor.consumer().events().expect("an event stream");
    let answer = ring.lock().unwrap().since(0, None);
    let events: Vec<Value> = answer
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    validate_with("events.schema.json", &events);
    let mut sums = BTreeMap::new();
    for (_, _, counter, delta, pid) in counter_events(&events) {
        if owner.is_none_or(|owner| owner == pid) {
            *sums.entry(counter).or_insert(0) += delta;
        }
    }
    sums
}

/// Each counter's rise from `before` to `after`.
fn rises(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(name, &value)| (name.clone(), value - before.get(name).copied().unwrap_or(0)))
        .filter(|&(_, rise)| rise > 0)
        .collect()
}

#[test]
fn the_stream_adds_up_to_the_totals_rise_when_some_slabs_cannot_be_read() {
    let scratch = Scratch::new("totals-stream");
    scratch.sysfs(1, 2, 0, 0);
    let slabs = scratch.slabs();
    let ledger = TestLedger::following(&[0]);
    let t0 = Instant::now();
    let log = EventLog::new(None, DEFAULT_CAPACITY);
    let health = Health::new(HealthRules::default(), t0)
        .judging_from_totals()
        .with_event_log(log);
    let mut monitor = Monitor::new(scratch.source(), Plan::everything(SECOND), t0)
        .with_ledger(Some(Box::new(ledger.clone())))
        .with_consumer(health);
    // Before the monitor's first report, a tenure long gone counted an error: the first
    // report is the baseline, and counts nothing.
    let (read, hidden) = (701, 702);
    let mut unread = BTreeMap::from([((1, "hw_dma_abort_error"), 1)]);
    let baseline = kernel_totals(&scratch, &[], &unread);
    monitor.report_all(t0);
    assert!(evented(&monitor, None).is_empty());

    // A tenure the monitor reads counts errors; one it cannot read (its file is no slab)
    // counts hardware errors the totals hold too.
    let produced = [produce_mix(&slabs, 0, read, "read", 300, ERROR_MIX)];
    write(&slab_path(&slabs, 0, hidden), "not a slab");
    unread.insert((0, "hw_hbm_ue_error"), 3);
    unread.insert((1, "hw_dma_abort_error"), 1 + 2);
    let totals = kernel_totals(&scratch, &[read], &unread);
    monitor.report_all(t0 + SECOND);
    assert_eq!(evented(&monitor, None), rises(&baseline, &totals));
    assert_eq!(
        evented(&monitor, Some(None)),
        BTreeMap::from([
            ("hw_dma_abort_error".to_owned(), 2),
            ("hw_hbm_ue_error".to_owned(), 3)
        ]),
        "what no reading accounts for, without an owner"
    );
    assert_eq!(
        evented(&monitor, Some(Some(i64::from(read)))),
        errors_written(&produced),
        "the readable tenure's rises, with its owner"
    );
    // The device is judged from the totals' rises, the unreadable slab's with the rest.
    let judged = &monitor.consumer().group().devices[0].judged;
    assert_eq!(judged.errors, rises(&baseline, &totals));
    assert_eq!(judged.verdict.reason.name(), "hbm_uncorrectable_errors");

    // The unreadable tenure counts one more error and ends; its ledger record names it. Only
    // what had not been evented yet is evented with its owner.
    unread.insert((0, "hw_hbm_ue_error"), 4);
    let started = monitor.started_ns() + 1;
    let ended = BTreeMap::from([((0, "hw_hbm_ue_error"), 4), ((1, "hw_dma_abort_error"), 2)]);
    std::fs::remove_file(slab_path(&slabs, 0, hidden)).unwrap();
    let totals = kernel_totals(&scratch, &[read], &unread);
    ledger.push(record_of(hidden, 1, started, &ended));
    monitor.tick(t0 + SECOND + TICK);
    monitor.report_all(t0 + 2 * SECOND);
    assert_eq!(
        evented(&monitor, None),
        rises(&baseline, &totals),
        "each count once"
    );
    assert_eq!(
        evented(&monitor, Some(Some(i64::from(hidden)))),
        BTreeMap::from([("hw_hbm_ue_error".to_owned(), 1)]),
        "the record adds what the totals had not shown yet"
    );
}
