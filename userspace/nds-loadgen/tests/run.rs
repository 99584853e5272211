//! The load generator end to end over slab files: every report matches its slab exactly, a
//! crashing producer dies by SIGKILL after reporting, and a held run keeps its slabs until
//! standard input closes.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nds::{Backend, Reader};
use nds_abi::counters::{ExtNcCounter, NcCounter, NdCounter};
use nds_loadgen::{ProducerReport, Summary};
use nds_slabs::slab_file_name;

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("nds-loadgen-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn loadgen(dir: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nds-loadgen"));
    command
        .args(["run", "--rate", "0", "--slab-dir"])
        .arg(dir)
        .args(extra);
    command
}

/// Every named counter of the report's slab file equals the report.
fn assert_slab_matches(dir: &Path, report: &ProducerReport, cores: usize) {
    let path = dir.join(slab_file_name(report.device, report.pid));
    let slab = Reader::open(&Backend::file(&path), report.pid).unwrap();
    for core in 0..cores {
        for (index, name) in NcCounter::ALL
            .iter()
            .map(|c| (c.index(), c.name()))
            .chain(ExtNcCounter::ALL.iter().map(|c| (c.index(), c.name())))
        {
            assert_eq!(
                slab.nc_counter(core, index).unwrap(),
                report.nc(core, name),
                "{} core {core} {name}",
                report.tag
            );
        }
    }
    for counter in NdCounter::ALL {
        let reported = report.nd_counters.get(counter.name()).copied().unwrap_or(0);
        assert_eq!(
            slab.nd_counter(counter.index()).unwrap(),
            reported,
            "{}",
            counter.name()
        );
    }
    let models = slab.read_all_models().unwrap();
    assert_eq!(models.len(), report.loaded_models.len(), "{}", report.tag);
}

#[test]
fn reports_equal_the_slabs_including_the_crashed_producer() {
    let dir = Scratch::new("exact");
    let output = loadgen(
        &dir.0,
        &[
            "--devices",
            "0,1",
            "--procs-per-device",
            "2",
            "--cores",
            "2",
            "--count",
            "400",
            "--crash",
            "1",
        ],
    )
    .output()
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Summary = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary.producers.len(), 4);
    let crashed: Vec<_> = summary.producers.iter().filter(|r| r.crashed).collect();
    assert_eq!(crashed.len(), 1);
    assert_eq!(crashed[0].tag, "loadgen-d1-p1");
    assert_eq!(crashed[0].executions, 200, "crashes halfway");
    for report in &summary.producers {
        assert_slab_matches(&dir.0, report, 2);
        let executions: u64 = report.statuses.values().sum();
        assert_eq!(executions, report.executions);
        // Every finished execution counts as an inference (the retry sentinel does not).
        let pending = report
            .statuses
            .get("NRT_COLL_PENDING")
            .copied()
            .unwrap_or(0);
        let inferences: u64 = (0..2)
            .map(|c| report.nc(c, "NDS_NC_COUNTER_INFERENCE_COUNT"))
            .sum();
        assert_eq!(inferences, report.executions - pending);
        let successes: u64 = (0..2)
            .map(|c| report.nc(c, "NDS_NC_COUNTER_INFER_COMPLETED"))
            .sum();
        assert_eq!(successes, report.statuses["NRT_SUCCESS"]);
        let loads: u64 = (0..2)
            .map(|c| report.nc(c, "NDS_NC_COUNTER_MODEL_LOAD_COUNT"))
            .sum();
        assert_eq!(loads, report.model_loads);
        assert_eq!(
            report.loaded_models.len() as u64,
            report.model_loads - report.model_unloads
        );
    }
}

