//! The fault campaign: `ds-faults [--short] [--ko PATH] [--params "..."]`.
//!
//! Steps a forced failure through every failure point the module reaches, one operation at
//! a time: module load, open (first and second file of a process), ACQUIRE (own and a
//! reader's), mmap with its first fault (owner and reader), RELEASE (own and a reader's),
//! close and munmap that release, sysfs show and store, read() of the metric posts, a metrics
//! period of the worker, and module unload. Point N of an operation is the N-th slab
//! allocation, page allocation or user copy with a module frame on its stack (`fail-nth` with
//! the stacktrace filter, see `fault_injection`); stepping ends when the operation reaches
//! fewer than N points.
//!
//! Each point runs in a fresh child process: it sets up what the operation needs, arms its
//! own `fail-nth`, makes the call, disarms, undoes its setup the natural way, runs one full
//! producer cycle (open, ACQUIRE, mmap, write, munmap, close without RELEASE) and checks that
//! closing released its slab. The parent then checks that the counts the child wrote reached
//! the sysfs total exactly, that an ACQUIRE/RELEASE and sysfs reads still work, and reads the
//! kernel log: the failure's report (which allocation or copy, at which call site) and any
//! complaint. A kmemleak scan at the end attributes unreferenced objects allocated with a
//! module frame to the point whose process allocated them. While each load runs, another
//! thread opens the first node in a loop: an open that succeeds during a load that fails is a
//! failure (the kernel frees the module's code with the file still open).
//!
//! Prints one row per point and ends with `faults: N injection points reached, M failed,
//! K leaks`; exits 1 if M or K is not zero.

use neuron_ds_guest_tests::{
    acquire, device_path,
    fault_injection::{self, MODULE_AREA},
    kcov::{Collector, Sections},
    kernel_log::{Injection, KernelLog},
    kmemleak,
    module_control::{leftovers, load_module, unload_module, MODULE},
    nc_offset, open_device, open_posts, read_available_posts, release, slots_on, sysfs_counter_on,
    sysfs_device, DsInfo, Mapping, Producer, ACQUIRE, SLAB_SIZE,
};
use std::{
    collections::{BTreeMap, BTreeSet},
    ffi::CString,
    fs::{self, File},
    io::{self, Read, Write},
    os::fd::{AsRawFd, FromRawFd},
    process::exit,
    thread,
    time::{Duration, Instant},
};

/// The counter the children write: status/success of core 0 (NeuronCore counter 1).
const COUNTED: (usize, usize) = (0, 1);
const COUNTED_NODE: (&str, &str) = ("status", "success");
/// The counter the sysfs store point resets: status/timeout of core 1, written by nobody.
const RESET_NODE: (usize, &str, &str) = (1, "status", "timeout");
/// What a child writes into the slab of its setup and of its closing cycle.
const SETUP_COUNT: u64 = 3;
const CYCLE_COUNT: u64 = 5;
/// Where the owner's mapping goes: 1 GiB-aligned, far from any mapping a process has.
const FRESH_REGION: usize = 0x3f00_0000_0000;
/// CloudWatch id of the posted success count.
const CW_SUCCESS: u8 = 200;
const DEVICE: usize = 0;

/// One operation whose failure points are stepped through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Insmod,
    OpenFirst,
    OpenSecond,
    AcquireOwn,
    AcquireReader,
    MmapOwner,
    MmapReader,
    ReleaseOwn,
    ReleaseReader,
    CloseReleases,
    MunmapReleases,
    SysfsTotal,
    SysfsPresent,
    SysfsSlots,
    SysfsStore,
    ReadPosts,
    MetricsPeriod,
    Rmmod,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Insmod => "insmod",
            Op::OpenFirst => "open (first file)",
            Op::OpenSecond => "open (second file)",
            Op::AcquireOwn => "ACQUIRE own",
            Op::AcquireReader => "ACQUIRE reader",
            Op::MmapOwner => "mmap+fault owner",
            Op::MmapReader => "mmap+fault reader",
            Op::ReleaseOwn => "RELEASE own",
            Op::ReleaseReader => "RELEASE reader",
            Op::CloseReleases => "close (releases)",
            Op::MunmapReleases => "munmap (releases)",
            Op::SysfsTotal => "sysfs total show",
            Op::SysfsPresent => "sysfs present show",
            Op::SysfsSlots => "sysfs slots show",
            Op::SysfsStore => "sysfs total store",
            Op::ReadPosts => "read() posts",
            Op::MetricsPeriod => "metrics period",
            Op::Rmmod => "rmmod",
        }
    }

    /// Every operation, in the order the table lists them.
    const ORDER: [Op; 18] = [
        Op::Insmod,
        Op::OpenFirst,
        Op::OpenSecond,
        Op::AcquireOwn,
        Op::AcquireReader,
        Op::MmapOwner,
        Op::MmapReader,
        Op::ReleaseOwn,
        Op::ReleaseReader,
        Op::CloseReleases,
        Op::MunmapReleases,
        Op::SysfsTotal,
        Op::SysfsPresent,
        Op::SysfsSlots,
        Op::SysfsStore,
        Op::ReadPosts,
        Op::MetricsPeriod,
        Op::Rmmod,
    ];

    /// The task operations, run by a child each.
    const TASK_OPS: [Op; 15] = [
        Op::OpenFirst,
        Op::OpenSecond,
        Op::AcquireOwn,
        Op::AcquireReader,
        Op::MmapOwner,
        Op::MmapReader,
        Op::ReleaseOwn,
        Op::ReleaseReader,
        Op::CloseReleases,
        Op::MunmapReleases,
        Op::SysfsTotal,
        Op::SysfsPresent,
        Op::SysfsSlots,
        Op::SysfsStore,
        Op::ReadPosts,
    ];
}

/// What a child reports about its point.
#[derive(Debug, Default)]
struct ChildReport {
    /// The call's return value (-1 on failure).
    ret: i64,
    errno: i32,
    /// What was left of fail-nth after the call: non-zero if the point was not reached.
    remaining: u32,
    /// Counts written into slabs the child owned (they must all reach the sysfs total).
    written: u64,
    /// Empty if every check passed.
    state: String,
}

