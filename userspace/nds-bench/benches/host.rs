//! Host benchmarks of `make bench`: counter increments, reader snapshots and records, each next
//! to the reference that `nds-bench-report` divides it by.
//!
//! Run them with `make bench`, or alone with `cargo bench -p nds-bench --features mmv` (drop
//! the feature on a host without Debian's libpcp-mmv1-dev: the MMV rows then show `n/a`).
//! The measuring thread runs on CPU 0; second lanes and the hammering producer on CPU 1.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::Criterion;
use nds::{CounterSnapshot, Model};
use nds::{ModelSlot, Snapshot};
use nds_abi::fnv::fnv1a_32;
use nds_abi::layout::NDS_REQUIRED_SIZE;
use nds_abi::records::{ModelMemUsage, ModelNodeInfo, ModelRecord};
use nds_bench::counters::{raw_increment, typed_increment, Band, Counter, Sharing};
use nds_bench::report::{
    counter_group, ours_increment, peer, record, snapshot, typed_increment as typed_id,
    RECORD_GROUP, SNAPSHOT_GROUP,
};
use nds_bench::slab::{snapshot_counters, MappedWord, RegionMap, ScratchSlab, SNAPSHOT_COUNTERS};
use nds_bench::threads::{pin_to_cpu, run_pair, Hammer, MEASURING_CPU};
use prometheus_client::metrics::counter::Counter as PrometheusCounter;
use zerocopy::{FromZeros, IntoBytes};

/// An atomic word alone on its cache lines, so two of them never share one.
#[repr(align(128))]
#[derive(Default)]
struct OwnLine(AtomicU64);

/// Counts the increments a two-thread run issued, to compare with what the counter shows.
#[derive(Default)]
struct Issued(AtomicU64);

impl Issued {
    /// Records a run of `iters` per lane and passes the measured time through.
    fn pair(&self, iters: u64, time: Duration) -> Duration {
        self.0.fetch_add(2 * iters, Ordering::Relaxed);
        time
    }

    fn report(&self, what: &str, before: u64, after: u64) {
        let issued = self.0.load(Ordering::Relaxed);
        let lost = issued.saturating_sub(after.wrapping_sub(before));
        eprintln!(
            "nds-bench: {what}, 2 threads on one counter: lost {lost} of {issued} increments"
        );
    }
}

