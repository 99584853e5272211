//! Hashed records and model slots: round trips, emptiness, slot lifecycle, reader refusal.

mod common;

use std::os::unix::fs::FileExt;

use common::ScratchDir;
use nds::abi::layout::{
    model_record_offset, NDS_MODEL_BITMAP_START, NDS_PROCESS_EXT_INFO_START, NDS_PROCESS_INFO_START,
};
use nds::abi::records::{
    record_hash, MemUsageSlot, ModelMemUsage, ModelNodeInfo, ProcessInfo, ProcessInfoExt,
    VersionInfo,
};
use nds::{text_lossy, Error, ModelEntry, ModelSlot, Snapshot};
use zerocopy::{FromZeros, IntoBytes};

fn sample_process_info() -> ProcessInfo {
    let mut info = ProcessInfo::new_zeroed();
    info.framework_type = 3;
    info.set_tag(b"pid-1234").unwrap();
    info.framework_version = VersionInfo {
        major: 2,
        minor: 1,
        reserved: [0; 2],
        build: 77,
    };
    info.fal_version.build = 5;
    info.runtime_version.major = 2;
    info
}

fn sample_model(id: u32) -> (ModelNodeInfo, ModelMemUsage) {
    let mut node = ModelNodeInfo::new_zeroed();
    node.model_id = id;
    node.model_node_id = id * 10;
    node.set_name(format!("model-{id}").as_bytes()).unwrap();
    node.uuid = [id as u8; 16];
    node.nc_index = (id % 16) as u8;
    node.sg_index = 1;
    let mut usage = ModelMemUsage::new_zeroed();
    let cell = usage.get_mut(1, MemUsageSlot::Tensors.index()).unwrap();
    cell.total_size = u64::from(id) << 20;
    cell.chunk_count = id + 1;
    (node, usage)
}

fn slab_bytes(dir: &ScratchDir, offset: usize, len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    std::fs::File::open(dir.slab_path())
        .unwrap()
        .read_exact_at(&mut bytes, offset as u64)
        .unwrap();
    bytes
}

#[test]
fn process_info_round_trip_and_wire_bytes() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    assert_eq!(reader.read_process_info().unwrap(), Snapshot::Empty);
    let info = sample_process_info();
    producer.commit_process_info(&info).unwrap();
    let read = reader
        .read_process_info()
        .unwrap()
        .valid()
        .expect("consistent");
    assert_eq!(read, info);
    assert_eq!(text_lossy(&read.tag), "pid-1234");

    // On the wire: hash first, then the 60-byte payload, hash = FNV-1a with the field zero.
    let wire = slab_bytes(&dir, NDS_PROCESS_INFO_START, 64);
    assert_eq!(&wire[4..], info.as_bytes());
    let hash = u32::from_le_bytes(wire[..4].try_into().unwrap());
    assert_ne!(hash, 0);
    assert_eq!(hash, record_hash(&wire));
}

#[test]
fn process_info_ext_round_trip_and_overwrite() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    assert_eq!(reader.read_process_info_ext().unwrap(), Snapshot::Empty);
    let mut info = ProcessInfoExt::new_zeroed();
    info.set_tag(&[b'q'; 255]).unwrap();
    producer.commit_process_info_ext(&info).unwrap();
    assert_eq!(
        reader.read_process_info_ext().unwrap(),
        Snapshot::Valid(info)
    );
    info.set_tag("tagged ✓".as_bytes()).unwrap();
    producer.commit_process_info_ext(&info).unwrap();
    let read = reader.read_process_info_ext().unwrap().valid().unwrap();
    assert_eq!(text_lossy(&read.tag), "tagged ✓");
    let wire = slab_bytes(&dir, NDS_PROCESS_EXT_INFO_START, 260);
    assert_eq!(
        u32::from_le_bytes(wire[..4].try_into().unwrap()),
        record_hash(&wire)
    );
}

#[test]
fn a_record_that_does_not_match_its_hash_reads_as_torn() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    producer
        .commit_process_info(&sample_process_info())
        .unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.slab_path())
        .unwrap();
    file.write_all_at(b"X", (NDS_PROCESS_INFO_START + 10) as u64)
        .unwrap();
    assert_eq!(reader.read_process_info().unwrap(), Snapshot::Torn);
    // Re-publishing repairs it.
    producer
        .commit_process_info(&sample_process_info())
        .unwrap();
    assert!(reader.read_process_info().unwrap().valid().is_some());
}

#[test]
fn text_lossy_is_bounded_and_replaces_garbage() {
    assert_eq!(text_lossy(b"abc\0def"), "abc");
    assert_eq!(text_lossy(&[0xFF, b'a']), "\u{FFFD}a");
    assert_eq!(text_lossy(&[]), "");
    assert_eq!(text_lossy(&[b'z'; 32]).len(), 32);
}

#[test]
fn model_round_trip_and_wire_layout() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    let slot = producer.allocate_model_slot().unwrap();
    assert_eq!(slot.index(), 0);
    assert_eq!(
        reader.read_model(slot).unwrap(),
        Snapshot::Empty,
        "allocated, not committed"
    );
    assert!(
        reader.read_all_models().unwrap().is_empty(),
        "empty slots are skipped"
    );

    let (node, usage) = sample_model(7);
    producer.commit_model(slot, &node, &usage).unwrap();
    let model = reader.read_model(slot).unwrap().valid().unwrap();
    assert_eq!(model.slot, slot);
    assert_eq!(model.node_info, node);
    assert_eq!(model.mem_usage, usage);
    assert_eq!(text_lossy(&model.node_info.name), "model-7");
    assert_eq!(
        reader.read_all_models().unwrap(),
        vec![ModelEntry::Valid(Box::new(model))]
    );

    let wire = slab_bytes(&dir, model_record_offset(0).unwrap(), 672);
    assert_eq!(&wire[4..288], node.as_bytes());
    assert_eq!(&wire[288..], usage.as_bytes());
    assert_eq!(
        u32::from_le_bytes(wire[..4].try_into().unwrap()),
        record_hash(&wire)
    );
    assert_eq!(
        slab_bytes(&dir, NDS_MODEL_BITMAP_START, 8),
        1u64.to_le_bytes()
    );
}

