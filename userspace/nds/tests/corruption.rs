//! Untrusted slab contents: random bytes never panic a reader, a record is only ever returned
//! when its hash matches, and a counter snapshot returns exactly the slab's words.

mod common;

use std::fs::File;
use std::os::unix::fs::FileExt;

use common::{Rng, ScratchDir};
use nds::abi::counters::{NcCounter, NdCounter};
use nds::abi::layout::{
    model_record_offset, NDS_MODEL_BITMAP_START, NDS_PROCESS_EXT_INFO_START,
    NDS_PROCESS_INFO_START, NDS_REQUIRED_SIZE, NEURON_DATASTORE_SIZE, SLAB_GENERATION_OFFSET,
};
use nds::abi::layout::{nc_counter_offset, nd_counter_offset};
use nds::abi::records::{record_hash, ModelRecord, ProcessInfoExtRecord, ProcessInfoRecord};
use nds::{text_lossy, CounterSnapshot, ModelEntry, NeuronCore, Reader, SlabRead, Snapshot};
use zerocopy::IntoBytes;

/// The little-endian word of `slab` at `offset`.
fn word_at(slab: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(slab[offset..offset + 8].try_into().unwrap())
}

/// Calls every reader function and checks that anything returned as valid is exactly what the
/// slab holds and matches its hash.
fn read_everything(reader: &Reader, slab: &[u8]) -> (usize, usize) {
    let (mut valid, mut rejected) = (0, 0);
    // Nothing moves the generation of a file: the snapshot is valid and is the slab's words.
    let mut counters = Box::new(CounterSnapshot::new());
    let SlabRead::Valid(counters) = reader.snapshot(&mut counters) else {
        panic!("a file's snapshot is always valid");
    };
    for (index, &value) in counters.nd.iter().enumerate() {
        assert_eq!(value, word_at(slab, nd_counter_offset(index).unwrap()));
    }
    for (core, values) in counters.nc.iter().enumerate() {
        for (index, &value) in values.iter().enumerate() {
            assert_eq!(
                value,
                word_at(slab, nc_counter_offset(core, index).unwrap())
            );
        }
    }
    for core in NeuronCore::ALL {
        assert_eq!(
            reader.nc(core, NcCounter::InferCompleted).get(),
            counters.nc(core, NcCounter::InferCompleted)
        );
    }
    assert_eq!(
        reader.nd(NdCounter::FeatureBitmap).get(),
        counters.nd(NdCounter::FeatureBitmap)
    );
    assert_eq!(reader.moved(), None);
    for index in 0..40 {
        let result = reader.nd_counter(index);
        assert_eq!(result.is_ok(), index < 31);
    }
    for core in 0..18 {
        for index in 0..100 {
            let result = reader.nc_counter(core, index);
            assert_eq!(result.is_ok(), core < 16 && index < 95);
        }
    }
    let _ = reader.slab_generation();
    let _ = reader.slab_reused();

    let mut check = |record_bytes: &[u8], offset: usize| {
        let wire = &slab[offset..offset + record_bytes.len()];
        assert_eq!(
            record_bytes[4..],
            wire[4..],
            "returned payload is not the slab's"
        );
        let hash = u32::from_le_bytes(wire[..4].try_into().unwrap());
        assert_eq!(
            record_hash(wire),
            hash,
            "accepted a record whose hash does not match"
        );
        assert_ne!(hash, 0);
        valid += 1;
    };
    match reader.read_process_info().unwrap() {
        Snapshot::Valid(info) => {
            let _ = text_lossy(&info.tag);
            check(
                ProcessInfoRecord { hash: 0, info }.as_bytes(),
                NDS_PROCESS_INFO_START,
            );
        }
        Snapshot::Empty | Snapshot::Torn => rejected += 1,
    }
    match reader.read_process_info_ext().unwrap() {
        Snapshot::Valid(info) => {
            let _ = text_lossy(&info.tag);
            check(
                ProcessInfoExtRecord { hash: 0, info }.as_bytes(),
                NDS_PROCESS_EXT_INFO_START,
            );
        }
        Snapshot::Empty | Snapshot::Torn => rejected += 1,
    }
    let bitmap = reader.model_bitmap().unwrap();
    let entries = reader.read_all_models().unwrap();
    assert!(entries.len() <= bitmap.count_ones() as usize);
    for entry in entries {
        match entry {
            ModelEntry::Valid(model) => {
                assert!(bitmap & (1 << model.slot.index()) != 0);
                let _ = text_lossy(&model.node_info.name);
                let record = ModelRecord {
                    hash: 0,
                    node_info: model.node_info,
                    mem_usage: model.mem_usage,
                };
                check(
                    record.as_bytes(),
                    model_record_offset(model.slot.index()).unwrap(),
                );
            }
            ModelEntry::Torn(_) => rejected += 1,
        }
    }
    (valid, rejected)
}

/// Writes a correct hash into the record at `offset` of `slab`.
fn seal(slab: &mut [u8], offset: usize, len: usize) {
    let hash = record_hash(&slab[offset..offset + len]);
    slab[offset..offset + 4].copy_from_slice(&hash.to_le_bytes());
}

struct Fixture {
    _dir: ScratchDir,
    file: File,
    reader: Reader,
}

