//! Guest timing binary of `make bench`: the kernel paths of the neuron_ds module, timed with
//! real system calls inside the QEMU guest, each next to its floor.
//!
//! | measurement | floor |
//! | --- | --- |
//! | open + ACQUIRE + mmap + touch 64 pages + munmap + RELEASE + close | open + 2 null ioctls on the same device + mmap(MAP_POPULATE) of a 256 KiB memfd + touch 64 pages + munmap + close |
//! | RELEASE (aggregation) with 16 live slabs | the same with 1 live slab |
//! | RELEASE (aggregation) while four other processes have the slab mapped, every page touched | the same right after the four unmapped it again (the same work, no mapping at the release); and RELEASE with no other process |
//! | RELEASE while another process reads every sysfs counter file in a loop | RELEASE alone, and RELEASE while another process reads the misc device's `dev` attribute in a loop (the same load on the other CPU, no module code) |
//! | open + read + close of a sysfs total, 1 and 16 live slabs | the same for the misc device's `dev` attribute |
//! | wakeup of a reader blocked in `read()` of the posts, from the period's stamp | wakeup of a reader blocked in `read()` of a pipe, from the stamp of the thread that writes it after sleeping a period |
//! | ACQUIRE that reaps a dead owner whose `CLONE_VM` sibling keeps its 60,000 mappings of its window asked for | the same with one mapping |
//!
//! A "null ioctl" is a command the driver does not know: it goes through the whole ioctl path
//! into the driver and comes back with ENOTTY. Each pair is measured in alternating rounds so
//! that a slow phase of the host (other builds on the same two cores) hits both sides; each
//! round gives one sample (the mean of one batch) and the median sample is printed as a line
//! `BENCH <key> <ns per op> <samples>` that `nds-bench-report` reads.
//!
//! Its one argument is the `metrics_period_ms` the module was loaded with.
//!
//! Nothing is asserted about timings; the binary fails only when a system call does.

use std::ffi::c_void;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use nds_abi::ioctl::{
    NeuronDsInfo, NEURON_IOCTL_ACQUIRE_NEURON_DS, NEURON_IOCTL_RELEASE_NEURON_DS,
};
use nds_abi::layout::{NEURON_DATASTORE_SIZE, NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE};
use nds_abi::ledger::{TenureRecord, NDS_IOCTL_FOLLOW_LEDGER, TENURE_RECORD_SIZE};
use nds_abi::sysfs::{sysfs_counter, SysfsGroup};
use nds_bench::report::GuestBench;
use zerocopy::FromBytes;

mod wakeup;

/// The device under test.
const DEVICE: &str = "/dev/neuron0";
/// Its sysfs directory, where the original driver has it.
const SYSFS_DEVICE: &str = "/sys/class/neuron_device/neuron0";
/// The `dev` attribute of its misc device, a sysfs read with nothing behind it.
const MISC_DEV: &str = "/sys/class/misc/neuron0/dev";
/// `_IO('N', 0)`: a command the driver does not implement.
const NULL_IOCTL: u32 = 0x4E00;
/// Guest page size.
const PAGE_SIZE: usize = 4096;
/// Rounds per comparison: samples per side.
const ROUNDS: usize = 11;
/// Mappings of one reader window a reader asks for to slow the next owner (the module makes
/// at most 1,024 of them).
const MANY_MAPPINGS: usize = 10_000;
/// Mappings of its window an owner asks for before it dies, its address space kept by a
/// `CLONE_VM` sibling (the module makes at most 1,024 of them).
const DEAD_OWNER_MAPPINGS: usize = 60_000;
/// Stack of such a sibling, which only waits for its signal.
const SIBLING_STACK: usize = 64 * 1024;
/// Wall time of one batch (one sample).
const BATCH: Duration = Duration::from_millis(40);

type Result<T, E = io::Error> = std::result::Result<T, E>;

/// Adds the failing step to an I/O error.
fn context<T>(result: io::Result<T>, step: &str) -> Result<T> {
    result.map_err(|error| io::Error::new(error.kind(), format!("{step}: {error}")))
}

/// `-1` from a system call as the errno it set.
fn check(rc: libc::c_int, step: &str) -> Result<libc::c_int> {
    if rc < 0 {
        context(Err(io::Error::last_os_error()), step)
    } else {
        Ok(rc)
    }
}

/// An open device node and the datastore ioctls on it.
struct Device(File);

