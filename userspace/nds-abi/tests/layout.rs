//! Region map offsets and counter addressing.

use nds_abi::layout::*;

#[test]
fn region_offsets_match_the_section_map() {
    let expected = [
        (NDS_HEADER_START, 0x0),
        (NDS_ND_COUNTERS_START, 0x8),
        (NDS_NEURONCORE_COUNTERS_START, 0x100),
        (NDS_PROCESS_INFO_START, 0x4E0),
        (NDS_MODEL_BITMAP_START, 0x520),
        (NDS_MODEL_RECORDS_START, 0x528),
        (NDS_PROCESS_EXT_INFO_START, 0xAD28),
        (NDS_EXT_OFFSET_OLD, 44_588),
        (NDS_EXT_OFFSET, 0xDA80),
        (NDS_EXT_NEURONCORE_COUNTERS_START, 0xDA80),
        (NDS_EXT_NEURONCORE_NC_DATA_START, 0xE280),
        (NDS_REQUIRED_SIZE, 0x10680),
        (SLAB_GENERATION_OFFSET, 0x3F000),
        (NEURON_DATASTORE_SIZE, 262_144),
    ];
    for (actual, wanted) in expected {
        assert_eq!(actual, wanted);
    }
}

#[test]
fn region_sizes_match_the_section_map() {
    assert_eq!(NDS_HEADER_SIZE, 8);
    assert_eq!(NDS_ND_COUNTERS_SIZE, 248);
    assert_eq!(NDS_NEURONCORE_COUNTERS_SIZE, 992);
    assert_eq!(NDS_PROCESS_INFO_SIZE, 64);
    assert_eq!(NDS_MODEL_BITMAP_SIZE, 8);
    assert_eq!(NDS_MODEL_RECORD_SIZE, 672);
    assert_eq!(NDS_MODEL_RECORDS_SIZE, 43_008);
    assert_eq!(NDS_PROCESS_EXT_INFO_SIZE, 260);
    assert_eq!(NDS_EXT_SECTION_SIZE_OLD, 11_296);
    assert_eq!(NDS_EXT_NEURONCORE_COUNTERS_SIZE, 2048);
    assert_eq!(NDS_EXT_NEURONCORE_NC_DATA_SIZE, 9216);
    assert_eq!(NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE, 16);
    assert_eq!(NDS_MAX_NEURONCORE_COUNT, 4);
    assert_eq!(NDS_EXT_MAX_NEURONCORE_COUNT, 12);
    assert_eq!(NDS_TOTAL_NEURONCORE_COUNT, 16);
}

#[test]
fn nds_align_rounds_up_to_64() {
    assert_eq!(nds_align(0), Some(0));
    assert_eq!(nds_align(1), Some(64));
    assert_eq!(nds_align(64), Some(64));
    assert_eq!(nds_align(65), Some(128));
    assert_eq!(nds_align(55_884), Some(55_936));
    assert_eq!(nds_align(usize::MAX - 62), None);
    assert_eq!(nds_align(usize::MAX - 63), Some(usize::MAX - 63));
}

#[test]
fn nc_counter_spot_values_from_the_kernel_harness() {
    assert_eq!(nc_counter_offset(0, 0), Ok(256));
    assert_eq!(nc_counter_offset(3, 30), Ok(1240));
    assert_eq!(nc_counter_offset(0, 31), Ok(55_936));
    assert_eq!(nc_counter_offset(3, 94), Ok(57_976));
    assert_eq!(nc_counter_offset(4, 0), Ok(57_984));
    assert_eq!(nc_counter_offset(15, 94), Ok(67_184));
}

/// Independent restatement of the kernel's three-band formula in u64 elements.
fn kernel_element(core: usize, index: usize) -> usize {
    if core < 4 && index < 31 {
        32 + core * 31 + index
    } else if core < 4 {
        6992 + core * 64 + (index - 31)
    } else {
        7248 + (core - 4) * 96 + index
    }
}

#[test]
fn every_valid_nc_address_matches_the_kernel_formula_and_is_unique() {
    let mut seen = std::collections::HashSet::new();
    for core in 0..16 {
        for index in 0..95 {
            let offset = nc_counter_offset(core, index).expect("valid pair");
            assert_eq!(
                offset,
                8 * kernel_element(core, index),
                "core {core} index {index}"
            );
            assert_eq!(offset % 8, 0);
            assert!(offset + 8 <= NDS_REQUIRED_SIZE);
            let in_nc_band = (NDS_NEURONCORE_COUNTERS_START
                ..NDS_NEURONCORE_COUNTERS_START + NDS_NEURONCORE_COUNTERS_SIZE)
                .contains(&offset);
            let in_ext_band = (NDS_EXT_NEURONCORE_COUNTERS_START
                ..NDS_EXT_NEURONCORE_COUNTERS_START + NDS_EXT_NEURONCORE_COUNTERS_SIZE)
                .contains(&offset);
            let in_data_band =
                (NDS_EXT_NEURONCORE_NC_DATA_START..NDS_REQUIRED_SIZE).contains(&offset);
            assert_eq!(in_nc_band, core < 4 && index < 31);
            assert_eq!(in_ext_band, core < 4 && index >= 31);
            assert_eq!(in_data_band, core >= 4);
            assert!(
                seen.insert(offset),
                "core {core} index {index} aliases another counter"
            );
        }
    }
    assert_eq!(seen.len(), 16 * 95);
}

#[test]
fn every_invalid_nc_pair_is_rejected() {
    for core in 0..16 {
        for index in 95..200 {
            assert_eq!(
                nc_counter_offset(core, index),
                Err(CounterAddressError::InvalidCounter),
                "core {core} index {index}"
            );
        }
        assert_eq!(
            nc_counter_offset(core, usize::MAX),
            Err(CounterAddressError::InvalidCounter)
        );
    }
    for core in (16..64).chain([usize::MAX]) {
        for index in [0, 30, 31, 94, 95, usize::MAX] {
            assert_eq!(
                nc_counter_offset(core, index),
                Err(CounterAddressError::InvalidCore)
            );
        }
    }
}

#[test]
fn nd_counter_addresses() {
    for index in 0..31 {
        assert_eq!(nd_counter_offset(index), Some(8 + 8 * index));
    }
    assert_eq!(nd_counter_offset(30), Some(248));
    for index in [31, 32, 1000, usize::MAX] {
        assert_eq!(nd_counter_offset(index), None);
    }
}

#[test]
fn model_record_addresses() {
    for slot in 0..64 {
        let offset = model_record_offset(slot).expect("valid slot");
        assert_eq!(offset, 0x528 + slot * 672);
        assert_eq!(offset % 8, 0);
    }
    assert_eq!(
        model_record_offset(63).map(|o| o + 672),
        Some(NDS_PROCESS_EXT_INFO_START)
    );
    assert_eq!(model_record_offset(64), None);
    assert_eq!(model_record_offset(usize::MAX), None);
}

#[test]
fn slab_generation_parity() {
    assert!(!slab_generation_is_owned(0));
    assert!(slab_generation_is_owned(1));
    assert!(!slab_generation_is_owned(2));
    assert!(slab_generation_is_owned(u64::MAX));
}
