//! The exporter exact to the tag and the pod: a tenure's end feeds the final values of the
//! kernel's ledger record of it into its per-tag, per-process and per-pod series, instead of
//! the last reading; records from before the monitor started add nothing, none counts twice,
//! a gap and a redacted record are counted. Slab files have no ledger: the tests push the
//! records the kernel would write ([`common::ledger`]).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::ledger::{record_of_slab, redacted, TestLedger};
use common::*;
use nds_abi::ledger::TenureRecord;
use nds_abi::sysfs::SYSFS_COUNTERS;
use nds_document::{MonitorDocument, Plan};
use nds_exporter::Exporter;
use nds_podresources::v1::{
    ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources,
};
use nds_podresources::{Attribution, PodFeed};
use nds_sampler::monitor::LEDGER_WAIT;
use nds_sampler::Monitor;

const SECOND: Duration = Duration::from_secs(1);
const TICK: Duration = Duration::from_millis(100);
const DEVICE: u32 = 0;
const UID: &str = "3f1c9d2e-7a4b-4c1d-9e8f-0123456789ab";

/// The value of the first series of `family` whose labels hold every one of `labels` (as
/// rendered, e.g. `runtime_tag="exact"`), if the exposition shows one.
fn value(monitor: &Monitor<Exporter>, family: &str, labels: &[&str]) -> Option<f64> {
    monitor
        .consumer()
        .counters()
        .exported()
        .find(|series| {
            series.family.metric.name == family && labels.iter().all(|l| series.labels.contains(l))
        })
        .map(|series| series.value)
}

fn completed(tag: &str) -> [String; 2] {
    [
        format!("runtime_tag=\"{tag}\""),
        "status_type=\"completed\"".to_owned(),
    ]
}

fn tag_completed(monitor: &Monitor<Exporter>, tag: &str) -> Option<f64> {
    let labels = completed(tag);
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    value(monitor, "execution_status_total", &labels)
}

fn pod_completed(monitor: &Monitor<Exporter>, pod: &str) -> Option<f64> {
    let pod = format!("pod=\"{pod}\"");
    value(
        monitor,
        "nds_pod_execution_status_total",
        &[&pod, "status_type=\"completed\""],
    )
}

fn process_success(monitor: &Monitor<Exporter>, pid: i32, core: usize) -> Option<f64> {
    let (pid, core) = (format!("pid=\"{pid}\""), format!("neuroncore=\"{core}\""));
    value(
        monitor,
        "nds_runtime_status_total",
        &[&pid, &core, "status=\"success\""],
    )
}

fn outcome(monitor: &Monitor<Exporter>, outcome: &str) -> Option<f64> {
    let outcome = format!("outcome=\"{outcome}\"");
    value(monitor, "nds_monitor_ledger_records_total", &[&outcome])
}

/// Where `success` is among the record's counters.
fn success_node() -> usize {
    SYSFS_COUNTERS
        .iter()
        .position(|node| node.name == "success")
        .unwrap()
}

/// The successes `record` counts over its cores.
fn recorded_successes(record: &TenureRecord) -> f64 {
    (0..usize::from(record.core_count))
        .map(|core| record.counters[core][success_node()])
        .sum::<u64>() as f64
}

/// A kubelet mapping with pod `trainer-0` (namespace `ml`, container `main`) holding device 0.
fn trainer_holds_device_0() -> PodFeed {
    let feed = PodFeed::new(Duration::from_secs(3600));
    feed.publish(
        Attribution::from_list(&ListPodResourcesResponse {
            pod_resources: vec![PodResources {
                name: "trainer-0".to_owned(),
                namespace: "ml".to_owned(),
                containers: vec![ContainerResources {
                    name: "main".to_owned(),
                    devices: vec![ContainerDevices {
                        resource_name: "aws.amazon.com/neuron".to_owned(),
                        device_ids: vec![DEVICE.to_string()],
                    }],
                    dynamic_resources: Vec::new(),
                }],
            }],
        }),
        Instant::now(),
    );
    feed
}

/// A monitor of `scratch` with every group every second and an exporter with `exporter`'s
/// settings, following `ledger`, started at `t0`.
fn monitor(
    scratch: &Scratch,
    ledger: &TestLedger,
    exporter: Exporter,
    t0: Instant,
) -> Monitor<Exporter> {
    Monitor::new(scratch.source(), Plan::everything(SECOND), t0)
        .with_ledger(Some(Box::new(ledger.clone())))
        .with_consumer(exporter)
}