impl Device {
    fn open() -> Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(DEVICE);
        context(file, DEVICE).map(Self)
    }

    fn ioctl(&self, request: u32, arg: *mut NeuronDsInfo, step: &str) -> Result<libc::c_int> {
        // SAFETY: the datastore commands take a pointer to a 24-byte argument that `arg` points
        // to; the driver rejects any other command without touching `arg`. The cast only
        // changes the C library's request type (`int` on musl), not the bits.
        check(
            unsafe { libc::ioctl(self.0.as_raw_fd(), request as libc::Ioctl, arg) },
            step,
        )
    }

    /// ACQUIRE of the caller's own slab; returns its mmap offset.
    fn acquire(&self) -> Result<u64> {
        let mut info = NeuronDsInfo::for_pid(0);
        self.ioctl(NEURON_IOCTL_ACQUIRE_NEURON_DS, &mut info, "ACQUIRE")?;
        Ok(info.mmap_offset)
    }

    /// RELEASE of the caller's own slab.
    fn release(&self) -> Result<()> {
        let mut info = NeuronDsInfo::for_pid(0);
        self.ioctl(NEURON_IOCTL_RELEASE_NEURON_DS, &mut info, "RELEASE")
            .map(drop)
    }

    /// An ioctl the driver answers with ENOTTY.
    fn null_ioctl(&self) -> Result<()> {
        let mut info = NeuronDsInfo::for_pid(0);
        // SAFETY: as in `ioctl`; the driver does not know the command and ignores `info`.
        let rc = unsafe { libc::ioctl(self.0.as_raw_fd(), NULL_IOCTL as libc::Ioctl, &mut info) };
        let error = io::Error::last_os_error();
        match (rc, error.raw_os_error()) {
            (-1, Some(libc::ENOTTY)) => Ok(()),
            (-1, _) => context(Err(error), "null ioctl"),
            _ => Err(io::Error::other("null ioctl: the driver accepted it")),
        }
    }
}

/// A shared 256 KiB mapping, unmapped on drop.
struct Mapping(NonNull<c_void>);

impl Mapping {
    fn new(fd: libc::c_int, offset: u64, extra_flags: libc::c_int) -> Result<Self> {
        let offset = libc::off_t::try_from(offset).map_err(io::Error::other)?;
        // SAFETY: a fresh shared mapping at an address the kernel chooses.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                NEURON_DATASTORE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | extra_flags,
                fd,
                offset,
            )
        };
        if addr == libc::MAP_FAILED {
            return context(Err(io::Error::last_os_error()), "mmap");
        }
        NonNull::new(addr)
            .map(Self)
            .ok_or_else(|| io::Error::other("mmap returned NULL"))
    }

    /// A read-only shared 256 KiB mapping.
    fn read_only(fd: libc::c_int, offset: u64) -> Result<Self> {
        let offset = libc::off_t::try_from(offset).map_err(io::Error::other)?;
        // SAFETY: a fresh shared mapping at an address the kernel chooses.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                NEURON_DATASTORE_SIZE,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                offset,
            )
        };
        if addr == libc::MAP_FAILED {
            return context(Err(io::Error::last_os_error()), "mmap");
        }
        NonNull::new(addr)
            .map(Self)
            .ok_or_else(|| io::Error::other("mmap returned NULL"))
    }

    /// Reads one byte of each of the 64 pages, as a reader attaching would.
    fn read_every_page(&self) {
        for page in 0..NEURON_DATASTORE_SIZE / PAGE_SIZE {
            // SAFETY: inside the mapping.
            unsafe {
                self.0
                    .as_ptr()
                    .cast::<u8>()
                    .add(page * PAGE_SIZE)
                    .read_volatile();
            }
        }
    }

    /// Writes one byte in each of the 64 pages, as a producer starting up would.
    /// Reads the first page, which the fault-around maps the whole window with.
    fn touch_once(&self) {
        // SAFETY: inside the mapping.
        unsafe { self.0.as_ptr().cast::<u8>().read_volatile() };
    }

    fn touch(&self) {
        for page in 0..NEURON_DATASTORE_SIZE / PAGE_SIZE {
            // SAFETY: inside the writable mapping; nothing else in this process uses it.
            unsafe {
                self.0
                    .as_ptr()
                    .cast::<u8>()
                    .add(page * PAGE_SIZE + PAGE_SIZE / 2)
                    .write_volatile(1);
            }
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping created in `new`, unmapped once.
        unsafe { libc::munmap(self.0.as_ptr(), NEURON_DATASTORE_SIZE) };
    }
}

