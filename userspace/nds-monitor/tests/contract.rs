//! The output contract: a document of ours carries every key path of neuron-monitor's
//! documented example with the same JSON type (and exactly its keys where consumers build
//! fixed records), and NeuronCores are numbered instance-wide in every group and in the
//! Prometheus exposition.

mod common;

use std::time::{Duration, Instant};

use common::*;
use nds_document::document::RuntimeEntry;
use nds_document::{MonitorDocument, Plan};
use nds_exporter::Exporter;
use nds_host::imds::MetadataSetting;
use nds_sampler::Monitor;
use serde_json::Value;

const SECOND: Duration = Duration::from_secs(1);

/// A report of two processes (one per device, two cores each) with every group filled in:
/// both ran executions during the period (so latencies were sampled), the slab files are
/// named after this test process (shown in the scratch `/proc`, so its `<pid>/stat` is
/// there), a driver tree gives ECC counters and the device type, and a fake metadata service
/// on loopback gives the instance.
fn full_document(scratch: &Scratch) -> MonitorDocument {
    full_report(scratch).0
}

/// [`full_document`] with the monitor that made it (its counters for the exposition).
fn full_report(scratch: &Scratch) -> (MonitorDocument, Monitor<Exporter>) {
    scratch.sysfs(2, 2, 9, 1);
    scratch.hardware(2, 4);
    let imds = FakeImds::start(false);
    let pid = own_pid();
    scratch.show_process(pid);
    produce(&scratch.slabs(), 0, pid, "contract-d0", 150);
    produce(&scratch.slabs(), 1, pid, "contract-d1", 150);
    let mut source = scratch.source();
    source.host.instance_metadata = MetadataSetting::Endpoint(imds.url.clone());
    let t0 = Instant::now();
    let mut monitor =
        Monitor::new(source, Plan::everything(SECOND), t0).with_consumer(Exporter::new());
    assert!(monitor.poll(t0).is_none(), "attaches; nothing is due yet");
    // The metadata is queried in the background: wait for it (bounded), without reporting.
    let mut waited = 0;
    while monitor.instance_info().instance_id.is_empty() {
        assert!(waited < 200, "the fake metadata service was never queried");
        std::thread::sleep(Duration::from_millis(25));
        waited += 1;
    }
    produce_more(&scratch.slabs(), 0, pid, "contract-d0", 80);
    produce_more(&scratch.slabs(), 1, pid, "contract-d1", 80);
    let document = monitor.poll(t0 + SECOND).expect("every group is due");
    (document, monitor)
}

fn entry_on(document: &MonitorDocument, device: u32) -> &RuntimeEntry {
    document
        .neuron_runtime_data
        .iter()
        .find(|entry| entry.neuron_device_index == device)
        .unwrap_or_else(|| panic!("no process on device {device}"))
}

#[test]
fn every_key_path_of_the_guide_is_in_our_document_with_its_type() {
    let scratch = Scratch::new("contract");
    let document = full_document(&scratch);
    let value = serde_json::to_value(&document).unwrap();
    match shape::check(std::slice::from_ref(&value)) {
        Ok(checked) => println!("{checked} key paths of the guide's example checked"),
        Err(problems) => panic!(
            "{} mismatches:\n{}\n{value:#}",
            problems.len(),
            problems.join("\n")
        ),
    }
    validate(&[value]);
    // The values are real, not placeholders.
    let instance = &document.instance_info;
    assert_eq!(instance.instance_id, "i-0fa1ce0123456789a");
    assert_eq!(instance.subnet_id, "subnet-0fa1ce01");
    assert_eq!(instance.error, "");
    let hardware = &document.neuron_hardware_info;
    assert_eq!(
        (
            hardware.neuron_device_type.as_str(),
            hardware.neuroncore_version.as_str()
        ),
        ("trainium", "v2")
    );
    let ecc = document.system_data.neuron_hw_counters.as_ref().unwrap();
    assert_eq!(ecc.lifetime[1].mem_ecc_uncorrected, 14);
    let entry = entry_on(&document, 0);
    let stats = entry.report.execution_stats.as_ref().unwrap();
    assert!(stats.latency_stats.total_latency.is_some());
    let cpu = entry.report.neuron_runtime_vcpu_usage.as_ref().unwrap();
    assert_eq!(cpu.error, "", "this process's /proc/<pid>/stat is readable");
}