#[test]
fn a_held_run_reports_ready_and_finishes_when_stdin_closes() {
    let dir = Scratch::new("hold");
    let mut child = loadgen(
        &dir.0,
        &["--procs-per-device", "2", "--count", "60", "--hold"],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    // The producers are alive and holding their slabs.
    let slabs = std::fs::read_dir(&dir.0).unwrap().count();
    assert_eq!(slabs, 2);
    drop(child.stdin.take());
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    let summary: Summary = serde_json::from_str(&rest).unwrap();
    assert_eq!(summary.producers.len(), 2);
    assert!(summary
        .producers
        .iter()
        .all(|r| !r.crashed && r.executions == 60));
}

#[test]
fn a_bad_mix_is_refused_before_anything_starts() {
    let dir = Scratch::new("mix");
    let output = loadgen(&dir.0, &["--mix", "SUCCESS=1,NOT_A_STATUS=2"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("NOT_A_STATUS"));
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
}

/// TIME_IN_USE per (producer tag, core) of a run writing it in `ps_per_unit` picoseconds.
fn busy_written(ps_per_unit: &str) -> Vec<(String, usize, u64)> {
    busy_written_with(ps_per_unit, &["--time-in-use-unit-ps", ps_per_unit])
}

/// The same for a run with `unit_args`, in a scratch directory named after `name`.
fn busy_written_with(name: &str, unit_args: &[&str]) -> Vec<(String, usize, u64)> {
    let dir = Scratch::new(&format!("unit-{name}"));
    let mut args = vec!["--procs-per-device", "2", "--cores", "2", "--count", "200"];
    args.extend(unit_args);
    let output = loadgen(&dir.0, &args).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Summary = serde_json::from_slice(&output.stdout).unwrap();
    let mut busy = Vec::new();
    for report in &summary.producers {
        assert_slab_matches(&dir.0, report, 2);
        for core in 0..2 {
            let written = report.nc(core, "NDS_NC_COUNTER_TIME_IN_USE");
            busy.push((report.tag.clone(), core, written));
        }
    }
    busy
}

#[test]
fn busy_time_is_written_in_the_unit_given() {
    let microseconds = busy_written("1000000");
    let nanoseconds = busy_written("1000");
    let picoseconds = busy_written("1");
    let milliseconds = busy_written("1000000000");
    assert_eq!(microseconds.len(), 4);
    // The same streams (same seeds) of whole-microsecond device times, in four units.
    for (((us, ns), ps), ms) in microseconds
        .iter()
        .zip(&nanoseconds)
        .zip(&picoseconds)
        .zip(&milliseconds)
    {
        assert_eq!((&us.0, us.1), (&ps.0, ps.1));
        assert!(us.2 > 0, "{us:?}");
        assert_eq!(ns.2, us.2 * 1_000, "{ns:?} vs {us:?}");
        assert_eq!(ps.2, us.2 * 1_000_000, "{ps:?} vs {us:?}");
        // A coarser unit than the device times: the total is rounded once, not per execution.
        assert_eq!(ms.2, (us.2 + 500) / 1_000, "{ms:?} vs {us:?}");
    }
    // Without the option, the module's parameter, else picoseconds.
    let module = Scratch::new("unit-module");
    let parameter = module.0.join("parameters/time_in_use_unit_ps");
    std::fs::create_dir_all(parameter.parent().unwrap()).unwrap();
    std::fs::write(&parameter, "1000000\n").unwrap();
    let module_dir = module.0.to_str().unwrap();
    let from_module = busy_written_with("from-module", &["--module-dir", module_dir]);
    assert_eq!(from_module, microseconds);
    let absent = module.0.join("absent");
    let absent = absent.to_str().unwrap();
    let no_module = busy_written_with("no-module", &["--module-dir", absent]);
    assert_eq!(no_module, picoseconds);
    std::fs::write(&parameter, "0\n").unwrap();
    let output = loadgen(&module.0.join("run"), &["--module-dir", module_dir])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("time_in_use_unit_ps"), "{stderr}");
}

#[test]
fn a_zero_time_unit_is_refused() {
    let dir = Scratch::new("unit-zero");
    let output = loadgen(&dir.0, &["--time-in-use-unit-ps", "0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--time-in-use-unit-ps"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
}

/// Whether process `pid` is still running (a zombie waiting for its reaper is not).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat.get(end + 2..end + 3))
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Producers the test saw; any still running when the test ends (it failed) are killed, so
/// a failure leaves no process behind.
struct Producers(Vec<i32>);

impl Drop for Producers {
    fn drop(&mut self) {
        for &pid in self.0.iter().filter(|&&pid| running(pid)) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// The pids of the producers whose slab files are in `dir`.
fn slab_owners(dir: &Path) -> Vec<i32> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".slab")?.split_once('-')?.1.parse().ok()
        })
        .collect()
}

#[test]
fn sigterm_or_sigkill_to_a_run_stops_its_producers() {
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let dir = Scratch::new(&format!("signal-{signal}"));
        // Producers in the middle of an hour-long stream. The signalled run cannot remove a
        // report directory of its own, so it gets one inside the scratch directory.
        let reports = dir.0.join("reports");
        let mut child = loadgen(&dir.0, &["--procs-per-device", "3", "--duration", "1h"])
            .arg("--report-dir")
            .arg(&reports)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let producers = Producers(loop {
            let pids = slab_owners(&dir.0);
            if pids.len() == 3 {
                break pids;
            }
            assert!(Instant::now() < deadline, "{pids:?}");
            std::thread::sleep(Duration::from_millis(20));
        });
        assert!(producers.0.iter().all(|&pid| running(pid)));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(i32::try_from(child.id()).unwrap(), signal) };
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(signal));
        let deadline = Instant::now() + Duration::from_secs(10);
        while producers.0.iter().any(|&pid| running(pid)) {
            assert!(
                Instant::now() < deadline,
                "producers {:?} outlived the run (signal {signal})",
                producers.0
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
