//! Helpers shared by the guest integration tests: raw access to the device node with real
//! system calls, so each test sees exactly the errno the kernel returned, plus a handle on
//! `ds-producer` helper processes and readers of the module's sysfs files.

pub mod actor;
pub mod exporter;
pub mod fault_injection;
pub mod identity;
pub mod kcov;
pub mod kernel_log;
pub mod kmemleak;
pub mod kubelet;
pub mod memory;
pub mod module_control;
pub mod posts;
pub mod rng;
pub mod stress;

use std::{
    fs::{self, File, OpenOptions},
    io::{self, BufRead, BufReader, Write},
    os::fd::AsRawFd,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    ptr::NonNull,
    sync::atomic::{AtomicU32, AtomicU64},
};

/// The VMAs of one window of one view of a slab that may exist at once, all processes
/// together (the module's `MAPPINGS_PER_VIEW`).
pub const MAPPINGS_PER_VIEW: usize = 1024;

/// The first device node the module creates with default parameters.
pub const DEVICE: &str = "/dev/neuron0";
/// `ACQUIRE_NEURON_DS`.
pub const ACQUIRE: u32 = 0x8008_4E47;
/// `RELEASE_NEURON_DS`.
pub const RELEASE: u32 = 0x8008_4E48;
/// `METRICS_CTRL`: `_IOW('N', 128, struct neuron_ioctl_metrics_ctrl)`.
pub const METRICS_CTRL: u32 = 0x4004_4E80;
/// `NEURON_METRICS_MODE_PERIODIC_ENABLE`.
pub const METRICS_ENABLE: u32 = 0;
/// `NEURON_METRICS_MODE_PERIODIC_DISABLE`.
pub const METRICS_DISABLE: u32 = 1;
/// Bytes in one slab.
pub const SLAB_SIZE: usize = 262_144;
/// Byte offset of the kernel-maintained slab generation.
pub const GENERATION_OFFSET: usize = SLAB_SIZE - 4096;
/// Slabs per device.
pub const SLOTS: usize = 16;

/// The `mmap_offset` of slot `slot` of device `device`: each slot has a reader's window and,
/// right after it, the owner's (writable) window.
pub fn slab_offset(device: usize, slot: usize, owner: bool) -> u64 {
    (((device * SLOTS + slot) * 2 + usize::from(owner)) * SLAB_SIZE) as u64
}

/// The device an `mmap_offset` names.
pub fn offset_device(offset: u64) -> usize {
    (offset / SLAB_SIZE as u64) as usize / 2 / SLOTS
}

/// The slot an `mmap_offset` names.
pub fn offset_slot(offset: u64) -> usize {
    (offset / SLAB_SIZE as u64) as usize / 2 % SLOTS
}

/// Whether an `mmap_offset` is the owner's window of its slot.
pub fn offset_is_owner(offset: u64) -> bool {
    (offset / SLAB_SIZE as u64) % 2 == 1
}

/// The 24-byte ioctl argument.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DsInfo {
    /// In: 0 for the caller's own slab, else the process to read.
    pub pid: i32,
    /// Padding.
    pub reserved0: u32,
    /// Out: where to mmap the slab.
    pub mmap_offset: u64,
    /// Out: the slab size.
    pub size: u32,
    /// Padding.
    pub reserved1: u32,
}

/// `METRICS_CTRL` with `mode`.
pub fn metrics_ctrl(file: &File, mode: u32) -> io::Result<i32> {
    let mut arg = mode;
    ioctl(file, METRICS_CTRL, std::ptr::addr_of_mut!(arg) as usize)
}

/// Opens the metric post stream of node `path` for reading without waiting (`O_NONBLOCK`): a
/// read returns the posts there are, or `EAGAIN` when there is none.
pub fn open_posts(path: &str) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    kcov::follow_thread();
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Every post of `stream` (opened with [`open_posts`]) that it has not read yet, in order.
pub fn read_available_posts(stream: &mut File) -> Vec<nds_abi::metrics::MetricPost> {
    use nds_abi::metrics::{MetricPost, METRIC_POST_SIZE};
    use std::io::Read;
    use zerocopy::FromBytes;
    let mut posts = Vec::new();
    let mut buf = vec![0u8; 64 * METRIC_POST_SIZE];
    loop {
        let n = match stream.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return posts,
            Err(e) => panic!("reading posts: {e}"),
        };
        assert!(n > 0, "a post stream never ends");
        assert_eq!(n % METRIC_POST_SIZE, 0, "reads return whole posts");
        for chunk in buf[..n].chunks_exact(METRIC_POST_SIZE) {
            posts.push(MetricPost::read_from_bytes(chunk).unwrap());
        }
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock of a post's `posted_ns`.
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
    u64::try_from(now.tv_sec).unwrap() * 1_000_000_000 + u64::try_from(now.tv_nsec).unwrap()
}

