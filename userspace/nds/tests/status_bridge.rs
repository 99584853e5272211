//! End to end: a producer reports a mixed stream of execution results, generic statuses,
//! error-subtype flags and latencies through the `nrt-status` bridge into a file-backed slab,
//! and a reader opened on the same file sees exactly the expected per-counter sums on every
//! NeuronCore (all three address bands).
//!
//! The expected sums come from literal tables written from the reference (status → counter
//! index), not from the bridge's own tables.

mod common;

use std::collections::HashMap;

use common::{Rng, ScratchDir};
use nds::abi::counters::NDS_TOTAL_NC_COUNTER_COUNT;
use nds::abi::layout::NDS_TOTAL_NEURONCORE_COUNT;
use nrt_status::decode::InferErrorFlags;
use nrt_status::{
    report_error_flags, report_execution, report_generic, report_latencies, Latencies, MemorySink,
    NrtStatus,
};

/// Execution path: (status, outcome counter index).
const EXECUTION: [(u32, usize); 16] = [
    (0, 1),
    (1004, 2),
    (1003, 3),
    (5, 4),
    (1002, 5),
    (7, 6),
    (6, 11),
    (1, 16),
    (2, 19),
    (1006, 30),
    (1200, 31),
    (1201, 32),
    (1202, 33),
    (1203, 34),
    (1204, 35),
    (1205, 40),
];

/// Bumped once per execution result, except for the retry sentinel 1100.
const INFERENCE_COUNT: usize = 28;

/// Generic path: (status, counter index).
const GENERIC: [(u32, usize); 5] = [(1, 16), (2, 19), (4, 17), (9, 18), (10, 20)];

/// Error flags: (subtype = flag byte index, counter index).
const FLAGS: [(usize, usize); 4] = [(5, 36), (6, 37), (7, 38), (8, 39)];

/// Latency counters, set not added: device, total, NC time, CC time.
const LATENCY: [usize; 4] = [13, 14, 15, 21];

/// Every status the stream draws from: the 28 known codes, holes and unknown values.
fn statuses() -> Vec<u32> {
    NrtStatus::ALL
        .iter()
        .map(|status| status.as_u32())
        .chain([8, 12, 16, 1001, 1099, 1207, 4242, u32::MAX])
        .collect()
}

fn lookup<K: PartialEq>(table: &[(K, usize)], key: K) -> Option<usize> {
    table
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, index)| *index)
}

/// The producer and an in-memory mirror receive the same reports; `expected` is kept by hand.
struct Stream {
    producer: nds::Datastore,
    mirror: MemorySink,
    expected: HashMap<(usize, usize), u64>,
}

impl Stream {
    fn add(&mut self, core: usize, index: usize) {
        *self.expected.entry((core, index)).or_insert(0) += 1;
    }

    fn execution(&mut self, core: usize, value: u32) {
        let status = NrtStatus::from_u32(value);
        report_execution(&self.producer, core, status).unwrap();
        report_execution(&self.mirror, core, status).unwrap();
        if let Some(index) = lookup(&EXECUTION, value) {
            self.add(core, index);
        }
        if value != 1100 {
            self.add(core, INFERENCE_COUNT);
        }
    }

    fn generic(&mut self, core: usize, value: u32) {
        let status = NrtStatus::from_u32(value);
        report_generic(&self.producer, core, status).unwrap();
        report_generic(&self.mirror, core, status).unwrap();
        if let Some(index) = lookup(&GENERIC, value) {
            self.add(core, index);
        }
    }

    fn flags(&mut self, core: usize, bytes: [u8; 9]) {
        let flags = InferErrorFlags::from_bytes(bytes);
        report_error_flags(&self.producer, core, &flags).unwrap();
        report_error_flags(&self.mirror, core, &flags).unwrap();
        for (subtype, index) in FLAGS {
            if bytes[subtype] != 0 {
                self.add(core, index);
            }
        }
    }

    fn latencies(&mut self, core: usize, values: [u64; 4]) {
        let [device, total, nc_time, cc_time] = values;
        let latencies = Latencies {
            device,
            total,
            nc_time,
            cc_time,
        };
        report_latencies(&self.producer, core, &latencies).unwrap();
        report_latencies(&self.mirror, core, &latencies).unwrap();
        for (index, value) in LATENCY.into_iter().zip(values) {
            self.expected.insert((core, index), value);
        }
    }
}

#[test]
fn a_mixed_stream_reaches_the_reader_as_exact_sums() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    let mut stream = Stream {
        producer,
        mirror: MemorySink::new(),
        expected: HashMap::new(),
    };
    let statuses = statuses();
    let cores = NDS_TOTAL_NEURONCORE_COUNT;

    // Every status through both paths on every core, then a seeded random mix.
    for core in 0..cores {
        for &value in &statuses {
            stream.execution(core, value);
            stream.generic(core, value);
        }
        stream.flags(core, [1; 9]);
    }
    let mut rng = Rng::new(0x6e72_745f_7374_6174);
    let pick = |rng: &mut Rng| statuses[rng.below(statuses.len() as u64) as usize];
    for step in 0..6000 {
        let core = rng.below(cores as u64) as usize;
        match rng.below(4) {
            0 | 1 => {
                let value = pick(&mut rng);
                stream.execution(core, value);
            }
            2 => {
                let value = pick(&mut rng);
                stream.generic(core, value);
            }
            _ => {
                let mut bytes = [0u8; 9];
                for byte in &mut bytes {
                    *byte = if rng.below(3) == 0 {
                        rng.below(255) as u8 + 1
                    } else {
                        0
                    };
                }
                stream.flags(core, bytes);
            }
        }
        if step % 97 == 0 {
            let values = [rng.next_u64(), rng.next_u64(), rng.below(1000), 0];
            stream.latencies(core, values);
        }
    }

    let mut checked_nonzero = 0;
    for core in 0..cores {
        for index in 0..NDS_TOTAL_NC_COUNTER_COUNT {
            let want = stream.expected.get(&(core, index)).copied().unwrap_or(0);
            let got = reader.nc_counter(core, index).unwrap();
            assert_eq!(got, want, "core {core} counter {index}");
            checked_nonzero += usize::from(want != 0);
        }
    }
    // 16 outcome counters, the inference count, 3 generic-only and 4 flag counters per core.
    assert!(checked_nonzero >= cores * 24, "{checked_nonzero}");

    // The in-memory sink computes the same sums as the slab.
    let mirror: HashMap<(usize, usize), u64> = stream
        .mirror
        .snapshot()
        .into_iter()
        .map(|((core, counter), value)| ((core, counter.index()), value))
        .filter(|(_, value)| *value != 0)
        .collect();
    let expected: HashMap<(usize, usize), u64> = stream
        .expected
        .into_iter()
        .filter(|(_, value)| *value != 0)
        .collect();
    assert_eq!(mirror, expected);
}
