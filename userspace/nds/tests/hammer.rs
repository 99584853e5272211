//! Two threads hammering one counter through a pre-resolved handle lose no increment.
//!
//! `make test` runs 2 × 10^7 increments. The full run of the issue (10^9 in all, a few seconds
//! in release) is the same test with the count raised:
//!
//! ```text
//! NDS_HAMMER_INCREMENTS=1000000000 cargo test --release -p nds --test hammer -- --nocapture
//! ```

mod common;

use std::sync::Barrier;

use common::ScratchDir;
use nds::abi::counters::NcCounter;
use nds::{Backend, NeuronCore, Producer, Reader};

/// Total increments over both threads, unless `NDS_HAMMER_INCREMENTS` says otherwise.
const DEFAULT_INCREMENTS: u64 = 20_000_000;

#[test]
fn two_threads_on_one_typed_counter_lose_no_increment() {
    let total = std::env::var("NDS_HAMMER_INCREMENTS")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .unwrap_or(DEFAULT_INCREMENTS);
    let per_thread = total / 2;
    let dir = ScratchDir::new();
    let backend = Backend::file(dir.slab_path());
    let producer = Producer::open(&backend).unwrap();
    let core = NeuronCore::new(3).unwrap();
    let word = producer.nc(core, NcCounter::InferCompleted);
    let start = Barrier::new(2);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                start.wait();
                for _ in 0..per_thread {
                    word.add(1);
                }
            });
        }
    });
    let reader = Reader::open(&backend, 4242).unwrap();
    let counted = reader.nc(core, NcCounter::InferCompleted).get();
    let issued = 2 * per_thread;
    println!(
        "issued {issued} increments from 2 threads, counted {counted}, lost {}",
        issued - counted.min(issued)
    );
    assert_eq!(counted, issued);
}