impl ChildReport {
    fn line(&self) -> String {
        format!(
            "{} {} {} {} {}\n",
            self.ret,
            self.errno,
            self.remaining,
            self.written,
            self.state.replace('\n', " ")
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let mut words = line.splitn(5, ' ');
        Some(Self {
            ret: words.next()?.parse().ok()?,
            errno: words.next()?.parse().ok()?,
            remaining: words.next()?.parse().ok()?,
            written: words.next()?.parse().ok()?,
            state: words.next().unwrap_or("").trim().to_owned(),
        })
    }
}

/// One failure point reached, with what came of it.
struct Row {
    op: Op,
    point: u32,
    attr: String,
    site: String,
    result: String,
    /// Empty if the state was consistent afterwards.
    problems: Vec<String>,
    /// Messages the module logged.
    logged: Vec<String>,
    pid: i32,
    leaks: usize,
}

/// A line of the final table: operation (its index in `Op::ORDER`), failure, site, result.
type GroupKey<'a> = (usize, &'a str, &'a str, &'a str);
/// Its points, the points with a problem, and the leaks attributed to them.
type GroupCounts = (u32, u32, usize);

/// Where the short form is in its sampling of one operation's points.
#[derive(Default)]
struct Sampling {
    seen: BTreeMap<String, u32>,
    gap: u32,
}

/// The calling thread's `fail-nth`, opened before arming so that opening it is not counted.
struct FailNth(File);

impl FailNth {
    fn open() -> io::Result<Self> {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/proc/thread-self/fail-nth")
            .map(Self)
    }

    fn arm(&mut self, n: u32) {
        let text = n.to_string();
        // SAFETY: `text` is `text.len()` readable bytes, and the descriptor is this handle's
        // open fail-nth file.
        unsafe { libc::pwrite(self.0.as_raw_fd(), text.as_ptr().cast(), text.len(), 0) };
    }

    /// Disarms and returns what was left.
    fn disarm(&mut self) -> u32 {
        let mut buf = [0u8; 16];
        // SAFETY: reading into our own buffer from our own descriptor.
        let len = unsafe { libc::pread(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), 16, 0) };
        let left = std::str::from_utf8(&buf[..len.max(0) as usize])
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(u32::MAX);
        self.arm(0);
        left
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn errno_name(errno: i32) -> String {
    match errno {
        libc::ENOMEM => "ENOMEM".into(),
        libc::EFAULT => "EFAULT".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EBUSY => "EBUSY".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::EPERM => "EPERM".into(),
        libc::EAGAIN => "EAGAIN".into(),
        libc::ENODEV => "ENODEV".into(),
        libc::ENOSPC => "ENOSPC".into(),
        libc::EEXIST => "EEXIST".into(),
        other => format!("errno {other}"),
    }
}

/// The slots `pid` owns on the device.
fn owned_by(pid: i32) -> Vec<usize> {
    slots_on(DEVICE)
        .into_iter()
        .filter(|row| row.pid == pid)
        .map(|row| row.slot)
        .collect()
}

fn counted_total() -> u64 {
    sysfs_counter_on(DEVICE, COUNTED.0, COUNTED_NODE.0, COUNTED_NODE.1, "total")
}

/// What a child does: setup, the armed call, teardown, the closing cycle and its checks.
struct Child {
    report: ChildReport,
    fail_nth: FailNth,
    helper_pid: i32,
    kcov: Option<Collector>,
}

impl Child {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok && self.report.state.is_empty() {
            self.report.state = what();
        }
    }

    /// The armed call: `call` returns the syscall's result (negative: errno is set).
    fn armed(&mut self, n: u32, call: impl FnOnce() -> i64) -> i64 {
        if let Some(kcov) = self.kcov.as_mut() {
            kcov.drain();
        }
        self.fail_nth.arm(n);
        let ret = call();
        let err = errno();
        self.report.remaining = self.fail_nth.disarm();
        self.report.ret = ret;
        self.report.errno = if ret < 0 { err } else { 0 };
        ret
    }

    fn open(&mut self, flags: i32) -> Option<File> {
        let path = CString::new(device_path(DEVICE)).unwrap();
        // SAFETY: opening a device node.
        let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
        // SAFETY: a descriptor we just opened and own.
        (fd >= 0).then(|| unsafe { File::from_raw_fd(fd) })
    }

    /// ACQUIRE 0, mmap writable and write `count` into the counted counter.
    fn own_slab(&mut self, file: &File, count: u64) -> Option<Mapping> {
        let info = match acquire(file, 0) {
            Ok(info) => info,
            Err(e) => {
                self.check(false, || format!("setup ACQUIRE: {e}"));
                return None;
            }
        };
        let map = match Mapping::new(
            file,
            SLAB_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            info.mmap_offset,
        ) {
            Ok(map) => map,
            Err(e) => {
                self.check(false, || format!("setup mmap: {e}"));
                return None;
            }
        };
        // Added, not stored: a process that still owns its slab gets the same one back.
        let at = nc_offset(COUNTED.0, COUNTED.1);
        map.write_u64(at, map.read_u64(at) + count);
        self.report.written += count;
        Some(map)
    }

    fn check_released(&mut self, when: &str) {
        // SAFETY: a plain system call.
        let me = unsafe { libc::getpid() };
        let owned = owned_by(me);
        self.check(owned.is_empty(), || {
            format!("{when}: this process still owns slot {owned:?} though its last file is closed")
        });
    }

    /// A whole producer cycle that must work after any point: open, ACQUIRE, mmap, write,
    /// munmap, close without RELEASE; the close must release the slab.
    fn closing_cycle(&mut self) {
        let Some(file) = self.open(libc::O_RDWR) else {
            let e = errno();
            return self.check(false, || format!("closing cycle: open: {}", errno_name(e)));
        };
        let map = self.own_slab(&file, CYCLE_COUNT);
        drop(map);
        drop(file);
        self.check_released("after the closing cycle");
    }