/// Opens `path` read-write, as a producer would.
pub fn open_device(path: &str) -> io::Result<File> {
    kcov::follow_thread();
    OpenOptions::new().read(true).write(true).open(path)
}

/// Issues `ioctl(fd, cmd, arg)` and returns the kernel's result or errno.
///
/// `cmd` is cast to the C library's request type, which is `int` on musl: the bits are
/// what the kernel sees either way.
pub fn ioctl(file: &File, cmd: u32, arg: usize) -> io::Result<i32> {
    kcov::follow_thread();
    // SAFETY: the commands under test either ignore `arg` or treat it as a user pointer
    // that the kernel validates; a bad pointer yields EFAULT, never memory corruption here.
    let ret = unsafe { libc::ioctl(file.as_raw_fd(), cmd as libc::Ioctl, arg) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// ACQUIRE for `pid` (0: own slab).
pub fn acquire(file: &File, pid: i32) -> io::Result<DsInfo> {
    let mut info = DsInfo {
        pid,
        ..DsInfo::default()
    };
    ioctl(file, ACQUIRE, std::ptr::addr_of_mut!(info) as usize)?;
    Ok(info)
}

/// RELEASE for `pid` (0: own slab).
pub fn release(file: &File, pid: i32) -> io::Result<i32> {
    let mut info = DsInfo {
        pid,
        ..DsInfo::default()
    };
    ioctl(file, RELEASE, std::ptr::addr_of_mut!(info) as usize)
}

/// The errno of a failed call, for assertions.
pub fn errno<T: std::fmt::Debug>(result: io::Result<T>) -> i32 {
    result
        .expect_err("the call should have failed")
        .raw_os_error()
        .unwrap_or(0)
}

/// A shared mapping of a slab (or of whatever the test asked for).
#[derive(Debug)]
pub struct Mapping {
    addr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// `mmap(NULL, len, prot, MAP_SHARED, fd, offset)`.
    pub fn new(file: &File, len: usize, prot: i32, offset: u64) -> io::Result<Self> {
        Self::with_flags(file, len, prot, libc::MAP_SHARED, offset)
    }

    /// `mmap(NULL, len, prot, flags, fd, offset)`.
    pub fn with_flags(
        file: &File,
        len: usize,
        prot: i32,
        flags: i32,
        offset: u64,
    ) -> io::Result<Self> {
        // SAFETY: a fresh mapping chosen by the kernel; nothing else is at that address.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                flags,
                file.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            addr: NonNull::new(addr.cast()).expect("mmap returned NULL"),
            len,
        })
    }

    /// A private read-only anonymous page, for handing the kernel unwritable memory.
    pub fn anonymous_read_only() -> Self {
        Self::anonymous(4096)
    }

    /// `len` bytes of private read-only anonymous memory.
    fn anonymous(len: usize) -> Self {
        // SAFETY: a fresh anonymous mapping chosen by the kernel.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        Self {
            addr: NonNull::new(addr.cast()).unwrap(),
            len,
        }
    }

    /// The start address.
    pub fn addr(&self) -> *mut u8 {
        self.addr.as_ptr()
    }

    /// Reads the u64 at byte `offset` with a volatile load (another process may write it).
    pub fn read_u64(&self, offset: usize) -> u64 {
        assert!(offset + 8 <= self.len && offset.is_multiple_of(8));
        // SAFETY: in bounds and aligned; volatile because the memory is shared.
        unsafe { self.addr().add(offset).cast::<u64>().read_volatile() }
    }

    /// Writes the u64 at byte `offset` with a volatile store.
    pub fn write_u64(&self, offset: usize, value: u64) {
        assert!(offset + 8 <= self.len && offset.is_multiple_of(8));
        // SAFETY: in bounds and aligned; the caller mapped it writable.
        unsafe { self.addr().add(offset).cast::<u64>().write_volatile(value) }
    }

    /// The u64 at byte `offset` as an atomic: the memory is shared with other processes.
    pub fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        assert!(offset + 8 <= self.len && offset.is_multiple_of(8));
        // SAFETY: in bounds, aligned, and mapped for as long as `self` lives; every access
        // from this process to shared slab memory is atomic or volatile.
        unsafe { AtomicU64::from_ptr(self.addr().add(offset).cast()) }
    }

    /// The u32 at byte `offset` as an atomic.
    pub fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        assert!(offset + 4 <= self.len && offset.is_multiple_of(4));
        // SAFETY: as in `atomic_u64`.
        unsafe { AtomicU32::from_ptr(self.addr().add(offset).cast()) }
    }

    /// How many of the mapping's pages are mapped in the page tables now (`mincore`), without
    /// touching them: a revoked mapping has none, and any access to it faults. On Linux 7.2,
    /// whose `mincore` skips `VM_PFNMAP` mappings (its page walk treats them as holes), a
    /// slab mapping always reads 0 here: there the checks that a revoked mapping's accesses
    /// fault are what prove it revoked.
    pub fn resident_pages(&self) -> usize {
        let mut vec = vec![0u8; self.len.div_ceil(4096)];
        // SAFETY: the range is exactly this mapping and `vec` has one byte per page.
        let ret = unsafe { libc::mincore(self.addr().cast(), self.len, vec.as_mut_ptr()) };
        assert_eq!(ret, 0, "mincore: {}", io::Error::last_os_error());
        vec.iter().filter(|byte| **byte & 1 != 0).count()
    }

    /// The mapping's permissions as `/proc/self/maps` shows them, e.g. `rw-s`.
    pub fn permissions(&self) -> String {
        let start = format!("{:x}-", self.addr() as usize);
        fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .find(|line| line.starts_with(&start))
            .and_then(|line| line.split_whitespace().nth(1))
            .unwrap_or("")
            .to_owned()
    }

    /// Moves the mapping to another address with `mremap`.
    pub fn moved(self) -> io::Result<Self> {
        // A place of the same size to move to, chosen by the kernel.
        let target = Self::anonymous(self.len);
        // SAFETY: both ranges are exactly mappings this process owns; the old one is taken
        // over by the move (and forgotten below), the target replaced by it.
        let addr = unsafe {
            libc::mremap(
                self.addr().cast(),
                self.len,
                self.len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                target.addr(),
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let len = self.len;
        std::mem::forget(self);
        std::mem::forget(target);
        Ok(Self {
            addr: NonNull::new(addr.cast()).expect("mremap returned NULL"),
            len,
        })
    }

    /// `mprotect` of the whole mapping.
    pub fn protect(&self, prot: i32) -> io::Result<()> {
        // SAFETY: the range is exactly this mapping.
        if unsafe { libc::mprotect(self.addr().cast(), self.len, prot) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range is exactly this mapping, unmapped once.
        unsafe { libc::munmap(self.addr().cast(), self.len) };
    }
}

/// Byte offset of counter `index` of NeuronCore `core` (the three bands of the wire format).
pub fn nc_offset(core: usize, index: usize) -> usize {
    match (core, index) {
        (0..=3, 0..=30) => 256 + 8 * (31 * core + index),
        (0..=3, 31..=94) => 55_936 + 8 * (64 * core + index - 31),
        (4..=15, 0..=94) => 57_984 + 8 * (96 * (core - 4) + index),
        _ => panic!("invalid counter ({core}, {index})"),
    }
}

/// The sysfs class directory that lists the module's devices. Every sysfs path of the guest
/// code goes through this constant (and [`sysfs_device`]), so that moving the devices to
/// another class is a one-line change here.
pub const SYSFS_CLASS: &str = "/sys/class/neuron_device";

/// The class the module may register for its devices; it must not exist while the module is
/// not loaded (today's module uses the kernel's misc class, so it never exists).
pub const MODULE_CLASS: &str = "/sys/class/neuron_device";

/// The sysfs directory of device `device`.
pub fn sysfs_device(device: usize) -> String {
    format!("{SYSFS_CLASS}/neuron{device}")
}

/// How many NeuronCores device `device` shows in sysfs (its `neuron_core<c>` directories).
pub fn sysfs_core_count(device: usize) -> usize {
    let dir = sysfs_device(device);
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("neuron_core"))
        .count()
}

/// The node of device `device`.
pub fn device_path(device: usize) -> String {
    format!("/dev/neuron{device}")
}

/// Reads `…/neuron_core<core>/stats/<group>/<name>/<file>` of device 0.
pub fn sysfs_counter(core: usize, group: &str, name: &str, file: &str) -> u64 {
    sysfs_counter_on(0, core, group, name, file)
}

/// Reads `…/neuron_core<core>/stats/<group>/<name>/<file>` of device `device`.
pub fn sysfs_counter_on(device: usize, core: usize, group: &str, name: &str, file: &str) -> u64 {
    let path = format!(
        "{}/neuron_core{core}/stats/{group}/{name}/{file}",
        sysfs_device(device)
    );
    fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One row of the slot table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRow {
    /// Slot index.
    pub slot: usize,
    /// Owner pid in our namespace, 0 if free.
    pub pid: i32,
    /// LRU clear tick.
    pub clear_tick: u64,
    /// Generation.
    pub generation: u64,
}

/// The slot table of device 0.
pub fn slots() -> Vec<SlotRow> {
    slots_on(0)
}

/// The slot table of device `device`.
pub fn slots_on(device: usize) -> Vec<SlotRow> {
    let text = fs::read_to_string(format!("{}/datastore/slots", sysfs_device(device))).unwrap();
    text.lines()
        .skip(1)
        .map(|line| {
            let f: Vec<u64> = line
                .split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect();
            SlotRow {
                slot: f[0] as usize,
                pid: f[1] as i32,
                clear_tick: f[2],
                generation: f[3],
            }
        })
        .collect()
}

/// A device node made readable and writable by everyone (mode 0666, as the original driver's
/// udev rule makes it) until dropped, so that every refusal another uid meets is the module's.
pub struct WorldWritableNode {
    path: String,
    original: u32,
}

impl WorldWritableNode {
    /// Opens up `path`.
    pub fn new(path: &str) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let original = fs::metadata(path).unwrap().permissions().mode();
        fs::set_permissions(path, fs::Permissions::from_mode(0o666)).unwrap();
        Self {
            path: path.into(),
            original,
        }
    }
}

impl Drop for WorldWritableNode {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = fs::set_permissions(&self.path, fs::Permissions::from_mode(self.original));
    }
}

