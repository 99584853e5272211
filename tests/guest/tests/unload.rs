//! Unloading and reloading the module leaves nothing behind, and nothing unloads it while a
//! file or a mapping of its devices exists. Runs last (the harness runs test binaries in name
//! order) and leaves the module loaded with its original parameters.

use neuron_ds_guest_tests::{
    acquire, exporter::Exporter, identity::Identity, memory::MemoryReading,
    module_control::unload_module, nc_offset, open_device, Mapping, Producer, DEVICE, EVENTUALLY,
    SLAB_SIZE,
};
use std::process::Stdio;
use std::time::{Duration, Instant};
use std::{fs, process::Command};

const CYCLES: usize = 100;
/// Loss of available memory over all cycles that still counts as noise (measured with the
/// caches dropped and the slab caches, KASAN's quarantine with them, shrunk): this catches
/// what matters most, leaking slab memory, 4 MiB per device per load, even one 256 KiB slab
/// every fourth cycle. Leaks of small objects are below this noise; kmemleak looks for those.
const NOISE_BYTES: i64 = 16 << 20;

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} {args:?}: {status}");
}

fn reload(params: &[&str]) {
    run("rmmod", &["neuron_ds"]);
    let mut args = vec!["/neuron_ds.ko"];
    args.extend_from_slice(params);
    run("insmod", &args);
}

/// How many references hold the module.
fn module_references() -> u32 {
    fs::read_to_string("/sys/module/neuron_ds/refcnt")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether `rmmod neuron_ds` succeeds.
fn rmmod_succeeds() -> bool {
    Command::new("rmmod")
        .arg("neuron_ds")
        .status()
        .unwrap()
        .success()
}

#[test]
fn open_files_and_mappings_hold_the_module() {
    let idle = module_references();
    let producer = Producer::start(DEVICE, &[(0, 1, 5)]).unwrap();
    let file = open_device(DEVICE).unwrap();
    assert!(
        module_references() >= idle + 2,
        "the producer's file and ours"
    );
    assert!(!rmmod_succeeds(), "rmmod refused while files are open");
    let info = acquire(&file, producer.pid).unwrap();
    let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset).unwrap();
    assert_eq!(view.read_u64(nc_offset(0, 1)), 5);
    drop(file);
    producer.exit();
    // Only the mapping is left; it holds its file, which holds the module.
    assert_eq!(module_references(), idle + 1);
    assert!(!rmmod_succeeds(), "rmmod refused while a mapping exists");
    drop(view);
    assert_eq!(
        module_references(),
        idle,
        "the last unmap lets the module go"
    );
}

#[test]
fn node_name_names_the_nodes_and_bad_names_are_refused() {
    let params_text = fs::read_to_string("/module.params").unwrap_or_default();
    let params: Vec<&str> = params_text.split_whitespace().collect();
    reload(&["node_name=nds_test", "devices=2"]);
    assert!(fs::metadata("/dev/nds_test0").is_ok());
    assert!(fs::metadata("/dev/nds_test1").is_ok());
    assert!(
        fs::metadata("/dev/neuron0").is_err(),
        "the default name is not used"
    );
    run("rmmod", &["neuron_ds"]);
    for bad in [
        "node_name=",
        "node_name=Upper",
        "node_name=a/b",
        "node_name=0123456789012345678901234567890123",
    ] {
        let status = Command::new("insmod")
            .args(["/neuron_ds.ko", bad])
            .status()
            .unwrap();
        assert!(!status.success(), "{bad} must be refused");
    }
    let mut args = vec!["/neuron_ds.ko"];
    args.extend_from_slice(&params);
    run("insmod", &args);
    assert!(fs::metadata("/dev/neuron0").is_ok());
}

#[test]
fn load_and_unload_a_hundred_times_without_growth() {
    let params_text = fs::read_to_string("/module.params").unwrap_or_default();
    let params: Vec<&str> = params_text.split_whitespace().collect();
    // Warm up caches (module loader, sysfs, KUnit) before the baseline.
    for _ in 0..3 {
        reload(&params);
    }
    run("sync", &[]);
    let before = MemoryReading::now().available;
    for _ in 0..CYCLES {
        reload(&params);
    }
    run("sync", &[]);
    let after = MemoryReading::now().available;
    println!(
        "MemAvailable before {before} B, after {CYCLES} reloads {after} B, delta {} B",
        after - before
    );
    assert!(
        before - after < NOISE_BYTES,
        "lost {} bytes over {CYCLES} reloads",
        before - after
    );
    assert!(
        fs::metadata("/dev/neuron0").is_ok(),
        "the device is back after the last reload"
    );
}

