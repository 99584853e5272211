//! The status → counter bridge against literal tables written from the reference (facts §5 and
//! §4.8, counter indices from §2), independently of the implementation's tables and of the
//! counter enums' own values.

use std::collections::HashMap;

use nrt_status::bridge::{
    execution_counters, generic_counter, ERROR_FLAG_COUNTERS, EXECUTION_COUNTERS,
    GENERIC_STATUS_COUNTERS,
};
use nrt_status::decode::{InferErrorFlags, InferErrorSubtype};
use nrt_status::{
    report_error_flags, report_execution, report_generic, report_latencies, Counter, CounterSink,
    Latencies, MemorySink, NrtStatus,
};

/// Execution path: (status, outcome counter index, its C name, its sysfs node).
const EXECUTION: [(u32, usize, &str, &str); 16] = [
    (0, 1, "NDS_NC_COUNTER_INFER_COMPLETED", "status/success"),
    (
        1004,
        2,
        "NDS_NC_COUNTER_INFER_COMPLETED_WITH_ERR",
        "status/execute_completed_with_error",
    ),
    (
        1003,
        3,
        "NDS_NC_COUNTER_INFER_COMPLETED_WITH_NUM_ERR",
        "status/execute_completed_with_num_error",
    ),
    (5, 4, "NDS_NC_COUNTER_INFER_TIMED_OUT", "status/timeout"),
    (
        1002,
        5,
        "NDS_NC_COUNTER_INFER_INCORRECT_INPUT",
        "status/exec_bad_input",
    ),
    (
        7,
        6,
        "NDS_NC_COUNTER_INFER_FAILED_TO_QUEUE",
        "status/execute_failed_to_queue",
    ),
    (6, 11, "NDS_NC_COUNTER_ERR_HW", "status/hw_error"),
    (1, 16, "NDS_NC_COUNTER_GENERIC_FAIL", "status/failure"),
    (2, 19, "NDS_NC_COUNTER_ERR_INVALID", "status/invalid_error"),
    (1006, 30, "NDS_NC_COUNTER_OOB", "status/oob_error"),
    (
        1200,
        31,
        "NDS_EXT_NC_COUNTER_HW_ERR_COLLECTIVES",
        "status/hw_collectives_error",
    ),
    (
        1201,
        32,
        "NDS_EXT_NC_COUNTER_HW_ERR_HBM_UE",
        "status/hw_hbm_ue_error",
    ),
    (
        1202,
        33,
        "NDS_EXT_NC_COUNTER_HW_ERR_NC_UE",
        "status/hw_nc_ue_error",
    ),
    (
        1203,
        34,
        "NDS_EXT_NC_COUNTER_HW_ERR_DMA_ABORT",
        "status/hw_dma_abort_error",
    ),
    (
        1204,
        35,
        "NDS_EXT_NC_COUNTER_ERR_SW_NQ_OVERFLOW",
        "status/execute_sw_nq_overflow",
    ),
    (
        1205,
        40,
        "NDS_EXT_NC_COUNTER_HW_ERR_REPAIRABLE_HBM_UE",
        "status/hw_repairable_hbm_ue_error",
    ),
];

/// Generic path: (status, counter index, its sysfs node).
const GENERIC: [(u32, usize, &str); 5] = [
    (1, 16, "status/failure"),
    (2, 19, "status/invalid_error"),
    (4, 17, "status/resource_error"),
    (9, 18, "status/resource_nc_error"),
    (10, 20, "status/unsupported_neff_version"),
];

/// Error-flags path: (subtype, counter index, its sysfs node).
const FLAGS: [(u32, usize, &str); 4] = [
    (5, 36, "status/execute_sw_semaphore_error"),
    (6, 37, "status/execute_sw_event_error"),
    (7, 38, "status/execute_sw_psum_collision"),
    (8, 39, "status/execute_sw_sequencer_fatal"),
];

/// The inference-count counter and its node.
const INFERENCE_COUNT: (usize, &str, &str) = (
    28,
    "NDS_NC_COUNTER_INFERENCE_COUNT",
    "other_info/inference_count",
);

