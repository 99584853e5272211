//! Pre-resolved counter handles: they reach exactly the words the integer calls address, and a
//! reader's handles see what the producer's wrote.

mod common;

use common::ScratchDir;
use nds::abi::counters::{ExtNcCounter, NcCounter, NdCounter};
use nds::abi::sysfs::CounterSource;
use nds::{Backend, CoreCounter, NeuronCore, Producer, Reader};

fn open(dir: &ScratchDir) -> (Producer, Reader) {
    let backend = Backend::file(dir.slab_path());
    let producer = Producer::open(&backend).unwrap();
    let reader = Reader::open(&backend, 4242).unwrap();
    (producer, reader)
}

/// A value that names its word, so that a handle on the wrong word cannot go unnoticed.
fn tag(core: usize, index: usize) -> u64 {
    (core as u64 + 1) << 32 | index as u64
}

fn check_core_counter(producer: &Producer, reader: &Reader, counter: impl CoreCounter) {
    for core in NeuronCore::ALL {
        let value = tag(core.index(), counter.core_index());
        producer.nc(core, counter).set(value);
        assert_eq!(
            producer
                .nc_counter(core.index(), counter.core_index())
                .unwrap(),
            value
        );
        assert_eq!(reader.nc(core, counter).get(), value);
        assert_eq!(
            reader
                .nc_counter(core.index(), counter.core_index())
                .unwrap(),
            value
        );
    }
}

#[test]
fn every_named_counter_handle_is_the_word_of_its_index() {
    let dir = ScratchDir::new();
    let (producer, reader) = open(&dir);
    for &counter in NcCounter::ALL {
        check_core_counter(&producer, &reader, counter);
        check_core_counter(&producer, &reader, CounterSource::Nc(counter));
    }
    for &counter in ExtNcCounter::ALL {
        check_core_counter(&producer, &reader, counter);
        check_core_counter(&producer, &reader, CounterSource::Ext(counter));
    }
    for &counter in NdCounter::ALL {
        let value = tag(99, counter.index());
        producer.nd(counter).set(value);
        assert_eq!(producer.nd_counter(counter.index()).unwrap(), value);
        assert_eq!(reader.nd(counter).get(), value);
    }
    // Nothing else was touched: every unnamed counter is still zero.
    for core in 0..16 {
        for index in 0..95 {
            if CounterSource::from_index(index).is_none() {
                assert_eq!(reader.nc_counter(core, index).unwrap(), 0, "{core}/{index}");
            }
        }
    }
}

#[test]
fn handle_operations_wrap_like_the_atomic_instructions() {
    let dir = ScratchDir::new();
    let (producer, reader) = open(&dir);
    let core = NeuronCore::new(5).unwrap();
    let word = producer.nc(core, NcCounter::InferCompleted);
    word.add(7);
    word.sub(2);
    assert_eq!(word.get(), 5);
    word.set(u64::MAX);
    word.add(2);
    assert_eq!(reader.nc(core, NcCounter::InferCompleted).get(), 1);
    word.sub(2);
    assert_eq!(word.get(), u64::MAX);
    let bitmap = producer.nd(NdCounter::FeatureBitmap);
    bitmap.or(1);
    bitmap.or(1 << 63);
    bitmap.or(1);
    assert_eq!(reader.nd(NdCounter::FeatureBitmap).get(), 1 | 1 << 63);
    // The same word through the integer call.
    producer
        .increment_nc_counter(5, NcCounter::InferCompleted.index(), 3)
        .unwrap();
    assert_eq!(word.get(), 2);
}

#[test]
fn reserved_counters_get_handles_through_the_checked_index() {
    let dir = ScratchDir::new();
    let (producer, reader) = open(&dir);
    producer.nc_index(15, 94).unwrap().add(11);
    producer.nd_index(30).unwrap().add(12);
    assert_eq!(reader.nc_counter(15, 94).unwrap(), 11);
    assert_eq!(reader.nd_counter(30).unwrap(), 12);
    assert!(producer.nc_index(16, 0).is_err());
    assert!(producer.nc_index(0, 95).is_err());
    assert!(producer.nd_index(31).is_err());
}

#[test]
fn neuron_cores_are_exactly_the_sixteen() {
    assert!(NeuronCore::new(16).is_none());
    assert!(NeuronCore::ALL
        .iter()
        .enumerate()
        .all(|(index, core)| core.index() == index && NeuronCore::new(index) == Some(*core)));
}

#[test]
fn handles_are_shared_between_threads() {
    let dir = ScratchDir::new();
    let (producer, reader) = open(&dir);
    let word = producer.nc(NeuronCore::new(2).unwrap(), NcCounter::InferenceCount);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(move || {
                for _ in 0..10_000 {
                    word.add(1);
                }
            });
        }
    });
    assert_eq!(
        reader
            .nc(NeuronCore::new(2).unwrap(), NcCounter::InferenceCount)
            .get(),
        40_000
    );
}