/// `promtool check metrics` of `exposition`: its exit code and its findings.
fn promtool(exposition: &str) -> (Option<i32>, Vec<String>) {
    use std::io::Write as _;
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
        .write_all(exposition.as_bytes())
        .unwrap();
    let output = promtool.wait_with_output().unwrap();
    let findings = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (
        output.status.code(),
        findings
            .lines()
            .map(|line| line.trim().to_owned())
            .collect(),
    )
}

fn entry(document: &MonitorDocument, pid: i32) -> &nds_document::document::RuntimeEntry {
    document
        .neuron_runtime_data
        .iter()
        .find(|entry| entry.pid == pid)
        .unwrap_or_else(|| panic!("no entry of pid {pid}"))
}

/// A tenure whose end discovery sees first waits for its record; the record's final values
/// then replace the last reading in the tag's, the process's and the pod's series, the
/// document tells of the end as before, and the exposition still parses.
#[test]
fn final_values_replace_the_last_reading_of_the_tag_process_and_pod_series() {
    let scratch = Scratch::new("ledger-final");
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let exporter = Exporter::new().with_pod_attribution(trainer_holds_device_0());
    let mut monitor = monitor(&scratch, &ledger, exporter, t0);
    let pid = 7201;
    let first = produce(&scratch.slabs(), DEVICE, pid, "exact", 120);
    monitor.tick(t0 + TICK);
    let sampled = first.statuses["NRT_SUCCESS"] as f64;
    assert_eq!(tag_completed(&monitor, "exact"), Some(sampled));
    assert_eq!(pod_completed(&monitor, "trainer-0"), Some(sampled));
    assert!(ledger.held().contains(&DEVICE), "its ledger is held open");

    // The last period, which no reading sees: the producer writes it, and its tenure ends.
    let last = produce_in_unit(
        &scratch.slabs(),
        DEVICE,
        pid,
        "exact",
        45,
        Default::default(),
    );
    let record = record_of_slab(
        &scratch.slabs(),
        DEVICE,
        pid,
        1,
        monitor.started_ns() + 1,
        "exact",
        "",
    );
    std::fs::remove_file(slab_path(&scratch.slabs(), DEVICE, pid)).unwrap();
    monitor.tick(t0 + 2 * TICK);
    assert_eq!(
        monitor.awaiting_records(),
        1,
        "the end waits for its record"
    );
    assert_eq!(tag_completed(&monitor, "exact"), Some(sampled));

    ledger.push(record);
    monitor.tick(t0 + 3 * TICK);
    assert_eq!(monitor.awaiting_records(), 0);
    let whole = (first.statuses["NRT_SUCCESS"] + last.statuses["NRT_SUCCESS"]) as f64;
    assert!(whole > sampled);
    assert_eq!(
        recorded_successes(&record),
        whole,
        "the record is the producer's"
    );
    assert_eq!(tag_completed(&monitor, "exact"), Some(whole));
    assert_eq!(pod_completed(&monitor, "trainer-0"), Some(whole));
    for core in 0..2 {
        assert_eq!(
            process_success(&monitor, pid, core),
            Some(record.counters[core][success_node()] as f64),
            "core {core}: the process's series ends at its final value, and is still shown"
        );
    }
    assert_eq!(outcome(&monitor, "final"), Some(1.0));
    assert_eq!(
        value(
            &monitor,
            "nds_monitor_slabs_ended_total",
            &["reason=\"released\""]
        ),
        Some(1.0)
    );

    // The document tells of the end as without a ledger, in neuron-monitor's shape.
    let document = monitor.poll(t0 + SECOND).expect("a report is due");
    assert!(
        ledger.held().is_empty(),
        "no slab left: no ledger held open"
    );
    assert!(
        entry(&document, pid)
            .error
            .starts_with("slab released by pid 7201"),
        "{}",
        entry(&document, pid).error
    );
    validate(&[serde_json::to_value(&document).unwrap()]);
    // The exposition, with the ledger's and the pod's families, parses.
    let exposition = monitor.consumer().exposition();
    assert!(
        exposition.contains("\nnds_pod_execution_status_total{"),
        "{exposition}"
    );
    assert!(exposition.contains("\nnds_monitor_ledger_records_total{"));
    let (code, findings) = promtool(&exposition);
    assert_eq!(code, Some(3), "{findings:?}");
    assert_eq!(
        findings,
        [
            "system_vcpu_count non-histogram and non-summary metrics should not have \"_count\" \
          suffix"
        ]
    );
}

