//! Health verdicts from the stream: producers whose status mix has uncorrectable hardware
//! errors make their device unhealthy at the next report, with its reason and action;
//! repairable ones are counted and warned about; a clean mix stays healthy; a device whose
//! totals or slabs cannot be read is unknown, never healthy; the errors leave the window. The
//! monitors here read slab files, which no module counts: they are judged from the tenures
//! (tests/health_totals.rs judges the kernel's slabs from their totals).

mod common;

use std::time::{Duration, Instant};

use common::*;
use nds_abi::sysfs::SYSFS_COUNTERS;
use nds_document::health::{
    Action, DeviceHealth, HealthRules, HealthState, Reason, DEFAULT_WINDOW,
};
use nds_health::Health;
use nds_loadgen::ProducerReport;
use nds_sampler::Monitor;

const SECOND: Duration = Duration::from_secs(1);

/// What `report` wrote into status node `node`, over its cores.
fn written(report: &ProducerReport, node: &str) -> u64 {
    let source = SYSFS_COUNTERS
        .iter()
        .find(|counter| counter.name == node)
        .unwrap()
        .source
        .name();
    report
        .nc_counters
        .values()
        .filter_map(|counters| counters.get(source))
        .sum()
}

fn monitor(scratch: &Scratch, t0: Instant) -> Monitor<Health> {
    scratch
        .monitor(t0)
        .with_consumer(Health::new(HealthRules::default(), t0))
}

fn device(monitor: &Monitor<Health>, index: u32) -> &DeviceHealth {
    monitor
        .consumer()
        .group()
        .devices
        .iter()
        .find(|device| device.neuron_device_index == index)
        .unwrap_or_else(|| panic!("no verdict on neuron{index}"))
}

fn verdict(device: &DeviceHealth) -> (HealthState, Reason, Action) {
    let verdict = &device.judged.verdict;
    (verdict.state, verdict.reason, verdict.action)
}