    fn run(&mut self, op: Op, n: u32) {
        let rw = libc::O_RDWR;
        match op {
            Op::OpenFirst => {
                let path = CString::new(device_path(DEVICE)).unwrap();
                // SAFETY: opening a device node; closed below.
                let fd = self.armed(
                    n,
                    || unsafe { libc::open(path.as_ptr(), rw | libc::O_CLOEXEC) } as i64,
                );
                if fd >= 0 {
                    // SAFETY: our own descriptor.
                    unsafe { libc::close(fd as i32) };
                }
            }
            Op::OpenSecond => {
                let Some(first) = self.open(rw) else {
                    return self.check(false, || "setup open".into());
                };
                let map = self.own_slab(&first, SETUP_COUNT);
                let path = CString::new(device_path(DEVICE)).unwrap();
                // SAFETY: as above.
                let fd = self.armed(
                    n,
                    || unsafe { libc::open(path.as_ptr(), rw | libc::O_CLOEXEC) } as i64,
                );
                if fd >= 0 {
                    // SAFETY: our own descriptor.
                    unsafe { libc::close(fd as i32) };
                }
                drop(map);
                drop(first);
                self.check_released("after closing the first file");
            }
            Op::AcquireOwn => {
                let Some(file) = self.open(rw) else {
                    return self.check(false, || "setup open".into());
                };
                let mut info = DsInfo::default();
                let ret = self.armed(n, || {
                    // SAFETY: a valid argument.
                    unsafe {
                        libc::ioctl(file.as_raw_fd(), ACQUIRE as libc::Ioctl, &mut info) as i64
                    }
                });
                if ret == 0 {
                    match Mapping::new(
                        &file,
                        SLAB_SIZE,
                        libc::PROT_READ | libc::PROT_WRITE,
                        info.mmap_offset,
                    ) {
                        Ok(map) => {
                            map.write_u64(nc_offset(COUNTED.0, COUNTED.1), SETUP_COUNT);
                            self.report.written += SETUP_COUNT;
                        }
                        Err(e) => {
                            self.check(false, || format!("mmap after a successful ACQUIRE: {e}"))
                        }
                    }
                }
                drop(file);
                self.check_released("after closing the file");
            }
            Op::AcquireReader | Op::MmapReader | Op::ReleaseReader => {
                let Some(file) = self.open(libc::O_RDONLY) else {
                    return self.check(false, || "setup open".into());
                };
                let helper = self.helper_pid;
                let mut info = DsInfo {
                    pid: helper,
                    ..DsInfo::default()
                };
                let acquire_call = |info: &mut DsInfo| {
                    // SAFETY: a valid argument.
                    unsafe { libc::ioctl(file.as_raw_fd(), ACQUIRE as libc::Ioctl, info) as i64 }
                };
                let acquired = if op == Op::AcquireReader {
                    self.armed(n, || acquire_call(&mut info)) == 0
                } else {
                    let ok = acquire_call(&mut info) == 0;
                    self.check(ok, || {
                        format!("setup ACQUIRE of the helper: {}", errno_name(errno()))
                    });
                    ok
                };
                if acquired {
                    let map = if op == Op::MmapReader {
                        // The mapping and its first read, whose fault inserts the pages, as
                        // for the owner's mapping.
                        let at = self.armed(n, || {
                            // SAFETY: a fresh read-only shared mapping of the granted slab,
                            // read once inside it.
                            unsafe {
                                let at = libc::mmap(
                                    FRESH_REGION as *mut _,
                                    SLAB_SIZE,
                                    libc::PROT_READ,
                                    libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE,
                                    file.as_raw_fd(),
                                    info.mmap_offset as libc::off_t,
                                );
                                if at != libc::MAP_FAILED {
                                    at.cast::<u64>().read_volatile();
                                }
                                at as i64
                            }
                        });
                        if at != -1 {
                            // SAFETY: the mapping just made.
                            unsafe { libc::munmap(at as *mut _, SLAB_SIZE) };
                        }
                        None
                    } else {
                        Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset).ok()
                    };
                    if let Some(map) = &map {
                        self.check(
                            map.protect(libc::PROT_READ | libc::PROT_WRITE).is_err(),
                            || "a reader's mapping could be made writable".into(),
                        );
                    }
                    if op == Op::ReleaseReader {
                        let mut arg = DsInfo {
                            pid: helper,
                            ..DsInfo::default()
                        };
                        self.armed(n, || {
                            // SAFETY: a valid argument.
                            unsafe {
                                libc::ioctl(
                                    file.as_raw_fd(),
                                    neuron_ds_guest_tests::RELEASE as libc::Ioctl,
                                    &mut arg,
                                ) as i64
                            }
                        });
                    }
                }
                drop(file);
                let owners = owned_by(helper);
                self.check(owners.len() == 1, || {
                    format!("the helper owner holds {owners:?} after a reader's call (one slot expected)")
                });
            }
            Op::MmapOwner => {
                let Some(file) = self.open(rw) else {
                    return self.check(false, || "setup open".into());
                };
                let info = match acquire(&file, 0) {
                    Ok(info) => info,
                    Err(e) => return self.check(false, || format!("setup ACQUIRE: {e}")),
                };
                // The mapping and its first write, whose fault inserts the pages: at an address
                // no mapping of this process is near, so that the fault needs new page tables
                // (allocations made on the module's behalf, inside its fault handler). A fault
                // that fails for want of memory is retried by the core; it never kills the
                // writer (the child would die, a failure of the point).
                let at = self.armed(n, || {
                    // SAFETY: a fresh shared mapping of the granted slab, one slab long, written
                    // once inside it and unmapped below.
                    unsafe {
                        let at = libc::mmap(
                            FRESH_REGION as *mut _,
                            SLAB_SIZE,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE,
                            file.as_raw_fd(),
                            info.mmap_offset as libc::off_t,
                        );
                        if at != libc::MAP_FAILED {
                            at.cast::<u64>()
                                .add(nc_offset(COUNTED.0, COUNTED.1) / 8)
                                .write_volatile(SETUP_COUNT);
                        }
                        at as i64
                    }
                });
                if at != -1 {
                    // SAFETY: the mapping made above, one slab long.
                    unsafe { libc::munmap(at as *mut _, SLAB_SIZE) };
                    self.report.written += SETUP_COUNT;
                }
                drop(file);
                self.check_released("after closing the file");
            }
            Op::ReleaseOwn => {
                let Some(file) = self.open(rw) else {
                    return self.check(false, || "setup open".into());
                };
                drop(self.own_slab(&file, SETUP_COUNT));
                let mut arg = DsInfo::default();
                let ret = self.armed(n, || {
                    // SAFETY: a valid argument.
                    unsafe {
                        libc::ioctl(
                            file.as_raw_fd(),
                            neuron_ds_guest_tests::RELEASE as libc::Ioctl,
                            &mut arg,
                        ) as i64
                    }
                });
                if ret == 0 {
                    self.check_released("after a successful RELEASE");
                }
                drop(file);
                self.check_released("after closing the file");
            }
            Op::CloseReleases => {
                let Some(file) = self.open(rw) else {
                    return self.check(false, || "setup open".into());
                };
                drop(self.own_slab(&file, SETUP_COUNT));
                let fd = file.as_raw_fd();
                std::mem::forget(file);
                // SAFETY: closing our own descriptor, forgotten above.
                self.armed(n, || unsafe { libc::close(fd) } as i64);
                self.check_released("after the close");
            }
            Op::MunmapReleases => {
                let Some(file) = self.open(rw) else {
                    return self.check(false, || "setup open".into());
                };
                let map = self.own_slab(&file, SETUP_COUNT);
                drop(file);
                if let Some(map) = map {
                    let at = map.addr();
                    std::mem::forget(map);
                    // SAFETY: our own mapping, forgotten above.
                    self.armed(n, || unsafe { libc::munmap(at.cast(), SLAB_SIZE) } as i64);
                }
                self.check_released("after the last munmap");
            }
            Op::SysfsTotal | Op::SysfsPresent | Op::SysfsSlots | Op::SysfsStore => {
                let Some(file) = self.open(rw) else {
                    return self.check(false, || "setup open".into());
                };
                let map = self.own_slab(&file, SETUP_COUNT);
                let (core, group, name) = match op {
                    Op::SysfsStore => RESET_NODE,
                    _ => (COUNTED.0, COUNTED_NODE.0, COUNTED_NODE.1),
                };
                let path = match op {
                    Op::SysfsSlots => format!("{}/datastore/slots", sysfs_device(DEVICE)),
                    Op::SysfsPresent => format!(
                        "{}/neuron_core{core}/stats/{group}/{name}/present",
                        sysfs_device(DEVICE)
                    ),
                    _ => format!(
                        "{}/neuron_core{core}/stats/{group}/{name}/total",
                        sysfs_device(DEVICE)
                    ),
                };
                let writing = op == Op::SysfsStore;
                let node = fs::OpenOptions::new()
                    .read(!writing)
                    .write(writing)
                    .open(&path);
                match node {
                    Ok(node) => {
                        let mut buf = vec![0u8; 4096];
                        let ret = self.armed(n, || {
                            // SAFETY: reading into / writing from our own buffer.
                            unsafe {
                                if writing {
                                    libc::write(node.as_raw_fd(), b"0\n".as_ptr().cast(), 2) as i64
                                } else {
                                    libc::read(node.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
                                        as i64
                                }
                            }
                        });
                        if ret >= 0 && !writing {
                            let text = String::from_utf8_lossy(&buf[..ret as usize]).into_owned();
                            let well_formed = if op == Op::SysfsSlots {
                                text.starts_with("slot pid clear_tick generation\n")
                                    && text.lines().count() == 17
                            } else {
                                text.trim().parse::<u64>().is_ok()
                            };
                            self.check(well_formed, || format!("{path} read back {text:?}"));
                        }
                        if ret >= 0 && writing {
                            let back = sysfs_counter_on(DEVICE, core, group, name, "total");
                            self.check(back == 0, || {
                                format!("{path} is {back} after a successful reset")
                            });
                        }
                    }
                    Err(e) => self.check(false, || format!("open {path}: {e}")),
                }
                drop(map);
                drop(file);
                self.check_released("after closing the file");
            }
            Op::ReadPosts => {
                // Without waiting: a read with no post yet fails with EAGAIN.
                let Some(file) = self.open(libc::O_RDONLY | libc::O_NONBLOCK) else {
                    return self.check(false, || "setup open".into());
                };
                let post = nds_abi::metrics::METRIC_POST_SIZE;
                let mut buf = vec![0u8; 64 * post];
                let ret = self.armed(n, || {
                    // SAFETY: reading into our own buffer.
                    unsafe {
                        libc::read(file.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) as i64
                    }
                });
                self.check(ret < 0 || (ret as usize).is_multiple_of(post), || {
                    format!("read() returned {ret} bytes: not whole posts")
                });
            }
            Op::Insmod | Op::MetricsPeriod | Op::Rmmod => unreachable!("not a child operation"),
        }
    }
}

