//! The event stream of `serve`: followed from `since=0` during a load, resumed after the
//! client went away and after the exporter restarted on the same state directory, each
//! counter's event deltas add up to what the producers wrote (what the kernel's total of that
//! node gains when their slabs are released), the numbers run without a hole and no event
//! comes twice; a ring smaller than the load declares what it lost.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::error_counts::{errors_written, ERROR_MIX};
use common::*;
use serde_json::Value;

fn serve(scratch: &Scratch, state_dir: &Path, extra: &[&str]) -> Served {
    let mut command = scratch.monitor_command("100ms");
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state_dir)
        .args(extra);
    Served::start(&mut command)
}

fn lines(body: &str) -> Vec<Value> {
    body.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// A client of the stream: what it saw, and where it is.
#[derive(Default)]
struct Client {
    stream: Option<String>,
    last: u64,
    events: Vec<Value>,
}

impl Client {
    /// Takes what follows its last number; every line must be the next number of its stream.
    fn poll(&mut self, served: &Served) {
        let path = match &self.stream {
            Some(stream) => format!("/api/v1/events?since={}&stream={stream}", self.last),
            None => format!("/api/v1/events?since={}", self.last),
        };
        let response = served.get(&path);
        assert!(response.status.contains(" 200 "), "{response:?}");
        assert_eq!(
            response.header("content-type"),
            Some("application/x-ndjson")
        );
        for line in lines(&response.body) {
            assert!(
                line.get("seq").is_some(),
                "no gap or reset expected: {line}"
            );
            assert_eq!(line["seq"], self.last + 1, "numbers run without a hole");
            let stream = line["stream"].as_str().unwrap().to_owned();
            assert_eq!(self.stream.get_or_insert(stream.clone()), &stream);
            self.last += 1;
            self.events.push(line);
        }
    }

    /// Each counter's event deltas, added up.
    fn counted(&self) -> BTreeMap<String, u64> {
        let mut sums = BTreeMap::new();
        for event in self
            .events
            .iter()
            .filter(|event| event["kind"] == "counter")
        {
            let counter = event["counter"].as_str().unwrap().to_owned();
            *sums.entry(counter).or_insert(0) += event["delta"].as_u64().unwrap();
        }
        sums
    }

    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["kind"] == kind).collect()
    }
}

#[test]
fn every_rise_is_evented_once_across_a_client_away_and_an_exporter_restart() {
    let scratch = Scratch::new("events-exact");
    scratch.sysfs(1, 2, 0, 0);
    let state_dir = scratch.0.join("state");
    let slabs = scratch.slabs();
    let mut client = Client::default();
    let mut produced = Vec::new();

    let first = serve(&scratch, &state_dir, &[]);
    client.poll(&first);
    produced.push(produce_mix(&slabs, 0, 301, "a", 300, ERROR_MIX));
    first.two_more_reports();
    client.poll(&first);
    assert_eq!(
        client.counted(),
        errors_written(&produced),
        "followed during the load"
    );
    let unhealthy = client.of_kind("verdict").into_iter().any(|verdict| {
        verdict["state"] == "unhealthy" && verdict.get("neuroncore_index").is_none()
    });
    assert!(
        unhealthy,
        "the device's verdict changed: {:?}",
        client.events
    );

    // The client goes away; the load goes on, in the same slab and a new one.
    produced.push(produce_mix(&slabs, 0, 301, "a", 200, ERROR_MIX));
    produced.push(produce_mix(&slabs, 0, 302, "b", 200, ERROR_MIX));
    first.two_more_reports();
    client.poll(&first);
    assert_eq!(
        client.counted(),
        errors_written(&produced),
        "resumed after going away"
    );

    // The exporter stops; its tenures live on and count while no exporter runs.
    let stream = client.stream.clone();
    assert!(first.stop_with(libc::SIGTERM).success());
    produced.push(produce_mix(&slabs, 0, 301, "a", 200, ERROR_MIX));
    produced.push(produce_mix(&slabs, 0, 302, "b", 100, ERROR_MIX));
    let second = serve(&scratch, &state_dir, &[]);
    produced.push(produce_mix(&slabs, 0, 302, "b", 100, ERROR_MIX));
    second.two_more_reports();
    client.poll(&second);
    assert_eq!(client.stream, stream, "the stream resumed");
    assert_eq!(
        client.counted(),
        errors_written(&produced),
        "resumed after the restart"
    );

    // The tenures end: their ends are evented, and nothing more is counted.
    std::fs::remove_file(slab_path(&slabs, 0, 301)).unwrap();
    std::fs::remove_file(slab_path(&slabs, 0, 302)).unwrap();
    second.two_more_reports();
    client.poll(&second);
    assert_eq!(client.counted(), errors_written(&produced));
    let mut ends: Vec<(i64, &str)> = client
        .of_kind("tenure_end")
        .into_iter()
        .map(|end| (end["pid"].as_i64().unwrap(), end["end"].as_str().unwrap()))
        .collect();
    ends.sort_unstable();
    assert_eq!(ends, [(301, "released"), (302, "released")]);
    validate_with("events.schema.json", &client.events);
    let devices: Value = serde_json::from_str(&second.get("/api/v1/devices").body).unwrap();
    assert_eq!(devices["events"]["last_seq"], client.last);
    assert_eq!(
        devices["events"]["stream"].as_str(),
        client.stream.as_deref()
    );
    validate_with("devices.schema.json", &[devices]);
}

