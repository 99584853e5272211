//! The metric table against the original driver's cw-id list (facts §4.7), written out
//! independently of the implementation.

use nds_abi::counters::{NdCounter, NDS_TOTAL_NC_COUNTER_COUNT};
use nds_abi::metrics::{
    metric_def, MetricKind, MetricPost, VersionField, VersionRank, VersionWord, METRIC_DEFS,
    METRIC_POST_SIZE,
};
use std::collections::HashSet;

/// (cw id, NC/EXT counter index) for every counter metric of the original table.
const COUNTER_METRICS: [(u8, usize); 28] = [
    (200, 1),
    (201, 16),
    (202, 19),
    (204, 17),
    (205, 4),
    (206, 11),
    (207, 6),
    (208, 18),
    (209, 20),
    (212, 5),
    (213, 3),
    (214, 2),
    (215, 8),
    (216, 9),
    (217, 10),
    (218, 12),
    (219, 7),
    (220, 30),
    (221, 31),
    (222, 32),
    (223, 33),
    (224, 34),
    (225, 36),
    (226, 37),
    (227, 38),
    (228, 39),
    (229, 40),
    (253, 35),
];

#[test]
fn every_counter_metric_reads_the_original_counter() {
    for (cw_id, index) in COUNTER_METRICS {
        let def = metric_def(cw_id).unwrap_or_else(|| panic!("cw {cw_id} missing"));
        match def.kind {
            MetricKind::Counter(source) => assert_eq!(source.index(), index, "cw {cw_id}"),
            other => panic!("cw {cw_id} is {other:?}"),
        }
    }
    let counters = METRIC_DEFS
        .iter()
        .filter(|d| matches!(d.kind, MetricKind::Counter(_)))
        .count();
    assert_eq!(counters, COUNTER_METRICS.len());
}

#[test]
fn versions_bitmap_constants_and_utilization_have_their_ids() {
    let version = |cw_id| metric_def(cw_id).map(|d| d.kind);
    assert_eq!(
        version(180),
        Some(MetricKind::Version(
            NdCounter::RuntimeVersion,
            VersionRank::First,
            VersionField::Version
        ))
    );
    assert_eq!(
        version(193),
        Some(MetricKind::Version(
            NdCounter::FrameworkVersion,
            VersionRank::Second,
            VersionField::FrameworkType
        ))
    );
    assert_eq!(
        version(196),
        Some(MetricKind::Version(
            NdCounter::FalVersion,
            VersionRank::Second,
            VersionField::Version
        ))
    );
    assert_eq!(
        version(250),
        Some(MetricKind::Bitmap(NdCounter::FeatureBitmap))
    );
    assert_eq!(
        version(252),
        Some(MetricKind::Constant(NdCounter::DeviceClusterId, true))
    );
    assert_eq!(
        version(80),
        Some(MetricKind::Constant(NdCounter::AggNeffId, false))
    );
    assert_eq!(version(90), Some(MetricKind::Utilization));
    // Not datastore metrics: FW-IO errors, instance id, driver version, dynamic sysfs bitmap.
    for absent in [0, 11, 12, 13, 251] {
        assert!(metric_def(absent).is_none(), "cw {absent}");
    }
}

#[test]
fn ids_and_names_are_unique_and_sources_are_in_range() {
    let ids: HashSet<u8> = METRIC_DEFS.iter().map(|d| d.cw_id).collect();
    let names: HashSet<&str> = METRIC_DEFS.iter().map(|d| d.name).collect();
    assert_eq!(ids.len(), METRIC_DEFS.len());
    assert_eq!(names.len(), METRIC_DEFS.len());
    for def in &METRIC_DEFS {
        if let MetricKind::Counter(source) = def.kind {
            assert!(source.index() < NDS_TOTAL_NC_COUNTER_COUNT);
        }
    }
}

#[test]
fn a_post_is_56_bytes_and_its_value_is_bounded_by_len() {
    assert_eq!(METRIC_POST_SIZE, 56);
    let mut post = MetricPost {
        seq: 1,
        period: 1,
        posted_ns: 5,
        device: 0,
        cw_id: 200,
        len: 2,
        reserved: [0; 2],
        value: [b'9'; 24],
    };
    assert_eq!(post.value_bytes(), b"99");
    post.len = 255;
    assert_eq!(
        post.value_bytes().len(),
        24,
        "a corrupt len never reads past the field"
    );
}

#[test]
fn version_words_split_as_nmetric_version_t() {
    let word = (13u64 << 48) | (2 << 40) | (5 << 32) | 77;
    assert_eq!(
        VersionWord::from_word(word),
        VersionWord {
            major: 2,
            minor: 5,
            build: 77,
            reserved: 13
        }
    );
}