/// Every sysfs node of the driver (facts §4.8): (counter index, node).
const SYSFS: [(usize, &str); 28] = [
    (1, "status/success"),
    (16, "status/failure"),
    (4, "status/timeout"),
    (5, "status/exec_bad_input"),
    (11, "status/hw_error"),
    (2, "status/execute_completed_with_error"),
    (3, "status/execute_completed_with_num_error"),
    (7, "status/generic_error"),
    (17, "status/resource_error"),
    (18, "status/resource_nc_error"),
    (6, "status/execute_failed_to_queue"),
    (19, "status/invalid_error"),
    (20, "status/unsupported_neff_version"),
    (30, "status/oob_error"),
    (31, "status/hw_collectives_error"),
    (32, "status/hw_hbm_ue_error"),
    (33, "status/hw_nc_ue_error"),
    (34, "status/hw_dma_abort_error"),
    (35, "status/execute_sw_nq_overflow"),
    (36, "status/execute_sw_semaphore_error"),
    (37, "status/execute_sw_event_error"),
    (38, "status/execute_sw_psum_collision"),
    (39, "status/execute_sw_sequencer_fatal"),
    (40, "status/hw_repairable_hbm_ue_error"),
    (27, "other_info/model_load_count"),
    (28, "other_info/inference_count"),
    (29, "other_info/flop_count"),
    (0, "other_info/nc_time_in_use"),
];

fn node(counter: Counter) -> Option<String> {
    counter.sysfs_node().map(|n| n.to_string())
}

fn expected_execution(value: u32) -> Vec<usize> {
    let outcome = EXECUTION.iter().find(|row| row.0 == value).map(|row| row.1);
    let inference = (value != 1100).then_some(INFERENCE_COUNT.0);
    outcome.into_iter().chain(inference).collect()
}

fn values_to_check() -> impl Iterator<Item = u32> {
    (0..=1300).chain([2000, 65_535, 1 << 31, u32::MAX])
}

#[test]
fn execution_table_matches_the_reference() {
    assert_eq!(EXECUTION_COUNTERS.len(), EXECUTION.len());
    for (value, index, name, sysfs) in EXECUTION {
        let (_, counter) = EXECUTION_COUNTERS
            .iter()
            .find(|(status, _)| status.as_u32() == value)
            .unwrap_or_else(|| panic!("{value} missing"));
        assert_eq!(counter.index(), index, "{value}");
        assert_eq!(counter.name(), name, "{value}");
        assert_eq!(node(*counter).as_deref(), Some(sysfs), "{value}");
    }
}

#[test]
fn every_status_through_the_execution_path() {
    for value in values_to_check() {
        let got: Vec<usize> = execution_counters(NrtStatus::from_u32(value))
            .map(Counter::index)
            .collect();
        assert_eq!(got, expected_execution(value), "status {value}");
    }
}

#[test]
fn statuses_without_an_outcome_counter() {
    // Facts §5: these are not counted (beyond the inference count).
    for value in [3, 4, 9, 10, 11, 13, 14, 15, 101, 1005, 1206, 8, 12, 4242] {
        let got: Vec<usize> = execution_counters(NrtStatus::from_u32(value))
            .map(Counter::index)
            .collect();
        assert_eq!(got, [INFERENCE_COUNT.0], "status {value}");
    }
    assert_eq!(execution_counters(NrtStatus::COLL_PENDING).count(), 0);
}

#[test]
fn inference_count_counter() {
    let counter = nrt_status::bridge::INFERENCE_COUNT;
    assert_eq!(counter.index(), INFERENCE_COUNT.0);
    assert_eq!(counter.name(), INFERENCE_COUNT.1);
    assert_eq!(node(counter).as_deref(), Some(INFERENCE_COUNT.2));
}

#[test]
fn every_status_through_the_generic_path() {
    assert_eq!(GENERIC_STATUS_COUNTERS.len(), GENERIC.len());
    for value in values_to_check() {
        let expected = GENERIC.iter().find(|row| row.0 == value);
        let got = generic_counter(NrtStatus::from_u32(value));
        assert_eq!(
            got.map(Counter::index),
            expected.map(|row| row.1),
            "status {value}"
        );
        assert_eq!(
            got.and_then(node).as_deref(),
            expected.map(|row| row.2),
            "status {value}"
        );
    }
}

