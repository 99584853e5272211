//! The exporter's counters only go up: processes sharing a tag add up, a process that ends
//! leaves its last value in its tag's series, a slab reused by a process with the same pid
//! continues its series, and `_created` stays the time the series was first seen.

mod common;

use std::time::{Duration, Instant};

use common::*;
use nds_document::Plan;
use nds_exporter::Exporter;
use nds_sampler::Monitor;

const SECOND: Duration = Duration::from_secs(1);

/// The value of `family{labels…}` in the exposition of `monitor`'s counters (the labels are
/// matched as rendered, e.g. `runtime_tag="shared"`).
fn value(monitor: &Monitor<Exporter>, family: &str, labels: &[&str]) -> f64 {
    monitor
        .consumer()
        .counters()
        .exported()
        .find(|series| {
            series.family.metric.name == family && labels.iter().all(|l| series.labels.contains(l))
        })
        .map_or(0.0, |series| series.value)
}

fn created(monitor: &Monitor<Exporter>, family: &str, labels: &[&str]) -> f64 {
    monitor
        .consumer()
        .counters()
        .exported()
        .find(|series| {
            series.family.metric.name == family && labels.iter().all(|l| series.labels.contains(l))
        })
        .map(|series| series.created)
        .unwrap()
}

const COMPLETED: [&str; 2] = ["runtime_tag=\"shared\"", "status_type=\"completed\""];

#[test]
fn tag_totals_follow_every_process_and_never_drop() {
    let scratch = Scratch::new("counters-tag");
    let t0 = Instant::now();
    let mut monitor =
        Monitor::new(scratch.source(), Plan::everything(SECOND), t0).with_consumer(Exporter::new());
    let a = produce(&scratch.slabs(), 0, 7001, "shared", 120);
    let b = produce(&scratch.slabs(), 0, 7002, "shared", 60);
    let completed = |report: &nds_loadgen::ProducerReport| report.statuses["NRT_SUCCESS"] as f64;
    let mut seen = Vec::new();
    let mut now = t0;
    let mut tick = |monitor: &mut Monitor<Exporter>, seen: &mut Vec<f64>| {
        now += SECOND;
        let _ = monitor.poll(now);
        seen.push(value(monitor, "execution_status_total", &COMPLETED));
    };
    tick(&mut monitor, &mut seen);
    assert_eq!(
        seen[0],
        completed(&a) + completed(&b),
        "two processes of one tag add up"
    );
    let born = created(&monitor, "execution_status_total", &COMPLETED);
    assert!(born > 1.5e9, "a Unix time: {born}");

    // A ends (its file goes): its executions stay in the tag's total.
    std::fs::remove_file(slab_path(&scratch.slabs(), 0, 7001)).unwrap();
    tick(&mut monitor, &mut seen);
    assert_eq!(
        seen[1], seen[0],
        "the total did not drop when a process ended"
    );

    // B runs more; a new process C joins the tag.
    produce_more(&scratch.slabs(), 0, 7002, "shared", 40);
    let c = produce(&scratch.slabs(), 0, 7003, "shared", 30);
    tick(&mut monitor, &mut seen);
    let b_now = {
        let slab = nds::Reader::open(
            &nds::Backend::file(slab_path(&scratch.slabs(), 0, 7002)),
            7002,
        )
        .unwrap();
        (0..2)
            .map(|core| {
                slab.nc_counter(core, nds_abi::counters::NcCounter::InferCompleted.index())
                    .unwrap()
            })
            .sum::<u64>() as f64
    };
    assert_eq!(seen[2], completed(&a) + b_now + completed(&c));

    // B's slab is reused by a process with the same pid (a new slab under the same name):
    // the tag's and the pid's series both continue from where they were.
    let pid_labels = ["pid=\"7002\"", "neuroncore=\"0\"", "status=\"success\""];
    let b_core0_before = value(&monitor, "nds_runtime_status_total", &pid_labels);
    assert!(b_core0_before > 0.0);
    std::fs::remove_file(slab_path(&scratch.slabs(), 0, 7002)).unwrap();
    tick(&mut monitor, &mut seen);
    let again = produce(&scratch.slabs(), 0, 7002, "shared", 25);
    tick(&mut monitor, &mut seen);
    assert_eq!(seen[4], seen[2] + completed(&again));
    assert_eq!(
        value(&monitor, "nds_runtime_status_total", &pid_labels),
        b_core0_before + again.nc(0, "NDS_NC_COUNTER_INFER_COMPLETED") as f64,
        "the pid's series continued"
    );
    assert!(seen.windows(2).all(|pair| pair[0] <= pair[1]), "{seen:?}");
    assert_eq!(
        created(&monitor, "execution_status_total", &COMPLETED),
        born
    );
    assert_eq!(
        value(
            &monitor,
            "nds_monitor_slabs_ended_total",
            &["reason=\"released\""]
        ),
        2.0
    );
}