/// Runs `body` in a forked child with a pipe for its report; returns the child's pid and
/// what it reported.
fn in_child(body: impl FnOnce() -> ChildReport) -> (i32, Option<ChildReport>) {
    let mut pipe = [0i32; 2];
    // SAFETY: creating a pipe and forking a single-threaded process; the child writes its
    // report and leaves with `_exit`.
    unsafe {
        assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
        let pid = libc::fork();
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            libc::close(pipe[0]);
            let line = body().line();
            libc::write(pipe[1], line.as_ptr().cast(), line.len());
            libc::_exit(0);
        }
        libc::close(pipe[1]);
        let mut text = String::new();
        let _ = File::from_raw_fd(pipe[0]).read_to_string(&mut text);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        let report = if libc::WIFEXITED(status) {
            ChildReport::parse(&text)
        } else {
            None
        };
        (pid, report)
    }
}

struct Campaign {
    short: bool,
    ko: String,
    params: String,
    log: KernelLog,
    rows: Vec<Row>,
    /// Checks outside any point (e.g. the run that found no more points).
    other_failures: Vec<String>,
    helper: Option<Producer>,
    kcov_dir: Option<String>,
    sections: Sections,
    /// Every operation stepped through, with the failure points it reached.
    stepped: Vec<(Op, u32)>,
    /// Whether kmemleak scanned (this kernel has it).
    kmemleak_seen: bool,
    /// Objects already attributed (kmemleak reports an object at every scan).
    leaks_seen: BTreeSet<String>,
    /// The module's unreferenced objects allocated by no point's process.
    unattributed_leaks: Vec<String>,
}

impl Campaign {
    /// Reads the log after a point: the failure's report and complaints.
    fn collect_log(&mut self, row: &mut Row) -> Vec<Injection> {
        // Reports of a worker's failure may come a little later than the call returned.
        let (injections, complaints) = self.log.take_injections();
        for complaint in complaints {
            if complaint.starts_with("neuron_ds:") || complaint.contains(" neuron_ds: ") {
                row.logged.push(complaint);
            } else {
                row.problems.push(format!("kernel complaint: {complaint}"));
            }
        }
        injections
    }

    fn describe(&self, row: &mut Row, injections: &[Injection]) {
        match injections {
            [] => {
                // Fault injection reports no failure of an allocation that asked for no
                // warning (__GFP_NOWARN): one that has a fallback or is allowed to fail.
                row.attr = "(silent)".into();
                row.site = "(a __GFP_NOWARN allocation: fault injection does not report it)".into();
            }
            [one, ..] => {
                row.attr = one.attr.clone();
                row.site = one
                    .module_site(MODULE)
                    .unwrap_or_else(|| "(no module frame)".into());
                // The first non-module frame below the site says what failed.
                if let Some(callee) = one
                    .frames
                    .iter()
                    .take_while(|f| !f.ends_with("[neuron_ds]"))
                    .filter(|f| !f.starts_with("? "))
                    .filter(|f| {
                        !f.contains("should_fail")
                            && !f.contains("dump_stack")
                            && !f.contains("fail_dump")
                    })
                    .last()
                {
                    let callee = callee.split('+').next().unwrap_or(callee);
                    row.site = format!("{} -> {callee}", row.site);
                }
                if injections.len() > 1 {
                    row.problems.push(format!(
                        "{} failures forced for one point",
                        injections.len()
                    ));
                }
            }
        }
    }