/// A 256 KiB memfd, the floor's stand-in for a slab.
fn memfd() -> Result<File> {
    // SAFETY: a NUL-terminated name; the new descriptor is owned by the returned `File`.
    let fd = check(
        unsafe { libc::memfd_create(c"nds-bench-floor".as_ptr(), libc::MFD_CLOEXEC) },
        "memfd_create",
    )?;
    // SAFETY: `fd` was just created and is owned by nothing else.
    let file = unsafe { File::from_raw_fd(fd) };
    context(
        file.set_len(u64::try_from(NEURON_DATASTORE_SIZE).map_err(io::Error::other)?),
        "ftruncate memfd",
    )?;
    Ok(file)
}

/// One batch: runs `op` until [`BATCH`] has passed; `op` returns the time to count for its
/// run (all of it, or only the part under test). Returns the mean counted time per op.
fn batch(mut op: impl FnMut() -> Result<Duration>) -> Result<f64> {
    let start = Instant::now();
    let (mut counted, mut ops) = (Duration::ZERO, 0u32);
    while ops == 0 || start.elapsed() < BATCH {
        counted += op()?;
        ops += 1;
    }
    Ok(counted.as_secs_f64() * 1e9 / f64::from(ops))
}

/// Times the whole of `op`.
fn whole(mut op: impl FnMut() -> Result<()>) -> impl FnMut() -> Result<Duration> {
    move || {
        let start = Instant::now();
        op()?;
        Ok(start.elapsed())
    }
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A measurement and the batch that produces one sample of it.
type Side<'a> = (GuestBench, &'a mut dyn FnMut() -> Result<f64>);

/// Collects [`ROUNDS`] samples of each side, one side after the other in every round, and
/// prints one `BENCH` line per side.
fn alternate(sides: &mut [Side<'_>]) -> Result<()> {
    let mut samples = vec![Vec::new(); sides.len()];
    for _ in 0..ROUNDS {
        for ((_, sample), samples) in sides.iter_mut().zip(&mut samples) {
            samples.push(sample()?);
        }
    }
    for ((bench, _), samples) in sides.iter().zip(samples) {
        println!("{}", bench.line(median(samples), ROUNDS));
    }
    Ok(())
}

/// One attach cycle of a producer, as the client library does it: open the node, ACQUIRE,
/// map, touch every page, unmap, RELEASE, close.
fn attach_cycle(phases: &mut Phases) -> Result<()> {
    let mut clock = Instant::now();
    let device = Device::open()?;
    phases.lap(Phase::Open, &mut clock);
    let offset = device.acquire()?;
    phases.lap(Phase::Acquire, &mut clock);
    let mapping = Mapping::new(device.0.as_raw_fd(), offset, 0)?;
    phases.lap(Phase::Mmap, &mut clock);
    mapping.touch();
    phases.lap(Phase::Touch, &mut clock);
    drop(mapping);
    phases.lap(Phase::Munmap, &mut clock);
    device.release()?;
    phases.lap(Phase::Release, &mut clock);
    drop(device);
    phases.lap(Phase::Close, &mut clock);
    phases.cycles += 1;
    Ok(())
}

/// The steps of an attach cycle, timed separately to show where a cycle's time goes.
#[derive(Clone, Copy, Debug)]
enum Phase {
    Open,
    Acquire,
    Mmap,
    Touch,
    Munmap,
    Release,
    Close,
}

impl Phase {
    const ALL: [Self; 7] = [
        Self::Open,
        Self::Acquire,
        Self::Mmap,
        Self::Touch,
        Self::Munmap,
        Self::Release,
        Self::Close,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Acquire => "ACQUIRE",
            Self::Mmap => "mmap",
            Self::Touch => "touch",
            Self::Munmap => "munmap",
            Self::Release => "RELEASE",
            Self::Close => "close",
        }
    }
}

/// Time spent in each [`Phase`] over all attach cycles.
#[derive(Debug, Default)]
struct Phases {
    spent: [Duration; Phase::ALL.len()],
    cycles: u32,
}

