//! The exporter exact to the tag, the process and the pod against the real module: it follows
//! the kernel's tenure ledger, so a tenure's last period reaches its series whatever the
//! exporter's period (30 s here, as CloudWatch users sample), also for producers that were
//! SIGKILLed or ended before a tick could read them; a ledger that overflowed while the
//! exporter could not read is counted and logged; a reader without the right to a tenure gets
//! its record redacted and counts it so; a restarted exporter counts no record twice and none
//! from before it started.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nds_abi::counters::NcCounter;
use nds_abi::sysfs::{SysfsGroup, SYSFS_COUNTERS};
use neuron_ds_guest_tests::actor::Actor;
use neuron_ds_guest_tests::exporter::{Exporter, Sample};
use neuron_ds_guest_tests::identity::Identity;
use neuron_ds_guest_tests::kubelet::{pod_holding, FakeKubelet};
use neuron_ds_guest_tests::{eventually, helper_path, sysfs_core_count, Producer, DEVICE};
use serde_json::Value;

/// `execution_status_total`'s `status_type` values and the counters they sum
/// (neuron-monitor's `execution_stats`).
const STATUS_TYPES: [(&str, NcCounter); 6] = [
    ("completed", NcCounter::InferCompleted),
    ("completed_with_err", NcCounter::InferCompletedWithErr),
    (
        "completed_with_num_err",
        NcCounter::InferCompletedWithNumErr,
    ),
    ("timed_out", NcCounter::InferTimedOut),
    ("incorrect_input", NcCounter::InferIncorrectInput),
    ("failed_to_queue", NcCounter::InferFailedToQueue),
];

/// Longest a report of a 30 s exporter can take to show what happened, with room for a slow
/// guest.
const SLOW_REPORT: Duration = Duration::from_secs(180);

/// `CAP_PERFMON`.
const CAP_PERFMON: u32 = 38;

