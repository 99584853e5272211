//! Multi-process torture: one producer rewriting records as fast as it can, a second writer
//! process bumping the same counters, and several reader processes verifying every record they
//! accept. No accepted record may be inconsistent, and the counters must end exactly at the
//! sum of both writers' net increments.

mod common;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};

use common::ScratchDir;
use nds::abi::counters::NdCounter;
use nds::{Backend, CounterSnapshot, Producer, Reader, SlabRead};

const RUN_MILLIS: &str = "2000";
const READERS: usize = 3;

fn spawn(mode: &str, slab: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_nds-torture"))
        .args([mode, slab.to_str().unwrap(), RUN_MILLIS])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn nds-torture")
}

/// Waits for `child` and parses its `key=value` report.
fn report(child: Child) -> HashMap<String, u64> {
    let output = child.wait_with_output().expect("wait for nds-torture");
    assert!(
        output.status.success(),
        "nds-torture failed: {:?}",
        output.status
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .split_whitespace()
        .map(|pair| {
            let (key, value) = pair.split_once('=').expect("key=value");
            (key.to_owned(), value.parse().expect("number"))
        })
        .collect()
}

#[test]
fn concurrent_processes_never_accept_a_torn_record_or_lose_an_increment() {
    let dir = ScratchDir::new();
    let slab = dir.slab_path();
    // Commit the header first so readers never race the producer's open.
    Producer::open(&Backend::file(&slab))
        .unwrap()
        .close()
        .unwrap();

    let producer = spawn("producer", &slab);
    let bumper = spawn("bumper", &slab);
    let readers: Vec<Child> = (0..READERS).map(|_| spawn("reader", &slab)).collect();

    let produced = report(producer)["iterations"];
    let bumped = report(bumper)["iterations"];
    println!("producer iterations={produced} bumper iterations={bumped}");
    let (mut accepted, mut torn) = (0, 0);
    for (number, reader) in readers.into_iter().enumerate() {
        let counts = report(reader);
        println!(
            "reader {number}: accepted={} torn={} empty={} inconsistent={}",
            counts["accepted"], counts["torn"], counts["empty"], counts["inconsistent"]
        );
        assert_eq!(
            counts["inconsistent"], 0,
            "reader {number} accepted a torn record"
        );
        assert!(counts["snapshots"] > 0, "reader {number} took no snapshot");
        accepted += counts["accepted"];
        torn += counts["torn"];
    }
    println!("total accepted={accepted} torn detected={torn}");
    assert!(produced > 0 && bumped > 0);
    assert!(accepted > 0, "readers never saw a consistent record");

    let check = Reader::open(&Backend::file(&slab), 1).unwrap();
    let mut counters = Box::new(CounterSnapshot::new());
    let SlabRead::Valid(counters) = check.snapshot(&mut counters) else {
        panic!("the final snapshot is not valid");
    };
    let expected = produced + bumped;
    // The ND counter both writers bump (nds-torture's BUMPED_ND_COUNTER).
    assert_eq!(counters.nd(NdCounter::RuntimeVersion), expected);
    for (core, index) in [(0, 1), (3, 40), (15, 94)] {
        assert_eq!(
            counters.nc[core][index], expected,
            "core {core} counter {index}"
        );
    }
}