impl Phases {
    /// Charges the time since `clock` to `phase` and restarts the clock.
    fn lap(&mut self, phase: Phase, clock: &mut Instant) {
        let now = Instant::now();
        self.spent[phase as usize] += now - *clock;
        *clock = now;
    }

    /// One `PHASE <step> <mean ns>` line per step (information only, not in the table).
    fn print(&self) {
        for (phase, spent) in Phase::ALL.iter().zip(self.spent) {
            let mean = spent.as_secs_f64() * 1e9 / f64::from(self.cycles.max(1));
            println!("PHASE attach-cycle/{} {mean:.1}", phase.name());
        }
    }
}

/// The floor of a cycle: the same open and close of the node, two ioctls with no work behind
/// them, and a populated mapping of shared memory that already exists, touched and unmapped.
fn attach_floor(memfd: &File) -> Result<()> {
    let device = Device::open()?;
    device.null_ioctl()?;
    Mapping::new(memfd.as_raw_fd(), 0, libc::MAP_POPULATE)?.touch();
    device.null_ioctl()
}

/// ACQUIRE (not timed), then RELEASE (timed): the owner's release with aggregation.
fn timed_release(device: &Device) -> Result<Duration> {
    device.acquire()?;
    let start = Instant::now();
    device.release()?;
    Ok(start.elapsed())
}

/// `pread` of `buffer.len()` bytes at `offset`; returns how many came.
fn read_at(file: &File, buffer: &mut [u8], offset: u64) -> Result<usize> {
    context(FileExt::read_at(file, buffer, offset), "pread")
}

/// A file of the device that follows its ledger, and room for one record.
struct LedgerReader {
    file: File,
    buffer: Vec<u8>,
    oldest: u64,
}

impl LedgerReader {
    fn follow() -> Result<Self> {
        let file = context(OpenOptions::new().read(true).open(DEVICE), DEVICE)?;
        // SAFETY: FOLLOW_LEDGER takes no argument; the cast only changes the C library's
        // request type (`int` on musl), not the bits.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), NDS_IOCTL_FOLLOW_LEDGER as libc::Ioctl) };
        check(rc, "FOLLOW_LEDGER")?;
        let mut reader = Self {
            file,
            buffer: vec![0; TENURE_RECORD_SIZE],
            oldest: 0,
        };
        reader.read_oldest()?;
        let record = TenureRecord::read_from_bytes(&reader.buffer)
            .map_err(|_| io::Error::other("a ledger record of the wrong size"))?;
        reader.oldest = record.seq;
        Ok(reader)
    }

    /// One whole record (the one asked for, or the oldest kept if it is gone).
    fn read_oldest(&mut self) -> Result<()> {
        match read_at(&self.file, &mut self.buffer, self.oldest)? {
            TENURE_RECORD_SIZE => Ok(()),
            other => Err(io::Error::other(format!("a ledger read of {other} bytes"))),
        }
    }
}

/// open + read to the end + close, as `cat` and monitors read sysfs.
fn read_file(path: &str) -> Result<()> {
    let mut file = context(File::open(path), path)?;
    let mut buffer = [0u8; 64];
    while context(file.read(&mut buffer), path)? != 0 {}
    Ok(())
}

/// A process that reads `paths` (sysfs files), over and over, until dropped.
struct SysfsReadLoop(libc::pid_t);

impl SysfsReadLoop {
    fn start(paths: &[String]) -> Result<Self> {
        // SAFETY: this process is single-threaded; the child only makes system calls until it
        // is killed.
        let pid = check(unsafe { libc::fork() }, "fork")?;
        if pid == 0 {
            loop {
                for path in paths {
                    let _ = read_file(path);
                }
            }
        }
        Ok(Self(pid))
    }
}

impl Drop for SysfsReadLoop {
    fn drop(&mut self) {
        let mut status = 0;
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(self.0, libc::SIGKILL);
            libc::waitpid(self.0, &mut status, 0);
        }
    }
}

/// Every counter file of the device: `total` and `present` of every node of every core.
fn sysfs_counter_files() -> Result<Vec<String>> {
    let mut files = Vec::new();
    for entry in context(std::fs::read_dir(SYSFS_DEVICE), SYSFS_DEVICE)? {
        let core_dir = context(entry, SYSFS_DEVICE)?.path();
        let is_core = core_dir
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with("neuron_core"));
        if !is_core {
            continue;
        }
        for counter in nds_abi::sysfs::SYSFS_COUNTERS {
            for file in ["total", "present"] {
                files.push(format!(
                    "{}/stats/{}/{}/{file}",
                    core_dir.display(),
                    counter.group.dir_name(),
                    counter.name
                ));
            }
        }
    }
    Ok(files)
}

