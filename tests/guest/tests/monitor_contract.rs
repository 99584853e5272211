//! The monitor's real output against the real module, produced as `make demo` produces it
//! (load generator on every device, one producer killed): the document carries every key
//! path of neuron-monitor's documented example with the same JSON type, and NeuronCores are
//! numbered instance-wide in the JSON, the Prometheus exposition and the top view.

#[path = "../../../userspace/nds-monitor/tests/common/shape.rs"]
mod shape;

use std::collections::BTreeSet;
use std::process::{Child, Command, Output};

use neuron_ds_guest_tests::helper_path;
use serde_json::Value;

/// The demo's load: three producers per device at 300 executions/s, the last one killed
/// halfway. Long enough that the three readers below, started one after another, all see it
/// live on the debug kernel too (KASAN makes each tool's start take seconds there; with other
/// jobs on the host's cores the three took 14 s, and the last saw no process of a 10 s load).
fn start_load() -> Child {
    let _ = std::fs::remove_dir_all("/tmp/contract-reports");
    Command::new(helper_path("nds-loadgen"))
        .args([
            "run",
            "--procs-per-device",
            "3",
            "--duration",
            "20s",
            "--rate",
            "300",
            "--crash",
            "1",
            "--tag-prefix",
            "contract",
            "--report-dir",
            "/tmp/contract-reports",
            "--summary",
            "/tmp/contract-summary.json",
        ])
        .spawn()
        .unwrap()
}

fn succeeded(output: Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The instance-wide keys a process on `device` may use.
fn keys_of(device: u64, per_device: u64) -> BTreeSet<String> {
    (device * per_device..(device + 1) * per_device)
        .map(|core| core.to_string())
        .collect()
}

#[test]
fn the_demos_output_has_neuron_monitors_shape_and_instance_wide_cores() {
    let mut load = start_load();
    std::thread::sleep(std::time::Duration::from_secs(1));
    // As the demo runs it (without --pretty, which only indents).
    let text = succeeded(
        Command::new(helper_path("nds-monitor"))
            .args(["--period", "1s", "--count", "1"])
            .output()
            .unwrap(),
    );
    let document: Value = serde_json::from_str(&text).unwrap();
    let exposition = succeeded(
        Command::new(helper_path("nds-monitor"))
            .args([
                "--period",
                "500ms",
                "--count",
                "1",
                "--format",
                "prometheus",
            ])
            .output()
            .unwrap(),
    );
    let screen = succeeded(
        Command::new(helper_path("nds-top"))
            .args([
                "--once", "--period", "500ms", "--width", "100", "--height", "40",
            ])
            .output()
            .unwrap(),
    );
    assert!(load.wait().unwrap().success(), "the load generator failed");

    match shape::check(std::slice::from_ref(&document)) {
        Ok(checked) => println!("{checked} key paths of the guide's example checked"),
        Err(problems) => panic!(
            "{} mismatches:\n{}\n{document:#}",
            problems.len(),
            problems.join("\n")
        ),
    }

    let hardware = &document["neuron_hardware_info"];
    let devices = hardware["neuron_device_count"].as_u64().unwrap();
    let per_device = hardware["neuroncore_per_device_count"].as_u64().unwrap();
    assert!(devices >= 2 && per_device >= 2, "{hardware}");
    let mut checked_devices = BTreeSet::new();
    for entry in document["neuron_runtime_data"].as_array().unwrap() {
        if entry["error"] != "" {
            continue;
        }
        let device = entry["neuron_device_index"].as_u64().unwrap();
        let allowed = keys_of(device, per_device);
        let report = &entry["report"];
        for object in [
            &report["neuroncore_counters"]["neuroncores_in_use"],
            &report["memory_used"]["neuron_runtime_used_bytes"]["usage_breakdown"]
                ["neuroncore_memory_usage"],
            &report["nds_counters"]["neuroncores"],
        ] {
            let keys: BTreeSet<String> = object.as_object().unwrap().keys().cloned().collect();
            assert!(!keys.is_empty(), "{entry}");
            assert!(keys.is_subset(&allowed), "device {device}: {keys:?}");
        }
        checked_devices.insert(device);
    }
    assert!(checked_devices.contains(&1), "no live process on device 1");
    println!("instance-wide cores checked on devices {checked_devices:?}");

    // Prometheus: a device-1 process (tag contract-d1-*) is only on device 1's cores.
    let device_one = keys_of(1, per_device);
    let mut labelled = BTreeSet::new();
    for line in exposition
        .lines()
        .filter(|l| l.starts_with("neuroncore_utilization_ratio{"))
        .filter(|l| l.contains("runtime_tag=\"contract-d1-"))
    {
        let core = line.split("neuroncore=\"").nth(1).unwrap();
        let core = core.split('"').next().unwrap().to_owned();
        assert!(device_one.contains(&core), "{line}");
        labelled.insert(core);
    }
    assert!(!labelled.is_empty(), "no device-1 series in\n{exposition}");
    // The top view: device-1 rows carry device 1's instance-wide numbers.
    let rows: Vec<&str> = screen.lines().filter(|l| l.contains(" nd1 ")).collect();
    assert!(!rows.is_empty(), "{screen}");
    for row in rows {
        let number = row
            .split("nc")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap();
        assert!(device_one.contains(number), "{row}");
    }
}