/// Whether `line` is device 0's gauge of owned slots, which only a loaded module's sysfs
/// gives (its counters stay in the exposition, monotonic for the monitor's life).
fn device_zero(line: &str) -> bool {
    line.starts_with("nds_device_slots_owned{") && line.contains("neuron_device_index=\"0\"")
}

/// Unloads the module while an exporter runs: it lets go of what it holds within a sampling
/// step or two, so `delete_module` is retried (EAGAIN meanwhile) until [`EVENTUALLY`].
fn unload_beside_a_running_exporter() {
    let deadline = Instant::now() + EVENTUALLY;
    while let Err(errno) = unload_module() {
        assert_eq!(errno, libc::EAGAIN, "delete_module");
        assert!(
            Instant::now() < deadline,
            "the running exporter keeps the module loaded"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A module reload (as a KMM or DKMS upgrade does) while the exporter runs: it holds nothing
/// that keeps the module loaded; while the module is gone `/healthz` says so (503) and no
/// device is served; once the module is back both return, without a restart.
#[test]
fn a_serving_exporter_follows_a_module_reload() {
    let params_text = fs::read_to_string("/module.params").unwrap_or_default();
    let params: Vec<&str> = params_text.split_whitespace().collect();
    let exporter = Exporter::start(Identity::Root, &["--period", "200ms"], Stdio::inherit());
    let producer = Producer::start(DEVICE, &[(0, 1, 5)]).unwrap();
    exporter.wait_for("its slab counted as owned", 200, true, |line| {
        line.starts_with("nds_device_slots_owned{")
            && line.contains("neuron_device_index=\"0\"")
            && line.ends_with("} 1")
    });
    producer.exit();
    unload_beside_a_running_exporter();
    exporter.wait_for(
        "503 and no device without the module",
        503,
        false,
        device_zero,
    );
    let mut args = vec!["/neuron_ds.ko"];
    args.extend_from_slice(&params);
    run("insmod", &args);
    exporter.wait_for("device 0 after the reload", 200, true, device_zero);
}

/// Whether the event stream in `body` (NDJSON) has a module event saying `loaded`.
fn module_event(body: &str, loaded: bool) -> bool {
    body.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .any(|event| event["kind"] == "module" && event["loaded"] == loaded)
}

/// `/readyz` tells a module reload: 200 once the exporter has read every source and listed a
/// device, 503 while the module is unloaded (its devices then unknown, the unload an event),
/// 200 again once it is back.
#[test]
fn readyz_is_503_while_the_module_is_unloaded() {
    let params_text = fs::read_to_string("/module.params").unwrap_or_default();
    let params: Vec<&str> = params_text.split_whitespace().collect();
    let exporter = Exporter::start(Identity::Root, &["--period", "200ms"], Stdio::inherit());
    exporter.wait_until("ready with the module loaded", "/readyz", 200, |_| true);
    unload_beside_a_running_exporter();
    let why = exporter.wait_until("not ready without the module", "/readyz", 503, |_| true);
    assert!(!why.trim().is_empty(), "/readyz says why");
    exporter.wait_until("device 0 unknown", "/api/v1/devices", 200, |body| {
        let devices: serde_json::Value = serde_json::from_str(body).unwrap();
        devices["devices"].as_array().unwrap().iter().any(|device| {
            device["neuron_device_index"] == 0
                && device["state"] == "unknown"
                && device["reason"] == "module_unloaded"
        })
    });
    exporter.wait_until(
        "the unload evented",
        "/api/v1/events?since=0",
        200,
        |body| module_event(body, false),
    );
    let mut args = vec!["/neuron_ds.ko"];
    args.extend_from_slice(&params);
    run("insmod", &args);
    exporter.wait_until("ready after the reload", "/readyz", 200, |_| true);
    exporter.wait_until("the load evented", "/api/v1/events?since=0", 200, |body| {
        module_event(body, true)
    });
}