/// Processes that map the slab of this process's file on command, reading every page, as
/// monitors attached to it would (they inherit the file, and with it its grant).
struct Readers(Vec<(libc::pid_t, File, File)>);

impl Readers {
    /// Forks `count` readers of `device`'s slab.
    fn spawn(device: &Device, count: usize) -> Result<Self> {
        let mut readers = Self(Vec::new());
        for _ in 0..count {
            let mut commands = [0; 2];
            let mut answers = [0; 2];
            // SAFETY: pipe writes its two descriptors into `commands`, which has room for two.
            check(unsafe { libc::pipe(commands.as_mut_ptr()) }, "pipe")?;
            // SAFETY: as above, into `answers`.
            check(unsafe { libc::pipe(answers.as_mut_ptr()) }, "pipe")?;
            // SAFETY: this process is single-threaded; the child only makes system calls and
            // leaves with `_exit`.
            let pid = check(unsafe { libc::fork() }, "fork")?;
            if pid == 0 {
                // SAFETY: the child's ends of its pipes, owned by nothing else in it.
                let (mut input, mut output) = unsafe {
                    libc::close(commands[1]);
                    libc::close(answers[0]);
                    (
                        File::from_raw_fd(commands[0]),
                        File::from_raw_fd(answers[1]),
                    )
                };
                Self::serve(device, &mut input, &mut output);
                // SAFETY: leaving the child without running the parent's destructors.
                unsafe { libc::_exit(0) };
            }
            // SAFETY: the parent's ends, owned by nothing else.
            let (input, output) = unsafe {
                libc::close(commands[0]);
                libc::close(answers[1]);
                (
                    File::from_raw_fd(answers[0]),
                    File::from_raw_fd(commands[1]),
                )
            };
            readers.0.push((pid, output, input));
        }
        Ok(readers)
    }

    /// A reader's loop: `m` + offset maps and reads the reader's window of the owner's window at
    /// that offset, `M` + offset asks for [`MANY_MAPPINGS`] mappings of it and touches each
    /// one it gets, `u` unmaps them all; each is answered with one byte.
    fn serve(device: &Device, input: &mut File, output: &mut File) {
        let mut mappings: Vec<Mapping> = Vec::new();
        let mut command = [0u8; 9];
        while input.read_exact(&mut command).is_ok() {
            let mut offset = [0u8; 8];
            offset.copy_from_slice(&command[1..]);
            let reader_window =
                u64::from_ne_bytes(offset).saturating_sub(NEURON_DATASTORE_SIZE as u64);
            let asked = match command[0] {
                b'm' => 1,
                b'M' => MANY_MAPPINGS,
                _ => 0,
            };
            mappings.clear();
            for _ in 0..asked {
                if let Ok(view) = Mapping::read_only(device.0.as_raw_fd(), reader_window) {
                    if asked == 1 {
                        view.read_every_page();
                    } else {
                        view.touch_once();
                    }
                    mappings.push(view);
                }
            }
            if output.write_all(&[u8::from(!mappings.is_empty())]).is_err() {
                return;
            }
        }
    }