#[test]
fn a_document_missing_a_key_or_with_an_extra_one_in_a_fixed_record_fails_the_check() {
    let scratch = Scratch::new("contract-neg");
    let document = full_document(&scratch);
    let good = serde_json::to_value(&document).unwrap();
    let mut missing = good.clone();
    missing["instance_info"]
        .as_object_mut()
        .unwrap()
        .remove("subnet_id");
    let problems = shape::check(&[missing]).unwrap_err();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems
        .iter()
        .any(|p| p == "missing instance_info.subnet_id"));
    let mut extra = good.clone();
    extra["neuron_runtime_data"][0]["report"]["memory_used"]["neuron_runtime_used_bytes"]
        ["usage_breakdown"]["host"]["pinned"] = 1.into();
    let problems = shape::check(&[extra]).unwrap_err();
    assert!(
        problems[0].contains("extra keys [\"pinned\"]"),
        "{problems:?}"
    );
    // Null latencies (no execution) are the guide's, but then nothing checks the percentiles.
    let mut idle = good.clone();
    for entry in idle["neuron_runtime_data"].as_array_mut().unwrap() {
        entry["report"]["execution_stats"]["latency_stats"]["total_latency"] = Value::Null;
    }
    let problems = shape::check(&[idle.clone()]).unwrap_err();
    assert!(
        problems
            .iter()
            .any(|p| p.ends_with("total_latency: {\"null\"} where the guide has {\"object\"}")),
        "{problems:?}"
    );
    assert!(
        shape::check(&[idle, good.clone()]).is_ok(),
        "null in one document, object in another"
    );
    let mut retyped = good;
    retyped["neuron_hardware_info"]["neuron_device_count"] = "2".into();
    let problems = shape::check(&[retyped]).unwrap_err();
    assert!(
        problems[0].starts_with("neuron_hardware_info.neuron_device_count"),
        "{problems:?}"
    );
}

#[test]
fn device_one_processes_are_on_neuroncores_two_and_three_everywhere() {
    let scratch = Scratch::new("contract-index");
    let (document, monitor) = full_report(&scratch);
    for (device, keys) in [(0, ["0", "1"]), (1, ["2", "3"])] {
        let report = &entry_on(&document, device).report;
        let in_use: Vec<&str> = report
            .neuroncore_counters
            .as_ref()
            .unwrap()
            .neuroncores_in_use
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(in_use, keys, "neuroncores_in_use of device {device}");
        let memory = report.memory_used.as_ref().unwrap();
        let by_core: Vec<&str> = memory
            .neuron_runtime_used_bytes
            .usage_breakdown
            .neuroncore_memory_usage
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(by_core, keys, "neuroncore_memory_usage of device {device}");
        let counters: Vec<&str> = report
            .nds_counters
            .as_ref()
            .unwrap()
            .neuroncores
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(counters, keys, "nds_counters of device {device}");
        // A subgraph names its core within its device, next to the device.
        for model in &memory.loaded_models {
            for subgraph in model.subgraphs.values() {
                assert_eq!(subgraph.neuron_device_index, device);
                assert!(subgraph.neuroncore_index < 2);
            }
        }
        let system = document.system_data.neuron_counters.as_ref().unwrap();
        let sysfs_keys: Vec<&str> = system.neuron_devices[device as usize]
            .neuroncores
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(sysfs_keys, keys, "neuron_counters of device {device}");
    }
    // Prometheus: the ecosystem's and our families label the same instance-wide cores.
    let exposition = monitor.consumer().render(&document);
    for family in [
        "neuroncore_utilization_ratio",
        "neuroncore_memory_usage_tensors",
        "nds_runtime_status_total",
    ] {
        let mut cores: Vec<&str> = exposition
            .lines()
            .filter(|line| line.starts_with(&format!("{family}{{")))
            .filter(|line| line.contains("runtime_tag=\"contract-d1\""))
            .filter_map(|line| line.split("neuroncore=\"").nth(1)?.split('"').next())
            .collect();
        cores.sort_unstable();
        cores.dedup();
        assert_eq!(cores, ["2", "3"], "{family} of the device-1 process");
    }
}
