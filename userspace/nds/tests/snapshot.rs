//! `Reader::snapshot`: every counter from its word, and honest about slabs that moved.

mod common;

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

use common::ScratchDir;
use nds::abi::layout::{NDS_REQUIRED_SIZE, SLAB_GENERATION_OFFSET};
use nds::abi::records::NDS_HEADER_WORD;
use nds::{Backend, CounterSnapshot, Producer, Reader, SlabRead};

fn write_generation(dir: &ScratchDir, generation: u64) {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.slab_path())
        .unwrap();
    file.write_all_at(&generation.to_le_bytes(), SLAB_GENERATION_OFFSET as u64)
        .unwrap();
}

#[test]
fn the_snapshot_holds_every_counter_of_every_band() {
    let dir = ScratchDir::new();
    let backend = Backend::file(dir.slab_path());
    let producer = Producer::open(&backend).unwrap();
    let mut value = 1;
    for index in 0..31 {
        producer.set_nd_counter(index, value).unwrap();
        value += 1;
    }
    for core in 0..16 {
        for index in 0..95 {
            producer.set_nc_counter(core, index, value).unwrap();
            value += 1;
        }
    }
    let reader = Reader::open(&backend, 4242).unwrap();
    let mut counters = Box::new(CounterSnapshot::new());
    let SlabRead::Valid(counters) = reader.snapshot(&mut counters) else {
        panic!("snapshot of a quiet slab");
    };
    let mut expected = 1;
    for index in 0..31 {
        assert_eq!(counters.nd[index], expected, "ND {index}");
        expected += 1;
    }
    for core in 0..16 {
        for index in 0..95 {
            assert_eq!(
                counters.nc[core][index], expected,
                "core {core} counter {index}"
            );
            expected += 1;
        }
    }
    // The producer's own view reads the same.
    let mut own = Box::new(CounterSnapshot::new());
    assert_eq!(producer.reader().snapshot(&mut own).valid(), Some(counters));
}

#[test]
fn a_generation_that_moved_since_attach_is_reported_not_copied() {
    let dir = ScratchDir::new();
    let backend = Backend::file(dir.slab_path());
    let producer = Producer::open(&backend).unwrap();
    write_generation(&dir, 5);
    let reader = Reader::open(&backend, 4242).unwrap();
    assert_eq!(reader.attached_generation(), Some(5));
    producer.set_nd_counter(0, 9).unwrap();
    let mut counters = Box::new(CounterSnapshot::new());
    assert!(matches!(reader.snapshot(&mut counters), SlabRead::Valid(c) if c.nd[0] == 9));
    assert_eq!(reader.moved(), None);
    write_generation(&dir, 6);
    assert_eq!(
        reader.snapshot(&mut counters),
        SlabRead::Moved { generation: 6 }
    );
    assert_eq!(reader.moved(), Some(6));
    // Even back at the attached value the reader reads again: only the value matters.
    write_generation(&dir, 5);
    assert!(matches!(reader.snapshot(&mut counters), SlabRead::Valid(_)));
}

#[test]
fn a_file_without_the_generation_word_is_always_valid() {
    let dir = ScratchDir::new();
    let mut bytes = vec![0u8; NDS_REQUIRED_SIZE];
    bytes[..8].copy_from_slice(&NDS_HEADER_WORD.to_le_bytes());
    bytes[8..16].copy_from_slice(&77u64.to_le_bytes());
    std::fs::write(dir.slab_path(), &bytes).unwrap();
    let reader = Reader::open(&Backend::file(dir.slab_path()), 1).unwrap();
    assert_eq!(reader.attached_generation(), None);
    let mut counters = Box::new(CounterSnapshot::new());
    assert!(matches!(reader.snapshot(&mut counters), SlabRead::Valid(c) if c.nd[0] == 77));
    assert_eq!(reader.moved(), None);
}

#[test]
fn snapshots_under_a_hammering_producer_are_valid_and_never_go_back() {
    let dir = ScratchDir::new();
    let backend = Backend::file(dir.slab_path());
    let producer = Producer::open(&backend).unwrap();
    let reader = Reader::open(&backend, 4242).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                for core in 0..16 {
                    for index in 0..95 {
                        producer.increment_nc_counter(core, index, 1).unwrap();
                    }
                }
            }
        });
        let mut last = Box::new(CounterSnapshot::new());
        let mut now = Box::new(CounterSnapshot::new());
        for _ in 0..500 {
            let SlabRead::Valid(counters) = reader.snapshot(&mut now) else {
                panic!("a producer's increments never move the generation");
            };
            for (before, after) in last.nc.iter().flatten().zip(counters.nc.iter().flatten()) {
                assert!(
                    after >= before,
                    "a counter went back: {before} then {after}"
                );
            }
            std::mem::swap(&mut last, &mut now);
        }
        stop.store(true, Ordering::Relaxed);
    });
}