    fn result_text(ret: i64, err: i32) -> String {
        if ret < 0 {
            errno_name(err)
        } else {
            format!("ok ({ret})")
        }
    }

    /// The parent's own checks after a child: the counts it wrote are in the total, and an
    /// ACQUIRE/RELEASE and a slot-table read work.
    fn parent_checks(&mut self, row: &mut Row, total_before: u64, written: u64) {
        let total = counted_total();
        if total != total_before.wrapping_add(written) {
            row.problems.push(format!(
                "success total {total}, expected {total_before} + {written} written"
            ));
        }
        match open_device(&device_path(DEVICE)).and_then(|f| {
            acquire(&f, 0)?;
            release(&f, 0)?;
            Ok(f)
        }) {
            Ok(_) => {}
            Err(e) => row.problems.push(format!("follow-up ACQUIRE/RELEASE: {e}")),
        }
        let owned: Vec<i32> = slots_on(DEVICE)
            .into_iter()
            .map(|r| r.pid)
            .filter(|pid| *pid != 0 && Some(*pid) != self.helper.as_ref().map(|h| h.pid))
            .collect();
        if !owned.is_empty() {
            row.problems
                .push(format!("slots owned by exited processes: {owned:?}"));
        }
    }

    /// The next point to try after `n`. The full form tries every point. The short form
    /// samples: once the points it lands on are sites it has seen three times already (a loop
    /// allocating page after page, or node after node), the gap doubles, up to 64; a new site
    /// brings it back to 1.
    fn next_point(&self, n: u32, sampling: &mut Sampling, site: &str) -> u32 {
        if !self.short {
            return n + 1;
        }
        let seen = sampling.seen.entry(site.to_owned()).or_default();
        *seen += 1;
        sampling.gap = if *seen > 3 {
            (sampling.gap * 2).min(64)
        } else {
            1
        };
        n + sampling.gap
    }

    /// Steps through `op`'s points, twice. Which point comes N-th may depend on state the
    /// first runs changed (a vector of the module that had to grow the first time and not the
    /// second): the second pass, in the state the first left, records the points whose call
    /// site, failure and result the first did not see, and any point with a problem.
    fn step_task_op(&mut self, op: Op) {
        let first = self.rows.len();
        self.step_task_op_once(op, None);
        let seen: BTreeSet<(String, String, String)> = self.rows[first..]
            .iter()
            .map(|r| (r.attr.clone(), r.site.clone(), r.result.clone()))
            .collect();
        self.step_task_op_once(op, Some(&seen));
    }

    /// One pass of [`Campaign::step_task_op`]; with `seen`, rows already seen and without a
    /// problem are not recorded again.
    fn step_task_op_once(&mut self, op: Op, seen: Option<&BTreeSet<(String, String, String)>>) {
        let helper_pid = self.helper.as_ref().map_or(0, |h| h.pid);
        let mut n = 1;
        let mut sampling = Sampling::default();
        loop {
            let total_before = counted_total();
            let kcov_dir = self.kcov_dir.clone();
            let (pid, report) = in_child(|| {
                let mut child = Child {
                    report: ChildReport::default(),
                    fail_nth: FailNth::open().expect("/proc/thread-self/fail-nth"),
                    helper_pid,
                    kcov: kcov_dir.and_then(|dir| Collector::start(&dir, "faults").ok()),
                };
                child.run(op, n);
                child.closing_cycle();
                if let Some(kcov) = child.kcov.as_mut() {
                    kcov.save();
                }
                child.report
            });
            let mut row = Row {
                op,
                point: n,
                attr: String::new(),
                site: String::new(),
                result: String::new(),
                problems: Vec::new(),
                logged: Vec::new(),
                pid,
                leaks: 0,
            };
            let Some(report) = report else {
                self.other_failures
                    .push(format!("{} point {n}: the child died", op.name()));
                return;
            };
            let injections = self.collect_log(&mut row);
            if !report.state.is_empty() {
                row.problems.push(report.state.clone());
            }
            self.parent_checks(&mut row, total_before, report.written);
            if report.remaining != 0 {
                // Fewer than n points: this was a clean run; its checks must pass too.
                if !injections.is_empty() {
                    row.problems
                        .push("a failure was forced although fail-nth was not used up".into());
                }
                for problem in row.problems {
                    self.other_failures
                        .push(format!("{} without a failure: {problem}", op.name()));
                }
                if seen.is_none() {
                    self.print_progress(op, n - 1);
                }
                return;
            }
            row.result = Self::result_text(report.ret, report.errno);
            if report.ret > 0
                && !matches!(
                    op,
                    Op::OpenFirst
                        | Op::OpenSecond
                        | Op::SysfsTotal
                        | Op::SysfsPresent
                        | Op::SysfsSlots
                        | Op::SysfsStore
                        | Op::ReadPosts
                        | Op::MmapOwner
                        | Op::MmapReader
                )
            {
                row.problems
                    .push(format!("returned a positive count {}", report.ret));
            }
            self.describe(&mut row, &injections);
            let site = format!("{} {}", row.attr, row.site);
            let key = (row.attr.clone(), row.site.clone(), row.result.clone());
            if seen.is_none_or(|seen| !seen.contains(&key) || !row.problems.is_empty()) {
                self.record(row);
            }
            n = self.next_point(n, &mut sampling, &site);
        }
    }

    /// Records that `op` reached `points` failure points in all.
    fn print_progress(&mut self, op: Op, points: u32) {
        println!("faults: {:<22} stepped through {points} points", op.name());
        let _ = io::stdout().flush();
        self.stepped.push((op, points));
    }