    /// Tells every reader `command`, then waits for every answer.
    fn tell(&mut self, command: u8, offset: u64) -> Result<()> {
        let mut message = [command; 9];
        message[1..].copy_from_slice(&offset.to_ne_bytes());
        for (_, output, _) in &mut self.0 {
            context(output.write_all(&message), "a reader's command")?;
        }
        for (_, _, input) in &mut self.0 {
            let mut answer = [0u8];
            context(input.read_exact(&mut answer), "a reader's answer")?;
            if command == b'm' && answer[0] != 1 {
                return Err(io::Error::other("a reader could not map the slab"));
            }
        }
        Ok(())
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        // Every reader inherited the command pipes of the readers forked before it, so a
        // reader sees the end of its commands only once all are closed: close them all before
        // waiting for any.
        let pids: Vec<_> = self.0.drain(..).map(|(pid, _output, _input)| pid).collect();
        for pid in pids {
            let mut status = 0;
            // SAFETY: waiting for our own child, whose command pipe is closed now.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        }
    }
}

/// The next owner's ACQUIRE (timed) of the slot this process just released, the only one free
/// (`others` own the rest), after `readers` were told `command` (`M`: as many VMAs of its
/// reader window as they may have) for the released tenure, or with no reader (`None`).
fn timed_reacquire(device: &Device, readers: Option<&mut Readers>) -> Result<Duration> {
    let offset = device.acquire()?;
    let mut readers = readers;
    if let Some(readers) = readers.as_deref_mut() {
        readers.tell(b'M', offset)?;
    }
    device.release()?;
    let start = Instant::now();
    device.acquire()?;
    let elapsed = start.elapsed();
    device.release()?;
    if let Some(readers) = readers {
        readers.tell(b'u', 0)?;
    }
    Ok(elapsed)
}

/// ACQUIRE, the readers' mappings and their munmaps (not timed), and RELEASE (timed) while
/// they are `mapped`, or right after they unmapped: the same work either way, so that the
/// only difference is the mappings at the moment of the release.
fn timed_release_with_readers(
    device: &Device,
    readers: &mut Readers,
    mapped: bool,
) -> Result<Duration> {
    let offset = device.acquire()?;
    readers.tell(b'm', offset)?;
    if !mapped {
        readers.tell(b'u', 0)?;
    }
    let start = Instant::now();
    device.release()?;
    let elapsed = start.elapsed();
    if mapped {
        readers.tell(b'u', 0)?;
    }
    Ok(elapsed)
}

/// Waits for the signal that kills it: a `CLONE_VM` sibling's whole life.
extern "C" fn wait_to_be_killed(_: *mut c_void) -> libc::c_int {
    loop {
        // SAFETY: waits for a signal; nothing else is done.
        unsafe { libc::pause() };
    }
}

/// The life of an owner that dies with its address space kept: acquires its slab, asks for
/// `mappings` mappings of its window, and starts a sibling of another thread group that shares
/// its address space (`CLONE_VM`) and has a copy of its descriptors (so no close releases the
/// slab). Returns the sibling's pid; the caller then exits.
fn owner_that_dies_kept(mappings: usize) -> Result<libc::pid_t> {
    let device = Device::open()?;
    let offset = device.acquire()?;
    for _ in 0..mappings {
        match Mapping::new(device.0.as_raw_fd(), offset, 0) {
            Ok(mapping) => {
                mapping.touch_once();
                // Kept: the address space outlives this process in the sibling.
                std::mem::forget(mapping);
            }
            Err(_) => break,
        }
    }
    // SAFETY: a fresh private anonymous mapping for the sibling's stack, never unmapped (the
    // sibling uses it until it is killed).
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIBLING_STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return context(Err(io::Error::last_os_error()), "mmap of a stack");
    }
    // SAFETY: the sibling runs `wait_to_be_killed` on its own stack (its top, the stack grows
    // down) in this address space and touches nothing else of it.
    let sibling = unsafe {
        libc::clone(
            wait_to_be_killed,
            stack.cast::<u8>().add(SIBLING_STACK).cast(),
            libc::CLONE_VM | libc::SIGCHLD,
            std::ptr::null_mut(),
        )
    };
    check(sibling, "clone(CLONE_VM)")?;
    std::mem::forget(device);
    Ok(sibling)
}

/// This process's ACQUIRE (timed), which first reaps the dead owner of a slab whose address
/// space a `CLONE_VM` sibling keeps with `mappings` mappings of its window asked for: the
/// reaping's release removes them all. The sibling is killed afterwards.
fn timed_acquire_reaping(device: &Device, mappings: usize) -> Result<Duration> {
    let mut report = [0; 2];
    // SAFETY: pipe writes its two descriptors into `report`, which has room for two.
    check(unsafe { libc::pipe(report.as_mut_ptr()) }, "pipe")?;
    // SAFETY: this process is single-threaded here; the child only makes system calls and
    // leaves with `_exit`.
    let owner = check(unsafe { libc::fork() }, "fork")?;
    if owner == 0 {
        let sibling = owner_that_dies_kept(mappings).unwrap_or(0);
        // SAFETY: the child's end of the pipe, written once; then it leaves.
        unsafe {
            libc::write(report[1], sibling.to_ne_bytes().as_ptr().cast(), 4);
            libc::_exit(i32::from(sibling == 0));
        }
    }
    // SAFETY: the parent's copy of the write end, and the read end, owned by nothing else.
    let mut reported = unsafe {
        libc::close(report[1]);
        File::from_raw_fd(report[0])
    };
    let mut pid = [0u8; 4];
    context(reported.read_exact(&mut pid), "the dying owner's report")?;
    let sibling = libc::pid_t::from_ne_bytes(pid);
    let mut status = 0;
    // SAFETY: waiting for our own child: its thread group is dead afterwards.
    unsafe { libc::waitpid(owner, &mut status, 0) };
    if sibling == 0 {
        return Err(io::Error::other("the dying owner could not set itself up"));
    }
    let start = Instant::now();
    let acquired = device.acquire();
    let elapsed = start.elapsed();
    // SAFETY: the sibling was reparented to this process (a child subreaper, see `run`):
    // killing and reaping it.
    unsafe {
        libc::kill(sibling, libc::SIGKILL);
        libc::waitpid(sibling, &mut status, 0);
    }
    acquired?;
    device.release()?;
    Ok(elapsed)
}