/// A record that comes before discovery sees the end (the kernel released the slab of a
/// killed producer between the slot table's read and the ledger's) ends its tenure at once,
/// with the last period the producer wrote before it died; the slab discovery still shows is
/// not taken for a new tenure, while a new file under the same name is.
#[test]
fn a_killed_producers_record_ends_its_tenure_before_discovery_does() {
    let scratch = Scratch::new("ledger-killed");
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let mut monitor = monitor(&scratch, &ledger, Exporter::new(), t0);
    let pid = 7202;
    let first = produce(&scratch.slabs(), DEVICE, pid, "killed", 80);
    monitor.tick(t0 + TICK);
    let last = produce_in_unit(
        &scratch.slabs(),
        DEVICE,
        pid,
        "killed",
        33,
        Default::default(),
    );
    let record = record_of_slab(
        &scratch.slabs(),
        DEVICE,
        pid,
        7,
        monitor.started_ns() + 1,
        "killed",
        "",
    );
    ledger.push(record);
    monitor.tick(t0 + 2 * TICK);
    assert_eq!(monitor.attached(), 0, "the record ended the tenure");
    assert_eq!(monitor.awaiting_records(), 0);
    let whole = (first.statuses["NRT_SUCCESS"] + last.statuses["NRT_SUCCESS"]) as f64;
    assert_eq!(tag_completed(&monitor, "killed"), Some(whole));
    // The slab is still there: not a new tenure, nothing counted twice.
    for tick in 3..6 {
        monitor.tick(t0 + tick * TICK);
    }
    assert_eq!(monitor.attached(), 0);
    assert_eq!(tag_completed(&monitor, "killed"), Some(whole));
    // Released, and a new process of the same pid takes a new slab: a new tenure.
    std::fs::remove_file(slab_path(&scratch.slabs(), DEVICE, pid)).unwrap();
    monitor.tick(t0 + 6 * TICK);
    let again = produce(&scratch.slabs(), DEVICE, pid, "killed", 10);
    monitor.tick(t0 + 7 * TICK);
    assert_eq!(monitor.attached(), 1);
    assert_eq!(
        tag_completed(&monitor, "killed"),
        Some(whole + again.statuses["NRT_SUCCESS"] as f64)
    );
}

/// A tenure that began after the monitor started and ended before it could read it is
/// counted whole from its record, in its tag and in its pod, which its cgroup path names
/// after the pod left the kubelet's list (learnt from another process of the pod); records
/// of tenures that ended before the start, or began before it and were never read, are
/// history.
#[test]
fn a_tenure_never_read_counts_whole_and_its_pod_is_named_by_its_cgroup() {
    let scratch = Scratch::new("ledger-unseen");
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let feed = trainer_holds_device_0();
    let exporter = Exporter::new().with_pod_attribution(feed.clone());
    let mut monitor = monitor(&scratch, &ledger, exporter, t0);
    // A process of the pod, read while the kubelet lists the pod: its cgroup names the pod.
    let seen = 7203;
    write(
        &scratch.proc_root().join(format!("{seen}/cgroup")),
        &format!("0::/kubepods/burstable/pod{UID}/0a1b\n"),
    );
    let read = produce(&scratch.slabs(), DEVICE, seen, "pod-job", 50);
    monitor.tick(t0 + TICK);
    let read_successes = read.statuses["NRT_SUCCESS"] as f64;
    assert_eq!(pod_completed(&monitor, "trainer-0"), Some(read_successes));
    // The pod leaves the kubelet's list.
    feed.publish(Attribution::default(), Instant::now());

    // Another process of the pod began and ended between two readings.
    let unseen = 7204;
    let short = produce(&scratch.slabs(), DEVICE, unseen, "pod-job", 30);
    let mut record = record_of_slab(
        &scratch.slabs(),
        DEVICE,
        unseen,
        3,
        monitor.started_ns() + 1,
        "pod-job",
        &format!("/kubepods/burstable/pod{UID}/2c3d"),
    );
    std::fs::remove_file(slab_path(&scratch.slabs(), DEVICE, unseen)).unwrap();
    record.slot = 5;
    // And two records of the past: one ended before the start, one began before it.
    let mut ended_before = record;
    ended_before.seq = 1;
    ended_before.started_ns = 1;
    ended_before.ended_ns = monitor.started_ns() - 1;
    let mut began_before = record;
    began_before.seq = 2;
    began_before.started_ns = monitor.started_ns() - 1;
    for past in [ended_before, began_before] {
        ledger.push(past);
    }
    ledger.push(record);
    monitor.tick(t0 + 2 * TICK);
    let short_successes = short.statuses["NRT_SUCCESS"] as f64;
    assert_eq!(recorded_successes(&record), short_successes);
    assert_eq!(
        tag_completed(&monitor, "pod-job"),
        Some(read_successes + short_successes),
        "counted whole, once; the past not at all"
    );
    assert_eq!(
        pod_completed(&monitor, "trainer-0"),
        Some(read_successes + short_successes),
        "the pod gone from the list is named by the cgroup path"
    );
    assert_eq!(outcome(&monitor, "unseen"), Some(1.0));
    assert_eq!(outcome(&monitor, "history"), Some(2.0));
    assert_eq!(
        process_success(&monitor, unseen, 0),
        Some(record.counters[0][success_node()] as f64),
        "its process's series end at its final values"
    );
    assert_eq!(
        value(
            &monitor,
            "nds_monitor_slabs_ended_total",
            &["reason=\"released\""]
        ),
        Some(0.0),
        "no slab the monitor read ended"
    );
}

