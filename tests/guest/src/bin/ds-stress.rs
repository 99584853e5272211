//! The stress campaign's controller:
//! `ds-stress [--cycles N] [--processes N] [--devices N] [--readers N] [--seed S]`.
//!
//! Per device, 16 lanes each run `stress-producer` processes one after another (16 at once
//! per device, one slot each) until `--processes` have been started and `--cycles`
//! acquire/release cycles are done; `--readers` `stress-reader`s per device attach and detach
//! all along; a chaos thread kills about one producer in four at a random point of its run.
//! A counting producer is stopped first so that the controller can read what its current
//! slab holds (it is exactly what the kill will aggregate), then killed; a chaff producer
//! (one in four) writes only counters that no sysfs node aggregates and is killed blind.
//!
//! At the end every sysfs `total` must have moved by exactly what the producers wrote, no
//! slot may be owned, the kernel log must hold no complaint and MemAvailable must be back
//! within noise. Figures are printed; any violation exits 1.

use nds_abi::{layout::SLAB_GENERATION_OFFSET, sysfs::SYSFS_COUNTERS};
use neuron_ds_guest_tests::{
    acquire, device_path, helper_path,
    kernel_log::KernelLog,
    memory::MemoryReading,
    offset_device, offset_slot, open_device,
    rng::Rng,
    slab_offset, slots_on,
    stress::{node_offset, ProducerLine, ReaderStats, Tally, Tenure},
    sysfs_core_count, sysfs_counter_on, Mapping, EVENTUALLY, SLAB_SIZE, SLOTS,
};
use std::{
    fs,
    io::{BufRead, BufReader, Write},
    os::unix::process::ExitStatusExt,
    process::{exit, Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
        Arc, Mutex,
    },
    thread,
    time::{Duration, Instant},
};

/// Loss of MemAvailable that still counts as noise: page-table and slab-cache churn of a few
/// thousand processes (measured with the caches dropped and the slab caches, KASAN's
/// quarantine with them, shrunk: see `memory`). Slabs are allocated at load,
/// so what a leak here would be is a task or file reference per cycle: a few KiB times
/// thousands of cycles in the short form, gigabytes in the full one.
const NOISE_BYTES: i64 = 16 << 20;

struct Options {
    cycles: u64,
    processes: u64,
    devices: usize,
    readers: usize,
    seed: u64,
}

impl Options {
    fn parse() -> Self {
        let mut options = Self {
            cycles: 4_000,
            processes: 64,
            devices: 2,
            readers: 2,
            seed: 0x5EED_7E57,
        };
        let args: Vec<String> = std::env::args().skip(1).collect();
        for pair in args.chunks(2) {
            let [name, value] = pair else {
                usage();
            };
            let number = || value.parse::<u64>().unwrap_or_else(|_| usage());
            match name.as_str() {
                "--cycles" => options.cycles = number(),
                "--processes" => options.processes = number(),
                "--devices" => options.devices = number() as usize,
                "--readers" => options.readers = number() as usize,
                "--seed" => options.seed = number(),
                _ => usage(),
            }
        }
        options
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: ds-stress [--cycles N] [--processes N] [--devices N] [--readers N] [--seed S]"
    );
    exit(2);
}

/// A snapshot of a stopped producer's current slab.
struct InFlight {
    tenure: Tenure,
    tally: Tally,
}

/// What a lane and the chaos thread share about one running producer.
struct Running {
    pid: i32,
    device: usize,
    counting: bool,
    /// Kill it once it has reported this many cycles (`u64::MAX`: never).
    doom_after: u64,
    cycles: AtomicU64,
    killed: AtomicBool,
    in_flight: Mutex<Option<InFlight>>,
}

/// What the whole campaign adds up.
#[derive(Default)]
struct Totals {
    started: u64,
    counting: u64,
    cycles: u64,
    in_flight_counted: u64,
    stop_kills: u64,
    blind_kills: u64,
    enomem: u64,
    failures: Vec<String>,
    /// Per device.
    written: Vec<Tally>,
}

struct Campaign {
    options: Options,
    cores: usize,
    /// Producers not yet reaped; the chaos thread signals only these, under this lock, so a
    /// pid is never signalled after it was reaped (and maybe reused).
    running: Mutex<Vec<Arc<Running>>>,
    totals: Mutex<Totals>,
    done: AtomicBool,
}

impl Campaign {
    fn fail(&self, why: String) {
        eprintln!("ds-stress: FAIL: {why}");
        self.totals.lock().unwrap().failures.push(why);
    }

