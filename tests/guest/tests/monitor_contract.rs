//! The monitor's real output against the real module, produced as `make demo` produces it
//! (load generator on every device, one producer killed): the document carries every key
//! path of neuron-monitor's documented example with the same JSON type, and NeuronCores are
//! numbered instance-wide in the JSON, the Prometheus exposition and the top view.
//!
//! The readers run while the load is live, however long a slow guest takes to start them: the
//! load outlasts them by far and is stopped once they are done, and the producer killed is one
//! the test kills itself, before the readers, not whichever one the load generator would kill
//! at a moment of its own.

#[path = "../../../userspace/nds-monitor/tests/common/shape.rs"]
mod shape;

use std::collections::BTreeSet;
use std::process::{Child, Command, Output};

use neuron_ds_guest_tests::{eventually, helper_path, slots_on};
use serde_json::Value;

/// Producers per device of the demo's load.
const PER_DEVICE: usize = 3;

/// The load generator, killed when dropped (also when the test fails): its producers get
/// SIGTERM then (their parent-death signal), exit, and their slabs are released.
struct Load(Child);

impl Drop for Load {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The demo's load: three producers per device at 300 executions/s, for far longer than the
/// test runs; returns once every producer owns its slab. The last one started (device 1's
/// third, the one the demo's crash kills) is then killed; the load generator waits for its
/// producers in the order it started them, so it is still waiting for the first.
fn start_load() -> Load {
    let load = Load(
        Command::new(helper_path("nds-loadgen"))
            .args([
                "run",
                "--procs-per-device",
                &PER_DEVICE.to_string(),
                "--duration",
                "600s",
                "--rate",
                "300",
                "--tag-prefix",
                "contract",
                "--summary",
                "/dev/null",
            ])
            .spawn()
            .unwrap(),
    );
    let owners = |device| slots_on(device).iter().filter(|slot| slot.pid != 0).count();
    eventually("every producer owns its slab", || {
        owners(0) == PER_DEVICE && owners(1) == PER_DEVICE
    });
    let killed = slots_on(1).iter().map(|slot| slot.pid).max().unwrap();
    // SAFETY: a signal to a process of ours.
    assert_eq!(unsafe { libc::kill(killed, libc::SIGKILL) }, 0);
    eventually("the killed producer's slab is released", || {
        owners(1) == PER_DEVICE - 1
    });
    load
}

/// Stops the load and waits for its slabs to be released.
fn stop_load(load: Load) {
    drop(load);
    eventually("the load's slabs are released", || {
        [0, 1]
            .iter()
            .all(|&device| slots_on(device).iter().all(|slot| slot.pid == 0))
    });
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
    let load = start_load();
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
    stop_load(load);

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
