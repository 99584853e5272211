//! Helpers shared by the monitor's integration tests: scratch directories, in-process
//! producers writing slab files through the load generator's workload, a sysfs tree laid out
//! like the module's, and JSON-schema validation.

#![allow(dead_code)] // Each test binary uses a different subset.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nds::{Backend, Producer};
use nds_abi::sysfs::SYSFS_COUNTERS;
use nds_loadgen::spec::{ProducerSpec, SlabSource as LoadgenSource, StreamLength};
use nds_loadgen::workload::Workload;
use nds_loadgen::{ProducerReport, Recorder, StatusMix, Tally};
use nds_monitor::{Monitor, Plan, SlabSource, Source};
use nds_sysfs::SysfsRoot;

pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("nds-monitor-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(path.join("slabs")).unwrap();
        std::fs::create_dir_all(path.join("sys")).unwrap();
        Self(path)
    }

    pub fn slabs(&self) -> PathBuf {
        self.0.join("slabs")
    }

    pub fn sys(&self) -> PathBuf {
        self.0.join("sys")
    }

    pub fn source(&self) -> Source {
        Source {
            slabs: SlabSource::Files { dir: self.slabs() },
            sysfs: SysfsRoot::new(self.sys()),
        }
    }

    /// A monitor of this directory with every group every second, started at `t0`.
    pub fn monitor(&self, t0: Instant) -> Monitor {
        Monitor::new(self.source(), Plan::everything(Duration::from_secs(1)), t0)
    }

    /// Writes a sysfs tree with `cores` cores per device and every total set to `value`.
    pub fn sysfs(&self, devices: u32, cores: usize, value: u64, owned: usize) {
        for device in 0..devices {
            let mut slots = String::from("slot pid clear_tick generation\n");
            for slot in 0..16 {
                let pid = if slot < owned { 100 + slot } else { 0 };
                slots += &format!("{slot} {pid} 0 {}\n", u64::from(pid != 0));
            }
            write(
                &self.sys().join(format!("neuron{device}/datastore/slots")),
                &slots,
            );
            for core in 0..cores {
                for counter in SYSFS_COUNTERS.iter() {
                    let dir = self.sys().join(format!(
                        "neuron{device}/neuron_core{core}/stats/{}/{}",
                        counter.group.dir_name(),
                        counter.name
                    ));
                    write(&dir.join("total"), &format!("{value}\n"));
                    write(&dir.join("present"), "0\n");
                }
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The slab file of (`device`, `pid`).
pub fn slab_path(dir: &Path, device: u32, pid: i32) -> PathBuf {
    dir.join(format!("neuron{device}-{pid}.slab"))
}

/// Runs a load-generator workload of `count` executions into a fresh slab file, in-process,
/// and returns its report (exactly what it wrote).
pub fn produce(dir: &Path, device: u32, pid: i32, tag: &str, count: u64) -> ProducerReport {
    let path = slab_path(dir, device, pid);
    let _ = std::fs::remove_file(&path);
    let store = Producer::open(&Backend::file(&path)).unwrap();
    let tally = Tally::new();
    let spec = ProducerSpec {
        tag: tag.to_owned(),
        device,
        source: LoadgenSource::Directory(dir.to_path_buf()),
        cores: 2,
        length: StreamLength::Count(count),
        rate: 0,
        mix: nds_loadgen::mix::DEFAULT_MIX.to_owned(),
        seed: u64::try_from(pid).unwrap(),
        crash: false,
        hold: false,
        explicit_release: true,
        report: dir.join("unused.json"),
    };
    let mut workload = Workload::start(
        Recorder::new(&store, &tally),
        &tally,
        &spec,
        StatusMix::default(),
        pid,
    )
    .unwrap();
    workload.run(spec.length, 0, false).unwrap();
    tally.verify(&store, 2).unwrap();
    let mut report = workload.report(false);
    report.pid = pid;
    report
}

/// Validates every document in `documents` against Documentation/monitor.schema.json with
/// Python's `jsonschema`; panics with the validator's message otherwise.
pub fn validate(documents: &[serde_json::Value]) {
    // Cargo runs test binaries with CARGO_MANIFEST_DIR set; the compile-time value is the
    // fallback for running the binary by hand.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let schema = Path::new(&manifest_dir).join("../../Documentation/monitor.schema.json");
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let data = std::env::temp_dir().join(format!(
        "nds-monitor-docs-{}-{}.json",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&data, serde_json::to_vec(documents).unwrap()).unwrap();
    let script = "import json, sys, jsonschema\n\
        schema = json.load(open(sys.argv[1]))\n\
        jsonschema.Draft202012Validator.check_schema(schema)\n\
        validator = jsonschema.Draft202012Validator(schema)\n\
        for doc in json.load(open(sys.argv[2])):\n    validator.validate(doc)\n\
        print('valid', len(json.load(open(sys.argv[2]))))\n";
    let python = ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|python| {
            Command::new(python)
                .args(["-c", "import jsonschema"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("python3 with the jsonschema module (Debian: python3-jsonschema)");
    let output = Command::new(python)
        .args(["-c", script])
        .arg(&schema)
        .arg(&data)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&data);
    assert!(
        output.status.success(),
        "schema validation failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
