//! Helpers of nds-ls's tests: a scratch host (a sysfs tree laid out like the module's, a slab
//! directory), real processes to hold the slabs (so that `/proc` has their command lines), and
//! slab files written by the load generator's workload, as `nds-loadgen run --slab-dir`
//! writes them.

#![allow(dead_code)] // Each test binary uses a different subset.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nds::{Backend, Producer};
use nds_loadgen::spec::{ProducerSpec, SlabSource as LoadgenSource, StreamLength};
use nds_loadgen::workload::Workload;
use nds_loadgen::{Recorder, StatusMix, Tally};
use nds_ls::Source;
use nds_slabs::SlabSource;
use nds_sysfs::{SysfsRoot, TimeInUseUnit};
use serde_json::Value;

/// The versions the load generator's producers publish in process-info.
pub const RUNTIME_VERSION: &str = "2.31.24";
pub const FRAMEWORK_VERSION: &str = "2.5.1";
pub const FRAMEWORK_TYPE: i64 = 1;

/// A scratch host: `sys/` (the module's class directory) and `slabs/`.
pub struct Host(pub PathBuf);

impl Host {
    pub fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("nds-ls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(path.join("slabs")).unwrap();
        std::fs::create_dir_all(path.join("sys")).unwrap();
        Self(path)
    }

    pub fn sys(&self) -> PathBuf {
        self.0.join("sys")
    }

    pub fn slabs(&self) -> PathBuf {
        self.0.join("slabs")
    }

    /// Slab files of `slabs/`, the scratch sysfs tree, the real `/proc`.
    pub fn source(&self) -> Source {
        Source {
            sysfs: SysfsRoot::new(self.sys()),
            slabs: SlabSource::Files { dir: self.slabs() },
            proc_root: PathBuf::from("/proc"),
        }
    }

    /// Device `device` with `cores` cores (its `core_count` and core directories) and a slot
    /// table of 16 slots: `owners` are `(slot, pid, generation)`, the other slots free.
    pub fn device(&self, device: u32, cores: usize, owners: &[(usize, i32, u64)]) {
        let dir = self.sys().join(format!("neuron{device}"));
        write(&dir.join("core_count"), &format!("{cores}\n"));
        for core in 0..cores {
            std::fs::create_dir_all(dir.join(format!("neuron_core{core}/stats"))).unwrap();
        }
        let mut table = String::from("slot pid clear_tick generation\n");
        for slot in 0..16 {
            let (pid, generation) = owners
                .iter()
                .find(|(owned, _, _)| *owned == slot)
                .map_or((0, 2), |&(_, pid, generation)| (pid, generation));
            table += &format!("{slot} {pid} 0 {generation}\n");
        }
        write(&dir.join("datastore/slots"), &table);
    }

    /// The slab file of `pid` on `device`.
    pub fn slab(&self, device: u32, pid: i32) -> PathBuf {
        self.slabs().join(format!("neuron{device}-{pid}.slab"))
    }

    /// A load-generator stream of `count` executions into the slab file of `pid` on `device`,
    /// tagged `tag`.
    pub fn produce(&self, device: u32, pid: i32, tag: &str, count: u64) {
        let store = Producer::open(&Backend::file(self.slab(device, pid))).unwrap();
        let tally = Tally::new();
        let spec = ProducerSpec {
            tag: tag.to_owned(),
            device,
            source: LoadgenSource::Directory(self.slabs()),
            cores: 2,
            length: StreamLength::Count(count),
            rate: 0,
            mix: nds_loadgen::mix::DEFAULT_MIX.to_owned(),
            time_in_use_unit_ps: TimeInUseUnit::PICOSECOND.ps_per_unit(),
            seed: u64::from(device) + 7,
            crash: false,
            hold: false,
            explicit_release: true,
            report: self.0.join("unused.json"),
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
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A live process standing for a runtime: `sleep` under the program name `name`, so that
/// its `/proc/<pid>/cmdline` is `<name> 600`. Killed when dropped.
pub struct Holder {
    child: Child,
}

impl Holder {
    /// Starts it and waits until `/proc` shows its command line (spawning returns while the
    /// child is still execing, when `/proc` shows the test thread's name).
    pub fn start(name: &str) -> Self {
        let child = Command::new("sleep")
            .arg0(name)
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep(1) runs");
        let holder = Self { child };
        let cmdline = PathBuf::from(format!("/proc/{}/cmdline", holder.pid()));
        let expected = format!("{name}\0600\0");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read(&cmdline).ok().as_deref() != Some(expected.as_bytes()) {
            assert!(Instant::now() < deadline, "{name} never showed in /proc");
            std::thread::sleep(Duration::from_millis(1));
        }
        holder
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    /// The command line `/proc` shows.
    pub fn command(&self, name: &str) -> String {
        format!("{name} 600")
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Checks that `json` has neuron-ls's shape: an array of device objects with every key of the
/// original, typed as the original types it (a string `numa_node`, a `null` or integer array
/// `connected_to`, byte counts as integers), and process objects with `pid`, `command` and
/// `neuron_runtime_version`.
pub fn assert_neuron_ls_shape(json: &Value) {
    let devices = json.as_array().expect("a top-level array");
    for device in devices {
        let object = device.as_object().expect("device objects");
        let is_uint = |key: &str| object.get(key).is_some_and(Value::is_u64);
        let is_string = |key: &str| object.get(key).is_some_and(Value::is_string);
        for key in [
            "neuron_device",
            "nc_count",
            "logical_neuroncore_config",
            "memory_size",
        ] {
            assert!(is_uint(key), "{key} is not an integer in {device}");
        }
        for key in ["bdf", "cpu_affinity", "numa_node"] {
            assert!(is_string(key), "{key} is not a string in {device}");
        }
        let connected = object.get("connected_to").expect("connected_to");
        assert!(
            connected.is_null()
                || connected
                    .as_array()
                    .is_some_and(|ids| ids.iter().all(Value::is_u64)),
            "connected_to: {connected}"
        );
        let ids = object["neuroncore_ids"].as_array().expect("neuroncore_ids");
        assert!(ids.iter().all(Value::is_u64), "neuroncore_ids: {ids:?}");
        assert_eq!(ids.len() as u64, object["nc_count"].as_u64().unwrap());
        let processes = object["neuron_processes"]
            .as_array()
            .expect("neuron_processes");
        for process in processes {
            assert!(process["pid"].is_i64(), "pid of {process}");
            assert!(process["command"].is_string(), "command of {process}");
            assert!(
                process["neuron_runtime_version"].is_string(),
                "neuron_runtime_version of {process}"
            );
            // Ours.
            for key in ["neuron_runtime_tag", "framework_version", "error"] {
                assert!(process[key].is_string(), "{key} of {process}");
            }
            for key in ["slot", "generation", "framework_type"] {
                assert!(process[key].is_i64(), "{key} of {process}");
            }
        }
    }
}

/// The process objects of device `device` in `json`, by pid.
pub fn processes_of(json: &Value, device: u64) -> Vec<Value> {
    json.as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["neuron_device"] == device)
        .unwrap_or_else(|| panic!("no device {device} in {json}"))["neuron_processes"]
        .as_array()
        .unwrap()
        .clone()
}
