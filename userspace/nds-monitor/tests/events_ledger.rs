//! The event stream exact to the end, through the tenure ledger: a tenure's last period, which
//! no reading saw, is evented from its ledger record; after a restart on the same state
//! directory, the records the ledger kept of tenures that ended while no exporter ran are
//! evented as their final values less what the stream had evented of them, and a record the
//! previous exporter had read is not evented again. Slab files have no ledger: the tests push
//! the records the kernel would write ([`common::ledger`]).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::error_counts::{errors_written, ERROR_MIX};
use common::ledger::{realtime_ns, record_of_slab, TestLedger};
use common::*;
use nds_document::health::HealthRules;
use nds_document::Plan;
use nds_exporter::Exporter;
use nds_health::events::DEFAULT_CAPACITY;
use nds_health::state::StateDir;
use nds_health::writer::EventLog;
use nds_health::Health;
use nds_sampler::Monitor;
use serde_json::Value;

const SECOND: Duration = Duration::from_secs(1);
const TICK: Duration = Duration::from_millis(100);
const DEVICE: u32 = 0;

/// A monitor of `scratch` following `ledger`, its exporter and its health view with an event
/// stream kept in `state`, started at `t0`.
fn monitor(
    scratch: &Scratch,
    ledger: &TestLedger,
    state: &Path,
    t0: Instant,
) -> Monitor<(Exporter, Health)> {
    let log = EventLog::new(Some(StateDir::new(state)), DEFAULT_CAPACITY);
    let health = Health::new(HealthRules::default(), t0).with_event_log(log);
    Monitor::new(scratch.source(), Plan::everything(SECOND), t0)
        .with_ledger(Some(Box::new(ledger.clone())))
        .with_consumer((Exporter::new(), health))
}

/// The events `monitor`'s ring holds after `since`, each checked to be the next number.
fn events_after(monitor: &Monitor<(Exporter, Health)>, since: u64) -> Vec<Value> {
    let ring = monitor.consumer().1.events().expect("an event stream");
    let answer = ring.lock().unwrap().since(since, None);
    let events: Vec<Value> = answer
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    for (expected, event) in (since + 1..).zip(&events) {
        assert_eq!(event["seq"], expected, "numbered without a hole: {event}");
    }
    validate_with("events.schema.json", &events);
    events
}

/// Each counter's event deltas in `events`, added up.
fn counted(events: &[Value]) -> BTreeMap<String, u64> {
    let mut sums = BTreeMap::new();
    for event in events.iter().filter(|event| event["kind"] == "counter") {
        let counter = event["counter"].as_str().unwrap().to_owned();
        *sums.entry(counter).or_insert(0) += event["delta"].as_u64().unwrap();
    }
    sums
}

/// The `tenure_end` events of `events`: pid and ledger record.
fn ends(events: &[Value]) -> Vec<(i64, Option<u64>)> {
    events
        .iter()
        .filter(|event| event["kind"] == "tenure_end")
        .map(|end| (end["pid"].as_i64().unwrap(), end["ledger_seq"].as_u64()))
        .collect()
}

#[test]
fn the_last_period_no_reading_saw_is_evented_from_the_ledger_record() {
    let scratch = Scratch::new("events-ledger-final");
    scratch.sysfs(1, 2, 0, 0);
    let slabs = scratch.slabs();
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let mut monitor = monitor(&scratch, &ledger, &scratch.0.join("state"), t0);
    monitor.report_all(t0);
    let pid = 5101;
    let mut produced = vec![produce_mix(&slabs, DEVICE, pid, "final", 300, ERROR_MIX)];
    monitor.report_all(t0 + SECOND);
    let read = events_after(&monitor, 0);
    assert_eq!(counted(&read), errors_written(&produced), "the readings");

    // The last period, which no reading sees: the producer writes it, and its tenure ends.
    produced.push(produce_mix(&slabs, DEVICE, pid, "final", 200, ERROR_MIX));
    let record = record_of_slab(
        &slabs,
        DEVICE,
        pid,
        1,
        monitor.started_ns() + 1,
        "final",
        "",
    );
    std::fs::remove_file(slab_path(&slabs, DEVICE, pid)).unwrap();
    monitor.tick(t0 + SECOND + TICK);
    assert_eq!(
        monitor.awaiting_records(),
        1,
        "the end waits for its record"
    );
    ledger.push(record);
    monitor.tick(t0 + SECOND + 2 * TICK);
    assert_eq!(monitor.awaiting_records(), 0);
    monitor.report_all(t0 + 2 * SECOND);

    let events = events_after(&monitor, 0);
    assert_eq!(counted(&events), errors_written(&produced), "to the end");
    let last = &events[read.len()..];
    assert!(
        last.iter()
            .any(|event| event["kind"] == "counter" && event["final"] == true),
        "the rest came from the record: {last:?}"
    );
    assert_eq!(ends(&events), [(i64::from(pid), Some(1))]);
}