impl Fixture {
    fn new() -> Self {
        let dir = ScratchDir::new();
        let (_producer, _) = common::producer_and_reader(&dir);
        let reader = Reader::open(&nds::Backend::file(dir.slab_path()), 4242).unwrap();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.slab_path())
            .unwrap();
        Self {
            _dir: dir,
            file,
            reader,
        }
    }

    fn store(&self, slab: &[u8]) {
        self.file.write_all_at(slab, 0).unwrap();
    }
}

#[test]
fn random_bytes_never_panic_and_never_pass_as_records() {
    let fixture = Fixture::new();
    let mut rng = Rng::new(0x5EED_0001);
    let mut slab = vec![0u8; NDS_REQUIRED_SIZE];
    let mut valid = 0;
    // Every slot of a random bitmap is torn and costs two reads plus a 200 µs pause, so this
    // mode runs fewer rounds than the others.
    for _ in 0..300 {
        rng.fill(&mut slab);
        fixture.store(&slab);
        valid += read_everything(&fixture.reader, &slab).0;
    }
    assert_eq!(valid, 0, "random bytes matched an FNV hash");
}

#[test]
fn sealed_random_records_are_returned_exactly() {
    let fixture = Fixture::new();
    let mut rng = Rng::new(0x5EED_0002);
    let mut slab = vec![0u8; NDS_REQUIRED_SIZE];
    for _ in 0..2000 {
        rng.fill(&mut slab);
        let bitmap = rng.next_u64();
        slab[NDS_MODEL_BITMAP_START..NDS_MODEL_BITMAP_START + 8]
            .copy_from_slice(&bitmap.to_le_bytes());
        seal(&mut slab, NDS_PROCESS_INFO_START, 64);
        seal(&mut slab, NDS_PROCESS_EXT_INFO_START, 260);
        for slot in 0..64 {
            seal(&mut slab, model_record_offset(slot).unwrap(), 672);
        }
        fixture.store(&slab);
        // A sealed record hashing to zero would read as empty; that has odds of 2^-32.
        let (valid, rejected) = read_everything(&fixture.reader, &slab);
        assert_eq!(rejected, 0);
        assert_eq!(valid, 2 + bitmap.count_ones() as usize);
    }
}

#[test]
fn single_byte_damage_to_sealed_records_is_always_caught() {
    let fixture = Fixture::new();
    let mut rng = Rng::new(0x5EED_0003);
    let mut slab = vec![0u8; NDS_REQUIRED_SIZE];
    for _ in 0..1000 {
        rng.fill(&mut slab);
        // Few occupied slots keep the torn-retry pauses short.
        let bitmap = rng.next_u64() & rng.next_u64() & rng.next_u64() & rng.next_u64();
        slab[NDS_MODEL_BITMAP_START..NDS_MODEL_BITMAP_START + 8]
            .copy_from_slice(&bitmap.to_le_bytes());
        let records = [
            (NDS_PROCESS_INFO_START, 64),
            (NDS_PROCESS_EXT_INFO_START, 260),
        ]
        .into_iter()
        .chain((0..64).map(|slot| (model_record_offset(slot).unwrap(), 672)));
        let records: Vec<(usize, usize)> = records.collect();
        for &(offset, len) in &records {
            seal(&mut slab, offset, len);
        }
        // Flip one payload byte of one record: FNV-1a detects every single-byte change.
        let victim = rng.below(records.len() as u64) as usize;
        let (offset, len) = records[victim];
        let damaged = offset + 4 + rng.below(len as u64 - 4) as usize;
        slab[damaged] ^= 1 + rng.below(255) as u8;
        fixture.store(&slab);
        let visible_models = bitmap.count_ones() as usize;
        let victim_visible = victim < 2 || bitmap & (1 << (victim - 2)) != 0;
        let (valid, rejected) = read_everything(&fixture.reader, &slab);
        assert_eq!(rejected, usize::from(victim_visible));
        assert_eq!(valid + rejected, 2 + visible_models);
    }
}

#[test]
fn random_slab_files_of_random_sizes_never_panic_a_reader() {
    let dir = ScratchDir::new();
    let mut rng = Rng::new(0x5EED_0004);
    for round in 0..200 {
        let len = match round % 4 {
            0 => rng.below(NDS_REQUIRED_SIZE as u64) as usize,
            1 => NDS_REQUIRED_SIZE + rng.below(8) as usize,
            2 => SLAB_GENERATION_OFFSET + rng.below(16) as usize,
            _ => NEURON_DATASTORE_SIZE + rng.below(4096) as usize,
        };
        let mut bytes = vec![0u8; len];
        rng.fill(&mut bytes);
        if round % 2 == 0 && len >= 8 {
            bytes[..8].copy_from_slice(&nds::abi::records::NDS_HEADER_WORD.to_le_bytes());
        }
        let path = dir.path().join(format!("slab-{round}"));
        std::fs::write(&path, &bytes).unwrap();
        match Reader::open(&nds::Backend::file(&path), 99) {
            Ok(reader) => {
                assert!(len >= NDS_REQUIRED_SIZE);
                let mut view = bytes.clone();
                view.truncate(NEURON_DATASTORE_SIZE);
                read_everything(&reader, &view);
                assert_eq!(
                    reader.slab_generation().is_some(),
                    len >= SLAB_GENERATION_OFFSET + 8
                );
            }
            Err(error) => assert_eq!(error.errno(), libc::EINVAL),
        }
    }
}
