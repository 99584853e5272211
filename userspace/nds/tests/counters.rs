//! ND and NC counters: every operation, its addressing and its errors.

mod common;

use std::os::unix::fs::FileExt;

use common::ScratchDir;
use nds::abi::counters::{ExtNcCounter, NcCounter, NdCounter};
use nds::abi::layout::nc_counter_offset;
use nds::Error;

#[test]
fn nd_counter_operations() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    for index in 0..31 {
        assert_eq!(reader.nd_counter(index).unwrap(), 0);
        producer
            .increment_nd_counter(index, 10 + index as u64)
            .unwrap();
        producer.decrement_nd_counter(index, 3).unwrap();
        assert_eq!(reader.nd_counter(index).unwrap(), 7 + index as u64);
    }
    let bitmap = NdCounter::FeatureBitmap.index();
    producer.set_nd_counter(bitmap, 0).unwrap();
    producer.or_nd_counter(bitmap, 0).unwrap();
    producer.or_nd_counter(bitmap, 63).unwrap();
    producer.or_nd_counter(bitmap, 0).unwrap();
    assert_eq!(reader.nd_counter(bitmap).unwrap(), 1 | 1 << 63);
    producer.set_nd_counter(30, u64::MAX).unwrap();
    assert_eq!(producer.nd_counter(30).unwrap(), u64::MAX);
    producer.increment_nd_counter(30, 2).unwrap();
    assert_eq!(
        reader.nd_counter(30).unwrap(),
        1,
        "increments wrap like LOCK ADD"
    );
    producer.decrement_nd_counter(30, 2).unwrap();
    assert_eq!(
        reader.nd_counter(30).unwrap(),
        u64::MAX,
        "decrements wrap like LOCK SUB"
    );
}

#[test]
fn nd_counters_land_at_their_wire_offsets() {
    let dir = ScratchDir::new();
    let (producer, _reader) = common::producer_and_reader(&dir);
    producer.set_nd_counter(0, 0x1111).unwrap();
    producer.set_nd_counter(30, 0x2222).unwrap();
    let file = std::fs::File::open(dir.slab_path()).unwrap();
    let mut word = [0u8; 8];
    file.read_exact_at(&mut word, 8).unwrap();
    assert_eq!(u64::from_le_bytes(word), 0x1111);
    file.read_exact_at(&mut word, 248).unwrap();
    assert_eq!(u64::from_le_bytes(word), 0x2222);
}

#[test]
fn nd_counter_errors() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    for index in [31, 32, 1000, usize::MAX] {
        for result in [
            producer.increment_nd_counter(index, 1),
            producer.decrement_nd_counter(index, 1),
            producer.set_nd_counter(index, 1),
            producer.or_nd_counter(index, 1),
            producer.nd_counter(index).map(drop),
            reader.nd_counter(index).map(drop),
        ] {
            let error = result.unwrap_err();
            assert!(matches!(error, Error::InvalidNdCounter { index: i } if i == index));
            assert_eq!(error.errno(), libc::EINVAL);
        }
    }
    for bit in [64, 65, u64::MAX] {
        let error = producer.or_nd_counter(0, bit).unwrap_err();
        assert!(matches!(error, Error::InvalidBit { bit: b } if b == bit));
        assert_eq!(error.errno(), libc::EINVAL);
    }
}

#[test]
fn every_nc_counter_is_distinct_and_at_its_three_band_address() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    let value = |core: usize, index: usize| ((core as u64) << 32) | index as u64 | 1 << 63;
    for core in 0..16 {
        for index in 0..95 {
            producer
                .set_nc_counter(core, index, value(core, index))
                .unwrap();
        }
    }
    let file = std::fs::File::open(dir.slab_path()).unwrap();
    for core in 0..16 {
        for index in 0..95 {
            assert_eq!(reader.nc_counter(core, index).unwrap(), value(core, index));
            let mut word = [0u8; 8];
            let offset = nc_counter_offset(core, index).unwrap();
            file.read_exact_at(&mut word, offset as u64).unwrap();
            assert_eq!(u64::from_le_bytes(word), value(core, index));
        }
    }
}