#[test]
fn uncorrectable_errors_make_the_device_unhealthy_at_the_next_report() {
    let scratch = Scratch::new("health-ue");
    scratch.sysfs(2, 2, 0, 0);
    let t0 = Instant::now();
    let mut monitor = monitor(&scratch, t0);
    monitor.report_all(t0);
    let healthy = (HealthState::Healthy, Reason::NoErrors, Action::Monitor);
    assert_eq!(
        verdict(device(&monitor, 0)),
        healthy,
        "nothing happened yet"
    );
    let report = produce_mix(
        &scratch.slabs(),
        0,
        4242,
        "ue",
        400,
        "SUCCESS=4,EXEC_HW_ERR_HBM_UE=1,EXEC_HW_ERR_NC_UE=1",
    );
    let hbm = written(&report, "hw_hbm_ue_error");
    let nc = written(&report, "hw_nc_ue_error");
    assert!(hbm > 0 && nc > 0, "{report:?}");
    monitor.report_all(t0 + SECOND);
    let judged = device(&monitor, 0);
    assert_eq!(
        verdict(judged),
        (
            HealthState::Unhealthy,
            Reason::HbmUncorrectableErrors,
            Action::Terminate
        ),
        "the worst reason and the strongest action: {judged:?}"
    );
    assert_eq!(judged.judged.errors["hw_hbm_ue_error"], hbm);
    assert_eq!(judged.judged.errors["hw_nc_ue_error"], nc);
    assert!(judged.judged.verdict.message.contains(&format!("{hbm} ")));
    // Each core is judged on its own errors, and they add up to the device's.
    let on_cores: u64 = judged
        .neuroncores
        .iter()
        .map(|core| {
            core.judged
                .errors
                .get("hw_hbm_ue_error")
                .copied()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(on_cores, hbm);
    for core in &judged.neuroncores {
        let counted = core.judged.errors.values().any(|&count| count > 0);
        let unhealthy = core.judged.verdict.state == HealthState::Unhealthy;
        assert_eq!(counted, unhealthy, "{core:?}");
    }
    assert_eq!(verdict(device(&monitor, 1)), healthy, "the other device");
    // Nothing new: the errors stay within the window, then leave it.
    monitor.report_all(t0 + DEFAULT_WINDOW);
    assert_eq!(verdict(device(&monitor, 0)).0, HealthState::Unhealthy);
    monitor.report_all(t0 + DEFAULT_WINDOW + 2 * SECOND);
    assert_eq!(verdict(device(&monitor, 0)), healthy);
}

#[test]
fn a_clean_mix_stays_healthy_and_repairable_errors_are_a_warning() {
    let scratch = Scratch::new("health-clean");
    scratch.sysfs(1, 2, 0, 0);
    let t0 = Instant::now();
    let mut monitor = monitor(&scratch, t0);
    let clean = produce_mix(
        &scratch.slabs(),
        0,
        4343,
        "clean",
        300,
        "SUCCESS=10,EXEC_COMPLETED_WITH_ERR=2,TIMEOUT=1,HW_ERROR=1",
    );
    assert!(written(&clean, "timeout") > 0);
    monitor.report_all(t0 + SECOND);
    let judged = device(&monitor, 0);
    assert_eq!(
        verdict(judged),
        (HealthState::Healthy, Reason::NoErrors, Action::Monitor)
    );
    // Execution errors are counted, and judge nothing.
    assert_eq!(judged.judged.errors["timeout"], written(&clean, "timeout"));
    let repairable = produce_mix(
        &scratch.slabs(),
        0,
        4344,
        "repairable",
        300,
        "SUCCESS=4,EXEC_HW_ERR_REPAIRABLE_HBM_UE=1",
    );
    monitor.report_all(t0 + 2 * SECOND);
    let judged = device(&monitor, 0);
    assert_eq!(
        verdict(judged),
        (
            HealthState::Healthy,
            Reason::RepairableHbmErrors,
            Action::Monitor
        )
    );
    assert_eq!(
        judged.judged.errors["hw_repairable_hbm_ue_error"],
        written(&repairable, "hw_repairable_hbm_ue_error")
    );
    assert!(judged.judged.verdict.message.ends_with("(warning)"));
}

#[test]
fn a_device_whose_totals_or_slabs_cannot_be_read_is_unknown() {
    let scratch = Scratch::new("health-unreadable");
    scratch.sysfs(2, 2, 0, 0);
    let t0 = Instant::now();
    let mut monitor = monitor(&scratch, t0);
    monitor.report_all(t0);
    assert_eq!(verdict(device(&monitor, 0)).0, HealthState::Healthy);
    // A total of device 1 that is no number: its totals cannot be read, so it is not known
    // to be healthy; device 0's can.
    let total = scratch
        .sys()
        .join("neuron1/neuron_core0/stats/status/hw_hbm_ue_error/total");
    write(&total, "garbage\n");
    monitor.report_all(t0 + SECOND);
    let judged = device(&monitor, 1);
    assert_eq!(
        verdict(judged),
        (HealthState::Unknown, Reason::Unreadable, Action::Monitor),
        "{judged:?}"
    );
    assert!(
        judged.judged.verdict.message.contains("hw_hbm_ue_error"),
        "{judged:?}"
    );
    assert!(judged
        .neuroncores
        .iter()
        .all(|core| core.judged.verdict.state == HealthState::Unknown));
    assert_eq!(verdict(device(&monitor, 0)).0, HealthState::Healthy);
    write(&total, "0\n");
    monitor.report_all(t0 + 2 * SECOND);
    assert_eq!(verdict(device(&monitor, 1)).0, HealthState::Healthy);
    // A slab of device 1 that is not one: that device is unknown, the other is not.
    write(&slab_path(&scratch.slabs(), 1, 4545), "not a slab");
    monitor.report_all(t0 + 3 * SECOND);
    let judged = device(&monitor, 1);
    assert_eq!(verdict(judged).0, HealthState::Unknown, "{judged:?}");
    assert!(judged.judged.verdict.message.contains("cannot attach"));
    assert_eq!(verdict(device(&monitor, 0)).0, HealthState::Healthy);
    // A device that leaves the sysfs tree stays, unknown.
    std::fs::remove_file(slab_path(&scratch.slabs(), 1, 4545)).unwrap();
    std::fs::remove_dir_all(scratch.sys().join("neuron0")).unwrap();
    monitor.report_all(t0 + 4 * SECOND);
    let judged = device(&monitor, 0);
    assert_eq!(verdict(judged).0, HealthState::Unknown, "{judged:?}");
    assert!(judged.judged.verdict.message.contains("no longer listed"));
    assert_eq!(verdict(device(&monitor, 1)).0, HealthState::Healthy);
}

#[test]
fn the_json_document_carries_the_verdicts_and_validates() {
    let scratch = Scratch::new("health-json");
    scratch.sysfs(1, 2, 0, 0);
    produce_mix(
        &scratch.slabs(),
        0,
        4646,
        "json",
        200,
        "SUCCESS=4,EXEC_HW_ERR_DMA_ABORT=1",
    );
    let output = scratch
        .monitor_command("100ms")
        .args(["--count", "2"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let documents: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let health = &documents.last().unwrap()["neuron_health"];
    assert_eq!(health["window"], DEFAULT_WINDOW.as_secs_f64());
    let device = &health["devices"][0];
    assert_eq!(device["state"], "unhealthy", "{health}");
    assert_eq!(device["reason"], "dma_aborts");
    assert_eq!(device["action"], "reset");
    validate(&documents);
}