fn increments(c: &mut Criterion) {
    let slab = ScratchSlab::new("counters").expect("scratch slab");
    let producer = &slab.producer().expect("producer");
    #[cfg(feature = "mmv")]
    let mmv = nds_bench::mmv::MmvFile::create(slab.dir(), "peer.mmv", 2).expect("MMV file");
    for sharing in Sharing::ALL {
        let mut group = c.benchmark_group(counter_group(sharing));
        for band in Band::ALL {
            let (lane0, lane1) = (sharing.counter(band, 0), sharing.counter(band, 1));
            let (word0, word1) = (
                lane0.word(producer).expect("named counter"),
                lane1.word(producer).expect("named counter"),
            );
            let issued = Issued::default();
            let before = lane0.read(producer.reader()).expect("read");
            group.bench_function(typed_id(band), |b| match sharing {
                Sharing::Single => b.iter(|| typed_increment(word0, 1)),
                Sharing::SameCounter | Sharing::DifferentCounters => b.iter_custom(|iters| {
                    issued.pair(
                        iters,
                        run_pair(
                            iters,
                            || typed_increment(word0, 1),
                            || typed_increment(word1, 1),
                        ),
                    )
                }),
            });
            if sharing == Sharing::SameCounter {
                let after = lane0.read(producer.reader()).expect("read");
                issued.report(&format!("handle ({})", band.label()), before, after);
            }
            let issued = Issued::default();
            let before = lane0.read(producer.reader()).expect("read");
            group.bench_function(ours_increment(band), |b| match sharing {
                // The result is checked, as a caller would, rather than handed to criterion:
                // black-boxing the 32-byte `Result` would add stores the reference does not make.
                Sharing::Single => b.iter(|| lane0.increment(producer, 1).expect("increment")),
                Sharing::SameCounter | Sharing::DifferentCounters => b.iter_custom(|iters| {
                    let lane = |counter: Counter| {
                        move || counter.increment(producer, 1).expect("increment")
                    };
                    issued.pair(iters, run_pair(iters, lane(lane0), lane(lane1)))
                }),
            });
            if sharing == Sharing::SameCounter {
                let after = lane0.read(producer.reader()).expect("read");
                issued.report(&format!("int ({})", band.label()), before, after);
            }
        }
        group.bench_function(peer::RAW, |b| {
            let lanes = [OwnLine::default(), OwnLine::default()];
            let [own0, own1] = &lanes;
            let other = match sharing {
                Sharing::DifferentCounters => own1,
                Sharing::Single | Sharing::SameCounter => own0,
            };
            match sharing {
                Sharing::Single => b.iter(|| raw_increment(&own0.0, 1)),
                Sharing::SameCounter | Sharing::DifferentCounters => b.iter_custom(|iters| {
                    run_pair(
                        iters,
                        || raw_increment(&own0.0, 1),
                        || raw_increment(&other.0, 1),
                    )
                }),
            }
        });
        if sharing == Sharing::Single {
            let word = MappedWord::open(&slab.path(), Band::Nc.counter(0)).expect("slab word");
            group.bench_function(peer::RAW_SLAB, |b| b.iter(|| raw_increment(word.word(), 1)));
        }
        #[cfg(feature = "mmv")]
        {
            let lane0 = mmv.counter(0);
            let lane1 = match sharing {
                Sharing::DifferentCounters => mmv.counter(1),
                Sharing::Single | Sharing::SameCounter => lane0,
            };
            let issued = Issued::default();
            let before = mmv.value(0);
            // SAFETY: nothing but the lanes below touches these counters while they run. Where
            // two lanes share one counter, their race inside libpcp_mmv loses increments, which
            // `increment`'s contract lets the caller accept: `issued` counts what was lost and
            // reports it.
            let increment =
                |lane: nds_bench::mmv::MmvCounter<'_>| unsafe { lane.increment(black_box(1.0)) };
            group.bench_function(peer::MMV, |b| match sharing {
                Sharing::Single => b.iter(|| increment(lane0)),
                Sharing::SameCounter | Sharing::DifferentCounters => b.iter_custom(|iters| {
                    let time = run_pair(iters, || increment(lane0), || increment(lane1));
                    issued.pair(iters, time)
                }),
            });
            if sharing == Sharing::SameCounter {
                issued.report("mmv_inc_value", before, mmv.value(0));
            }
        }
        group.bench_function(peer::PROMETHEUS, |b| {
            let lane0 = PrometheusCounter::<u64>::default();
            let lane1 = match sharing {
                Sharing::DifferentCounters => PrometheusCounter::default(),
                Sharing::Single | Sharing::SameCounter => lane0.clone(),
            };
            match sharing {
                Sharing::Single => b.iter(|| lane0.inc_by(black_box(1))),
                Sharing::SameCounter | Sharing::DifferentCounters => b.iter_custom(|iters| {
                    run_pair(
                        iters,
                        || {
                            lane0.inc_by(black_box(1));
                        },
                        || {
                            lane1.inc_by(black_box(1));
                        },
                    )
                }),
            }
        });
        group.finish();
    }
}