/// A directory of this test's own, emptied.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new("/tmp").join(format!("exporter-exact-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `nds-loadgen ARGS...`, which must succeed; returns its standard output.
fn loadgen(args: &[&str]) -> String {
    let output = Command::new(helper_path("nds-loadgen"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "nds-loadgen {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A load generator run with `args`, its summary kept in `dir/name.json`, checked against
/// the kernel's totals (a baseline taken just before it); returns its producers' reports.
fn run_and_compare(dir: &Path, name: &str, args: &[&str]) -> Vec<Value> {
    let baseline = dir.join(format!("{name}-baseline.json"));
    fs::write(&baseline, loadgen(&["baseline"])).unwrap();
    let summary = dir.join(format!("{name}.json"));
    let mut run = vec!["run", "--summary", summary.to_str().unwrap()];
    run.extend_from_slice(args);
    loadgen(&run);
    let compared = loadgen(&[
        "compare",
        "--summary",
        summary.to_str().unwrap(),
        "--baseline",
        baseline.to_str().unwrap(),
    ]);
    println!("{name}: {}", compared.lines().last().unwrap_or_default());
    let summary: Value = serde_json::from_str(&fs::read_to_string(&summary).unwrap()).unwrap();
    summary["producers"].as_array().unwrap().clone()
}

/// What `producer`'s report says it added to `counter` on its device's core `core`.
fn wrote(producer: &Value, core: &str, counter: NcCounter) -> f64 {
    producer["nc_counters"][core][counter.name()]
        .as_u64()
        .unwrap_or(0) as f64
}

/// What `producer` added to `counter` over all its cores.
fn wrote_all(producer: &Value, counter: NcCounter) -> f64 {
    producer["nc_counters"]
        .as_object()
        .map(|cores| {
            cores
                .keys()
                .map(|core| wrote(producer, core, counter))
                .sum()
        })
        .unwrap_or(0.0)
}

/// The value of the one sample of `name` with `labels`, 0 if the exposition has none (a
/// counter never incremented may have no series).
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<_> = samples.iter().filter(|s| s.is(name, labels)).collect();
    assert!(found.len() <= 1, "{name} {labels:?}: {found:?}");
    found.first().map_or(0.0, |s| s.value)
}

/// The ledger records the exporter took, by outcome.
fn outcome(samples: &[Sample], outcome: &str) -> f64 {
    value(
        samples,
        "nds_monitor_ledger_records_total",
        &[("outcome", outcome)],
    )
}

fn tag_of(producer: &Value) -> &str {
    producer["tag"].as_str().unwrap()
}

#[test]
fn tag_process_and_pod_series_end_exact_under_a_30s_period() {
    let dir = scratch("period");
    let socket = dir.join("kubelet.sock");
    let kubelet = FakeKubelet::start(&socket);
    kubelet.set(vec![
        pod_holding("ml", "trainer-a", "main", &[0]),
        pod_holding("ml", "trainer-b", "main", &[1]),
    ]);
    let exporter = Exporter::start(
        Identity::Root,
        &[
            "--period",
            "30s",
            "--pod-resources-socket",
            socket.to_str().unwrap(),
            "--pod-resources-period",
            "1s",
        ],
        Stdio::inherit(),
    );
    // The second call means the first answer is the exporter's.
    eventually("the exporter asked the kubelet twice", || {
        kubelet.calls() >= 2
    });

    // Producers that the exporter reads while they run, ending between two of its reports,
    // the last two SIGKILLed halfway; then producers so short that no tick sees them.
    let mut producers = run_and_compare(
        &dir,
        "long",
        &[
            "--devices",
            "0,1",
            "--procs-per-device",
            "3",
            "--duration",
            "6s",
            "--rate",
            "200",
            "--crash",
            "2",
            "--tag-prefix",
            "exact",
        ],
    );
    assert_eq!(producers.iter().filter(|p| p["crashed"] == true).count(), 2);
    producers.extend(run_and_compare(
        &dir,
        "blink",
        &[
            "--devices",
            "0,1",
            "--procs-per-device",
            "2",
            "--count",
            "3",
            "--rate",
            "0",
            "--tag-prefix",
            "blink",
        ],
    ));
    let ended = producers.len() as f64;

    let samples = exporter.samples_when(
        "a report after every producer's record",
        SLOW_REPORT,
        |samples| outcome(samples, "final") + outcome(samples, "unseen") >= ended,
    );
    println!(
        "records: final {}, unseen {}, history {}",
        outcome(&samples, "final"),
        outcome(&samples, "unseen"),
        outcome(&samples, "history")
    );
    assert_eq!(
        outcome(&samples, "final") + outcome(&samples, "unseen"),
        ended
    );
    assert_eq!(outcome(&samples, "late"), 0.0);
    assert_eq!(outcome(&samples, "redacted"), 0.0);
    assert_eq!(
        value(&samples, "nds_monitor_ledger_lost_records_total", &[]),
        0.0
    );

    let cores_per_device = sysfs_core_count(0) as u64;
    let mut per_pod: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for producer in &producers {
        let tag = tag_of(producer);
        let pid = producer["pid"].as_i64().unwrap().to_string();
        let device = producer["device"].as_u64().unwrap();
        let pod = if device == 0 {
            "trainer-a"
        } else {
            "trainer-b"
        };
        for (status_type, counter) in STATUS_TYPES {
            let written = wrote_all(producer, counter);
            let exported = value(
                &samples,
                "execution_status_total",
                &[("runtime_tag", tag), ("status_type", status_type)],
            );
            assert_eq!(exported, written, "{tag} {status_type}");
            *per_pod.entry((pod, status_type)).or_default() += written;
        }
        // Per process and NeuronCore (numbered instance-wide), every status node's counter.
        let cores = producer["nc_counters"].as_object().unwrap();
        for core in cores.keys() {
            let instance_core =
                (device * cores_per_device + core.parse::<u64>().unwrap()).to_string();
            for node in SYSFS_COUNTERS
                .iter()
                .filter(|n| n.group == SysfsGroup::Status)
            {
                let nds_abi::sysfs::CounterSource::Nc(counter) = node.source else {
                    continue;
                };
                let exported = value(
                    &samples,
                    "nds_runtime_status_total",
                    &[
                        ("pid", pid.as_str()),
                        ("neuroncore", instance_core.as_str()),
                        ("status", node.name),
                    ],
                );
                assert_eq!(
                    exported,
                    wrote(producer, core, counter),
                    "pid {pid} ({tag}) core {instance_core} {}",
                    node.name
                );
            }
        }
    }
    for ((pod, status_type), written) in &per_pod {
        let exported = value(
            &samples,
            "nds_pod_execution_status_total",
            &[
                ("pod", pod),
                ("namespace", "ml"),
                ("container", "main"),
                ("status_type", status_type),
            ],
        );
        assert_eq!(exported, *written, "{pod} {status_type}");
    }
    println!(
        "{} producers ({} tags, 2 killed, 4 of 3 executions each): every per-tag, per-process \
         and per-pod counter equals what they wrote",
        producers.len(),
        producers.len()
    );
}

/// The tenures of `count` producers on device 0, one after another, each adding `value` to
/// completed executions of core 0.
fn short_tenures(count: usize, value: u64) {
    let completed = NcCounter::InferCompleted.index();
    for _ in 0..count {
        Producer::start(DEVICE, &[(0, completed, value)])
            .unwrap()
            .release_and_exit();
    }
}

/// Sends `signal` to `pid`.
fn signal(pid: i32, signal: libc::c_int) {
    // SAFETY: a signal to a child of this test.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

#[test]
fn a_ledger_that_overflowed_while_the_exporter_was_stopped_is_counted_and_logged() {
    let dir = scratch("gap");
    let log = dir.join("stderr");
    let exporter = Exporter::start(
        Identity::Root,
        &["--period", "1s"],
        Stdio::from(fs::File::create(&log).unwrap()),
    );
    // One tenure the exporter has taken: it has read the ledger up to here.
    short_tenures(1, 1);
    let taken = |samples: &[Sample]| outcome(samples, "final") + outcome(samples, "unseen");
    exporter.samples_when("the first record taken", SLOW_REPORT, |s| taken(s) >= 1.0);

    signal(exporter.pid(), libc::SIGSTOP);
    let capacity = nds_abi::ledger::LEDGER_CAPACITY;
    let overflow = 6;
    short_tenures(capacity + overflow, 2);
    signal(exporter.pid(), libc::SIGCONT);

    let lost = |samples: &[Sample]| value(samples, "nds_monitor_ledger_lost_records_total", &[]);
    let samples = exporter.samples_when("the gap and the kept records", SLOW_REPORT, |s| {
        lost(s) + taken(s) >= (1 + capacity + overflow) as f64
    });
    assert_eq!(lost(&samples), overflow as f64);
    assert_eq!(taken(&samples), (1 + capacity) as f64);
    let log = fs::read_to_string(&log).unwrap();
    let said = log
        .lines()
        .find(|line| line.contains("the tenure ledger dropped records"))
        .unwrap_or_else(|| panic!("no gap logged:\n{log}"));
    let range = said
        .split("dropped records ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|range| range.split_once("..="))
        .map(|(first, last)| (first.parse::<u64>().unwrap(), last.parse::<u64>().unwrap()))
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(range.1 - range.0 + 1, overflow as u64, "{said}");
    println!("{said}");
}

/// Device 0's node opened to a group, as the project's udev rule does for `neuron` (root:
/// neuron 0660); the node's owner and mode come back when dropped.
struct NodeGroup {
    uid: u32,
    gid: u32,
    mode: u32,
}

impl NodeGroup {
    fn grant(gid: u32) -> Self {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let meta = fs::metadata(DEVICE).unwrap();
        std::os::unix::fs::chown(DEVICE, None, Some(gid)).unwrap();
        fs::set_permissions(DEVICE, fs::Permissions::from_mode(0o660)).unwrap();
        Self {
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode() & 0o7777,
        }
    }
}

impl Drop for NodeGroup {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::os::unix::fs::chown(DEVICE, Some(self.uid), Some(self.gid));
        let _ = fs::set_permissions(DEVICE, fs::Permissions::from_mode(self.mode));
    }
}

/// Ends `count` tenures of root on device 0 while an exporter runs as `identity`; returns
/// what it made of their records.
fn records_taken_by(identity: Identity, count: usize) -> (f64, f64, f64) {
    let exporter = Exporter::start(identity, &["--period", "1s"], Stdio::inherit());
    // Its first read of the ledger made what was there history; the tenures come after.
    exporter.samples_when("the ledger followed", SLOW_REPORT, |s| {
        s.iter()
            .any(|s| s.name == "nds_monitor_ledger_records_total")
    });
    short_tenures(count, 3);
    let samples = exporter.samples_when("every record taken", SLOW_REPORT, |s| {
        ["final", "unseen", "redacted"]
            .iter()
            .map(|o| outcome(s, o))
            .sum::<f64>()
            >= count as f64
    });
    (
        outcome(&samples, "final"),
        outcome(&samples, "unseen"),
        outcome(&samples, "redacted"),
    )
}

#[test]
fn an_exporter_gets_whole_records_only_of_the_tenures_it_may_read() {
    // The exporter's user is in the node's group (its own: setresgid to 1001), as a
    // monitor is in `neuron`.
    let _group = NodeGroup::grant(1001);
    let count = 4;
    let (whole, unseen, redacted) = records_taken_by(Identity::User(1001), count);
    assert_eq!((whole, unseen, redacted), (0.0, 0.0, count as f64));
    let (whole, unseen, redacted) =
        records_taken_by(Identity::UserWithCap(1001, CAP_PERFMON), count);
    assert_eq!(
        (whole + unseen, redacted),
        (count as f64, 0.0),
        "perfmon reads every record whole"
    );
}

#[test]
fn a_restarted_exporter_counts_no_record_twice_and_none_from_before_it() {
    let completed = |samples: &[Sample], tag: &str| {
        value(
            samples,
            "execution_status_total",
            &[("runtime_tag", tag), ("status_type", "completed")],
        )
    };
    let first = Exporter::start(Identity::Root, &["--period", "1s"], Stdio::inherit());
    let before = Actor::start("root", "tagged", &["0", "restart-before", "7"]);
    assert_eq!(before.hello, "ready");
    before.stop();
    first.samples_when("the first exporter's count", SLOW_REPORT, |s| {
        completed(s, "restart-before") == 7.0
    });
    // Between the two exporters: a tenure that ends while none runs, and one that lives on.
    let between = Actor::start("root", "tagged", &["0", "restart-between", "11"]);
    drop(first);
    between.stop();
    let mut across = Actor::start("root", "tagged", &["0", "restart-across", "13"]);

    let second = Exporter::start(Identity::Root, &["--period", "1s"], Stdio::inherit());
    second.samples_when("the live tenure attached", SLOW_REPORT, |s| {
        s.iter().any(|s| {
            s.name == "nds_runtime_info"
                && s.labels.get("runtime_tag").map(String::as_str) == Some("restart-across")
        })
    });
    assert_eq!(across.ask("add 17").as_deref(), Some("added"));
    across.stop();
    let after = Actor::start("root", "tagged", &["0", "restart-after", "19"]);
    after.stop();

    let samples = second.samples_when("both tenures' records taken", SLOW_REPORT, |s| {
        completed(s, "restart-after") == 19.0 && outcome(s, "final") >= 1.0
    });
    // Only what was written after the second exporter's first reading: the across tenure's
    // 13 belong to the exporter before (the restart rule); the two that ended before it are
    // history.
    assert_eq!(completed(&samples, "restart-across"), 17.0);
    assert_eq!(completed(&samples, "restart-before"), 0.0);
    assert_eq!(completed(&samples, "restart-between"), 0.0);
    assert!(
        outcome(&samples, "history") >= 2.0,
        "{}",
        outcome(&samples, "history")
    );
    assert_eq!(
        outcome(&samples, "final") + outcome(&samples, "unseen"),
        2.0
    );
    println!(
        "after the restart: across 17 of 13 + 17 (the rest before it), after 19, history {}",
        outcome(&samples, "history")
    );
}