    fn step_insmod(&mut self) {
        let mut n = 1;
        let mut sampling = Sampling::default();
        let ko = self.ko.clone();
        let params = self.params.clone();
        loop {
            let kcov_dir = self.kcov_dir.clone();
            let (pid, report) = in_child(|| {
                let mut report = ChildReport::default();
                // A failed load leaves no sections to read: its points are saved as addresses,
                // which ds-coverage places by matching them with the module's points.
                let mut kcov = kcov_dir.and_then(|dir| Collector::start(&dir, "faults").ok());
                // Meanwhile another thread opens the first node as fast as it can: no open may
                // succeed during a load that fails, since the module's code is freed then.
                let loading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
                let still_loading = loading.clone();
                let opener = thread::spawn(move || {
                    let mut opened = 0u32;
                    while still_loading.load(std::sync::atomic::Ordering::Relaxed) {
                        if File::open(device_path(0)).is_ok() {
                            opened += 1;
                        }
                    }
                    opened
                });
                let mut fail_nth = FailNth::open().expect("fail-nth");
                fail_nth.arm(n);
                let result = load_module(&ko, &params);
                report.remaining = fail_nth.disarm();
                loading.store(false, std::sync::atomic::Ordering::Relaxed);
                let opened = opener.join().unwrap_or(0);
                if result.is_err() && opened > 0 {
                    report.state =
                        format!("{opened} opens of the node succeeded during a failed load");
                }
                match result {
                    Ok(()) => report.ret = 0,
                    Err(e) => (report.ret, report.errno) = (-1, e),
                }
                if let Some(kcov) = kcov.as_mut() {
                    kcov.refresh_sections();
                    kcov.save();
                }
                if result.is_err() {
                    let left = leftovers();
                    if !left.is_empty() {
                        report.state = format!("a failed load left {left:?}");
                    }
                }
                report
            });
            let mut row = Row {
                op: Op::Insmod,
                point: n,
                attr: String::new(),
                site: String::new(),
                result: String::new(),
                problems: Vec::new(),
                logged: Vec::new(),
                pid,
                leaks: 0,
            };
            let Some(report) = report else {
                self.other_failures
                    .push(format!("insmod point {n}: the child died"));
                return;
            };
            let injections = self.collect_log(&mut row);
            if !report.state.is_empty() {
                row.problems.push(report.state.clone());
            }
            if report.ret == 0 {
                // Loaded: the module must work (a closing cycle and the parent's checks).
                let (_, cycle) = in_child(|| {
                    let mut child = Child {
                        report: ChildReport::default(),
                        fail_nth: FailNth::open().expect("fail-nth"),
                        helper_pid: 0,
                        kcov: None,
                    };
                    child.closing_cycle();
                    child.report
                });
                match cycle {
                    Some(cycle) if cycle.state.is_empty() => {}
                    Some(cycle) => row.problems.push(cycle.state),
                    None => row.problems.push("the closing cycle's child died".into()),
                }
                if Sections::of(MODULE).text() != self.sections.text() && !self.sections.is_empty()
                {
                    println!("faults: note: the module's .text moved between loads");
                }
            }
            if report.remaining != 0 {
                for problem in row.problems {
                    self.other_failures
                        .push(format!("insmod without a failure: {problem}"));
                }
                if report.ret != 0 {
                    self.other_failures.push(format!(
                        "insmod without a failure: {}",
                        errno_name(report.errno)
                    ));
                }
                self.print_progress(Op::Insmod, n - 1);
                self.sections = Sections::of(MODULE);
                return;
            }
            row.result = Self::result_text(report.ret, report.errno);
            if report.ret == 0 {
                // The failure was absorbed: the load succeeded anyway. Unload for the next point.
                if let Err(e) = unload_module() {
                    row.problems.push(format!(
                        "rmmod after an absorbed failure: {}",
                        errno_name(e)
                    ));
                }
            }
            self.describe(&mut row, &injections);
            let site = format!("{} {}", row.attr, row.site);
            self.record(row);
            n = self.next_point(n, &mut sampling, &site);
        }
    }

    fn step_rmmod(&mut self) {
        let mut n = 1;
        loop {
            let kcov_dir = self.kcov_dir.clone();
            let (pid, report) = in_child(|| {
                let mut report = ChildReport::default();
                let mut kcov = kcov_dir.and_then(|dir| Collector::start(&dir, "faults").ok());
                let mut fail_nth = FailNth::open().expect("fail-nth");
                fail_nth.arm(n);
                let result = unload_module();
                report.remaining = fail_nth.disarm();
                if let Some(kcov) = kcov.as_mut() {
                    kcov.save();
                }
                match result {
                    Ok(()) => report.ret = 0,
                    Err(e) => (report.ret, report.errno) = (-1, e),
                }
                let left = leftovers();
                if result.is_ok() && !left.is_empty() {
                    report.state = format!("unloading left {left:?}");
                }
                report
            });
            let mut row = Row {
                op: Op::Rmmod,
                point: n,
                attr: String::new(),
                site: String::new(),
                result: String::new(),
                problems: Vec::new(),
                logged: Vec::new(),
                pid,
                leaks: 0,
            };
            let Some(report) = report else {
                self.other_failures
                    .push(format!("rmmod point {n}: the child died"));
                return;
            };
            let injections = self.collect_log(&mut row);
            if !report.state.is_empty() {
                row.problems.push(report.state.clone());
            }
            if report.ret != 0 {
                row.problems
                    .push(format!("unload failed: {}", errno_name(report.errno)));
            }
            // A reload starts clean: every slot free, the counted total back at 0.
            match load_module(&self.ko, &self.params) {
                Ok(()) => {
                    let owned = slots_on(DEVICE).into_iter().filter(|r| r.pid != 0).count();
                    let total = counted_total();
                    if owned != 0 || total != 0 {
                        row.problems.push(format!(
                            "the reload starts with {owned} slots owned, total {total}"
                        ));
                    }
                }
                Err(e) => row.problems.push(format!("reload: {}", errno_name(e))),
            }
            if report.remaining != 0 {
                for problem in row.problems {
                    self.other_failures
                        .push(format!("rmmod without a failure: {problem}"));
                }
                self.print_progress(Op::Rmmod, n - 1);
                return;
            }
            row.result = Self::result_text(report.ret, report.errno);
            self.describe(&mut row, &injections);
            self.record(row);
            n += 1;
        }
    }