/// A short tenure of `pid` (tag `blink`, `count` executions) on device 0, which a listed pod
/// holds, in no cgroup the exporter knows, begun after the monitor's first reading; its record
/// is in the ledger at the next reading, and its slab is gone by then unless `slab_stays`.
/// Returns the scratch directory, the monitor after that reading and the successes written.
fn short_tenure_on_a_held_device(
    name: &str,
    pid: i32,
    count: u64,
    slab_stays: bool,
) -> (Scratch, Monitor<Exporter>, f64) {
    let scratch = Scratch::new(name);
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let exporter = Exporter::new().with_pod_attribution(trainer_holds_device_0());
    let mut monitor = monitor(&scratch, &ledger, exporter, t0);
    monitor.tick(t0 + TICK);
    let written = produce(&scratch.slabs(), DEVICE, pid, "blink", count);
    let record = record_of_slab(
        &scratch.slabs(),
        DEVICE,
        pid,
        1,
        monitor.started_ns() + 1,
        "blink",
        "/system.slice/blink.service",
    );
    if !slab_stays {
        std::fs::remove_file(slab_path(&scratch.slabs(), DEVICE, pid)).unwrap();
    }
    ledger.push(record);
    monitor.tick(t0 + 2 * TICK);
    let successes = written.statuses["NRT_SUCCESS"] as f64;
    (scratch, monitor, successes)
}

/// Whether the tag's and the pod's completions are `successes`, all of the short tenure's.
fn assert_counted_for_tag_and_pod(monitor: &Monitor<Exporter>, successes: f64) {
    assert_eq!(tag_completed(monitor, "blink"), Some(successes));
    assert_eq!(
        pod_completed(monitor, "trainer-0"),
        Some(successes),
        "the pod holding device {DEVICE} ran it"
    );
}

/// A tenure that began and ended between two readings, on a device a listed pod holds, and
/// in no cgroup the exporter knows: its record counts for that pod, as its readings would have.
#[test]
fn a_tenure_never_read_counts_for_the_pod_holding_its_device() {
    let (_scratch, monitor, successes) =
        short_tenure_on_a_held_device("ledger-unseen-held", 7301, 30, false);
    assert_eq!(outcome(&monitor, "unseen"), Some(1.0));
    assert_counted_for_tag_and_pod(&monitor, successes);
}

/// A tenure whose record is there when the monitor finds it: it begins and ends in one pass,
/// before any reading of its counters. The record's cores name the pod, as a reading's would
/// have (the guest's 30 s test lost a 3-count producer's counts for its pod this way).
#[test]
fn a_tenure_found_with_its_record_already_written_counts_for_its_pod() {
    let (_scratch, monitor, successes) =
        short_tenure_on_a_held_device("ledger-found-ended", 7302, 3, true);
    assert_eq!(
        outcome(&monitor, "final"),
        Some(1.0),
        "the monitor found it"
    );
    assert_counted_for_tag_and_pod(&monitor, successes);
}