/// Processes that each own a slab of the device until dropped.
struct Holders(Vec<(libc::pid_t, File)>);

impl Holders {
    /// Forks `count` children; each acquires its slab, reports, and waits for its pipe to close.
    fn spawn(count: usize) -> Result<Self> {
        let mut holders = Self(Vec::new());
        for _ in 0..count {
            let mut ready = [0; 2];
            let mut hold = [0; 2];
            // SAFETY: pipe writes its two descriptors into `ready`, which has room for two.
            check(unsafe { libc::pipe(ready.as_mut_ptr()) }, "pipe")?;
            // SAFETY: as above, into `hold`.
            check(unsafe { libc::pipe(hold.as_mut_ptr()) }, "pipe")?;
            // SAFETY: this process is single-threaded; the child only makes system calls and
            // leaves with `_exit`.
            let pid = check(unsafe { libc::fork() }, "fork")?;
            if pid == 0 {
                let status =
                    match Device::open().and_then(|device| device.acquire().map(|_| device)) {
                        Ok(device) => {
                            let mut byte = [1u8];
                            // SAFETY: the child's descriptors of the two pipes. Closing its
                            // copy of the hold pipe's write end first lets the read return
                            // when the parent closes the last one.
                            unsafe {
                                libc::close(hold[1]);
                                libc::close(ready[0]);
                                libc::write(ready[1], byte.as_ptr().cast(), 1);
                                libc::read(hold[0], byte.as_mut_ptr().cast(), 1);
                            }
                            drop(device);
                            0
                        }
                        Err(_) => 1,
                    };
                // SAFETY: leaving the child without running the parent's destructors.
                unsafe { libc::_exit(status) };
            }
            // SAFETY: the parent's copies of the ends it does not use, and then `ready[0]`,
            // which is owned by nothing else.
            let mut ready_file = unsafe {
                libc::close(ready[1]);
                libc::close(hold[0]);
                File::from_raw_fd(ready[0])
            };
            // SAFETY: `hold[1]` is owned by nothing else.
            let hold_file = unsafe { File::from_raw_fd(hold[1]) };
            holders.0.push((pid, hold_file));
            let mut byte = [0u8];
            context(
                ready_file.read_exact(&mut byte),
                "a slab holder failed to acquire",
            )?;
        }
        Ok(holders)
    }
}

impl Drop for Holders {
    fn drop(&mut self) {
        // Every child inherited the write ends of its elders' pipes, so a child sees the end of
        // its own pipe only once all are closed: close them all before waiting for any.
        let pids: Vec<_> = self.0.drain(..).map(|(pid, _hold)| pid).collect();
        for pid in pids {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        }
    }
}

