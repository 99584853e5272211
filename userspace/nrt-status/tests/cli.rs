//! Runs the `nrt-status` binary and checks what it prints.

use std::process::{Command, Output};

use serde_json::Value;

fn nrt_status(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nrt-status"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout_of(args: &[&str]) -> String {
    let output = nrt_status(args);
    assert!(output.status.success(), "{args:?}: {output:?}");
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn json_of(args: &[&str]) -> Vec<Value> {
    let text = stdout_of(args);
    match serde_json::from_str(&text).expect("valid JSON") {
        Value::Array(items) => items,
        other => panic!("expected an array, got {other}"),
    }
}

#[test]
fn text_for_one_code() {
    let text = stdout_of(&["1004"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "NRT_EXEC_COMPLETED_WITH_ERR (1004)");
    assert!(
        lines.iter().any(|l| l.trim() == "band      per_inference"),
        "{text}"
    );
    assert!(lines.iter().any(|l| l.trim() == "priority  3"), "{text}");
    assert!(text.contains("[Execution]: [NRT_EXEC_COMPLETED_WITH_ERR] status_code=1004 "));
    assert!(text.contains(
        "execution: NDS_NC_COUNTER_INFER_COMPLETED_WITH_ERR [2] -> status/execute_completed_with_error"
    ));
    assert!(text
        .contains("execution: NDS_NC_COUNTER_INFERENCE_COUNT [28] -> other_info/inference_count"));
}

#[test]
fn identifiers_and_unknown_values_are_accepted() {
    let text = stdout_of(&["exec_oob", "0x4b6", "4242", "1100"]);
    let headers: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .collect();
    assert_eq!(
        headers,
        [
            "NRT_EXEC_OOB (1006)",
            "NRT_NETWORK_PROXY_FAILURE (1206)",
            "UNKNOWN (4242)",
            "NRT_COLL_PENDING (1100)"
        ]
    );
    assert!(text.contains("-> status/oob_error"));
    assert!(
        text.contains("feeds     nothing"),
        "1100 feeds nothing: {text}"
    );
}

#[test]
fn all_as_text_lists_every_code() {
    let text = stdout_of(&["--all"]);
    let headers = text.lines().filter(|l| l.starts_with("NRT_")).count();
    assert_eq!(headers, 28);
}

/// (value, identifier, band, priority, [(counter index, sysfs node)] on the execution path,
/// the generic-path counter index if any).
type Expected = (
    u64,
    &'static str,
    &'static str,
    u64,
    &'static [(u64, &'static str)],
    Option<u64>,
);

#[test]
fn all_as_json() {
    let items = json_of(&["--all", "--json"]);
    assert_eq!(items.len(), 28);
    // An independent excerpt of the reference tables.
    let expected: [Expected; 8] = [
        (
            0,
            "NRT_SUCCESS",
            "general",
            0,
            &[(1, "status/success"), (28, "other_info/inference_count")],
            None,
        ),
        (
            1,
            "NRT_FAILURE",
            "general",
            1,
            &[(16, "status/failure"), (28, "other_info/inference_count")],
            Some(16),
        ),
        (
            3,
            "NRT_INVALID_HANDLE",
            "general",
            1,
            &[(28, "other_info/inference_count")],
            None,
        ),
        (
            9,
            "NRT_LOAD_NOT_ENOUGH_NC",
            "general",
            1,
            &[(28, "other_info/inference_count")],
            Some(18),
        ),
        (
            101,
            "NRT_EXEC_UNIT_UNRECOVERABLE",
            "exec_unit",
            1,
            &[(28, "other_info/inference_count")],
            None,
        ),
        (1100, "NRT_COLL_PENDING", "collectives", 1, &[], None),
        (
            1204,
            "NRT_EXEC_SW_NQ_OVERFLOW",
            "hardware",
            2,
            &[
                (35, "status/execute_sw_nq_overflow"),
                (28, "other_info/inference_count"),
            ],
            None,
        ),
        (
            1205,
            "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE",
            "hardware",
            3,
            &[
                (40, "status/hw_repairable_hbm_ue_error"),
                (28, "other_info/inference_count"),
            ],
            None,
        ),
    ];
    for (value, identifier, band, priority, execution, generic) in expected {
        let item = items
            .iter()
            .find(|item| item["value"] == value)
            .unwrap_or_else(|| panic!("{value} missing"));
        assert_eq!(item["identifier"], identifier);
        assert_eq!(item["band"], band);
        assert_eq!(item["priority"], priority);
        assert_eq!(item["known"], true);
        assert_eq!(item["is_retry"], value == 1100);
        assert!(item["message"].as_str().is_some_and(|m| !m.is_empty()));
        let counters = item["counters"].as_array().expect("counters array");
        let got_execution: Vec<(u64, &str)> = counters
            .iter()
            .filter(|c| c["path"] == "execution")
            .map(|c| (c["index"].as_u64().unwrap(), c["sysfs"].as_str().unwrap()))
            .collect();
        assert_eq!(got_execution, execution, "{value}");
        let got_generic: Vec<u64> = counters
            .iter()
            .filter(|c| c["path"] == "generic")
            .map(|c| c["index"].as_u64().unwrap())
            .collect();
        assert_eq!(
            got_generic,
            generic.into_iter().collect::<Vec<_>>(),
            "{value}"
        );
    }
}

#[test]
fn json_for_an_unknown_value() {
    let items = json_of(&["--json", "70000"]);
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["identifier"], "UNKNOWN");
    assert_eq!(items[0]["known"], false);
    assert_eq!(items[0]["band"], "unbanded");
    assert_eq!(items[0]["priority"], 1);
    assert_eq!(
        items[0]["counters"][0]["counter"],
        "NDS_NC_COUNTER_INFERENCE_COUNT"
    );
}

#[test]
fn bad_usage_fails_cleanly() {
    for args in [&[][..], &["bogus"], &["--all", "5"], &["-1"]] {
        let output = nrt_status(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        assert!(!output.stderr.is_empty(), "{args:?}");
    }
}
