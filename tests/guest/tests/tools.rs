//! The userspace tools against the real module: the load generator's reports, the monitor's
//! per-process totals and the kernel's sysfs aggregates agree exactly (with one producer
//! killed by SIGKILL), and the monitor reports a reused slab instead of mixing two
//! processes' numbers.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use nds_abi::sysfs::{CounterSource, SYSFS_COUNTERS};
use neuron_ds_guest_tests::{
    helper_path, slots, slots_on, sysfs_core_count, sysfs_counter, sysfs_device, WorldWritableNode,
    DEVICE, SLOTS,
};
use serde_json::Value;

/// Cores of device 0 (the module's `cores_per_device`).
fn cores() -> Vec<usize> {
    let mut cores: Vec<usize> = std::fs::read_dir(sysfs_device(0))
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("neuron_core")?
                .parse()
                .ok()
        })
        .collect();
    cores.sort();
    cores
}

/// Every sysfs total of device 0: (core, node) → value.
fn totals() -> BTreeMap<(usize, &'static str), u64> {
    let mut totals = BTreeMap::new();
    for core in cores() {
        for counter in SYSFS_COUNTERS.iter() {
            let value = sysfs_counter(core, counter.group.dir_name(), counter.name, "total");
            totals.insert((core, counter.name), value);
        }
    }
    totals
}

fn source_name(source: CounterSource) -> &'static str {
    match source {
        CounterSource::Nc(c) => c.name(),
        CounterSource::Ext(c) => c.name(),
    }
}

/// What a producer report adds to sysfs node `node` of `core`.
fn contribution(report: &Value, core: usize, node: &str) -> u64 {
    let counter = SYSFS_COUNTERS.iter().find(|c| c.name == node).unwrap();
    let raw = report["nc_counters"][core.to_string()][source_name(counter.source)]
        .as_u64()
        .unwrap_or(0);
    raw * counter.scale
}

/// A load generator run with `--hold`: its producers keep their slabs until `finish`.
struct Held {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    report_dir: String,
}

impl Held {
    fn start(tag_prefix: &str, args: &[&str]) -> Self {
        Self::start_as("root", tag_prefix, args)
    }

    /// The same, run as `identity` (through `ds-as`).
    fn start_as(identity: &str, tag_prefix: &str, args: &[&str]) -> Self {
        Self::start_on(identity, "0", tag_prefix, args)
    }