#[test]
fn error_flags_table_matches_the_reference() {
    assert_eq!(ERROR_FLAG_COUNTERS.len(), FLAGS.len());
    for (subtype, index, sysfs) in FLAGS {
        let subtype = InferErrorSubtype::from_u32(subtype).unwrap();
        let mut flags = InferErrorFlags::new();
        flags.set(subtype);
        let sink = MemorySink::new();
        report_error_flags(&sink, 0, &flags).unwrap();
        let snapshot = sink.snapshot();
        assert_eq!(snapshot.len(), 1, "{subtype:?}");
        let ((core, counter), value) = snapshot.into_iter().next().unwrap();
        assert_eq!((core, counter.index(), value), (0, index, 1), "{subtype:?}");
        assert_eq!(node(counter).as_deref(), Some(sysfs));
    }
    // Subtypes 0..=4 have no flag counter.
    for subtype in 0..=4 {
        let mut flags = InferErrorFlags::new();
        flags.set(InferErrorSubtype::from_u32(subtype).unwrap());
        let sink = MemorySink::new();
        report_error_flags(&sink, 0, &flags).unwrap();
        assert!(sink.snapshot().is_empty(), "subtype {subtype}");
    }
}

#[test]
fn all_flags_at_once() {
    let sink = MemorySink::new();
    let flags = InferErrorFlags::from_bytes([1; 9]);
    report_error_flags(&sink, 3, &flags).unwrap();
    report_error_flags(&sink, 3, &flags).unwrap();
    let mut got: Vec<(usize, u64)> = sink
        .snapshot()
        .into_iter()
        .map(|((core, c), v)| {
            assert_eq!(core, 3);
            (c.index(), v)
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, [(36, 2), (37, 2), (38, 2), (39, 2)]);
}

#[test]
fn latencies_are_set_not_added() {
    let sink = MemorySink::new();
    let first = Latencies {
        device: 10,
        total: 20,
        nc_time: 30,
        cc_time: 40,
    };
    let second = Latencies {
        device: 1,
        total: 2,
        nc_time: 3,
        cc_time: 4,
    };
    report_latencies(&sink, 1, &first).unwrap();
    report_latencies(&sink, 1, &second).unwrap();
    let mut got: Vec<(usize, u64)> = sink
        .snapshot()
        .into_iter()
        .map(|((_, c), v)| (c.index(), v))
        .collect();
    got.sort_unstable();
    // device 13, total 14, NC time 15, CC time 21; no sysfs node for any of them.
    assert_eq!(got, [(13, 1), (14, 2), (15, 3), (21, 4)]);
    for (counter, _) in second.counter_values() {
        assert_eq!(counter.sysfs_node(), None, "{counter}");
    }
}

#[test]
fn sysfs_table_matches_the_driver() {
    for (index, expected) in SYSFS {
        let counter = Counter::from_index(index).unwrap_or_else(|| panic!("counter {index}"));
        assert_eq!(counter.index(), index);
        assert_eq!(node(counter).as_deref(), Some(expected), "counter {index}");
    }
    // No other counter of the 95 per-core slots has a node.
    let with_node = (0..95)
        .filter_map(Counter::from_index)
        .filter(|counter| counter.sysfs_node().is_some())
        .count();
    assert_eq!(with_node, SYSFS.len());
    assert_eq!(Counter::from_index(41), None, "41.. are reserved");
    assert_eq!(Counter::from_index(usize::MAX), None);
}

/// A sink that records every call, to check the kind (add vs set) and the order of writes.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<(&'static str, usize, usize, u64)>>);

impl CounterSink for Recorder {
    type Error = std::convert::Infallible;

    fn add_nc(&self, core: usize, counter: Counter, delta: u64) -> Result<(), Self::Error> {
        self.0
            .lock()
            .unwrap()
            .push(("add", core, counter.index(), delta));
        Ok(())
    }

    fn set_nc(&self, core: usize, counter: Counter, value: u64) -> Result<(), Self::Error> {
        self.0
            .lock()
            .unwrap()
            .push(("set", core, counter.index(), value));
        Ok(())
    }
}

#[test]
fn report_functions_issue_the_right_calls() {
    let sink = Recorder::default();
    report_execution(&sink, 2, NrtStatus::EXEC_COMPLETED_WITH_ERR).unwrap();
    report_execution(&sink, 2, NrtStatus::COLL_PENDING).unwrap();
    report_generic(&sink, 2, NrtStatus::INVALID_HANDLE).unwrap();
    report_generic(&sink, 2, NrtStatus::RESOURCE).unwrap();
    report_latencies(
        &sink,
        5,
        &Latencies {
            device: 7,
            total: 8,
            nc_time: 9,
            cc_time: 0,
        },
    )
    .unwrap();
    let calls = sink.0.into_inner().unwrap();
    assert_eq!(
        calls,
        [
            ("add", 2, 2, 1),
            ("add", 2, 28, 1),
            ("add", 2, 17, 1),
            ("set", 5, 13, 7),
            ("set", 5, 14, 8),
            ("set", 5, 15, 9),
            ("set", 5, 21, 0),
        ]
    );
}

/// A sink whose writes fail after a budget, to check errors propagate and stop the report.
struct Failing(std::sync::atomic::AtomicUsize);

#[derive(Debug, PartialEq)]
struct Full;

impl CounterSink for Failing {
    type Error = Full;

    fn add_nc(&self, _: usize, _: Counter, _: u64) -> Result<(), Full> {
        self.set_nc(0, nrt_status::bridge::INFERENCE_COUNT, 0)
    }

    fn set_nc(&self, _: usize, _: Counter, _: u64) -> Result<(), Full> {
        use std::sync::atomic::Ordering;
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .map(|_| ())
            .map_err(|_| Full)
    }
}

#[test]
fn sink_errors_propagate() {
    let sink = Failing(1.into());
    assert_eq!(report_execution(&sink, 0, NrtStatus::SUCCESS), Err(Full));
    let sink = Failing(0.into());
    assert_eq!(report_generic(&sink, 0, NrtStatus::FAILURE), Err(Full));
    assert_eq!(
        report_generic(&sink, 0, NrtStatus::SUCCESS),
        Ok(()),
        "no write, no error"
    );
    assert_eq!(report_latencies(&sink, 0, &Latencies::default()), Err(Full));
}

#[test]
fn mixed_stream_sums() {
    // A producer-side stream across two cores; expected sums worked out by hand.
    let sink = MemorySink::new();
    let stream: [(usize, u32); 10] = [
        (0, 0),
        (0, 0),
        (0, 1004),
        (0, 1100),
        (0, 1205),
        (1, 0),
        (1, 1003),
        (1, 1206),
        (1, 5),
        (1, 0),
    ];
    for (core, status) in stream {
        report_execution(&sink, core, NrtStatus::from_u32(status)).unwrap();
    }
    report_generic(&sink, 1, NrtStatus::LOAD_NOT_ENOUGH_NC).unwrap();
    let got: HashMap<(usize, usize), u64> = sink
        .snapshot()
        .into_iter()
        .map(|((core, c), v)| ((core, c.index()), v))
        .collect();
    let expected: HashMap<(usize, usize), u64> = [
        ((0, 1), 2),
        ((0, 2), 1),
        ((0, 40), 1),
        ((0, 28), 4),
        ((1, 1), 2),
        ((1, 3), 1),
        ((1, 4), 1),
        ((1, 28), 5),
        ((1, 18), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, expected);
}

#[test]
fn memory_sink_wraps_like_a_u64_counter() {
    let sink = MemorySink::new();
    let counter = nrt_status::bridge::INFERENCE_COUNT;
    sink.set_nc(0, counter, u64::MAX).unwrap();
    sink.add_nc(0, counter, 2).unwrap();
    assert_eq!(sink.get(0, counter), 1);
    assert_eq!(sink.get(1, counter), 0);
}