fn run() -> Result<()> {
    // The dying owners' siblings are reparented here when their parents exit, to be reaped.
    // SAFETY: a plain prctl on this process.
    let subreaper = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    check(subreaper, "PR_SET_CHILD_SUBREAPER")?;
    let device = Device::open()?;
    let memfd = memfd()?;
    let mut phases = Phases::default();
    alternate(&mut [
        (GuestBench::AttachCycle, &mut || {
            batch(whole(|| attach_cycle(&mut phases)))
        }),
        (GuestBench::AttachFloor, &mut || {
            batch(whole(|| attach_floor(&memfd)))
        }),
    ])?;
    phases.print();

    // The 15 other owners of the 16-live samples are forked before each of those samples and
    // gone before the next 1-live one.
    let others = NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE - 1;
    let counter_files = sysfs_counter_files()?;
    let other_file = [MISC_DEV.to_string()];
    alternate(&mut [
        (GuestBench::ReleaseOneLive, &mut || {
            batch(|| timed_release(&device))
        }),
        (GuestBench::ReleaseSixteenLive, &mut || {
            let _holders = Holders::spawn(others)?;
            batch(|| timed_release(&device))
        }),
        (GuestBench::ReleaseFourReaders, &mut || {
            let mut readers = Readers::spawn(&device, 4)?;
            batch(|| timed_release_with_readers(&device, &mut readers, true))
        }),
        (GuestBench::ReleaseFourReadersDetached, &mut || {
            let mut readers = Readers::spawn(&device, 4)?;
            batch(|| timed_release_with_readers(&device, &mut readers, false))
        }),
        (GuestBench::ReleaseUnderSysfsReads, &mut || {
            let _reader = SysfsReadLoop::start(&counter_files)?;
            batch(|| timed_release(&device))
        }),
        (GuestBench::ReleaseUnderOtherReads, &mut || {
            let _reader = SysfsReadLoop::start(&other_file)?;
            batch(|| timed_release(&device))
        }),
    ])?;

    // The next owner's ACQUIRE of the one slot the 15 holders leave free.
    alternate(&mut [
        (GuestBench::AcquireAfterReaderMappings, &mut || {
            let _holders = Holders::spawn(others)?;
            let mut readers = Readers::spawn(&device, 1)?;
            batch(|| timed_reacquire(&device, Some(&mut readers)))
        }),
        (GuestBench::AcquireAfterNoReader, &mut || {
            let _holders = Holders::spawn(others)?;
            batch(|| timed_reacquire(&device, None))
        }),
    ])?;

    // An ACQUIRE that reaps a dead owner whose address space lives on in a sibling.
    alternate(&mut [
        (GuestBench::AcquireReapingOwnerMappings, &mut || {
            batch(|| timed_acquire_reaping(&device, DEAD_OWNER_MAPPINGS))
        }),
        (GuestBench::AcquireReapingOneOwnerMapping, &mut || {
            batch(|| timed_acquire_reaping(&device, 1))
        }),
    ])?;

    let status = SysfsGroup::Status.dir_name();
    let success = sysfs_counter(SysfsGroup::Status, "success")
        .ok_or_else(|| io::Error::other("no sysfs counter named success"))?
        .name;
    let total = format!("{SYSFS_DEVICE}/neuron_core0/stats/{status}/{success}/total");
    let dev = MISC_DEV;
    // This process owns a slab throughout, so the total always has live slabs to add.
    device.acquire()?;
    alternate(&mut [
        (GuestBench::SysfsTotalOneLive, &mut || {
            batch(whole(|| read_file(&total)))
        }),
        (GuestBench::SysfsTotalSixteenLive, &mut || {
            let _holders = Holders::spawn(others)?;
            batch(whole(|| read_file(&total)))
        }),
        (GuestBench::SysfsDev, &mut || {
            batch(whole(|| read_file(dev)))
        }),
    ])?;
    device.release()?;

    // The releases above left the ledger full; the oldest record kept is read again and again.
    let mut ledger = LedgerReader::follow()?;
    let zero = context(File::open("/dev/zero"), "/dev/zero")?;
    let mut zeros = vec![0; TENURE_RECORD_SIZE];
    alternate(&mut [
        (GuestBench::LedgerRecordRead, &mut || {
            batch(whole(|| ledger.read_oldest()))
        }),
        (GuestBench::ZeroRead, &mut || {
            batch(whole(|| read_at(&zero, &mut zeros, 0).map(drop)))
        }),
    ])?;

    // Last: the pipe's writer is a thread, and the benches above fork.
    let period = wakeup::metrics_period()?;
    let mut posts = wakeup::PostWaiter::new()?;
    let mut pipe = wakeup::PipeWaiter::new(period)?;
    alternate(&mut [
        (GuestBench::PostWakeup, &mut || {
            wakeup::sample(|| posts.wakeup())
        }),
        (GuestBench::PipeWakeup, &mut || {
            wakeup::sample(|| pipe.wakeup())
        }),
    ])?;
    io::stdout().flush()
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nds-bench-guest: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