#[test]
fn a_tag_filtered_out_feeds_nothing_and_sampling_follows_the_rule() {
    let scratch = Scratch::new("counters-filter");
    produce(&scratch.slabs(), 0, 7101, "kept", 40);
    produce(&scratch.slabs(), 0, 7102, "dropped", 40);
    let config: nds_document::config::ConfigFile = serde_json::from_str(
        r#"{"period": "1s", "neuron_runtimes": [
            {"tag_filter": "^kept$", "metrics": [{"type": "execution_stats"}]},
            {"tag_filter": "^other$", "metrics": [{"type": "memory_used"}]}]}"#,
    )
    .unwrap();
    let t0 = Instant::now();
    let mut monitor = Monitor::new(scratch.source(), Plan::from_config(&config).unwrap(), t0)
        .with_consumer(Exporter::new());
    let _ = monitor.poll(t0 + SECOND);
    assert!(
        value(
            &monitor,
            "execution_status_total",
            &["runtime_tag=\"kept\""]
        ) > 0.0
    );
    let tags: Vec<String> = monitor
        .consumer()
        .counters()
        .exported()
        .map(|series| series.labels.to_owned())
        .collect();
    assert!(
        tags.iter().all(|labels| !labels.contains("dropped")),
        "{tags:?}"
    );
    assert!(
        tags.iter().all(|labels| !labels.contains("neuroncore=")),
        "no nds_counters in the rule: no per-core series"
    );
}

/// A restart of the exporter is a reset of the per-tag series, to no more than the new
/// process saw: a slab whose process ran before the monitor started counts from the
/// monitor's first reading (its earlier executions were the previous monitor's to expose),
/// while its per-process series and a process that is not visible count their whole lives.
#[test]
fn after_a_restart_a_tag_counts_only_what_the_new_monitor_saw() {
    let scratch = Scratch::new("counters-restart");
    let live = own_pid();
    // This test process ran before every monitor below.
    scratch.show_process(live);
    let before = produce(&scratch.slabs(), 0, live, "restart", 80);
    let completed = ["runtime_tag=\"restart\"", "status_type=\"completed\""];
    let pid_core0 = [
        &*format!("pid=\"{live}\""),
        "neuroncore=\"0\"",
        "status=\"success\"",
    ];
    let mut previous_first = None;
    for restart in 0..2 {
        let t0 = Instant::now();
        let mut monitor = Monitor::new(scratch.source(), Plan::everything(SECOND), t0)
            .with_consumer(Exporter::new());
        let _ = monitor.poll(t0 + SECOND);
        assert_eq!(
            value(&monitor, "execution_status_total", &completed),
            0.0,
            "start {restart}: the running process's earlier executions are not counted again"
        );
        let whole: f64 = value(&monitor, "nds_runtime_status_total", &pid_core0);
        assert!(
            whole > 0.0,
            "the per-process series counts the process's whole life"
        );
        if let Some(first) = previous_first {
            assert!(whole >= first);
        }
        previous_first = Some(whole);
        let more = produce_in_unit(&scratch.slabs(), 0, live, "restart", 30, Default::default());
        let _ = monitor.poll(t0 + 2 * SECOND);
        assert_eq!(
            value(&monitor, "execution_status_total", &completed),
            more.statuses["NRT_SUCCESS"] as f64,
            "start {restart}: what ran after the start is counted"
        );
    }
    assert!(before.statuses["NRT_SUCCESS"] > 0);
    // A slab whose process is gone (no entry in the scratch /proc) counts whole, as one that
    // started after the monitor.
    let t0 = Instant::now();
    let mut monitor =
        Monitor::new(scratch.source(), Plan::everything(SECOND), t0).with_consumer(Exporter::new());
    let gone = produce(&scratch.slabs(), 0, 999_999_999, "gone", 20);
    let _ = monitor.poll(t0 + SECOND);
    assert_eq!(
        value(
            &monitor,
            "execution_status_total",
            &["runtime_tag=\"gone\"", "status_type=\"completed\""]
        ),
        gone.statuses["NRT_SUCCESS"] as f64
    );
}

/// A FIFO where a slab file should be never blocks the monitor: it is refused at once,
/// reported, and counted once in `nds_monitor_attach_failures_total{reason="not_a_slab"}`
/// however many refreshes meet it; a real slab beside it is read as usual.
#[test]
fn a_fifo_in_the_slab_directory_is_one_attach_failure_and_blocks_nothing() {
    let scratch = Scratch::new("counters-fifo");
    let fifo = slab_path(&scratch.slabs(), 0, 4242);
    let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let real = produce(&scratch.slabs(), 0, 7101, "beside", 10);
    let (done, polled) = std::sync::mpsc::channel();
    let source = scratch.source();
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut monitor =
            Monitor::new(source, Plan::everything(SECOND), t0).with_consumer(Exporter::new());
        for tick in 1..=3 {
            let _ = monitor.poll(t0 + tick * SECOND);
        }
        let _ = done.send(monitor);
    });
    let monitor = polled
        .recv_timeout(Duration::from_secs(20))
        .expect("the monitor stalled on the FIFO");
    let failures = |reason: &str| {
        value(
            &monitor,
            "nds_monitor_attach_failures_total",
            &[&format!("reason=\"{reason}\"")],
        )
    };
    assert_eq!(
        failures("not_a_slab"),
        1.0,
        "counted once over three refreshes"
    );
    for other in ["no_permission", "vanished", "no_pid_view", "other"] {
        assert_eq!(failures(other), 0.0, "{other}");
    }
    assert_eq!(
        value(
            &monitor,
            "execution_status_total",
            &["runtime_tag=\"beside\"", "status_type=\"completed\""]
        ),
        real.statuses["NRT_SUCCESS"] as f64
    );
}
