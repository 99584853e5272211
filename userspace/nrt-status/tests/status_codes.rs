//! Every known code against a literal table written from the public header and the seed, not
//! from the implementation.

use nrt_status::{Band, NrtStatus};

/// (value, identifier, band, a word the header's comment for the code uses).
const CODES: [(u32, &str, &str, &str); 28] = [
    (0, "NRT_SUCCESS", "general", "success"),
    (1, "NRT_FAILURE", "general", "non-specific"),
    (2, "NRT_INVALID", "general", "invalid"),
    (3, "NRT_INVALID_HANDLE", "general", "handle"),
    (4, "NRT_RESOURCE", "general", "resource"),
    (5, "NRT_TIMEOUT", "general", "timed out"),
    (6, "NRT_HW_ERROR", "general", "hardware"),
    (7, "NRT_QUEUE_FULL", "general", "queue"),
    (9, "NRT_LOAD_NOT_ENOUGH_NC", "general", "neuroncores"),
    (
        10,
        "NRT_UNSUPPORTED_NEFF_VERSION",
        "general",
        "neff version",
    ),
    (11, "NRT_FAIL_HOST_MEM_ALLOC", "general", "host memory"),
    (13, "NRT_UNINITIALIZED", "general", "nrt_init"),
    (14, "NRT_CLOSED", "general", "nrt_close"),
    (15, "NRT_QUEUE_EMPTY", "general", "no data"),
    (
        101,
        "NRT_EXEC_UNIT_UNRECOVERABLE",
        "exec_unit",
        "cannot recover",
    ),
    (1002, "NRT_EXEC_BAD_INPUT", "per_inference", "invalid input"),
    (
        1003,
        "NRT_EXEC_COMPLETED_WITH_NUM_ERR",
        "per_inference",
        "nan",
    ),
    (
        1004,
        "NRT_EXEC_COMPLETED_WITH_ERR",
        "per_inference",
        "parity",
    ),
    (1005, "NRT_EXEC_NC_BUSY", "per_inference", "locked"),
    (1006, "NRT_EXEC_OOB", "per_inference", "out of bounds"),
    (1100, "NRT_COLL_PENDING", "collectives", "pending"),
    (
        1200,
        "NRT_EXEC_HW_ERR_COLLECTIVES",
        "hardware",
        "collectives",
    ),
    (1201, "NRT_EXEC_HW_ERR_HBM_UE", "hardware", "unrepairable"),
    (1202, "NRT_EXEC_HW_ERR_NC_UE", "hardware", "parity"),
    (1203, "NRT_EXEC_HW_ERR_DMA_ABORT", "hardware", "dma"),
    (
        1204,
        "NRT_EXEC_SW_NQ_OVERFLOW",
        "hardware",
        "notification queue overflow",
    ),
    (
        1205,
        "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE",
        "hardware",
        "repairable",
    ),
    (
        1206,
        "NRT_NETWORK_PROXY_FAILURE",
        "hardware",
        "network proxy",
    ),
];

#[test]
fn all_lists_exactly_the_header_codes_in_order() {
    let values: Vec<u32> = NrtStatus::ALL.iter().map(|s| s.as_u32()).collect();
    let expected: Vec<u32> = CODES.iter().map(|row| row.0).collect();
    assert_eq!(values, expected);
}

#[test]
fn every_code_has_its_identifier_band_and_message() {
    for (value, name, band, word) in CODES {
        let status = NrtStatus::from_u32(value);
        assert!(status.is_known(), "{value}");
        assert_eq!(status.as_str(), name, "{value}");
        assert_eq!(status.to_string(), name, "{value}");
        assert_eq!(status.band().name(), band, "{value}");
        let message = status.message().to_ascii_lowercase();
        assert!(
            message.contains(word),
            "{value}: {message:?} lacks {word:?}"
        );
        assert_ne!(
            status.message(),
            name,
            "{value}: message must not be the identifier"
        );
    }
}

