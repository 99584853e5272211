//! Starts the producer processes, waits for them, and collects their reports.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use nds_sysfs::TimeInUseUnit;

use crate::error::{Error, Result};
use crate::producer::READY_LINE;
use crate::report::{ProducerReport, Summary};
use crate::spec::{ProducerSpec, SlabSource, StreamLength};

/// Where producers get their slabs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slabs {
    /// From the kernel: `<dev_dir>/neuron<N>`.
    Devices {
        /// Directory of the device nodes, normally `/dev`.
        dev_dir: PathBuf,
    },
    /// From files in this directory (no kernel needed).
    Directory(PathBuf),
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Devices to load.
    pub devices: Vec<u32>,
    /// Producers per device.
    pub procs_per_device: usize,
    /// NeuronCores each producer writes.
    pub cores: usize,
    /// Stream length of each producer.
    pub length: StreamLength,
    /// Executions per second per producer (0: flat out).
    pub rate: u64,
    /// Status mix (`StatusMix` syntax).
    pub mix: String,
    /// The unit producers write `NDS_NC_COUNTER_TIME_IN_USE` in.
    pub time_in_use_unit: TimeInUseUnit,
    /// Tags are `<prefix>-d<device>-p<index>`.
    pub tag_prefix: String,
    /// How many producers (the last ones started) crash halfway.
    pub crash: usize,
    /// Keep the slabs after the streams until standard input closes.
    pub hold: bool,
    /// Where producers write their reports.
    pub report_dir: PathBuf,
    /// Slab source.
    pub slabs: Slabs,
    /// Base seed; producer `i` uses `seed + i`.
    pub seed: u64,
}

impl RunOptions {
    /// The specs of every producer, in start order.
    #[must_use]
    pub fn specs(&self) -> Vec<ProducerSpec> {
        let total = self.devices.len() * self.procs_per_device;
        let mut specs = Vec::with_capacity(total);
        for &device in &self.devices {
            for index in 0..self.procs_per_device {
                let number = specs.len();
                let tag = format!("{}-d{device}-p{index}", self.tag_prefix);
                let source = match &self.slabs {
                    Slabs::Devices { dev_dir } => {
                        SlabSource::Device(dev_dir.join(format!("neuron{device}")))
                    }
                    Slabs::Directory(dir) => SlabSource::Directory(dir.clone()),
                };
                specs.push(ProducerSpec {
                    report: self.report_dir.join(format!("{tag}.json")),
                    tag,
                    device,
                    source,
                    cores: self.cores,
                    length: self.length,
                    rate: self.rate,
                    mix: self.mix.clone(),
                    time_in_use_unit_ps: self.time_in_use_unit.ps_per_unit(),
                    seed: self.seed.wrapping_add(number as u64),
                    crash: number + self.crash >= total,
                    hold: self.hold,
                    explicit_release: number % 2 == 0,
                });
            }
        }
        specs
    }
}

/// A started producer.
struct Running {
    spec: ProducerSpec,
    child: Child,
    stdin: Option<ChildStdin>,
}

/// Runs every producer of `options` with `exe` (this program) and returns their reports.
///
/// With `hold`, [`READY_LINE`] is written to `out` once every producer has reported (or
/// crashed), and the producers keep their slabs until `input` reaches end of file.
///
/// # Errors
///
/// A producer that could not start, failed, crashed when it should not have (or survived when
/// it should have crashed), or left no readable report.
///
/// The producers get SIGTERM when the thread that called this function ends (the kernel ties
/// `PR_SET_PDEATHSIG` to the forking thread), so a killed orchestrator leaves none running.
pub fn run(
    options: &RunOptions,
    exe: &Path,
    out: &mut impl Write,
    input: impl Read,
) -> Result<Summary> {
    fs::create_dir_all(&options.report_dir)
        .map_err(|e| Error::io(format!("creating {}", options.report_dir.display()), e))?;
    let mut running = Vec::new();
    for spec in options.specs() {
        let json = serde_json::to_string(&spec).map_err(|source| Error::Json {
            path: PathBuf::from("-"),
            source,
        })?;
        let parent = std::process::id().to_string();
        let mut child = Command::new(exe)
            .args(["producer", "--parent", &parent, "--spec", &json])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io(format!("starting {}", exe.display()), e))?;
        let stdin = child.stdin.take();
        running.push(Running { spec, child, stdin });
    }
    for producer in &mut running {
        wait_ready(producer)?;
    }
    if options.hold {
        writeln!(out, "{READY_LINE}")
            .and_then(|()| out.flush())
            .map_err(|e| Error::io("writing the ready line", e))?;
        // Everything up to end of file is ignored; only the close matters.
        let mut sink = Vec::new();
        BufReader::new(input)
            .read_to_end(&mut sink)
            .map_err(|e| Error::io("waiting on standard input", e))?;
    }
    let mut summary = Summary::default();
    for mut producer in running {
        drop(producer.stdin.take());
        let status = producer
            .child
            .wait()
            .map_err(|e| Error::io(format!("waiting for {}", producer.spec.tag), e))?;
        let fail = |reason: String| Error::Producer {
            tag: producer.spec.tag.clone(),
            reason,
        };
        let killed = status.signal() == Some(libc::SIGKILL);
        match (producer.spec.crash, killed, status.success()) {
            (true, true, _) | (false, false, true) => {}
            (true, false, _) => return Err(fail(format!("should have crashed, {status}"))),
            (false, _, _) => return Err(fail(format!("{status}"))),
        }
        let report = ProducerReport::read(&producer.spec.report)?;
        if report.crashed != producer.spec.crash {
            return Err(fail("its report disagrees on whether it crashed".into()));
        }
        summary.producers.push(report);
    }
    summary.producers.sort_by(|a, b| a.tag.cmp(&b.tag));
    Ok(summary)
}

/// Run first by a producer that `run` started as `parent`: it gets SIGTERM when the thread
/// of `parent` that started it ends, however it ends (a SIGTERM or SIGKILL to the
/// orchestrator must not leave producers running and holding their slabs), and it ends at once
/// if `parent` is gone already (then nobody would signal it).
///
/// Done by the producer itself rather than between fork and exec: with a `pre_exec` hook the
/// standard library spawns by another path than `posix_spawn`, and on the test guests' kernels
/// (musl static binaries) that spawn failed with `ENOSYS` even for an empty hook.
pub fn tie_to_parent(parent: u32) -> std::io::Result<()> {
    // SAFETY: prctl with an option and a signal number, no pointers.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if std::os::unix::process::parent_id() != parent {
        return Err(std::io::Error::other(format!(
            "the load generator that started this producer (pid {parent}) has ended"
        )));
    }
    Ok(())
}

/// Waits until `producer` printed its ready line, or ended (a crashing producer never does).
fn wait_ready(producer: &mut Running) -> Result<()> {
    let Some(stdout) = producer.child.stdout.take() else {
        return Ok(());
    };
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| Error::io(format!("reading from {}", producer.spec.tag), e))?;
    match line.trim() {
        READY_LINE => Ok(()),
        "" if producer.spec.crash => Ok(()),
        other => Err(Error::Producer {
            tag: producer.spec.tag.clone(),
            reason: format!("ended before reporting ({other:?})"),
        }),
    }
}