/// Where the helper binaries are in the guest.
pub fn helper_path(name: &str) -> String {
    std::env::var("NEURON_DS_GUEST_BIN").unwrap_or_else(|_| "/work/bin".into()) + "/" + name
}

/// A `ds-producer` process that owns a slab and wrote the counters it was given.
pub struct Producer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Its pid.
    pub pid: i32,
    /// The mmap offset ACQUIRE returned to it.
    pub offset: u64,
}

impl Producer {
    /// Starts a producer on `device` that adds `(core, index, value)` to its slab.
    pub fn start(device: &str, counters: &[(usize, usize, u64)]) -> io::Result<Self> {
        let spec: Vec<String> = counters
            .iter()
            .map(|(core, index, value)| format!("{core}:{index}={value}"))
            .collect();
        let mut child = Command::new(helper_path("ds-producer"))
            .arg(device)
            .args(spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first() != Some(&"ready") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!("producer failed: {line:?}")));
        }
        Ok(Self {
            pid: child.id() as i32,
            offset: fields[1].parse().unwrap(),
            stdin: child.stdin.take(),
            child,
            stdout,
        })
    }

    /// Tells it to unmap, RELEASE and exit; waits for it.
    pub fn release_and_exit(mut self) {
        self.send("release");
    }

    /// Tells it to exit without RELEASE (the close at exit releases); waits for it.
    pub fn exit(mut self) {
        self.send("exit");
    }

    /// Tells it to RELEASE while keeping its mapping and its file; returns how many pages of
    /// the mapping were still mapped afterwards.
    pub fn release_keeping_mapping(&mut self) -> usize {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "release-keep").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.strip_prefix("released ")
            .and_then(|pages| pages.trim().parse().ok())
            .unwrap_or_else(|| panic!("producer answered {line:?}"))
    }

    /// Tells it to write through its mapping; returns how it ended, if the write killed it,
    /// or `None` if the write went through (it then exits without RELEASE).
    pub fn write_through_mapping(mut self) -> Option<std::process::ExitStatus> {
        let mut stdin = self.stdin.take().unwrap();
        writeln!(stdin, "write").unwrap();
        let mut line = String::new();
        let _ = self.stdout.read_line(&mut line);
        drop(stdin);
        let status = self.child.wait().unwrap();
        (line.trim() != "wrote").then_some(status)
    }

    /// Kills it with SIGKILL; waits for it.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn send(&mut self, command: &str) {
        let mut stdin = self.stdin.take().unwrap();
        writeln!(stdin, "{command}").unwrap();
        drop(stdin);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "producer exited with {status}");
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `f` in a forked child and returns its exit status (as from `waitpid`).
///
/// The child must only make system calls: the test harness may have other threads.
pub fn in_child(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child runs only `f`, which makes system calls, then `_exit`s.
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", io::Error::last_os_error()),
        0 => {
            let code = f();
            // SAFETY: leaving the child without running the parent's destructors.
            unsafe { libc::_exit(code) }
        }
        pid => {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            status
        }
    }
}

/// How long a test waits for an event before it calls it a hang: far beyond the one tick after
/// a release at which the module's work item zeroes a slab, or a metrics period, even on a guest
/// slowed by emulation and a host whose cores are busy with other work. Only a hang waits this
/// long, so it costs nothing when the event comes.
pub const EVENTUALLY: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits until `condition` holds, checking it every millisecond; panics naming `what` if it
/// still does not after [`EVENTUALLY`].
pub fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + EVENTUALLY;
    while !condition() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {EVENTUALLY:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