#[test]
fn messages_are_distinct() {
    let mut messages: Vec<&str> = NrtStatus::ALL.iter().map(|s| s.message()).collect();
    messages.sort_unstable();
    messages.dedup();
    assert_eq!(messages.len(), CODES.len());
}

#[test]
fn the_gaps_are_unknown() {
    let known: Vec<u32> = CODES.iter().map(|row| row.0).collect();
    for value in 0..=1300 {
        if known.contains(&value) {
            continue;
        }
        let status = NrtStatus::from_u32(value);
        assert!(!status.is_known(), "{value}");
        assert_eq!(status.as_str(), "UNKNOWN", "{value}");
        assert_eq!(status.message(), "Unknown status", "{value}");
        assert_eq!(status.to_string(), format!("UNKNOWN({value})"));
        assert_eq!(status.as_u32(), value);
    }
}

#[test]
fn bands_of_unknown_values_follow_the_ranges() {
    let cases = [
        (8, Band::General),
        (12, Band::General),
        (16, Band::Unbanded),
        (100, Band::Unbanded),
        (102, Band::Unbanded),
        (1000, Band::Unbanded),
        (1001, Band::Unbanded),
        (1007, Band::Unbanded),
        (1099, Band::Unbanded),
        (1101, Band::Unbanded),
        (1199, Band::Unbanded),
        (1207, Band::Unbanded),
        (u32::MAX, Band::Unbanded),
    ];
    for (value, band) in cases {
        assert_eq!(NrtStatus::from_u32(value).band(), band, "{value}");
    }
}

#[test]
fn only_coll_pending_is_a_retry() {
    for status in NrtStatus::ALL {
        assert_eq!(status.is_retry(), status.as_u32() == 1100, "{status:?}");
        assert_eq!(status.is_success(), status.as_u32() == 0, "{status:?}");
        assert_eq!(
            status.is_error(),
            status.as_u32() != 0 && status.as_u32() != 1100,
            "{status:?}"
        );
    }
    assert!(NrtStatus::from_u32(4242).is_error());
}

#[test]
fn user_message_layout() {
    assert_eq!(
        NrtStatus::TIMEOUT.user_message().to_string(),
        "[Runtime]: [NRT_TIMEOUT] status_code=5 Operation timed out \
         (see nrt-troubleshoot.html#nrt-troubleshooting)"
    );
    let oob = NrtStatus::from_u32(1006).user_message().to_string();
    assert!(
        oob.starts_with("[Execution]: [NRT_EXEC_OOB] status_code=1006 "),
        "{oob}"
    );
    let hw = NrtStatus::from_u32(1201).user_message().to_string();
    assert!(
        hw.starts_with("[Hardware]: [NRT_EXEC_HW_ERR_HBM_UE] status_code=1201 "),
        "{hw}"
    );
    let unknown = NrtStatus::from_u32(4242).user_message().to_string();
    assert!(unknown.starts_with("[Unknown]: [UNKNOWN] status_code=4242 Unknown status"));
}

#[test]
fn parsing_accepts_numbers_and_identifiers() {
    let cases: [(&str, u32); 9] = [
        ("1004", 1004),
        ("0x3ec", 1004),
        ("0X4B6", 1206),
        ("NRT_EXEC_OOB", 1006),
        ("exec_oob", 1006),
        (" nrt_timeout ", 5),
        ("COLL_PENDING", 1100),
        ("4242", 4242),
        ("4294967295", u32::MAX),
    ];
    for (text, value) in cases {
        let parsed: NrtStatus = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(parsed.as_u32(), value, "{text}");
    }
    for bad in ["", "UNKNOWN", "NRT_", "-1", "4294967296", "NRT_NOPE", "0x"] {
        assert!(bad.parse::<NrtStatus>().is_err(), "{bad:?} parsed");
    }
}

#[test]
fn conversions_round_trip() {
    for value in [0, 8, 1004, 1206, 70_000, u32::MAX] {
        let status = NrtStatus::from(value);
        assert_eq!(u32::from(status), value);
        assert_eq!(NrtStatus::from_u32(value), status);
    }
}