    /// The metrics worker's period: a kernel worker thread runs it, so every worker thread is
    /// armed while one period ends (only points with a module frame count, and only the
    /// module's work has one).
    fn step_metrics_period(&mut self, period: Duration) {
        let file = open_device(&device_path(DEVICE)).expect("open");
        let info = acquire(&file, 0).expect("ACQUIRE");
        let slab = Mapping::new(
            &file,
            SLAB_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            info.mmap_offset,
        )
        .expect("mmap");
        let mut stream = open_posts(&device_path(DEVICE)).expect("open for posts");
        let mut posted = 0u64;
        let mut written = 0u64;
        // Counts the earlier operations' children released are posted by the next periods.
        let mut last_period = drain_posts(&mut stream, &mut posted).unwrap_or(0);
        for _ in 0..2 {
            if let Some(p) = wait_for_period(&mut stream, &mut posted, last_period, period * 4) {
                last_period = p;
            }
        }
        posted = 0;
        let counter = nc_offset(COUNTED.0, COUNTED.1);
        let base = slab.read_u64(counter);
        let mut n = 1;
        // Tries of point `n` in which no armed worker reached it, and of those, the ones in
        // which a period ended while the workers were armed.
        let (mut idle_tries, mut idle_periods) = (0, 0);
        loop {
            let Some(p) = wait_for_period(&mut stream, &mut posted, last_period, period * 4) else {
                self.other_failures
                    .push("metrics period: no period ended within 4 periods".into());
                return;
            };
            last_period = p;
            written += 1;
            slab.write_u64(counter, base + written);
            let workers = fault_injection::kworkers();
            for &tid in &workers {
                let _ = fault_injection::set_fail_nth(Some(tid), n);
            }
            thread::sleep(period + period / 2);
            let mut used: Option<(i32, u32)> = None;
            for &tid in &workers {
                let left = fault_injection::fail_nth(Some(tid)).unwrap_or(n);
                let _ = fault_injection::set_fail_nth(Some(tid), 0);
                if left != n {
                    used = Some((tid, left));
                }
            }
            // New workers may have started meanwhile; they were never armed.
            let ended_while_armed =
                drain_posts(&mut stream, &mut posted).filter(|p| *p > last_period);
            if let Some(p) = ended_while_armed {
                last_period = p;
            }
            let mut row = Row {
                op: Op::MetricsPeriod,
                point: n,
                attr: String::new(),
                site: String::new(),
                result: String::new(),
                problems: Vec::new(),
                logged: Vec::new(),
                pid: used.map_or(0, |u| u.0),
                leaks: 0,
            };
            // Two more periods: the failed period's counts must be posted once, later.
            for _ in 0..2 {
                if let Some(p) = wait_for_period(&mut stream, &mut posted, last_period, period * 4)
                {
                    last_period = p;
                }
            }
            let injections = self.collect_log(&mut row);
            if posted != written {
                row.problems.push(format!(
                    "posted success deltas add up to {posted}, {written} were counted"
                ));
            }
            if used.is_none() && ended_while_armed.is_some() {
                idle_periods += 1;
            }
            match used {
                None if row.problems.is_empty() && idle_tries < 3 => {
                    // No armed worker reached point `n`: a worker that started after the arming
                    // may have run the period, so try the point again.
                    idle_tries += 1;
                    continue;
                }
                None if row.problems.is_empty() && idle_periods == idle_tries + 1 => {
                    // Every try, a period ended while the workers were armed and none of them
                    // reached point `n`: a period has fewer points (none, for n = 1: posting
                    // neither allocates nor copies).
                    self.print_progress(Op::MetricsPeriod, n - 1);
                    break;
                }
                None => row
                    .problems
                    .push("no worker ran the metrics work while armed".into()),
                Some((_, left)) if left != 0 => {
                    for problem in row.problems {
                        self.other_failures
                            .push(format!("metrics period without a failure: {problem}"));
                    }
                    self.print_progress(Op::MetricsPeriod, n - left);
                    break;
                }
                Some(_) => {}
            }
            row.result = if row.logged.is_empty() {
                "(no caller)".into()
            } else {
                "logged".into()
            };
            self.describe(&mut row, &injections);
            self.record(row);
            (idle_tries, idle_periods) = (0, 0);
            n += 1;
        }
        drop(slab);
        let _ = release(&file, 0);
    }

    fn run(&mut self) {
        fault_injection::confine_to(MODULE_AREA.0, MODULE_AREA.1)
            .expect("configure fault injection");
        // The stack dump of every forced failure goes to the log, not to the console.
        let _quiet = fault_injection::QuietDumps::new();
        kmemleak::command("clear");
        // The operations of a loaded module first, on the module as the guest loaded it; then
        // unloading and loading, which replace it with one loaded with the campaign's
        // parameters (last, so that a module that cannot be unloaded safely does not hide
        // the other rows).
        if fs::metadata(format!("/sys/module/{MODULE}")).is_err() {
            load_module(&self.ko, &self.params)
                .unwrap_or_else(|e| panic!("insmod: {}", errno_name(e)));
        }
        self.sections = Sections::of(MODULE);
        let text = self.sections.text().unwrap_or(0);
        assert!(
            (MODULE_AREA.0..MODULE_AREA.1).contains(&text),
            "the module's .text ({text:#x}) is outside the module area the failures are confined to"
        );
        self.helper =
            Some(Producer::start(&device_path(DEVICE), &[(1, 1, 11)]).expect("helper owner"));
        for op in Op::TASK_OPS {
            self.step_task_op(op);
        }
        self.step_metrics_period(metrics_period());
        if let Some(helper) = self.helper.take() {
            helper.release_and_exit();
        }
        // A first kmemleak verdict before the module is unloaded, so that a crash in unloading
        // does not take it along.
        self.scan_for_leaks();
        let (points, failed, leaks) = self.tally();
        println!(
            "faults: loaded-module operations: {points} injection points reached, {failed} failed, {}",
            leaks.map_or("leaks not checked".into(), |l| format!("{l} leaks"))
        );
        self.step_rmmod();
        unload_module().unwrap_or_else(|e| panic!("rmmod: {}", errno_name(e)));
        self.step_insmod();
        self.scan_for_leaks();
        let _ = self.log.take_injections();
    }

    /// Attributes the module's unreferenced objects to the points whose process allocated
    /// them (each object once, however many scans report it).
    fn scan_for_leaks(&mut self) {
        let Some(leaks) = kmemleak::scan() else {
            return;
        };
        self.kmemleak_seen = true;
        for leak in leaks.into_iter().filter(|l| l.from_module) {
            if !self.leaks_seen.insert(leak.object.clone()) {
                continue;
            }
            match self.rows.iter_mut().find(|r| r.pid == leak.pid) {
                Some(row) => row.leaks += 1,
                None => self.unattributed_leaks.push(leak.text),
            }
        }
    }

    /// Points reached, points with a problem (and checks outside points that failed), and
    /// leaks (`None` without kmemleak).
    fn tally(&self) -> (usize, usize, Option<usize>) {
        let failed = self
            .rows
            .iter()
            .filter(|r| !r.problems.is_empty() || r.leaks > 0)
            .count()
            + self.other_failures.len();
        let leaks =
            self.rows.iter().map(|r| r.leaks).sum::<usize>() + self.unattributed_leaks.len();
        (self.rows.len(), failed, self.kmemleak_seen.then_some(leaks))
    }

    /// Prints a row as soon as it is known (a kernel crash later still leaves it on the
    /// console) and keeps it for the summary.
    fn record(&mut self, row: Row) {
        print_row(&row, None);
        self.rows.push(row);
    }
}

