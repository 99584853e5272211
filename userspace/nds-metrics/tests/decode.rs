//! The decoder and the CLI over synthetic post streams.

use nds_abi::metrics::{MetricPost, METRIC_POST_SIZE, METRIC_VALUE_SIZE};
use nds_metrics::{DecodeError, Decoder, Event};
use std::process::Command;
use zerocopy::IntoBytes;

fn post(seq: u64, cw_id: u8, text: &str) -> MetricPost {
    let mut value = [0u8; METRIC_VALUE_SIZE];
    value[..text.len()].copy_from_slice(text.as_bytes());
    MetricPost {
        seq,
        period: seq / 3 + 1,
        posted_ns: seq * 1_000_000,
        device: 1,
        cw_id,
        len: text.len() as u8,
        reserved: [0; 2],
        value,
    }
}

fn stream(posts: &[MetricPost]) -> Vec<u8> {
    posts.iter().flat_map(|p| p.as_bytes().to_vec()).collect()
}

#[test]
fn posts_decode_to_named_json_with_numbers_and_versions() {
    let bytes = stream(&[post(1, 200, "12"), post(2, 190, "2.5.77")]);
    let mut events = Vec::new();
    Decoder::new().decode(&bytes, &mut events).unwrap();
    let json: Vec<_> = events.iter().map(Event::to_json).collect();
    assert_eq!(json[0]["metric"], "NERR_OK");
    assert_eq!(json[0]["value"], 12);
    assert_eq!(json[0]["device"], 1);
    assert_eq!(json[0]["seq"], 1);
    assert_eq!(json[0]["posted_ns"], 1_000_000);
    assert_eq!(json[1]["metric"], "FW_VERSION_0");
    assert_eq!(json[1]["value"], "2.5.77");
}

#[test]
fn a_gap_in_sequence_numbers_is_reported_across_calls() {
    let mut decoder = Decoder::new();
    let mut events = Vec::new();
    decoder
        .decode(&stream(&[post(4, 200, "1")]), &mut events)
        .unwrap();
    decoder
        .decode(&stream(&[post(9, 205, "2")]), &mut events)
        .unwrap();
    assert_eq!(
        events[1],
        Event::Missed {
            device: 1,
            first: 5,
            last: 8
        }
    );
    assert_eq!(events[1].to_json()["missed"], 4);
}

#[test]
fn a_partial_post_is_an_error_after_the_whole_ones() {
    let mut bytes = stream(&[post(1, 200, "3")]);
    bytes.extend_from_slice(&[0u8; 10]);
    let mut events = Vec::new();
    assert_eq!(
        Decoder::new().decode(&bytes, &mut events),
        Err(DecodeError::Truncated(10))
    );
    assert_eq!(events.len(), 1);
}

#[test]
fn garbage_never_panics() {
    let mut seed = 0x1234_5678_9abc_def0u64;
    for _ in 0..200 {
        let bytes: Vec<u8> = (0..METRIC_POST_SIZE * 5)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let mut events = Vec::new();
        Decoder::new().decode(&bytes, &mut events).unwrap();
        for event in &events {
            let _ = event.to_json();
        }
    }
}

#[test]
fn the_cli_prints_one_json_line_per_post() {
    let dir = std::env::temp_dir().join(format!("nds-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("posts");
    std::fs::write(&file, stream(&[post(1, 229, "7"), post(2, 250, "3")])).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nds-metrics"))
        .arg("--input")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["metric"], "NERR_HW_ERR_REPAIRABLE_HBM_UE");
    assert_eq!(lines[1]["metric"], "FEATURE_BITMAP");
    std::fs::remove_dir_all(&dir).unwrap();
}
