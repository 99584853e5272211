//! Helpers shared by the monitor's integration tests: scratch directories, in-process
//! producers writing slab files through the load generator's workload, a sysfs tree laid out
//! like the module's, a Neuron driver tree, a `/proc` of each test's own (so that the pids
//! the producers are named by mean what the test says, whatever processes the machine runs),
//! a fake instance metadata service on loopback, JSON-schema validation, the guide's
//! document shape ([`shape`]), a tenure ledger the tests write ([`ledger`]), and what
//! producers wrote to the error counters ([`error_counts`]).

#![allow(dead_code)] // Each test binary uses a different subset.

pub mod error_counts;
pub mod ledger;
pub mod prometheus;
pub mod served;
#[allow(unused_imports)] // Each test binary uses a different subset.
pub use served::{exchange, nds_monitor, request, tool, Response, Served};
pub mod shape;
pub mod written;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nds::{Backend, Producer};
use nds_abi::sysfs::SYSFS_COUNTERS;
use nds_document::Plan;
use nds_host::hardware::HardwareTree;
use nds_host::imds::MetadataSetting;
use nds_host::HostSource;
use nds_loadgen::spec::{ProducerSpec, SlabSource as LoadgenSource, StreamLength};
use nds_loadgen::workload::Workload;
use nds_loadgen::{ProducerReport, Recorder, StatusMix, Tally};
use nds_sampler::{Monitor, Source};
use nds_slabs::SlabSource;
use nds_sysfs::{SysfsRoot, TimeInUseUnit};

pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("nds-monitor-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(path.join("slabs")).unwrap();
        std::fs::create_dir_all(path.join("sys")).unwrap();
        let scratch = Self(path);
        // The machine's CPU and memory, and no process until a test shows one.
        std::fs::create_dir_all(scratch.proc_root()).unwrap();
        for file in ["stat", "meminfo"] {
            symlink(
                Path::new("/proc").join(file),
                scratch.proc_root().join(file),
            )
            .unwrap();
        }
        scratch
    }

    /// The `/proc` the monitors of this scratch read: the machine's `stat` and `meminfo`,
    /// and only the processes [`Scratch::show_process`] added. A producer named by any other
    /// pid is not visible there, as a process that is gone: the monitor counts it whole, as
    /// one that started after it, even where a real process holds that number.
    pub fn proc_root(&self) -> PathBuf {
        self.0.join("proc")
    }

    /// Shows the real process `pid` (this test, or a child it started) in [`Scratch::proc_root`]:
    /// its start time and CPU time are the kernel's.
    pub fn show_process(&self, pid: i32) {
        symlink(
            Path::new("/proc").join(pid.to_string()),
            self.proc_root().join(pid.to_string()),
        )
        .unwrap();
    }

    pub fn slabs(&self) -> PathBuf {
        self.0.join("slabs")
    }

    pub fn sys(&self) -> PathBuf {
        self.0.join("sys")
    }

    /// `nds-monitor` on this scratch: its slab files, sysfs trees, module directory and
    /// `/proc`, every group every `period`, no instance metadata; the caller adds the rest.
    pub fn monitor_command(&self, period: &str) -> std::process::Command {
        let mut command = std::process::Command::new(nds_monitor());
        command
            .arg("--slab-dir")
            .arg(self.slabs())
            .arg("--sysfs-root")
            .arg(self.sys())
            .arg("--hardware-sysfs-root")
            .arg(self.hardware_root())
            .arg("--module-dir")
            .arg(self.0.join("module"))
            .arg("--proc-root")
            .arg(self.proc_root())
            .args(["--period", period, "--instance-metadata", "off"]);
        command
    }

    /// The driver's sysfs tree (absent unless [`Scratch::hardware`] writes it).
    pub fn hardware_root(&self) -> PathBuf {
        self.0.join("driver")
    }

    /// Slab files, the scratch sysfs tree and `/proc` ([`Scratch::proc_root`]); no driver
    /// tree, DMI data, module (unless [`Scratch::module_time_unit`] writes its parameter) or
    /// instance metadata (nothing leaves the machine).
    pub fn source(&self) -> Source {
        Source {
            slabs: SlabSource::Files { dir: self.slabs() },
            sysfs: SysfsRoot::new(self.sys()),
            host: HostSource {
                proc_root: self.proc_root(),
                module_dir: self.0.join("module"),
                hardware: HardwareTree::new(self.hardware_root()),
                dmi_dir: self.0.join("dmi"),
                instance_metadata: MetadataSetting::Off,
            },
            time_in_use_unit: None,
        }
    }

    /// Loads the scratch module with `time_in_use_unit_ps` set to `unit`.
    pub fn module_time_unit(&self, unit: TimeInUseUnit) {
        write(
            &self.0.join("module/parameters/time_in_use_unit_ps"),
            &format!("{}\n", unit.ps_per_unit()),
        );
    }

    /// A Neuron driver tree for `devices` devices: architecture files, and ECC counters
    /// `mem_ecc_uncorrected = 10 * device + value`, `sram_ecc_corrected = value` (the two
    /// other counters unpublished, as on a real driver).
    pub fn hardware(&self, devices: u32, value: u64) {
        for device in 0..devices {
            let dir = self.hardware_root().join(format!("neuron{device}"));
            write(&dir.join("info/architecture/device_name"), "Trainium\n");
            write(&dir.join("info/architecture/arch_type"), "v2\n");
            write(
                &dir.join("neuron_core0/info/architecture/arch_type"),
                "NCv2\n",
            );
            let hardware = dir.join("stats/hardware");
            write(
                &hardware.join("mem_ecc_uncorrected/total"),
                &format!("{}\n", 10 * u64::from(device) + value),
            );
            write(&hardware.join("mem_ecc_uncorrected/present"), "0\n");
            write(
                &hardware.join("sram_ecc_corrected/total"),
                &format!("{value}\n"),
            );
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
/// and returns its report (exactly what it wrote); busy time in the module's default unit.
pub fn produce(dir: &Path, device: u32, pid: i32, tag: &str, count: u64) -> ProducerReport {
    let _ = std::fs::remove_file(slab_path(dir, device, pid));
    run_workload(dir, device, pid, tag, count, TimeInUseUnit::default())
}

/// Runs `count` executions drawn from status mix `mix` (`SUCCESS=10,EXEC_HW_ERR_HBM_UE=1`)
/// into `pid`'s slab file (a fresh one if there is none), in-process; returns what this run
/// added.
pub fn produce_mix(
    dir: &Path,
    device: u32,
    pid: i32,
    tag: &str,
    count: u64,
    mix: &str,
) -> ProducerReport {
    run_workload_with(
        dir,
        device,
        pid,
        (tag, count),
        TimeInUseUnit::default(),
        mix,
    )
}

/// Runs `count` more executions into an existing slab file (the monitor, already attached,
/// sees the counters move: latencies get sampled).
pub fn produce_more(dir: &Path, device: u32, pid: i32, tag: &str, count: u64) {
    run_workload(dir, device, pid, tag, count, TimeInUseUnit::default());
}

/// As [`produce_more`] (or [`produce`] when there is no slab file yet), with busy time
/// written in `unit`; returns what this run added.
pub fn produce_in_unit(
    dir: &Path,
    device: u32,
    pid: i32,
    tag: &str,
    count: u64,
    unit: TimeInUseUnit,
) -> ProducerReport {
    run_workload(dir, device, pid, tag, count, unit)
}

/// The pid of this test process: slab files named after it have a real `/proc/<pid>/stat`
/// once [`Scratch::show_process`] shows it.
pub fn own_pid() -> i32 {
    i32::try_from(std::process::id()).unwrap()
}

fn run_workload(
    dir: &Path,
    device: u32,
    pid: i32,
    tag: &str,
    count: u64,
    unit: TimeInUseUnit,
) -> ProducerReport {
    let mix = nds_loadgen::mix::DEFAULT_MIX;
    run_workload_with(dir, device, pid, (tag, count), unit, mix)
}

fn run_workload_with(
    dir: &Path,
    device: u32,
    pid: i32,
    (tag, count): (&str, u64),
    unit: TimeInUseUnit,
    mix: &str,
) -> ProducerReport {
    let path = slab_path(dir, device, pid);
    let existed = path.exists();
    let store = Producer::open(&Backend::file(&path)).unwrap();
    let tally = Tally::new();
    let spec = ProducerSpec {
        tag: tag.to_owned(),
        device,
        source: LoadgenSource::Directory(dir.to_path_buf()),
        cores: 2,
        length: StreamLength::Count(count),
        rate: 0,
        mix: mix.to_owned(),
        time_in_use_unit_ps: unit.ps_per_unit(),
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
        mix.parse::<StatusMix>().unwrap(),
        pid,
    )
    .unwrap();
    workload.run(spec.length, 0, false).unwrap();
    if !existed {
        // Only a fresh slab holds exactly what this tally counted.
        tally.verify(&store, 2).unwrap();
    }
    let mut report = workload.report(false);
    report.pid = pid;
    report
}

/// Validates every document in `documents` against Documentation/monitor.schema.json with
/// Python's `jsonschema`; panics with the validator's message otherwise.
pub fn validate(documents: &[serde_json::Value]) {
    validate_with("monitor.schema.json", documents);
}

/// Validates every document in `documents` against Documentation/`schema`, its references to
/// the other schemas there resolved by their `$id`; panics with the validator's message
/// otherwise.
pub fn validate_with(schema: &str, documents: &[serde_json::Value]) {
    // Cargo runs test binaries with CARGO_MANIFEST_DIR set; the compile-time value is the
    // fallback for running the binary by hand.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let schema = Path::new(&manifest_dir)
        .join("../../Documentation")
        .join(schema);
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let data = std::env::temp_dir().join(format!(
        "nds-monitor-docs-{}-{}.json",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&data, serde_json::to_vec(documents).unwrap()).unwrap();
    let script = "import glob, json, os, sys, jsonschema\n\
        from referencing import Registry, Resource\n\
        schemas = [json.load(open(p)) for p in glob.glob(os.path.join(os.path.dirname(sys.argv[1]), '*.schema.json'))]\n\
        registry = Registry().with_resources((s['$id'], Resource.from_contents(s)) for s in schemas)\n\
        schema = json.load(open(sys.argv[1]))\n\
        jsonschema.Draft202012Validator.check_schema(schema)\n\
        validator = jsonschema.Draft202012Validator(schema, registry=registry)\n\
        for doc in json.load(open(sys.argv[2])):\n    validator.validate(doc)\n\
        print('valid', len(json.load(open(sys.argv[2]))))\n";
    let python = ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|python| {
            Command::new(python)
                .args(["-c", "import jsonschema, referencing"])
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

/// A fake EC2 instance metadata service on 127.0.0.1 speaking IMDSv2: `PUT /latest/api/token`
/// with a TTL header gives a token, and each `GET /latest/meta-data/<path>` with that token
/// answers from its table (404 for anything else, 401 without the token). With `hang`, it
/// accepts connections and never answers.
pub struct FakeImds {
    pub url: String,
    /// Every request line received, in order, with its token header (if any).
    pub requests: Arc<RequestLog>,
    stop: Arc<AtomicBool>,
    address: String,
    thread: Option<JoinHandle<()>>,
}

/// Answers of the fake service that fail on purpose: metadata path, and how many more GETs of
/// it answer 500.
pub type Failures = Arc<Mutex<BTreeMap<String, usize>>>;

/// Request lines with their token header.
pub type RequestLog = Mutex<Vec<(String, Option<String>)>>;

pub const FAKE_TOKEN: &str = "AQAEAFake-Token==";

/// What the fake service answers: one value per metadata path.
pub fn fake_instance() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        ("instance-id", "i-0fa1ce0123456789a"),
        ("instance-type", "trn1.32xlarge"),
        ("placement/availability-zone", "us-west-2d"),
        ("placement/availability-zone-id", "usw2-az4"),
        ("placement/region", "us-west-2"),
        ("ami-id", "ami-0fa1ce0123456789b"),
        ("mac", "0a:1b:2c:3d:4e:5f"),
        (
            "network/interfaces/macs/0a:1b:2c:3d:4e:5f/subnet-id",
            "subnet-0fa1ce01",
        ),
        ("tags/instance/Name", "trainer \"one\""),
    ])
}

impl FakeImds {
    pub fn start(hang: bool) -> Self {
        Self::start_failing(hang, Failures::default())
    }

    /// A service whose first GETs of some paths fail with 500 (`failures`).
    pub fn start_failing(hang: bool, failures: Failures) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, stopping) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                if hang {
                    held.push(stream);
                    continue;
                }
                let _ = answer(stream, &log, &failures);
            }
        });
        Self {
            url: format!("http://{address}"),
            requests,
            stop,
            address,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeImds {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(&self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn answer(stream: TcpStream, log: &RequestLog, failures: &Failures) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    let (mut token, mut ttl) = (None, None);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? <= 2 {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((&header, ""));
        match name.to_ascii_lowercase().as_str() {
            "x-aws-ec2-metadata-token" => token = Some(value.trim().to_owned()),
            "x-aws-ec2-metadata-token-ttl-seconds" => ttl = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    let request = request.trim().to_owned();
    log.lock().unwrap().push((request.clone(), token.clone()));
    let mut parts = request.split_whitespace();
    let (status, body) = match (parts.next(), parts.next()) {
        (Some("PUT"), Some("/latest/api/token")) if ttl.is_some() => {
            ("200 OK", FAKE_TOKEN.to_owned())
        }
        (Some("GET"), Some(path)) if token.as_deref() != Some(FAKE_TOKEN) => {
            let _ = path;
            ("401 Unauthorized", String::new())
        }
        (Some("GET"), Some(path))
            if failures
                .lock()
                .unwrap()
                .get_mut(path.trim_start_matches("/latest/meta-data/"))
                .is_some_and(|left| {
                    let fail = *left > 0;
                    *left = left.saturating_sub(1);
                    fail
                }) =>
        {
            ("500 Internal Server Error", String::new())
        }
        (Some("GET"), Some(path)) => match path
            .strip_prefix("/latest/meta-data/")
            .and_then(|field| fake_instance().get(field).copied())
        {
            Some(value) => ("200 OK", value.to_owned()),
            None => ("404 Not Found", String::new()),
        },
        _ => ("400 Bad Request", String::new()),
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}
