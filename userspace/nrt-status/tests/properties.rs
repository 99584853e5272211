//! Property tests: conversions round-trip for every value, and `most_severe` picks the first of
//! the highest-ranked statuses.

use nrt_status::{most_severe, NrtStatus};
use proptest::prelude::*;

fn any_status() -> impl Strategy<Value = NrtStatus> {
    prop_oneof![
        prop::sample::select(NrtStatus::ALL.to_vec()),
        any::<u32>().prop_map(NrtStatus::from_u32),
        (0u32..=1300).prop_map(NrtStatus::from_u32),
    ]
}

proptest! {
    #[test]
    fn from_u32_round_trips(value in any::<u32>()) {
        let status = NrtStatus::from_u32(value);
        prop_assert_eq!(status.as_u32(), value);
        prop_assert_eq!(u32::from(NrtStatus::from(value)), value);
        prop_assert_eq!(value.to_string().parse::<NrtStatus>().ok(), Some(status));
    }

    #[test]
    fn as_str_round_trips_through_parse(value in any::<u32>()) {
        let status = NrtStatus::from_u32(value);
        let name = status.as_str();
        if status.is_known() {
            prop_assert!(name.starts_with("NRT_"));
            prop_assert_eq!(name.parse::<NrtStatus>().ok(), Some(status));
        } else {
            prop_assert_eq!(name, "UNKNOWN");
            prop_assert!(name.parse::<NrtStatus>().is_err());
        }
    }

    #[test]
    fn most_severe_is_the_first_of_the_highest(statuses in prop::collection::vec(any_status(), 0..24)) {
        let got = most_severe(statuses.iter().copied());
        match statuses.iter().map(|s| s.priority()).max() {
            None => prop_assert_eq!(got, None),
            Some(top) => {
                let first = statuses.iter().copied().find(|s| s.priority() == top);
                prop_assert_eq!(got, first);
            }
        }
    }

    #[test]
    fn most_severe_ignores_success_and_is_order_stable(
        statuses in prop::collection::vec(any_status(), 1..16),
        successes in 0usize..4,
    ) {
        let mut padded = vec![NrtStatus::SUCCESS; successes];
        padded.extend(statuses.iter().copied());
        let expected = most_severe(statuses.iter().copied());
        let got = most_severe(padded.iter().copied());
        if expected.map(NrtStatus::priority) == Some(nrt_status::Priority::None) {
            prop_assert_eq!(got, Some(NrtStatus::SUCCESS));
        } else {
            prop_assert_eq!(got, expected);
        }
    }
}
