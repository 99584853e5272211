//! Record layouts, header, text fields, FNV-1a and the ioctl ABI.

use core::mem::{align_of, size_of};

use nds_abi::fnv::*;
use nds_abi::ioctl::*;
use nds_abi::records::*;
use nds_abi::text::*;
use zerocopy::{FromZeros, IntoBytes};

#[test]
fn fnv1a_32_test_vectors() {
    assert_eq!(fnv1a_32(b""), 0x811c_9dc5);
    assert_eq!(fnv1a_32(b"a"), 0xe40c_292c);
    assert_eq!(fnv1a_32(b"foobar"), 0xbf9c_f968);
    assert_eq!(FNV1A_32_OFFSET_BASIS, 0x811C_9DC5);
    assert_eq!(FNV1A_32_PRIME, 0x0100_0193);
}

#[test]
fn fnv1a_32_can_be_fed_in_pieces() {
    let whole = fnv1a_32(b"foobar");
    let split = fnv1a_32_update(fnv1a_32_update(FNV1A_32_OFFSET_BASIS, b"foo"), b"bar");
    assert_eq!(split, whole);
}

#[test]
fn record_hash_ignores_the_hash_field() {
    let mut record = ProcessInfoRecord::new_zeroed();
    record.info.set_tag(b"hello").unwrap();
    let with_zero = fnv1a_32(record.as_bytes());
    assert_eq!(record_hash(record.as_bytes()), with_zero);
    record.hash = 0xDEAD_BEEF;
    assert_eq!(record_hash(record.as_bytes()), with_zero);
    record.info.framework_type = 1;
    assert_ne!(record_hash(record.as_bytes()), with_zero);
}

#[test]
fn record_sizes_and_alignment() {
    assert_eq!(size_of::<NdsHeader>(), 8);
    assert_eq!(size_of::<VersionInfo>(), 8);
    assert_eq!(size_of::<ProcessInfo>(), 60);
    assert_eq!(size_of::<ProcessInfoRecord>(), 64);
    assert_eq!(size_of::<ProcessInfoExt>(), 256);
    assert_eq!(size_of::<ProcessInfoExtRecord>(), 260);
    assert_eq!(size_of::<ModelNodeInfo>(), 284);
    assert_eq!(size_of::<MemUsageInfo>(), 16);
    assert_eq!(align_of::<MemUsageInfo>(), 8);
    assert_eq!(size_of::<ModelMemUsage>(), 384);
    assert_eq!(size_of::<ModelRecord>(), 672);
    assert_eq!(core::mem::offset_of!(ModelRecord, mem_usage), 288);
    assert_eq!(core::mem::offset_of!(ProcessInfo, tag), 1);
    assert_eq!(core::mem::offset_of!(ModelNodeInfo, name), 8);
    assert_eq!(core::mem::offset_of!(ModelNodeInfo, sg_index), 281);
}

#[test]
fn header_word_is_signature_then_version() {
    let header = NdsHeader {
        signature: NDS_HEADER_SIGNATURE,
        version: NDS_HEADER_VERSION,
    };
    assert_eq!(
        header.as_bytes(),
        &[b'n', b'd', b's', 0, 0xa0, 0x86, 0x01, 0x00]
    );
    assert_eq!(NDS_HEADER_WORD.to_le_bytes(), header.as_bytes());
    assert_eq!(NDS_HEADER_VERSION, 100_000);
}

#[test]
fn object_type_tags() {
    assert_eq!(ObjectType::ModelNodeInfo as u8, 0);
    assert_eq!(ObjectType::ProcessInfo as u8, 1);
    assert_eq!(ObjectType::ProcessInfoExt as u8, 2);
    for raw in 0..3 {
        assert_eq!(
            ObjectType::from_raw(raw).map(|t| i32::from(t as u8)),
            Some(raw)
        );
    }
    assert_eq!(ObjectType::from_raw(3), None);
    assert_eq!(ObjectType::from_raw(-1), None);
}