fn snapshots(c: &mut Criterion) {
    let slab = ScratchSlab::new("snapshot").expect("scratch slab");
    let producer = slab.producer().expect("producer");
    // Non-zero counters, so nothing about the copy could be special-cased.
    Hammer::start(&slab.path())
        .and_then(Hammer::stop)
        .expect("fill counters");
    let reader = slab.reader().expect("reader");
    let map = RegionMap::open(&slab.path()).expect("region map");
    let mut snapshot = Box::new(CounterSnapshot::new());
    let mut counters = Box::new([0u64; SNAPSHOT_COUNTERS]);
    let mut bytes = Box::new([0u8; NDS_REQUIRED_SIZE]);
    let mut group = c.benchmark_group(SNAPSHOT_GROUP);
    let mut runs = |group: &mut criterion::BenchmarkGroup<'_, _>,
                    [ours, integer, memcpy]: [&str; 3]| {
        group.bench_function(ours, |b| {
            // The outcome is checked as a caller would; a file's generation never moves.
            b.iter(|| {
                assert!(reader.snapshot(black_box(&mut snapshot)).valid().is_some());
            });
        });
        group.bench_function(integer, |b| {
            b.iter(|| snapshot_counters(&reader, black_box(&mut counters)).expect("snapshot"));
        });
        group.bench_function(memcpy, |b| b.iter(|| map.copy_to(black_box(&mut bytes))));
    };
    runs(
        &mut group,
        [snapshot::OURS, snapshot::INTEGER, snapshot::MEMCPY],
    );
    let hammer = Hammer::start(&slab.path()).expect("hammer");
    runs(
        &mut group,
        [
            snapshot::OURS_HAMMERED,
            snapshot::INTEGER_HAMMERED,
            snapshot::MEMCPY_HAMMERED,
        ],
    );
    let sweeps = hammer.stop().expect("hammer");
    eprintln!(
        "nds-bench: the hammering producer swept all {SNAPSHOT_COUNTERS} counters {sweeps} times"
    );
    group.finish();
    drop(producer);
}

/// A model record with every field non-zero.
fn model() -> (ModelNodeInfo, ModelMemUsage) {
    let mut node = ModelNodeInfo::new_zeroed();
    node.model_id = 7;
    node.model_node_id = 3;
    node.set_name(&[b'm'; 200]).expect("name fits");
    node.uuid = [0xA5; 16];
    node.nc_index = 1;
    node.sg_index = 2;
    let mut usage = ModelMemUsage::new_zeroed();
    for (cell, size) in usage.model_mem_usage.iter_mut().flatten().zip(1u64..) {
        cell.total_size = size << 20;
        cell.chunk_count = 3;
    }
    (node, usage)
}

fn records(c: &mut Criterion) {
    let slab = ScratchSlab::new("records").expect("scratch slab");
    let producer = slab.producer().expect("producer");
    let reader = slab.reader().expect("reader");
    let slot: ModelSlot = producer.allocate_model_slot().expect("slot");
    let (node, usage) = model();
    producer.commit_model(slot, &node, &usage).expect("commit");
    let valid = |what: &str| {
        let read = reader.read_model(slot).expect("read");
        assert!(matches!(read, Snapshot::Valid(_)), "{what}: {read:?}");
    };
    valid("before the benchmark");
    let record = ModelRecord {
        hash: 0,
        node_info: node,
        mem_usage: usage,
    };
    let bytes = record.as_bytes().to_vec();
    let mut group = c.benchmark_group(RECORD_GROUP);
    group.bench_function(record::COMMIT, |b| {
        b.iter(|| {
            producer
                .commit_model(slot, black_box(&node), black_box(&usage))
                .expect("commit");
        });
    });
    let mut model = Box::new(Model::zeroed(slot));
    group.bench_function(record::READ, |b| {
        // Into caller storage, the outcome checked as a caller would.
        b.iter(|| {
            let read = reader.read_model_into(black_box(slot), &mut model);
            assert!(matches!(read, Ok(Snapshot::Valid(_))));
        });
    });
    group.bench_function(record::FNV, |b| b.iter(|| fnv1a_32(black_box(&bytes))));
    group.finish();
    valid("after the benchmark");
}

fn main() {
    if let Err(error) = pin_to_cpu(MEASURING_CPU) {
        eprintln!("nds-bench: running unpinned: {error}");
    }
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
        .configure_from_args();
    increments(&mut criterion);
    snapshots(&mut criterion);
    records(&mut criterion);
    criterion.final_summary();
}