#[test]
fn model_slots_exhaust_at_64_and_are_reused_after_delete() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    let slots: Vec<ModelSlot> = (0..64)
        .map(|_| producer.allocate_model_slot().expect("64 slots"))
        .collect();
    assert_eq!(
        slots.iter().map(|s| s.index()).collect::<Vec<_>>(),
        (0..64).collect::<Vec<_>>(),
        "first clear bit each time"
    );
    let error = producer.allocate_model_slot().unwrap_err();
    assert!(matches!(error, Error::NoFreeModelSlot));
    assert_eq!(error.errno(), libc::ENOSPC);
    assert_eq!(reader.model_bitmap().unwrap(), u64::MAX);

    for slot in &slots {
        let (node, usage) = sample_model(slot.index() as u32);
        producer.commit_model(*slot, &node, &usage).unwrap();
    }
    assert_eq!(reader.read_all_models().unwrap().len(), 64);

    producer.delete_model(slots[9]).unwrap();
    producer.delete_model(slots[40]).unwrap();
    assert_eq!(reader.model_bitmap().unwrap(), !(1 << 9) & !(1 << 40));
    assert_eq!(reader.read_model(slots[9]).unwrap(), Snapshot::Empty);
    assert!(
        slab_bytes(&dir, model_record_offset(9).unwrap(), 672)
            .iter()
            .all(|&b| b == 0),
        "delete zeroes the record"
    );
    let listed: Vec<usize> = reader
        .read_all_models()
        .unwrap()
        .into_iter()
        .map(|entry| match entry {
            ModelEntry::Valid(model) => model.slot.index(),
            ModelEntry::Torn(slot) => panic!("slot {} torn", slot.index()),
        })
        .collect();
    assert_eq!(listed.len(), 62);
    assert!(!listed.contains(&9) && !listed.contains(&40));

    assert_eq!(producer.allocate_model_slot().unwrap().index(), 9);
    assert_eq!(producer.allocate_model_slot().unwrap().index(), 40);
    assert!(matches!(
        producer.allocate_model_slot(),
        Err(Error::NoFreeModelSlot)
    ));
}

#[test]
fn committing_to_an_unallocated_slot_is_refused() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    let (node, usage) = sample_model(1);
    let slot = ModelSlot::new(5).unwrap();
    let error = producer.commit_model(slot, &node, &usage).unwrap_err();
    assert!(matches!(error, Error::ModelSlotNotAllocated { slot: 5 }));
    assert_eq!(error.errno(), libc::EINVAL);
    assert_eq!(reader.read_model(slot).unwrap(), Snapshot::Empty);
    assert!(ModelSlot::new(63).is_some());
    assert!(ModelSlot::new(64).is_none());
}

#[test]
fn torn_model_slots_are_reported_distinctly() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    for id in 0..3 {
        let slot = producer.allocate_model_slot().unwrap();
        let (node, usage) = sample_model(id);
        producer.commit_model(slot, &node, &usage).unwrap();
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.slab_path())
        .unwrap();
    file.write_all_at(&[0xAB], (model_record_offset(1).unwrap() + 400) as u64)
        .unwrap();
    let entries = reader.read_all_models().unwrap();
    assert_eq!(entries.len(), 3);
    assert!(matches!(entries[0], ModelEntry::Valid(ref m) if m.slot.index() == 0));
    assert_eq!(entries[1], ModelEntry::Torn(ModelSlot::new(1).unwrap()));
    assert!(matches!(entries[2], ModelEntry::Valid(ref m) if m.slot.index() == 2));
}

#[test]
fn reader_refuses_every_record_and_slot_mutator() {
    let dir = ScratchDir::new();
    let (producer, reader) = common::producer_and_reader(&dir);
    let slot = producer.allocate_model_slot().unwrap();
    let (node, usage) = sample_model(2);
    producer.commit_model(slot, &node, &usage).unwrap();
    let results = [
        reader.commit_process_info(&sample_process_info()),
        reader.commit_process_info_ext(&ProcessInfoExt::new_zeroed()),
        reader.allocate_model_slot().map(drop),
        reader.commit_model(slot, &node, &usage),
        reader.delete_model(slot),
    ];
    for result in results {
        let error = result.unwrap_err();
        assert!(matches!(error, Error::ReadOnly));
        assert_eq!(error.errno(), libc::EPERM);
    }
    assert_eq!(reader.model_bitmap().unwrap(), 1);
    assert!(reader.read_model(slot).unwrap().valid().is_some());
    assert_eq!(reader.read_process_info().unwrap(), Snapshot::Empty);
}

#[test]
fn concurrent_allocation_from_threads_hands_out_each_slot_once() {
    let dir = ScratchDir::new();
    let (producer, _reader) = common::producer_and_reader(&dir);
    let mut slots: Vec<usize> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..16)
                        .map(|_| producer.allocate_model_slot().unwrap().index())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    slots.sort_unstable();
    assert_eq!(slots, (0..64).collect::<Vec<_>>());
}