#[test]
fn nc_counter_operations_in_each_band() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    let samples = [
        (0, NcCounter::InferCompleted.index()),
        (3, NcCounter::Oob.index()),
        (0, ExtNcCounter::HwErrCollectives.index()),
        (3, 94),
        (4, 0),
        (15, 94),
    ];
    for (core, index) in samples {
        producer.increment_nc_counter(core, index, 5).unwrap();
        producer.increment_nc_counter(core, index, 5).unwrap();
        producer.decrement_nc_counter(core, index, 3).unwrap();
        assert_eq!(reader.nc_counter(core, index).unwrap(), 7);
        producer.set_nc_counter(core, index, 0).unwrap();
        producer.or_nc_counter(core, index, 4).unwrap();
        producer.or_nc_counter(core, index, 1).unwrap();
        assert_eq!(reader.nc_counter(core, index).unwrap(), 0b10010);
        let error = producer.or_nc_counter(core, index, 64).unwrap_err();
        assert!(matches!(error, Error::InvalidBit { bit: 64 }));
    }
}

#[test]
fn every_invalid_nc_pair_is_rejected_by_every_operation() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    let invalid_counters =
        (0..16).flat_map(|core| [95, 96, 200, usize::MAX].map(|index| (core, index)));
    for (core, index) in invalid_counters {
        for result in [
            producer.increment_nc_counter(core, index, 1),
            producer.decrement_nc_counter(core, index, 1),
            producer.set_nc_counter(core, index, 1),
            producer.or_nc_counter(core, index, 1),
            producer.nc_counter(core, index).map(drop),
            reader.nc_counter(core, index).map(drop),
        ] {
            let error = result.unwrap_err();
            assert!(
                matches!(error, Error::InvalidNcCounter { core: c, index: i } if c == core && i == index),
                "{error}"
            );
            assert_eq!(error.errno(), libc::EINVAL);
        }
    }
    let invalid_cores = [16, 17, 64, usize::MAX]
        .into_iter()
        .flat_map(|core| [0, 30, 31, 94, 95].map(|index| (core, index)));
    for (core, index) in invalid_cores {
        for result in [
            producer.increment_nc_counter(core, index, 1),
            producer.decrement_nc_counter(core, index, 1),
            producer.set_nc_counter(core, index, 1),
            producer.or_nc_counter(core, index, 1),
            reader.nc_counter(core, index).map(drop),
        ] {
            let error = result.unwrap_err();
            assert!(
                matches!(error, Error::InvalidCore { core: c } if c == core),
                "{error}"
            );
            assert_eq!(error.errno(), libc::EINVAL);
        }
    }
}

#[test]
fn reader_refuses_every_counter_mutator_before_checking_the_address() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    producer.set_nc_counter(4, 1, 11).unwrap();
    producer.set_nd_counter(1, 22).unwrap();
    for (index, core) in [(1, 4), (31, 16)] {
        for result in [
            reader.increment_nd_counter(index, 1),
            reader.decrement_nd_counter(index, 1),
            reader.set_nd_counter(index, 1),
            reader.or_nd_counter(index, 1),
            reader.increment_nc_counter(core, index, 1),
            reader.decrement_nc_counter(core, index, 1),
            reader.set_nc_counter(core, index, 1),
            reader.or_nc_counter(core, index, 1),
        ] {
            let error = result.unwrap_err();
            assert!(matches!(error, Error::ReadOnly));
            assert_eq!(error.errno(), libc::EPERM);
        }
    }
    assert_eq!(reader.nc_counter(4, 1).unwrap(), 11);
    assert_eq!(reader.nd_counter(1).unwrap(), 22);
}

#[test]
fn concurrent_increments_from_threads_are_not_lost() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..10_000 {
                    producer.increment_nc_counter(5, 50, 1).unwrap();
                    producer.increment_nd_counter(2, 3).unwrap();
                    producer.decrement_nd_counter(2, 1).unwrap();
                }
            });
        }
    });
    assert_eq!(reader.nc_counter(5, 50).unwrap(), 40_000);
    assert_eq!(reader.nd_counter(2).unwrap(), 80_000);
}
