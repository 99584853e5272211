//! The decode chain against literal tables written from the seed.

use nrt_status::decode::{
    collapse, subtype_for_notification, HwFault, InferErrorFlags, InferErrorSubtype, TpbErrorType,
    UnknownTpbErrorType, SUBTYPE_REMAP,
};
use nrt_status::NrtStatus;

/// The seed's remap table, `sunda_error_subtypes`.
const REMAP: [u8; 12] = [0, 1, 0, 0, 3, 4, 5, 6, 7, 2, 8, 0];

/// (TPB type value, the subtype value it decodes to, the status that subtype alone yields).
const TPB_CHAIN: [(u32, u8, u32); 11] = [
    (0, 0, 0),     // FP_UNDERFLOW -> NONE -> success
    (1, 1, 1003),  // FP_NAN -> NUMERICAL -> COMPLETED_WITH_NUM_ERR
    (2, 0, 0),     // FP_INF -> NONE
    (3, 0, 0),     // FP_OVERFLOW -> NONE
    (4, 3, 1004),  // MEMORY_ERROR -> MEMORY_ERROR -> COMPLETED_WITH_ERR
    (5, 4, 1004),  // FAKE_ERROR -> SW_FAKE_ERROR
    (6, 5, 1004),  // SEMAPHORE_ERROR -> SW_SEMAPHORE_ERROR
    (7, 6, 1004),  // EVENT_ERROR -> SW_EVENT_ERROR
    (8, 7, 1004),  // PSUM_COLLISION -> SW_PSUM_COLLISION_ERROR
    (9, 2, 0),     // SEQUENCER_NONFATAL -> TRANSIENT -> success (non-fatal)
    (10, 8, 1004), // SEQUENCER_FATAL -> SW_SEQUENCER_ERROR
];

const SUBTYPE_NAMES: [&str; 9] = [
    "INFER_ERROR_SUBTYPE_NONE",
    "INFER_ERROR_SUBTYPE_NUMERICAL",
    "INFER_ERROR_SUBTYPE_TRANSIENT",
    "INFER_ERROR_SUBTYPE_MEMORY_ERROR",
    "INFER_ERROR_SUBTYPE_SW_FAKE_ERROR",
    "INFER_ERROR_SUBTYPE_SW_SEMAPHORE_ERROR",
    "INFER_ERROR_SUBTYPE_SW_EVENT_ERROR",
    "INFER_ERROR_SUBTYPE_SW_PSUM_COLLISION_ERROR",
    "INFER_ERROR_SUBTYPE_SW_SEQUENCER_ERROR",
];

#[test]
fn remap_table_is_the_seeds() {
    let table: Vec<u8> = SUBTYPE_REMAP.iter().map(|s| s.index() as u8).collect();
    assert_eq!(table, REMAP);
    for (index, expected) in REMAP.iter().enumerate() {
        let index = u32::try_from(index).unwrap();
        assert_eq!(subtype_for_notification(index).index() as u8, *expected);
    }
}

#[test]
fn indices_past_the_table_decode_to_none() {
    for index in [12, 13, 100, u32::MAX] {
        assert_eq!(subtype_for_notification(index), InferErrorSubtype::None);
    }
}

#[test]
fn every_tpb_type_through_the_chain() {
    assert_eq!(TpbErrorType::ALL.len(), TPB_CHAIN.len());
    for (raw, subtype, status) in TPB_CHAIN {
        let tpb = TpbErrorType::try_from(raw).unwrap();
        assert_eq!(tpb.as_u32(), raw);
        assert_eq!(tpb.subtype().index() as u8, subtype, "type {raw}");
        assert_eq!(tpb.subtype().collapses_to().as_u32(), status, "type {raw}");
        let flags = InferErrorFlags::from_notifications([raw]);
        assert_eq!(collapse(&flags, None).as_u32(), status, "type {raw}");
    }
    assert_eq!(TpbErrorType::try_from(11), Err(UnknownTpbErrorType(11)));
    assert_eq!(TpbErrorType::from_u32(u32::MAX), None);
}

#[test]
fn subtype_values_and_names() {
    assert_eq!(InferErrorSubtype::COUNT, 9);
    for (value, name) in SUBTYPE_NAMES.iter().enumerate() {
        let subtype = InferErrorSubtype::from_u32(u32::try_from(value).unwrap()).unwrap();
        assert_eq!(subtype.index(), value);
        assert_eq!(subtype.as_str(), *name);
    }
    assert_eq!(InferErrorSubtype::from_u32(9), None, "MAX is a sentinel");
    assert_eq!(InferErrorSubtype::from_u32(u32::MAX), None);
}

#[test]
fn flags_are_one_byte_per_subtype() {
    let flags = InferErrorFlags::from_notifications([6, 8, 6]);
    assert_eq!(flags.as_bytes(), &[0, 0, 0, 0, 0, 1, 0, 1, 0]);
    let set: Vec<usize> = flags.iter_set().map(InferErrorSubtype::index).collect();
    assert_eq!(set, [5, 7]);
    // Any non-zero byte counts as set.
    let raw = InferErrorFlags::from_bytes([0, 0xff, 0, 0, 0, 0, 0, 0, 2]);
    assert!(raw.is_set(InferErrorSubtype::Numerical));
    assert!(raw.is_set(InferErrorSubtype::SwSequencerError));
    assert!(!raw.is_set(InferErrorSubtype::None));
    assert_eq!(InferErrorFlags::new(), InferErrorFlags::default());
}

#[test]
fn collapse_combinations() {
    // (notification indices, hardware fault, expected status)
    let cases: [(&[u32], Option<HwFault>, u32); 12] = [
        (&[], None, 0),
        (&[0, 2, 3], None, 0),
        (&[9], None, 0),
        (&[1], None, 1003),
        (&[1, 9], None, 1003),
        (&[1, 4], None, 1004),
        (&[6, 1], None, 1004),
        (&[11, 50], None, 0),
        (&[1], Some(HwFault::NcUe), 1202),
        (&[4], Some(HwFault::NqOverflow), 1204),
        (&[], Some(HwFault::RepairableHbmUe), 1205),
        (&[], Some(HwFault::Collectives), 1200),
    ];
    for (indices, fault, expected) in cases {
        let flags = InferErrorFlags::from_notifications(indices.iter().copied());
        assert_eq!(
            collapse(&flags, fault).as_u32(),
            expected,
            "{indices:?} {fault:?}"
        );
    }
}

#[test]
fn hardware_faults_map_to_the_1200_series() {
    let expected = [1200, 1201, 1202, 1203, 1204, 1205];
    let got: Vec<u32> = HwFault::ALL.iter().map(|f| f.status().as_u32()).collect();
    assert_eq!(got, expected);
    for fault in HwFault::ALL {
        assert_eq!(fault.status().band(), nrt_status::Band::Hardware);
        assert!(NrtStatus::ALL.contains(&fault.status()));
    }
}