#[test]
fn a_restart_events_what_ended_meanwhile_once_and_what_was_read_never_again() {
    let scratch = Scratch::new("events-ledger-restart");
    scratch.sysfs(1, 2, 0, 0);
    let slabs = scratch.slabs();
    let state = scratch.0.join("state");
    let (done, away, unseen) = (5201, 5202, 5203);

    // The first exporter: one tenure ends under its eyes (ledger record 1), another is live
    // at its last report.
    let ledger = TestLedger::following(&[DEVICE]);
    let t0 = Instant::now();
    let mut first = monitor(&scratch, &ledger, &state, t0);
    first.report_all(t0);
    let mut produced = vec![
        produce_mix(&slabs, DEVICE, done, "done", 200, ERROR_MIX),
        produce_mix(&slabs, DEVICE, away, "away", 200, ERROR_MIX),
    ];
    first.report_all(t0 + SECOND);
    let done_record = record_of_slab(&slabs, DEVICE, done, 1, first.started_ns() + 1, "done", "");
    std::fs::remove_file(slab_path(&slabs, DEVICE, done)).unwrap();
    ledger.push(done_record);
    first.tick(t0 + SECOND + TICK);
    first.report_all(t0 + 2 * SECOND);
    let before = events_after(&first, 0);
    assert_eq!(counted(&before), errors_written(&produced));
    assert_eq!(ends(&before), [(i64::from(done), Some(1))]);
    let (stream, last_seen) = (
        before[0]["stream"].as_str().unwrap().to_owned(),
        before.last().unwrap()["seq"].as_u64().unwrap(),
    );
    drop(first);

    // No exporter runs: the live tenure counts on and ends (record 2), another begins and
    // ends unseen (record 3). The kernel's ledger keeps every record, record 1 too.
    produced.push(produce_mix(&slabs, DEVICE, away, "away", 150, ERROR_MIX));
    let away_record = record_of_slab(&slabs, DEVICE, away, 2, realtime_ns(), "away", "");
    std::fs::remove_file(slab_path(&slabs, DEVICE, away)).unwrap();
    produced.push(produce_mix(
        &slabs, DEVICE, unseen, "unseen", 100, ERROR_MIX,
    ));
    let unseen_record = record_of_slab(&slabs, DEVICE, unseen, 3, realtime_ns(), "unseen", "");
    std::fs::remove_file(slab_path(&slabs, DEVICE, unseen)).unwrap();
    let kept = TestLedger::following(&[DEVICE]);
    for record in [done_record, away_record, unseen_record] {
        kept.push(record);
    }

    // The second exporter on the same state directory.
    let t1 = Instant::now();
    let mut second = monitor(&scratch, &kept, &state, t1);
    second.report_all(t1);
    second.report_all(t1 + SECOND);
    let after = events_after(&second, last_seen);
    assert!(
        after.iter().all(|event| event["stream"] == stream.as_str()),
        "the stream goes on: {after:?}"
    );
    let whole: Vec<Value> = before.iter().chain(&after).cloned().collect();
    assert_eq!(
        counted(&whole),
        errors_written(&produced),
        "every count once, across the restart"
    );
    assert_eq!(
        ends(&after),
        [(i64::from(away), Some(2)), (i64::from(unseen), Some(3))],
        "what ended meanwhile, and not what the first exporter had read"
    );
}