#[test]
fn a_ring_smaller_than_the_load_declares_what_it_lost() {
    let scratch = Scratch::new("events-gap");
    scratch.sysfs(1, 2, 0, 0);
    let served = serve(
        &scratch,
        &scratch.0.join("state"),
        &["--events-capacity", "4"],
    );
    produce_mix(&scratch.slabs(), 0, 401, "gap", 300, ERROR_MIX);
    served.two_more_reports();
    let devices: Value = serde_json::from_str(&served.get("/api/v1/devices").body).unwrap();
    let last = devices["events"]["last_seq"].as_u64().unwrap();
    assert!(last > 4, "more events than the ring holds: {devices}");
    let answer = lines(&served.get("/api/v1/events?since=0").body);
    assert_eq!(answer[0]["kind"], "gap", "{answer:?}");
    let first_held = answer[1]["seq"].as_u64().unwrap();
    assert_eq!(
        (&answer[0]["first"], &answer[0]["last"], &answer[0]["lost"]),
        (
            &1.into(),
            &(first_held - 1).into(),
            &(first_held - 1).into()
        )
    );
    assert_eq!(answer.len(), 5, "the gap, then the four events held");
    let held: Vec<u64> = answer[1..]
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(held, (first_held..first_held + 4).collect::<Vec<_>>());
    validate_with("events.schema.json", &answer);
}

#[test]
fn a_client_of_another_stream_is_reset_and_reads_change_nothing() {
    let scratch = Scratch::new("events-reset");
    scratch.sysfs(1, 2, 0, 0);
    // No state directory: each start is a new stream.
    let mut command = scratch.monitor_command("100ms");
    command.args(["serve", "--listen", "127.0.0.1:0"]);
    let served = Served::start(&mut command);
    served.two_more_reports();
    let whole = served.get("/api/v1/events?since=0").body;
    assert!(!whole.is_empty(), "the first verdicts are events");
    let again = served.get("/api/v1/events?since=0").body;
    assert!(again.starts_with(&whole), "a read takes nothing away");
    let stream = lines(&whole)[0]["stream"].as_str().unwrap().to_owned();
    for path in [
        "/api/v1/events?since=0&stream=another".to_owned(),
        format!("/api/v1/events?since=999999&stream={stream}"),
    ] {
        let answer = lines(&served.get(&path).body);
        assert_eq!(answer[0]["kind"], "reset", "{path}: {answer:?}");
        assert_eq!(answer[0]["stream"], stream.as_str());
        assert_eq!(answer[1]["seq"], 1, "then the whole ring");
        validate_with("events.schema.json", &answer);
    }
    for bad in ["since=-1", "since=ten", "from=3"] {
        let response = served.get(&format!("/api/v1/events?{bad}"));
        assert!(response.status.contains(" 400 "), "{bad}: {response:?}");
        assert!(!response.body.trim().is_empty(), "{bad}: says why");
    }
}
