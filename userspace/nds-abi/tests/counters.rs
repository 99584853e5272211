//! Counter enums: values, names and round trips.

use nds_abi::counters::*;

#[test]
fn counts() {
    assert_eq!(NDS_ND_COUNTER_COUNT, 31);
    assert_eq!(NDS_NC_COUNTER_COUNT, 31);
    assert_eq!(NDS_EXT_NC_COUNTER_LAST, 41);
    assert_eq!(NDS_EXT_NC_COUNTER_COUNT, 64);
    assert_eq!(NDS_TOTAL_NC_COUNTER_COUNT, 95);
}

#[test]
fn nd_counters_round_trip_and_keep_their_c_names() {
    assert_eq!(NdCounter::ALL.len(), 14);
    for (position, counter) in NdCounter::ALL.iter().enumerate() {
        assert_eq!(counter.index(), position);
        assert_eq!(NdCounter::from_index(position), Some(*counter));
        assert!(counter.name().starts_with("NDS_ND_COUNTER_"));
    }
    assert_eq!(NdCounter::FeatureBitmap.index(), 3);
    assert_eq!(
        NdCounter::FeatureBitmap.name(),
        "NDS_ND_COUNTER_FEATURE_BITMAP"
    );
    assert_eq!(NdCounter::DeviceClusterId.index(), 12);
    assert_eq!(NdCounter::AggNeffId.name(), "NDS_ND_COUNTER_AGG_NEFF_ID");
    for reserved in 14..40 {
        assert_eq!(NdCounter::from_index(reserved), None);
    }
}

#[test]
fn nc_counters_round_trip_and_keep_their_c_names() {
    assert_eq!(NcCounter::ALL.len(), 31);
    for (position, counter) in NcCounter::ALL.iter().enumerate() {
        assert_eq!(counter.index(), position);
        assert_eq!(NcCounter::from_index(position), Some(*counter));
        assert!(counter.name().starts_with("NDS_NC_COUNTER_"));
    }
    assert_eq!(
        NcCounter::InferCompleted.name(),
        "NDS_NC_COUNTER_INFER_COMPLETED"
    );
    assert_eq!(NcCounter::ErrRt.index(), 12);
    assert_eq!(NcCounter::LatencyTotal.index(), 14);
    assert_eq!(NcCounter::MacCount.index(), 29);
    assert_eq!(NcCounter::Oob.name(), "NDS_NC_COUNTER_OOB");
    assert_eq!(NcCounter::from_index(31), None);
}

#[test]
fn ext_counters_continue_after_the_nc_counters() {
    assert_eq!(ExtNcCounter::ALL.len(), 10);
    for (position, counter) in ExtNcCounter::ALL.iter().enumerate() {
        assert_eq!(counter.index(), 31 + position);
        assert_eq!(ExtNcCounter::from_index(31 + position), Some(*counter));
        assert!(counter.name().starts_with("NDS_EXT_NC_COUNTER_"));
    }
    assert_eq!(
        ExtNcCounter::HwErrRepairableHbmUe.name(),
        "NDS_EXT_NC_COUNTER_HW_ERR_REPAIRABLE_HBM_UE"
    );
    assert_eq!(ExtNcCounter::from_index(30), None);
    for reserved in 41..95 {
        assert_eq!(ExtNcCounter::from_index(reserved), None);
    }
}

#[test]
fn c_names_are_unique() {
    let mut names = std::collections::HashSet::new();
    let all = NdCounter::ALL
        .iter()
        .map(|c| c.name())
        .chain(NcCounter::ALL.iter().map(|c| c.name()))
        .chain(ExtNcCounter::ALL.iter().map(|c| c.name()));
    for name in all {
        assert!(names.insert(name), "{name} appears twice");
    }
}