    /// The same on `devices` (`--devices`).
    fn start_on(identity: &str, devices: &str, tag_prefix: &str, args: &[&str]) -> Self {
        let report_dir = format!("/tmp/tools-{tag_prefix}");
        let _ = std::fs::remove_dir_all(&report_dir);
        std::fs::create_dir_all(&report_dir).unwrap();
        std::fs::set_permissions(&report_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut child = Command::new(helper_path("ds-as"))
            .args([identity, &helper_path("nds-loadgen")])
            .args([
                "run",
                "--devices",
                devices,
                "--rate",
                "0",
                "--hold",
                "--tag-prefix",
                tag_prefix,
            ])
            .args(["--report-dir", &report_dir])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the load generator did not get ready");
        Self {
            stdin: child.stdin.take(),
            child,
            stdout,
            report_dir,
        }
    }

    /// The report a producer wrote before announcing it was ready.
    fn report(&self, tag: &str) -> Value {
        let text = std::fs::read(format!("{}/{tag}.json", self.report_dir)).unwrap();
        serde_json::from_slice(&text).unwrap()
    }

    /// Lets the producers go and returns the summary of every report.
    fn finish(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        assert!(
            self.child.wait().unwrap().success(),
            "the load generator failed"
        );
        let summary: Value = serde_json::from_str(&rest).unwrap();
        summary["producers"].as_array().unwrap().clone()
    }
}

/// One report of the monitor.
fn monitor_once() -> Value {
    let output = Command::new(helper_path("nds-monitor"))
        .args(["--period", "200ms", "--count", "1"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn entry_of(document: &Value, pid: i64) -> Option<&Value> {
    document["neuron_runtime_data"]
        .as_array()?
        .iter()
        .find(|entry| entry["pid"].as_i64() == Some(pid))
}

/// The monitor's lifetime totals of an entry equal the report, counter by counter.
fn assert_entry_matches(entry: &Value, report: &Value) {
    assert_eq!(entry["error"], "", "{entry}");
    assert_eq!(entry["neuron_runtime_tag"], report["tag"]);
    let seen = &entry["report"]["nds_counters"]["neuroncores"];
    let wrote = report["nc_counters"].as_object().unwrap();
    let mut compared = 0;
    for (core, counters) in wrote {
        for (name, value) in counters.as_object().unwrap() {
            let total = seen[core][name]["total"].as_u64().unwrap_or(0);
            assert_eq!(total, value.as_u64().unwrap(), "core {core} {name}");
            compared += 1;
        }
    }
    for (core, counters) in seen.as_object().unwrap() {
        for name in counters.as_object().unwrap().keys() {
            assert!(
                wrote[core].get(name).is_some(),
                "the monitor shows unwritten {name}"
            );
        }
    }
    let device = &entry["report"]["nds_counters"]["neuron_device"];
    for (name, value) in report["nd_counters"].as_object().unwrap() {
        assert_eq!(
            device[name]["total"].as_u64().unwrap_or(0),
            value.as_u64().unwrap(),
            "{name}"
        );
    }
    assert!(compared > 20, "only {compared} counters compared");
}

#[test]
fn reports_monitor_and_sysfs_agree_exactly_with_a_killed_producer() {
    let before = totals();
    let held = Held::start(
        "exact",
        &["--procs-per-device", "4", "--count", "400", "--crash", "1"],
    );

    // While they run (holding their slabs): the monitor's per-process totals are the reports.
    let document = monitor_once();
    let mut live = 0;
    for index in 0..4 {
        let report = held.report(&format!("exact-d0-p{index}"));
        let pid = report["pid"].as_i64().unwrap();
        if report["crashed"] == true {
            assert!(entry_of(&document, pid).is_none_or(|e| e["error"] != ""));
            continue;
        }
        assert_entry_matches(
            entry_of(&document, pid).expect("a holding producer"),
            &report,
        );
        live += 1;
    }
    assert_eq!(live, 3);
    // The monitor's system section is the kernel's live total: everything counted so far.
    let reports: Vec<Value> = (0..4)
        .map(|i| held.report(&format!("exact-d0-p{i}")))
        .collect();
    let system = &document["system_data"]["neuron_counters"]["neuron_devices"][0]["neuroncores"];
    for (&(core, node), &start) in &before {
        let group = if system[core.to_string()]["status"].get(node).is_some() {
            "status"
        } else {
            "other_info"
        };
        let now = system[core.to_string()][group][node]["total"]
            .as_u64()
            .unwrap();
        let expected: u64 = reports.iter().map(|r| contribution(r, core, node)).sum();
        assert_eq!(now - start, expected, "live total of core {core} {node}");
    }

    // After they exit (explicit RELEASE, plain exit, and the SIGKILL'd one): exact sums.
    let producers = held.finish();
    assert_eq!(producers.len(), 4);
    assert_eq!(producers.iter().filter(|p| p["crashed"] == true).count(), 1);
    let after = totals();
    let mut nonzero = 0;
    for (&(core, node), &start) in &before {
        let expected: u64 = producers.iter().map(|r| contribution(r, core, node)).sum();
        assert_eq!(after[&(core, node)] - start, expected, "core {core} {node}");
        nonzero += usize::from(expected != 0);
    }
    assert!(nonzero >= 10, "only {nonzero} counters moved");
    assert!(
        slots().iter().all(|row| row.pid == 0),
        "every slab was given back"
    );
}

/// A streaming monitor whose documents are read one by one.
struct Stream {
    child: Child,
    lines: std::io::Lines<BufReader<ChildStdout>>,
}

impl Stream {
    fn next(&mut self) -> Value {
        let line = self.lines.next().expect("the monitor ended").unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn signal(&self, signal: i32) {
        // SAFETY: signalling our own child process.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, signal) }, 0);
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_monitor_reports_a_reused_slab_instead_of_mixing_numbers() {
    let first = Held::start("first", &["--procs-per-device", "1", "--count", "60"]);
    let first_report = first.report("first-d0-p0");
    let first_pid = first_report["pid"].as_i64().unwrap();
    let slot = slots()
        .iter()
        .find(|r| i64::from(r.pid) == first_pid)
        .unwrap()
        .slot;

    let mut child = Command::new(helper_path("nds-monitor"))
        .args(["--period", "100ms"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut monitor = Stream { child, lines };
    let mut seen = Vec::new();
    loop {
        let document = monitor.next();
        let found = entry_of(&document, first_pid).is_some();
        seen.push(document);
        if found {
            break;
        }
        assert!(seen.len() < 50, "the monitor never saw the first producer");
    }

    // Hold every other free slot, so the first producer's slab is the only one to reuse.
    let free = slots().iter().filter(|r| r.pid == 0).count();
    let fillers = (free > 0).then(|| {
        Held::start(
            "filler",
            &["--procs-per-device", &free.to_string(), "--count", "1"],
        )
    });
    monitor.signal(libc::SIGSTOP);
    first.finish();
    let second = Held::start(
        "second",
        &["--procs-per-device", "1", "--count", "90", "--seed", "77"],
    );
    let second_report = second.report("second-d0-p0");
    let second_pid = second_report["pid"].as_i64().unwrap();
    assert_eq!(
        i64::from(slots()[slot].pid),
        second_pid,
        "the slab was handed on"
    );
    monitor.signal(libc::SIGCONT);

    let mut reported_reuse = None;
    let mut second_seen = false;
    while !(reported_reuse.is_some() && second_seen) {
        assert!(
            seen.len() < 200,
            "no reuse report or second owner after {} reports",
            seen.len()
        );
        let document = monitor.next();
        if let Some(entry) = entry_of(&document, first_pid).filter(|e| e["error"] != "") {
            reported_reuse = Some(entry["error"].as_str().unwrap().to_owned());
        }
        if let Some(entry) = entry_of(&document, second_pid) {
            assert_entry_matches(entry, &second_report);
            second_seen = true;
        }
        seen.push(document);
    }
    let reason = reported_reuse.unwrap();
    assert!(reason.contains("reused"), "{reason}");
    // Never the second owner's numbers under the first owner's pid.
    for document in &seen {
        if let Some(entry) = entry_of(document, first_pid) {
            if entry["error"] == "" {
                assert_entry_matches(entry, &first_report);
            } else {
                assert_eq!(entry["report"], serde_json::json!({}));
            }
        }
    }
    drop(monitor);
    second.finish();
    if let Some(fillers) = fillers {
        fillers.finish();
    }
    println!("reuse reported as: {reason}");
}

#[test]
fn top_renders_a_frame_of_the_live_processes() {
    let held = Held::start("top", &["--procs-per-device", "2", "--count", "50"]);
    let output = Command::new(helper_path("nds-top"))
        .args(["--once", "--period", "200ms"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let screen = String::from_utf8(output.stdout).unwrap();
    assert_eq!(screen.lines().count(), 24);
    assert!(screen.contains("1:all"), "{screen}");
    assert!(
        screen.contains(":top-d0-p0") && screen.contains(":top-d0-p1"),
        "{screen}"
    );
    held.finish();
}

#[test]
fn one_users_monitor_and_top_show_nothing_of_another_users_reuse() {
    let _node = WorldWritableNode::new(DEVICE);
    let mine = Held::start_as(
        "uid:1000",
        "mine",
        &["--procs-per-device", "1", "--count", "60"],
    );
    let my_report = mine.report("mine-d0-p0");
    let my_pid = my_report["pid"].as_i64().unwrap();
    let mut child = Command::new(helper_path("ds-as"))
        .args(["uid:1000", &helper_path("nds-monitor"), "--period", "100ms"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut monitor = Stream { child, lines };
    let mut seen = Vec::new();
    while !seen.iter().any(|d| entry_of(d, my_pid).is_some()) {
        assert!(seen.len() < 50, "the monitor never saw its user's producer");
        seen.push(monitor.next());
    }
    // The producer goes; another user's producers take every slot, its slab among them.
    mine.finish();
    let theirs = Held::start_as(
        "uid:1001",
        "theirs",
        &[
            "--procs-per-device",
            &SLOTS.to_string(),
            "--count",
            "90",
            "--seed",
            "5",
        ],
    );
    assert!(
        slots().iter().all(|row| row.pid != 0),
        "every slot is theirs"
    );
    for _ in 0..20 {
        seen.push(monitor.next());
    }
    let top = Command::new(helper_path("ds-as"))
        .args(["uid:1000", &helper_path("nds-top"), "--once"])
        .output()
        .unwrap();
    assert!(
        top.status.success(),
        "{}",
        String::from_utf8_lossy(&top.stderr)
    );
    let frame = String::from_utf8_lossy(&top.stdout);
    assert!(
        !frame.contains("theirs"),
        "nds-top showed another user's process:\n{frame}"
    );
    assert!(
        monitor.child.try_wait().unwrap().is_none(),
        "the monitor ended"
    );
    drop(theirs);
    for document in &seen {
        let text = document.to_string();
        assert!(
            !text.contains("theirs"),
            "the monitor showed another user's process"
        );
        if let Some(entry) = entry_of(document, my_pid) {
            if entry["error"] == "" {
                assert_entry_matches(entry, &my_report);
            } else {
                assert_eq!(entry["report"], serde_json::json!({}));
            }
        }
    }
}

#[test]
fn nds_ls_lists_exactly_the_processes_holding_slabs_on_two_devices() {
    let held = Held::start_on(
        "root",
        "0,1",
        "ls",
        &["--procs-per-device", "2", "--count", "5"],
    );
    let output = Command::new(helper_path("nds-ls"))
        .args(["--output-format", "json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let devices: Value = serde_json::from_slice(&output.stdout).unwrap();
    let devices = devices.as_array().unwrap();
    assert_eq!(devices.len(), 2, "both devices");
    for (index, device) in devices.iter().enumerate() {
        assert_eq!(device["neuron_device"], index);
        let cores = sysfs_core_count(index);
        assert_eq!(device["nc_count"], cores);
        let ids: Vec<u64> = device["neuroncore_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_u64().unwrap())
            .collect();
        let first = (index * cores) as u64;
        assert_eq!(ids, (first..first + cores as u64).collect::<Vec<_>>());
        let table = slots_on(index);
        let mut owners: Vec<i64> = table
            .iter()
            .filter(|row| row.pid != 0)
            .map(|row| i64::from(row.pid))
            .collect();
        owners.sort_unstable();
        let processes = device["neuron_processes"].as_array().unwrap();
        let mut listed: Vec<i64> = processes
            .iter()
            .map(|p| p["pid"].as_i64().unwrap())
            .collect();
        listed.sort_unstable();
        assert_eq!(
            listed, owners,
            "device {index}: exactly the slot table's owners"
        );
        for process in processes {
            let pid = process["pid"].as_i64().unwrap();
            let row = table.iter().find(|row| i64::from(row.pid) == pid).unwrap();
            let tag = process["neuron_runtime_tag"].as_str().unwrap();
            assert!(tag.starts_with(&format!("ls-d{index}-p")), "{process}");
            let report = held.report(tag);
            assert_eq!(report["pid"].as_i64(), Some(pid));
            assert_eq!(process["slot"], row.slot);
            assert_eq!(process["generation"], row.generation);
            assert_eq!(process["error"], "");
            assert!(!process["neuron_runtime_version"]
                .as_str()
                .unwrap()
                .is_empty());
            assert!(
                process["command"].as_str().unwrap().contains("nds-loadgen"),
                "{process}"
            );
        }
    }
    held.finish();
}