/// An exporter restart while a tenure runs and others end: the new monitor counts the
/// running tenure from its first reading (the restart rule) to its final value, and adds no
/// record of what ended before it started; nothing is counted twice.
#[test]
fn after_a_restart_no_record_counts_twice_and_none_from_before_the_start() {
    let scratch = Scratch::new("ledger-restart");
    let live = own_pid();
    // This test process ran before both monitors: the restart rule applies to its slab.
    scratch.show_process(live);
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let mut before = monitor(&scratch, &ledger, Exporter::new(), t0);
    let started_before = before.started_ns();
    produce(&scratch.slabs(), DEVICE, live, "restart", 60);
    before.tick(t0 + TICK);
    // Another tenure ends while the first monitor runs: its record is read by it.
    let gone = 7205;
    produce(&scratch.slabs(), DEVICE, gone, "restart", 20);
    let gone_record = record_of_slab(
        &scratch.slabs(),
        DEVICE,
        gone,
        1,
        started_before + 1,
        "restart",
        "",
    );
    std::fs::remove_file(slab_path(&scratch.slabs(), DEVICE, gone)).unwrap();
    ledger.push(gone_record);
    before.tick(t0 + 2 * TICK);
    assert_eq!(outcome(&before, "unseen"), Some(1.0));
    drop(before);

    // The new monitor: its ledger still holds the record of the ended tenure (the kernel keeps
    // the last records), read again from the oldest kept.
    let t1 = Instant::now();
    let mut after = monitor(&scratch, &ledger, Exporter::new(), t1);
    ledger.push(gone_record);
    after.tick(t1 + TICK);
    assert_eq!(
        tag_completed(&after, "restart"),
        Some(0.0),
        "nothing from before"
    );
    assert_eq!(outcome(&after, "history"), Some(1.0));
    let more = produce_in_unit(
        &scratch.slabs(),
        DEVICE,
        live,
        "restart",
        25,
        Default::default(),
    );
    after.tick(t1 + 2 * TICK);
    let last = produce_in_unit(
        &scratch.slabs(),
        DEVICE,
        live,
        "restart",
        15,
        Default::default(),
    );
    let record = record_of_slab(&scratch.slabs(), DEVICE, live, 2, 1, "restart", "");
    std::fs::remove_file(slab_path(&scratch.slabs(), DEVICE, live)).unwrap();
    ledger.push(record);
    after.tick(t1 + 3 * TICK);
    assert_eq!(
        tag_completed(&after, "restart"),
        Some((more.statuses["NRT_SUCCESS"] + last.statuses["NRT_SUCCESS"]) as f64),
        "from the first reading to the final value"
    );
    assert_eq!(outcome(&after, "final"), Some(1.0));
}

/// A gap in a device's ledger is counted (as many records as it lost) and the tenure whose
/// record it lost closes with its last reading when the wait runs out; a record that comes
/// after that is late, and adds nothing.
#[test]
fn a_gap_is_counted_and_its_tenure_keeps_its_last_reading() {
    let scratch = Scratch::new("ledger-gap");
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let mut monitor = monitor(&scratch, &ledger, Exporter::new(), t0);
    let pid = 7206;
    let first = produce(&scratch.slabs(), DEVICE, pid, "gap", 40);
    monitor.tick(t0 + TICK);
    produce_more(&scratch.slabs(), DEVICE, pid, "gap", 20);
    let record = record_of_slab(
        &scratch.slabs(),
        DEVICE,
        pid,
        9,
        monitor.started_ns() + 1,
        "gap",
        "",
    );
    std::fs::remove_file(slab_path(&scratch.slabs(), DEVICE, pid)).unwrap();
    ledger.lose(DEVICE, 5, 9);
    monitor.tick(t0 + 2 * TICK);
    assert_eq!(
        value(&monitor, "nds_monitor_ledger_lost_records_total", &[]),
        Some(5.0)
    );
    assert_eq!(monitor.awaiting_records(), 1);
    monitor.tick(t0 + 2 * TICK + LEDGER_WAIT);
    assert_eq!(monitor.awaiting_records(), 0, "the wait ran out");
    let sampled = first.statuses["NRT_SUCCESS"] as f64;
    assert_eq!(tag_completed(&monitor, "gap"), Some(sampled));
    ledger.push(record);
    monitor.tick(t0 + 3 * TICK + LEDGER_WAIT);
    assert_eq!(outcome(&monitor, "late"), Some(1.0));
    assert_eq!(
        tag_completed(&monitor, "gap"),
        Some(sampled),
        "late: not added"
    );
}