    /// Claims the next producer to start: (seed, cycles, counting, doom_after).
    fn next_producer(&self, rng: &mut Rng) -> Option<(u64, u64, bool, u64)> {
        let mut totals = self.totals.lock().unwrap();
        let per_process = self.options.cycles.div_ceil(self.options.processes).max(1);
        if totals.started >= self.options.processes && totals.cycles >= self.options.cycles {
            return None;
        }
        totals.started += 1;
        let counting = !rng.one_in(4);
        totals.counting += u64::from(counting);
        let doom_after = if rng.one_in(4) {
            rng.below(per_process)
        } else {
            u64::MAX
        };
        Some((rng.next_u64(), per_process, counting, doom_after))
    }

    /// One lane: producers on `device`, one at a time.
    fn lane(&self, device: usize, mut rng: Rng) {
        while let Some((seed, cycles, counting, doom_after)) = self.next_producer(&mut rng) {
            self.run_producer(device, seed, cycles, counting, doom_after);
        }
    }

    fn run_producer(&self, device: usize, seed: u64, cycles: u64, counting: bool, doom_after: u64) {
        let mode = if counting { "count" } else { "chaff" };
        let spawned = Command::new(helper_path("stress-producer"))
            .args([device.to_string(), cycles.to_string(), seed.to_string()])
            .args([mode.to_string(), self.cores.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => return self.fail(format!("spawning a producer: {e}")),
        };
        let running = Arc::new(Running {
            pid: child.id() as i32,
            device,
            counting,
            doom_after,
            cycles: AtomicU64::new(0),
            killed: AtomicBool::new(false),
            in_flight: Mutex::new(None),
        });
        self.running.lock().unwrap().push(running.clone());
        let mut written = Tally::default();
        let mut last_tenure = None;
        let mut enomem = 0;
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        for line in stdout.lines().map_while(Result::ok) {
            match ProducerLine::parse(&line) {
                Some(ProducerLine::Report(tenure, tally)) => {
                    written.merge(&tally);
                    last_tenure = Some(tenure);
                    running.cycles.fetch_add(1, Relaxed);
                }
                Some(ProducerLine::Done(count)) => enomem = count,
                None => self.fail(format!(
                    "producer {}: unexpected line {line:?}",
                    running.pid
                )),
            }
        }
        // Off the list before reaping: the chaos thread may no longer signal this pid.
        self.running
            .lock()
            .unwrap()
            .retain(|r| !Arc::ptr_eq(r, &running));
        let status = child.wait().expect("wait for a producer");
        let killed = running.killed.load(Relaxed);
        if !(status.success() || killed && status.signal() == Some(libc::SIGKILL)) {
            self.fail(format!("producer {} ended with {status}", running.pid));
        }
        let mut totals = self.totals.lock().unwrap();
        if let Some(in_flight) = running.in_flight.lock().unwrap().take() {
            // A tenure already reported was counted from its report.
            if last_tenure != Some(in_flight.tenure) {
                written.merge(&in_flight.tally);
                totals.in_flight_counted += 1;
            }
        }
        totals.cycles += running.cycles.load(Relaxed);
        totals.enomem += enomem;
        totals.written[device].merge(&written);
    }

    /// Reads the current slab of a stopped producer: exactly what its death will aggregate.
    fn read_in_flight(&self, target: &Running) -> Result<Option<InFlight>, String> {
        let file = open_device(&device_path(target.device)).map_err(|e| format!("open: {e}"))?;
        let info = match acquire(&file, target.pid) {
            Ok(info) => info,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(format!("ACQUIRE of stopped producer {}: {e}", target.pid)),
        };
        let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset)
            .map_err(|e| format!("mmap of stopped producer {}'s slab: {e}", target.pid))?;
        let mut tally = Tally::default();
        for core in 0..self.cores {
            for node in 0..SYSFS_COUNTERS.len() {
                tally.add(core, node, view.read_u64(node_offset(core, node)));
            }
        }
        // Producers report their tenures by the owner's window of the slot; a reader is given
        // the readers' window of the same slot.
        let offset = info.mmap_offset;
        let tenure = Tenure {
            offset: slab_offset(offset_device(offset), offset_slot(offset), true),
            generation: view.read_u64(SLAB_GENERATION_OFFSET),
        };
        Ok(Some(InFlight { tenure, tally }))
    }