/// The metrics period of the loaded module (its parameter), 1 s if unreadable.
fn metrics_period() -> Duration {
    let ms = fs::read_to_string(format!("/sys/module/{MODULE}/parameters/metrics_period_ms"))
        .ok()
        .or_else(|| {
            fs::read_to_string("/module.params").ok().and_then(|p| {
                p.split_whitespace()
                    .find_map(|w| w.strip_prefix("metrics_period_ms=").map(str::to_owned))
            })
        })
        .and_then(|v| v.trim().parse().ok())
        .filter(|ms| *ms > 0)
        .unwrap_or(1000);
    Duration::from_millis(ms)
}

/// Prints one row of the table; `leaks` once kmemleak has been read.
fn print_row(row: &Row, leaks: Option<usize>) {
    println!(
        "{:<20} {:>5}  {:<16} {:<10} {:<6} {:<5} {}",
        row.op.name(),
        row.point,
        row.attr,
        row.result,
        if row.problems.is_empty() {
            "ok"
        } else {
            "FAIL"
        },
        leaks.map_or("-".into(), |l| l.to_string()),
        row.site
    );
    for problem in &row.problems {
        println!("{:>28} problem: {problem}", "");
    }
    for logged in &row.logged {
        println!("{:>28} logged: {logged}", "");
    }
    let _ = io::stdout().flush();
}

/// Reads every post not read yet; adds the success deltas to `posted`; returns the last
/// period seen.
fn drain_posts(stream: &mut File, posted: &mut u64) -> Option<u64> {
    let mut last = None;
    for post in read_available_posts(stream) {
        if post.cw_id == CW_SUCCESS {
            *posted += std::str::from_utf8(post.value_bytes())
                .ok()?
                .parse::<u64>()
                .ok()?;
        }
        last = Some(post.period);
    }
    last
}

/// Waits until a period after `after` has posted; returns it.
fn wait_for_period(
    stream: &mut File,
    posted: &mut u64,
    after: u64,
    limit: Duration,
) -> Option<u64> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(p) = drain_posts(stream, posted).filter(|p| *p > after) {
            return Some(p);
        }
        thread::sleep(Duration::from_millis(50));
    }
    None
}

fn main() {
    let mut short = false;
    let mut ko = "/neuron_ds.ko".to_owned();
    let mut params = "devices=1 cores_per_device=2 metrics_period_ms=1000".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--short" => short = true,
            "--ko" => ko = args.next().expect("--ko PATH"),
            "--params" => params = args.next().expect("--params TEXT"),
            _ => {
                eprintln!("usage: ds-faults [--short] [--ko PATH] [--params \"...\"]");
                exit(2);
            }
        }
    }
    if !fault_injection::available() {
        eprintln!("ds-faults: this kernel has no failure injection with a stacktrace filter (the debug or cov variant has)");
        exit(2);
    }
    println!(
        "ds-faults: {} form, module parameters for load and unload {params:?}",
        if short { "short" } else { "full" }
    );
    println!(
        "{:<20} {:>5}  {:<16} {:<10} {:<6} {:<5} site",
        "operation", "point", "failure", "result", "state", "leaks"
    );
    let started = Instant::now();
    let mut campaign = Campaign {
        short,
        ko,
        params,
        log: KernelLog::open().expect("/dev/kmsg"),
        rows: Vec::new(),
        other_failures: Vec::new(),
        helper: None,
        kcov_dir: std::env::var(neuron_ds_guest_tests::kcov::DIR_VAR).ok(),
        sections: Sections::of(MODULE),
        stepped: Vec::new(),
        kmemleak_seen: false,
        leaks_seen: BTreeSet::new(),
        unattributed_leaks: Vec::new(),
    };
    campaign.run();

    let leaks = campaign.kmemleak_seen.then_some(());
    // The table: every (operation, failure, call site, result) with its points, how many of
    // them left a problem, and the leaks kmemleak attributed to them.
    println!("\n== fault table: operation x injected failure at call site -> result, state, leaks");
    let mut groups: BTreeMap<GroupKey, GroupCounts> = BTreeMap::new();
    for row in &campaign.rows {
        let op_order = Op::ORDER.iter().position(|op| *op == row.op).unwrap_or(0);
        let group = groups
            .entry((op_order, &row.attr, &row.site, &row.result))
            .or_default();
        group.0 += 1;
        group.1 += u32::from(!row.problems.is_empty());
        group.2 += row.leaks;
    }
    println!(
        "{:<20} {:<16} {:<10} {:>6} {:<12} {:<6} site",
        "operation", "failure", "result", "points", "state", "leaks"
    );
    for ((op, attr, site, result), (points, bad, leaked)) in &groups {
        let state = if *bad == 0 {
            "ok".to_owned()
        } else {
            format!("{bad} FAIL")
        };
        let leak_text = if leaks.is_some() {
            leaked.to_string()
        } else {
            "-".into()
        };
        println!(
            "{:<20} {:<16} {:<10} {:>6} {:<12} {:<6} {site}",
            Op::ORDER[*op].name(),
            attr,
            result,
            points,
            state,
            leak_text
        );
    }
    for row in campaign.rows.iter().filter(|r| r.leaks > 0) {
        println!(
            "faults: {} point {} (pid {}) leaked {} objects",
            row.op.name(),
            row.point,
            row.pid,
            row.leaks
        );
    }
    println!("\n== failure points per operation (the short form samples repeated sites)");
    for (op, points) in &campaign.stepped {
        let tried = campaign.rows.iter().filter(|r| r.op == *op).count();
        let bad = campaign
            .rows
            .iter()
            .filter(|r| r.op == *op && (!r.problems.is_empty() || r.leaks > 0))
            .count();
        println!(
            "{:<22} {points:>5} points, {tried} failed on purpose, {bad} with a problem",
            op.name()
        );
    }
    for failure in &campaign.other_failures {
        println!("faults: FAIL: {failure}");
    }
    for leak in &campaign.unattributed_leaks {
        println!("faults: leak not attributed to a point:\n{leak}");
    }
    println!("faults: time {:.1} s", started.elapsed().as_secs_f64());
    let (points, failed, leak_count) = campaign.tally();
    println!(
        "faults: {points} injection points reached, {failed} failed, {}",
        leak_count.map_or(
            "leaks not checked (no kmemleak in this kernel)".into(),
            |l| { format!("{l} leaks") }
        )
    );
    if failed > 0 || leak_count.unwrap_or(0) > 0 {
        exit(1);
    }
}