/// A record the monitor may not read whole carries no counters: it ends its tenure with the
/// last reading, and is counted; so is one of no tenure the monitor knows.
#[test]
fn a_redacted_record_is_counted_and_skipped() {
    let scratch = Scratch::new("ledger-redacted");
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let mut monitor = monitor(&scratch, &ledger, Exporter::new(), t0);
    let pid = 7207;
    let first = produce(&scratch.slabs(), DEVICE, pid, "other-uid", 40);
    monitor.tick(t0 + TICK);
    produce_more(&scratch.slabs(), DEVICE, pid, "other-uid", 20);
    let record = record_of_slab(
        &scratch.slabs(),
        DEVICE,
        pid,
        4,
        monitor.started_ns() + 1,
        "other-uid",
        "",
    );
    std::fs::remove_file(slab_path(&scratch.slabs(), DEVICE, pid)).unwrap();
    monitor.tick(t0 + 2 * TICK);
    assert_eq!(monitor.awaiting_records(), 1);
    // Redacted, the record names no pid: a slab file's tenure is not found by it, and waits.
    ledger.push(redacted(&record));
    monitor.tick(t0 + 3 * TICK);
    assert_eq!(outcome(&monitor, "redacted"), Some(1.0));
    let sampled = first.statuses["NRT_SUCCESS"] as f64;
    assert_eq!(tag_completed(&monitor, "other-uid"), Some(sampled));
    monitor.tick(t0 + 3 * TICK + LEDGER_WAIT);
    assert_eq!(monitor.awaiting_records(), 0);
    assert_eq!(tag_completed(&monitor, "other-uid"), Some(sampled));
    assert_eq!(outcome(&monitor, "final"), Some(0.0));
}

/// A record from before the monitor started is history whether or not the monitor may read
/// it: `redacted` counts only the tenures of its own time that it could not account for.
#[test]
fn a_redacted_record_from_before_the_start_is_history() {
    let scratch = Scratch::new("ledger-redacted-history");
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let mut monitor = monitor(&scratch, &ledger, Exporter::new(), t0);
    let pid = 7209;
    produce(&scratch.slabs(), DEVICE, pid, "before", 10);
    let mut before = record_of_slab(&scratch.slabs(), DEVICE, pid, 1, 1, "before", "");
    before.ended_ns = monitor.started_ns() - 1;
    std::fs::remove_file(slab_path(&scratch.slabs(), DEVICE, pid)).unwrap();
    ledger.push(redacted(&before));
    monitor.tick(t0 + TICK);
    assert_eq!(outcome(&monitor, "history"), Some(1.0));
    assert_eq!(outcome(&monitor, "redacted"), Some(0.0));
}

/// The per-process series of an ended tenure stay in the exposition with their final values
/// for the exporter's linger, so that a scrape sees them, and then leave it.
#[test]
fn an_ended_processs_series_stay_a_while_with_their_final_values() {
    let scratch = Scratch::new("ledger-linger");
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let linger = 10 * SECOND;
    let mut monitor = monitor(&scratch, &ledger, Exporter::new().with_linger(linger), t0);
    let pid = 7208;
    produce(&scratch.slabs(), DEVICE, pid, "linger", 30);
    monitor.tick(t0 + TICK);
    produce_more(&scratch.slabs(), DEVICE, pid, "linger", 10);
    let record = record_of_slab(
        &scratch.slabs(),
        DEVICE,
        pid,
        1,
        monitor.started_ns() + 1,
        "linger",
        "",
    );
    std::fs::remove_file(slab_path(&scratch.slabs(), DEVICE, pid)).unwrap();
    ledger.push(record);
    let ended = t0 + 2 * TICK;
    let _ = monitor.poll(ended);
    let final_value = Some(record.counters[0][success_node()] as f64);
    assert_eq!(process_success(&monitor, pid, 0), final_value);
    assert!(monitor.poll(ended + SECOND).is_some());
    assert_eq!(
        process_success(&monitor, pid, 0),
        final_value,
        "still shown"
    );
    assert!(monitor.poll(ended + linger + SECOND).is_some());
    assert_eq!(
        process_success(&monitor, pid, 0),
        None,
        "gone after the linger"
    );
    assert!(
        tag_completed(&monitor, "linger").is_some(),
        "the tag's series stay"
    );
}
