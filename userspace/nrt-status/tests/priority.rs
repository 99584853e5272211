//! The severity classifier against two oracles written independently of the implementation:
//! a literal table of the non-generic ranks, and a transcription of the seed's value-gate
//! pseudocode for `nrt_get_status_priority`.

use nrt_status::{most_severe, NrtStatus, Priority};

/// Every value whose rank is not 1 (generic), with its rank.
const NON_GENERIC: [(u32, u8); 11] = [
    (0, 0),
    (5, 2),
    (6, 2),
    (1004, 3),
    (1200, 3),
    (1201, 3),
    (1202, 3),
    (1203, 3),
    (1204, 2),
    (1205, 3),
    (1206, 2),
];

fn table_rank(value: u32) -> u8 {
    NON_GENERIC
        .iter()
        .find(|(v, _)| *v == value)
        .map_or(1, |(_, rank)| *rank)
}

/// The seed's pseudocode, gate by gate.
fn gate_rank(s: u32) -> u8 {
    if s == 1004 {
        return 3;
    }
    if s <= 1004 {
        if s == 0 {
            return 0;
        }
        return u8::from(s.wrapping_sub(5) < 2) + 1;
    }
    if s == 1205 {
        return 3;
    }
    if s > 1205 {
        return u8::from(s == 1206) + 1;
    }
    if s == 1204 {
        return 2;
    }
    if s >= 1200 {
        return 3;
    }
    1
}

const SAMPLES_ABOVE_2000: [u32; 12] = [
    2001,
    2004,
    2204,
    4096,
    1004 + 65_536,
    1205 + 65_536,
    65_535,
    1 << 20,
    0x7fff_ffff,
    0x8000_0000,
    u32::MAX - 1,
    u32::MAX,
];

#[test]
fn priority_over_0_to_2000_and_samples_above() {
    for value in (0..=2000).chain(SAMPLES_ABOVE_2000) {
        let rank = NrtStatus::from_u32(value).priority().rank();
        assert_eq!(rank, table_rank(value), "value {value}");
        assert_eq!(rank, gate_rank(value), "value {value}");
    }
}

#[test]
fn the_two_oracles_agree_with_each_other() {
    for value in (0..=2000).chain(SAMPLES_ABOVE_2000) {
        assert_eq!(table_rank(value), gate_rank(value), "value {value}");
    }
}

#[test]
fn priority_variants_and_order() {
    assert_eq!(NrtStatus::SUCCESS.priority(), Priority::None);
    assert_eq!(NrtStatus::FAILURE.priority(), Priority::Generic);
    assert_eq!(NrtStatus::TIMEOUT.priority(), Priority::Elevated);
    assert_eq!(
        NrtStatus::EXEC_COMPLETED_WITH_ERR.priority(),
        Priority::Terminal
    );
    assert!(Priority::None < Priority::Generic);
    assert!(Priority::Generic < Priority::Elevated);
    assert!(Priority::Elevated < Priority::Terminal);
    assert_eq!(Priority::Terminal.to_string(), "3");
}

#[test]
fn rank_is_not_numeric_order() {
    // 1004 outranks the numerically larger 1206; 5 outranks 7.
    let s = NrtStatus::from_u32;
    assert_eq!(most_severe([s(1206), s(1004)]), Some(s(1004)));
    assert_eq!(most_severe([s(7), s(5)]), Some(s(5)));
}

#[test]
fn most_severe_cases() {
    let s = NrtStatus::from_u32;
    let cases: [(&[u32], Option<u32>); 9] = [
        (&[], None),
        (&[0], Some(0)),
        (&[0, 0], Some(0)),
        (&[0, 1100, 0], Some(1100)),
        // Ties keep the first.
        (&[1, 2, 3], Some(1)),
        (&[4242, 1], Some(4242)),
        (&[1204, 1206, 5, 6], Some(1204)),
        (&[1201, 1004, 1205], Some(1201)),
        (&[0, 1003, 1204, 1200, 1004], Some(1200)),
    ];
    for (input, expected) in cases {
        let got = most_severe(input.iter().copied().map(s));
        assert_eq!(got.map(NrtStatus::as_u32), expected, "{input:?}");
    }
}