#[test]
fn mem_usage_slots_and_grid_access() {
    assert_eq!(MemUsageSlot::Code.index(), 0);
    assert_eq!(MemUsageSlot::Tensors.index(), 1);
    assert_eq!(MemUsageSlot::Constants.index(), 2);
    assert_eq!(MemUsageSlot::Scratchpad.index(), 3);
    assert_eq!(MemUsageSlot::Misc.index(), 4);
    assert_eq!(MODEL_MEM_USAGE_LOCATION_COUNT, 2);
    assert_eq!(NDS_DMA_MEM_USAGE_SLOT_COUNT, 12);

    let mut usage = ModelMemUsage::new_zeroed();
    usage.get_mut(1, 11).unwrap().total_size = 7;
    assert_eq!(usage.model_mem_usage[1][11].total_size, 7);
    assert_eq!(usage.get(1, 11).map(|cell| cell.total_size), Some(7));
    assert!(usage.get(2, 0).is_none());
    assert!(usage.get(0, 12).is_none());
    assert!(usage.get_mut(2, 0).is_none());
    // The grid is the last 384 bytes of the model record, cell (1, 11) last of all.
    let mut record = ModelRecord::new_zeroed();
    record.mem_usage = usage;
    let bytes = record.as_bytes();
    assert_eq!(bytes[672 - 16], 7);
}

#[test]
fn text_fields_are_bounded_and_nul_terminated() {
    let mut info = ProcessInfo::new_zeroed();
    info.set_tag(b"0123456789012345678901234567890").unwrap();
    assert_eq!(info.tag().len(), 31);
    assert_eq!(info.tag[31], 0);
    assert_eq!(
        info.set_tag(&[b'x'; 32]),
        Err(TextTooLong {
            len: 32,
            capacity: 31
        })
    );
    // A failed set leaves the field as it was.
    assert_eq!(info.tag().len(), 31);
    info.set_tag(b"ab").unwrap();
    assert_eq!(info.tag(), b"ab");
    assert!(info.tag[2..].iter().all(|&b| b == 0), "rest is zero-padded");

    // Garbage without a terminator is read to the end of the field, never beyond it.
    info.tag = [0xFF; 32];
    assert_eq!(info.tag(), &[0xFF; 32]);
    assert_eq!(c_text(&[]), b"");
    assert_eq!(c_text(b"a\0b"), b"a");
    let mut empty: [u8; 0] = [];
    assert_eq!(
        set_c_text(&mut empty, b""),
        Err(TextTooLong {
            len: 0,
            capacity: 0
        })
    );

    let mut ext = ProcessInfoExt::new_zeroed();
    ext.set_tag(&[b'y'; 255]).unwrap();
    assert_eq!(ext.tag().len(), 255);
    assert!(ext.set_tag(&[b'y'; 256]).is_err());

    let mut node = ModelNodeInfo::new_zeroed();
    node.set_name(b"resnet").unwrap();
    assert_eq!(node.name(), b"resnet");
    assert!(node.set_name(&[b'z'; 256]).is_err());
}

#[test]
fn ioctl_numbers_and_argument() {
    assert_eq!(NEURON_IOCTL_ACQUIRE_NEURON_DS, 0x8008_4E47);
    assert_eq!(NEURON_IOCTL_RELEASE_NEURON_DS, 0x8008_4E48);
    assert_eq!(NEURON_IOCTL_BASE, u32::from(b'N'));
    assert_eq!(size_of::<NeuronDsInfo>(), 24);
    let mut arg = NeuronDsInfo::for_pid(-2);
    arg.mmap_offset = 0x0010_0000_1234_5000;
    arg.size = 262_144;
    let bytes = arg.as_bytes();
    assert_eq!(&bytes[0..4], &(-2i32).to_le_bytes());
    assert_eq!(&bytes[4..8], &[0; 4]);
    assert_eq!(&bytes[8..16], &0x0010_0000_1234_5000u64.to_le_bytes());
    assert_eq!(&bytes[16..20], &262_144u32.to_le_bytes());
    assert_eq!(&bytes[20..24], &[0; 4]);
}