    /// Stops `target`, snapshots its slab, kills it. Returns false if it had already exited.
    fn stop_and_kill(&self, target: &Running) -> Result<bool, String> {
        // SAFETY: signalling a child that has not been reaped (see `running`).
        unsafe { libc::kill(target.pid, libc::SIGSTOP) };
        let started = Instant::now();
        loop {
            let stat = fs::read_to_string(format!("/proc/{}/stat", target.pid)).unwrap_or_default();
            let state = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next());
            match state {
                Some('T' | 't') => break,
                Some('Z' | 'X') | None => return Ok(false),
                Some(_) if started.elapsed() > EVENTUALLY => {
                    return Err(format!("producer {} does not stop", target.pid));
                }
                Some(_) => thread::sleep(Duration::from_micros(100)),
            }
        }
        let in_flight = self.read_in_flight(target)?;
        *target.in_flight.lock().unwrap() = in_flight;
        target.killed.store(true, Relaxed);
        // SAFETY: as above.
        unsafe { libc::kill(target.pid, libc::SIGKILL) };
        Ok(true)
    }

    fn chaos(&self, mut rng: Rng) {
        while !self.done.load(Relaxed) {
            thread::sleep(Duration::from_micros(rng.below(4_000)));
            let running = self.running.lock().unwrap();
            let due: Vec<&Arc<Running>> = running
                .iter()
                .filter(|r| !r.killed.load(Relaxed) && r.cycles.load(Relaxed) >= r.doom_after)
                .collect();
            if due.is_empty() {
                continue;
            }
            let target = due[rng.index(due.len())].clone();
            if target.counting {
                match self.stop_and_kill(&target) {
                    Ok(true) => self.totals.lock().unwrap().stop_kills += 1,
                    Ok(false) => {}
                    Err(why) => {
                        drop(running);
                        self.fail(why);
                        // SAFETY: as in `stop_and_kill`; never leave a producer stopped.
                        unsafe { libc::kill(target.pid, libc::SIGKILL) };
                        target.killed.store(true, Relaxed);
                        continue;
                    }
                }
            } else {
                target.killed.store(true, Relaxed);
                // SAFETY: signalling a child that has not been reaped.
                unsafe { libc::kill(target.pid, libc::SIGKILL) };
                self.totals.lock().unwrap().blind_kills += 1;
            }
        }
    }
}

/// Every sysfs total of `devices` × `cores`, in (device, core, node) order.
fn sysfs_totals(devices: usize, cores: usize) -> Vec<u64> {
    let mut values = Vec::new();
    for device in 0..devices {
        for core in 0..cores {
            for counter in SYSFS_COUNTERS.iter() {
                let group = counter.group.dir_name();
                values.push(sysfs_counter_on(device, core, group, counter.name, "total"));
            }
        }
    }
    values
}

fn main() {
    let options = Options::parse();
    let devices = options.devices;
    let cores = sysfs_core_count(0);
    if (0..devices).any(|d| fs::metadata(device_path(d)).is_err()) {
        eprintln!("ds-stress: needs {devices} devices (load the module with devices={devices})");
        exit(2);
    }
    let mut kernel_log = KernelLog::open().expect("/dev/kmsg");
    let memory_before = MemoryReading::now();
    let totals_before = sysfs_totals(devices, cores);
    let mut rng = Rng::new(options.seed);
    println!(
        "ds-stress: seed {} cycles {} processes {} devices {devices} cores {cores} readers/device {}",
        options.seed, options.cycles, options.processes, options.readers
    );
    let started = Instant::now();
    let campaign = Campaign {
        options,
        cores,
        running: Mutex::new(Vec::new()),
        totals: Mutex::new(Totals {
            written: vec![Tally::default(); devices],
            ..Totals::default()
        }),
        done: AtomicBool::new(false),
    };
    let mut readers = Vec::new();
    for device in 0..devices {
        for _ in 0..campaign.options.readers {
            let reader = Command::new(helper_path("stress-reader"))
                .args([device.to_string(), rng.next_u64().to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn stress-reader");
            readers.push(reader);
        }
    }
    thread::scope(|scope| {
        let chaos_rng = rng.fork();
        let chaos = scope.spawn(|| campaign.chaos(chaos_rng));
        let lanes: Vec<_> = (0..devices)
            .flat_map(|device| (0..SLOTS).map(move |_| device))
            .map(|device| {
                let lane_rng = rng.fork();
                let campaign = &campaign;
                scope.spawn(move || campaign.lane(device, lane_rng))
            })
            .collect();
        for lane in lanes {
            lane.join().expect("lane thread");
        }
        campaign.done.store(true, Relaxed);
        chaos.join().expect("chaos thread");
    });
    let mut reader_stats = ReaderStats::default();
    for mut reader in readers {
        drop(reader.stdin.take());
        let output = reader.wait_with_output().expect("wait for a reader");
        let text = String::from_utf8_lossy(&output.stdout);
        match text.lines().find_map(ReaderStats::parse) {
            Some(stats) if output.status.success() => reader_stats.merge(&stats),
            _ => campaign.fail(format!("a reader ended with {} ({text:?})", output.status)),
        }
    }
    let elapsed = started.elapsed();
    let totals_after = sysfs_totals(devices, cores);
    let totals = campaign.totals.into_inner().unwrap();
    let mut failures = totals.failures;

    println!("\n== stress figures ({:.1} s)", elapsed.as_secs_f64());
    println!(
        "producer processes        {} ({} counting, {} chaff)",
        totals.started,
        totals.counting,
        totals.started - totals.counting
    );
    println!("acquire/release cycles    {}", totals.cycles);
    println!(
        "kills                     {} ({} stopped+snapshotted+killed, {} blind)",
        totals.stop_kills + totals.blind_kills,
        totals.stop_kills,
        totals.blind_kills
    );
    println!(
        "in-flight cycles counted  {} (read from a stopped producer's slab)",
        totals.in_flight_counted
    );
    println!("ENOMEM retries            {}", totals.enomem);
    println!(
        "readers                   {} ({} attaches: {} valid, {} empty, {} torn, {} moved; {} gone, {} stale, {} no header; {} mismatches)",
        devices * campaign.options.readers,
        reader_stats.attached,
        reader_stats.valid,
        reader_stats.empty,
        reader_stats.torn,
        reader_stats.moved,
        reader_stats.gone,
        reader_stats.stale,
        reader_stats.no_header,
        reader_stats.mismatches
    );
    if reader_stats.mismatches != 0 {
        failures.push(format!("{} inconsistent records", reader_stats.mismatches));
    }
    let per_device = cores * SYSFS_COUNTERS.len();
    for device in 0..devices {
        let (mut written_sum, mut counted_sum, mut wrong) = (0u64, 0u64, 0);
        for core in 0..cores {
            for (node, counter) in SYSFS_COUNTERS.iter().enumerate() {
                let at = device * per_device + core * SYSFS_COUNTERS.len() + node;
                let written = totals.written[device].sysfs_value(core, node);
                let counted = totals_after[at].wrapping_sub(totals_before[at]);
                written_sum = written_sum.wrapping_add(written);
                counted_sum = counted_sum.wrapping_add(counted);
                if written != counted {
                    wrong += 1;
                    failures.push(format!(
                        "neuron{device} core {core} {}: written {written}, sysfs moved by {counted}",
                        counter.name
                    ));
                }
            }
        }
        println!(
            "neuron{device} counts             written {written_sum}, counted by sysfs {counted_sum}, {} of {per_device} counters differ",
            wrong
        );
    }
    let owned: usize = (0..devices)
        .map(|d| {
            slots_on(d)
                .iter()
                .filter(|r| r.pid != 0 || r.generation % 2 != 0)
                .count()
        })
        .sum();
    println!("slots left owned          {owned}");
    if owned != 0 {
        failures.push(format!("{owned} slots left owned"));
    }
    let complaints = kernel_log.complaints();
    println!("kernel complaints         {}", complaints.len());
    for complaint in &complaints {
        println!("    {complaint}");
    }
    if !complaints.is_empty() {
        failures.push(format!("{} kernel complaints", complaints.len()));
    }
    let memory_after = MemoryReading::now();
    println!(
        "MemAvailable              before {} B, after {} B, delta {} B (noise bound {NOISE_BYTES} B)",
        memory_before.available,
        memory_after.available,
        memory_after.available - memory_before.available
    );
    println!(
        "  before shrinking slabs  delta {} B (SUnreclaim {} B to {} B)",
        memory_after.available_cached - memory_before.available_cached,
        memory_before.slab_unreclaimable,
        memory_after.slab_unreclaimable
    );
    if memory_before.available - memory_after.available > NOISE_BYTES {
        failures.push(format!(
            "lost {} bytes of memory",
            memory_before.available - memory_after.available
        ));
    }
    let _ = std::io::stdout().flush();
    if failures.is_empty() {
        println!("ds-stress: PASS");
    } else {
        for failure in &failures {
            println!("ds-stress: FAIL: {failure}");
        }
        exit(1);
    }
}
