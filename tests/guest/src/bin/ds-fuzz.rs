//! A system-call fuzzer for the neuron_ds devices: `ds-fuzz [--calls N] [--seed S]`.
//!
//! Deterministic from its seed (the sequence of calls is; the timing of the thread that
//! closes descriptors under a concurrent call is not). Each step picks one of:
//!
//! * an ioctl: the two real commands and numbers around them (other nr, type, size,
//!   direction, random), with an argument that is valid (pid 0, our own pid, a helper's,
//!   negative, random), NULL, a kernel address, non-canonical, unmapped, misaligned, PROT_NONE,
//!   read-only, or placed 1..23 bytes before a guard page;
//! * an mmap of a random offset (granted slots, neighbours, other device's, random), length,
//!   protection and flags, at a kernel-chosen address or MAP_FIXED inside our own reserve;
//! * mprotect, mremap (grow, shrink, move), madvise (DONTFORK, DOFORK, DONTNEED, ...),
//!   munmap of one half, and touching a mapping through read(2)/write(2);
//! * fork after mmap (the child ACQUIREs through the inherited descriptors, maps, touches
//!   what it inherited, and exits), open/dup/close, a close in another thread racing an
//!   ioctl on the same descriptor, reads of the slot table, reads and resets of the sysfs
//!   counters, reads of `core_count`.
//!
//! With KCOV (the `cov` kernel), the module points the calls reached are reported as they go.
//! (A coverage-guided mode, programs mutated from a corpus, was removed: at equal calls it
//! never reached more of the module than this stream of random steps.)
//!
//! Outcomes are checked against what the module promises (e.g. a mapping that succeeds is
//! exactly one slab at a granted slot; a reader's mapping never becomes writable or
//! executable; unknown commands are ENOTTY; bad pointers EFAULT). The kernel log is checked
//! every 1000 calls; any complaint or broken promise prints the seed and exits 1. At the end,
//! once every helper is gone, no slot may be owned.

use nds_abi::sysfs::SYSFS_COUNTERS;
use neuron_ds_guest_tests::{
    acquire, device_path, kcov::Collector, kernel_log::KernelLog, metrics_ctrl, offset_device,
    offset_is_owner, offset_slot, open_device, open_posts, read_available_posts, release, rng::Rng,
    slab_offset, slots_on, sysfs_core_count, sysfs_device, DsInfo, ACQUIRE, METRICS_CTRL,
    METRICS_ENABLE, RELEASE, SLAB_SIZE, SLOTS,
};
use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    fmt, fs, io,
    process::exit,
    ptr,
};

const PAGE: usize = 4096;
/// MAP_FIXED targets: slab-sized cells of an address range we reserved (PROT_NONE).
const CELLS: usize = 24;
const MAX_FILES: usize = 8;
const DEVICES: usize = 2;

/// Pointer classes for ioctl arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    ValidArg,
    NullPointer,
    KernelPointer,
    NonCanonicalPointer,
    UnmappedPointer,
    ProtNonePointer,
    MisalignedPointer,
    GuardPagePointer,
    ReadOnlyPointer,
    SlabPointer,
    BadCommand,
    NegativePid,
    OwnPid,
    HelperPid,
    RandomPid,
    MmapBadOffset,
    MmapBadLength,
    MmapExecOrPrivate,
    MmapGood,
    Mprotect,
    Mremap,
    Madvise,
    MunmapHalf,
    Touch,
    ForkAfterMmap,
    CloseInOtherThread,
    OpenDupClose,
    SlotTableRead,
    SysfsCounter,
    Events,
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A mapping the fuzzer made and still tracks.
#[derive(Clone, Copy, Debug)]
struct Map {
    addr: usize,
    len: usize,
    /// Whether the module let it be writable (an owner's mapping).
    owner: bool,
    shared: bool,
}

struct File {
    fd: i32,
    device: usize,
    /// The open file description (shared by dups), whose grants are in `Fuzzer::grants`.
    description: usize,
}

struct Fuzzer {
    rng: Rng,
    seed: u64,
    calls: u64,
    classes: BTreeMap<Class, u64>,
    files: Vec<File>,
    /// What ACQUIREs through each open file description granted: slot → may write.
    grants: BTreeMap<usize, BTreeMap<usize, bool>>,
    descriptions: usize,
    /// Descriptions with grants the fuzzer cannot know (an ACQUIRE of an unknown pid whose
    /// result could not be written back).
    tainted: BTreeSet<usize>,
    /// A page shared with forked children: word `i` is the mmap offset + 1 that a child's
    /// ACQUIRE through our descriptor `i` returned.
    child_report: usize,
    maps: Vec<Map>,
    /// `CELLS` slab-sized cells, PROT_NONE unless a tracked mapping lives there.
    reserve: usize,
    /// Three pages: two read-write, the third PROT_NONE (the guard page).
    arena: usize,
    read_only: usize,
    devnull: i32,
    devzero: i32,
    helpers: Vec<(i32, i32)>,
    own_pid: i32,
    /// What each device's `info/notify_delay` last took from us (nothing else writes it).
    notify_delays: [Option<&'static str>; DEVICES],
}

/// The ioctl numbers around ours: other nr, type, size and direction bits.
fn neighbour_command(rng: &mut Rng) -> u32 {
    let base = rng.pick(&[ACQUIRE, RELEASE]);
    match rng.below(6) {
        0 => base.wrapping_add(rng.pick(&[1u32, 2, 3])),
        1 => base.wrapping_sub(rng.pick(&[1u32, 2, 3])),
        2 => base ^ (1 << (8 + rng.below(8))), // type
        3 => (base & !0x3FFF_0000) | ((rng.below(0x4000) as u32) << 16), // size
        4 => base ^ (rng.pick(&[1u32, 2, 3]) << 30), // direction
        _ => rng.next_u64() as u32,
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn mmap(
    addr: usize,
    len: usize,
    prot: i32,
    flags: i32,
    fd: i32,
    offset: u64,
) -> Result<usize, i32> {
    // SAFETY: MAP_FIXED is only ever used inside the fuzzer's own reserve; otherwise the
    // kernel picks a free address.
    let ret = unsafe { libc::mmap(addr as *mut _, len, prot, flags, fd, offset as libc::off_t) };
    if ret == libc::MAP_FAILED {
        Err(errno())
    } else {
        Ok(ret as usize)
    }
}

impl Fuzzer {
    fn new(seed: u64) -> Self {
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let reserve = mmap(0, CELLS * SLAB_SIZE, libc::PROT_NONE, anon, -1, 0).expect("reserve");
        let arena =
            mmap(0, 3 * PAGE, libc::PROT_READ | libc::PROT_WRITE, anon, -1, 0).expect("arena");
        // SAFETY: the third page of the arena mapped just above, which nothing references
        // yet, becomes the guard page.
        let guarded =
            unsafe { libc::mprotect((arena + 2 * PAGE) as *mut _, PAGE, libc::PROT_NONE) };
        assert_eq!(guarded, 0);
        let read_only = mmap(0, PAGE, libc::PROT_READ, anon, -1, 0).expect("read-only page");
        let shared = libc::MAP_SHARED | libc::MAP_ANONYMOUS;
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let child_report = mmap(0, PAGE, rw, shared, -1, 0).expect("report page");
        // SAFETY: opening two character devices.
        let (devnull, devzero) = unsafe {
            (
                libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY),
                libc::open(c"/dev/zero".as_ptr(), libc::O_RDONLY),
            )
        };
        assert!(devnull >= 0 && devzero >= 0);
        Self {
            rng: Rng::new(seed),
            seed,
            calls: 0,
            notify_delays: [None; DEVICES],
            classes: BTreeMap::new(),
            files: Vec::new(),
            grants: BTreeMap::new(),
            descriptions: 0,
            tainted: BTreeSet::new(),
            child_report,
            maps: Vec::new(),
            reserve,
            arena,
            read_only,
            devnull,
            devzero,
            helpers: Vec::new(),
            own_pid: std::process::id() as i32,
        }
    }

    fn violation(&self, what: String) -> ! {
        println!(
            "ds-fuzz: FAIL after {} calls (seed {}): {what}",
            self.calls, self.seed
        );
        println!(
            "ds-fuzz: reproduce with: ds-fuzz --seed {} --calls {}",
            self.seed, self.calls
        );
        exit(1);
    }

    fn count(&mut self, class: Class) {
        *self.classes.entry(class).or_default() += 1;
    }

    /// Forks a helper that owns a slab on `device` until it is killed (or its pipe closes).
    fn start_helper(&mut self, device: usize) {
        let path = std::ffi::CString::new(device_path(device)).unwrap();
        let mut pipe = [0i32; 2];
        // SAFETY: creating a pipe and forking; the child only makes system calls.
        unsafe {
            assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
            match libc::fork() {
                -1 => panic!("fork"),
                0 => {
                    libc::close(pipe[1]);
                    let fd = libc::open(path.as_ptr(), libc::O_RDWR);
                    let mut info = DsInfo::default();
                    libc::ioctl(fd, ACQUIRE as libc::Ioctl, &mut info);
                    let rw = libc::PROT_READ | libc::PROT_WRITE;
                    libc::mmap(
                        ptr::null_mut(),
                        SLAB_SIZE,
                        rw,
                        libc::MAP_SHARED,
                        fd,
                        info.mmap_offset as i64,
                    );
                    let mut byte = 0u8;
                    libc::read(pipe[0], ptr::addr_of_mut!(byte).cast(), 1);
                    libc::_exit(0);
                }
                pid => {
                    libc::close(pipe[0]);
                    self.helpers.push((pid, pipe[1]));
                }
            }
        }
    }

    /// Kills the helpers (their exit releases their slabs) and reaps them.
    fn stop_helpers(&mut self) {
        for (pid, pipe) in self.helpers.drain(..) {
            let mut status = 0;
            // SAFETY: signalling and reaping our own child, closing our own descriptor.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
                libc::close(pipe);
            }
        }
    }

    fn open_file(&mut self) {
        if self.files.len() >= MAX_FILES {
            return;
        }
        let device = self.rng.index(DEVICES);
        let flags = self.rng.pick(&[
            libc::O_RDWR,
            libc::O_RDONLY,
            libc::O_RDWR | libc::O_NONBLOCK,
        ]);
        let path = std::ffi::CString::new(device_path(device)).unwrap();
        // SAFETY: opening a device node.
        let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
        self.calls += 1;
        if fd < 0 {
            self.violation(format!(
                "open of {}: errno {}",
                device_path(device),
                errno()
            ));
        }
        self.descriptions += 1;
        self.files.push(File {
            fd,
            device,
            description: self.descriptions,
        });
    }

    /// A pid for an ioctl argument, with its class.
    fn pid(&mut self) -> (i32, Class) {
        match self.rng.below(8) {
            0..=2 => (0, Class::ValidArg),
            3 => (self.own_pid, Class::OwnPid),
            4 if !self.helpers.is_empty() => {
                let helper = self.rng.index(self.helpers.len());
                (self.helpers[helper].0, Class::HelperPid)
            }
            5 => (
                -(1 + self.rng.below(1 << 31) as i64) as i32,
                Class::NegativePid,
            ),
            6 => (
                self.rng.pick(&[i32::MIN, -1, i32::MAX, 1]),
                Class::RandomPid,
            ),
            _ => (self.rng.below(4096) as i32, Class::RandomPid),
        }
    }

    fn ioctl(&mut self) {
        if self.files.is_empty() {
            return self.open_file();
        }
        let which = self.rng.index(self.files.len());
        let (fd, device, description) = {
            let file = &self.files[which];
            (file.fd, file.device, file.description)
        };
        let command = if self.rng.one_in(5) {
            self.count(Class::BadCommand);
            neighbour_command(&mut self.rng)
        } else {
            self.rng.pick(&[ACQUIRE, RELEASE])
        };
        let (pid, pid_class) = self.pid();
        self.count(pid_class);
        let mut arg = DsInfo {
            pid,
            reserved0: self.rng.next_u64() as u32,
            mmap_offset: self.rng.next_u64(),
            size: self.rng.next_u64() as u32,
            reserved1: self.rng.next_u64() as u32,
        };
        let valid = ptr::addr_of_mut!(arg) as usize;
        let arena_arg = self.arena + self.rng.below(PAGE as u64 - 24) as usize;
        let (pointer, class) = match self.rng.below(12) {
            0..=3 => (valid, Class::ValidArg),
            4 => (0, Class::NullPointer),
            5 => (
                self.rng.pick(&[
                    0xffff_8880_0000_0000usize,
                    0xffff_ffff_8100_0000,
                    usize::MAX - 8,
                ]),
                Class::KernelPointer,
            ),
            6 => (
                0x8000_0000_0000_0000 | self.rng.below(1 << 40) as usize,
                Class::NonCanonicalPointer,
            ),
            7 => (PAGE * (1 + self.rng.index(14)), Class::UnmappedPointer),
            8 => match self.free_cell() {
                Some(cell) => (
                    cell + self.rng.index(SLAB_SIZE - 24),
                    Class::ProtNonePointer,
                ),
                None => (PAGE, Class::UnmappedPointer),
            },
            9 => (
                arena_arg | (1 + self.rng.index(7)),
                Class::MisalignedPointer,
            ),
            10 => (
                self.arena + 2 * PAGE - 1 - self.rng.index(23),
                Class::GuardPagePointer,
            ),
            _ => match self.maps.iter().find(|m| m.owner && m.shared) {
                Some(map) if self.rng.one_in(2) => {
                    (map.addr + 8 * self.rng.index(64), Class::SlabPointer)
                }
                _ => (
                    self.read_only + self.rng.index(PAGE - 24),
                    Class::ReadOnlyPointer,
                ),
            },
        };
        self.count(class);
        if class == Class::MisalignedPointer {
            // SAFETY: the target lies inside the read-write pages of our arena.
            unsafe { ptr::write_unaligned(pointer as *mut DsInfo, arg) };
        }
        // SAFETY: the kernel validates the pointer; every writable target is our own memory.
        let ret = unsafe { libc::ioctl(fd, command as libc::Ioctl, pointer) };
        let err = if ret < 0 { errno() } else { 0 };
        self.calls += 1;
        if ret > 0 {
            self.violation(format!("ioctl {command:#x} returned {ret}"));
        }
        let readable = matches!(
            class,
            Class::ValidArg
                | Class::MisalignedPointer
                | Class::ReadOnlyPointer
                | Class::SlabPointer
        );
        let allowed: &[i32] = if command != ACQUIRE && command != RELEASE {
            &[libc::ENOTTY]
        } else if class == Class::SlabPointer {
            // The argument is whatever the slab holds there, and the slab may be read-only.
            &[0, libc::EFAULT, libc::EINVAL, libc::ENOENT, libc::ENOMEM]
        } else if !readable {
            &[libc::EFAULT]
        } else if class == Class::ReadOnlyPointer {
            // The page holds zeros: pid 0, whose result cannot be written back.
            if command == RELEASE {
                &[0]
            } else {
                &[libc::EFAULT, libc::ENOMEM]
            }
        } else if pid < 0 {
            &[libc::EINVAL]
        } else if command == RELEASE {
            &[0]
        } else if pid == 0 {
            &[0, libc::ENOMEM]
        } else {
            &[0, libc::ENOENT]
        };
        if !allowed.contains(&err) {
            self.violation(format!(
                "ioctl {command:#x} pid {pid} pointer {pointer:#x} ({class}): errno {err}, expected one of {allowed:?}"
            ));
        }
        if command == ACQUIRE && err == libc::EFAULT && class == Class::ReadOnlyPointer {
            // Acquired and granted before the result could not be written back: learn the
            // slot with a valid ACQUIRE of the same pid 0 (idempotent).
            let mut again = DsInfo::default();
            // SAFETY: a valid argument on our own descriptor.
            if unsafe { libc::ioctl(fd, ACQUIRE as libc::Ioctl, &mut again) } == 0 {
                let slot = offset_slot(again.mmap_offset);
                self.grants
                    .entry(description)
                    .or_default()
                    .insert(slot, true);
            }
            self.calls += 1;
        }
        if command == ACQUIRE && err == libc::EFAULT && class == Class::SlabPointer {
            // Whatever pid the slab held may have been granted: no grant checks on this
            // description from now on.
            self.tainted.insert(description);
        }
        if command == ACQUIRE && err == 0 {
            let info = if class == Class::ValidArg {
                arg
            } else {
                // SAFETY: the kernel wrote the result where the pointer points, in our memory.
                unsafe { ptr::read_unaligned(pointer as *const DsInfo) }
            };
            if info.size as usize != SLAB_SIZE
                || offset_device(info.mmap_offset) != device
                || info.mmap_offset % SLAB_SIZE as u64 != 0
                || (info.pid == 0 && !offset_is_owner(info.mmap_offset))
            {
                self.violation(format!("ACQUIRE on neuron{device} returned {info:?}"));
            }
            let slot = offset_slot(info.mmap_offset);
            self.grants
                .entry(description)
                .or_default()
                .insert(slot, info.pid == 0);
        }
    }

    /// A free MAP_FIXED cell of the reserve, if any.
    fn free_cell(&mut self) -> Option<usize> {
        let free: Vec<usize> = (0..CELLS)
            .map(|cell| self.reserve + cell * SLAB_SIZE)
            .filter(|start| {
                !self
                    .maps
                    .iter()
                    .any(|m| m.addr < start + SLAB_SIZE && *start < m.addr + m.len)
            })
            .collect();
        (!free.is_empty()).then(|| free[self.rng.index(free.len())])
    }

    /// Gives the parts of `addr..addr + len` inside the reserve back to it (PROT_NONE), unless
    /// a tracked mapping lives there.
    fn re_reserve(&self, addr: usize, len: usize) {
        let (start, end) = (
            addr.max(self.reserve),
            (addr + len).min(self.reserve + CELLS * SLAB_SIZE),
        );
        let mut page = start;
        while page < end {
            if !self
                .maps
                .iter()
                .any(|m| m.addr <= page && page < m.addr + m.len)
            {
                let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED;
                mmap(page, PAGE, libc::PROT_NONE, flags, -1, 0).expect("re-reserve");
            }
            page += PAGE;
        }
    }

    fn mmap_slab(&mut self) {
        if self.files.is_empty() {
            return self.open_file();
        }
        let which = self.rng.index(self.files.len());
        let (fd, device, description) = {
            let file = &self.files[which];
            (file.fd, file.device, file.description)
        };
        let grants = self.grants.get(&description).cloned().unwrap_or_default();
        let granted: Vec<(usize, bool)> = grants.iter().map(|(s, o)| (*s, *o)).collect();
        let owner_window = self.rng.one_in(2);
        let slot_offset = |slot: usize| slab_offset(device, slot, owner_window);
        let (offset, mut class) = match self.rng.below(6) {
            0..=2 if !granted.is_empty() => {
                let (slot, owner) = granted[self.rng.index(granted.len())];
                // The owner's window for an owner's grant, else the readers' window.
                (
                    slab_offset(device, slot, owner && owner_window),
                    Class::MmapGood,
                )
            }
            0..=2 => (slot_offset(self.rng.index(SLOTS)), Class::MmapBadOffset),
            3 => (
                slot_offset(self.rng.index(SLOTS)) + PAGE as u64 * (1 + self.rng.below(63)),
                Class::MmapBadOffset,
            ),
            4 => (
                slab_offset(1 - device, self.rng.index(SLOTS), owner_window),
                Class::MmapBadOffset,
            ),
            _ => (
                (self.rng.next_u64() & !(PAGE as u64 - 1)) >> self.rng.below(40),
                Class::MmapBadOffset,
            ),
        };
        let len = if self.rng.one_in(6) {
            class = Class::MmapBadLength;
            self.rng.pick(&[
                PAGE,
                SLAB_SIZE - PAGE,
                SLAB_SIZE + PAGE,
                2 * SLAB_SIZE,
                1 << 40,
                0,
            ])
        } else {
            SLAB_SIZE
        };
        let mut prot = self.rng.pick(&[
            libc::PROT_READ,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::PROT_WRITE,
            libc::PROT_NONE,
        ]);
        let mut flags = libc::MAP_SHARED;
        if self.rng.one_in(6) {
            class = Class::MmapExecOrPrivate;
            if self.rng.one_in(2) {
                prot |= libc::PROT_EXEC;
            } else {
                flags = libc::MAP_PRIVATE;
            }
        }
        if self.rng.one_in(4) {
            flags |= self
                .rng
                .pick(&[libc::MAP_POPULATE, libc::MAP_LOCKED, libc::MAP_NORESERVE]);
        }
        let fixed = len == SLAB_SIZE && self.rng.one_in(2);
        let addr = match fixed.then(|| self.free_cell()).flatten() {
            Some(cell) => {
                flags |= libc::MAP_FIXED;
                cell
            }
            None => 0,
        };
        self.count(class);
        let result = mmap(addr, len, prot, flags, fd, offset);
        self.calls += 1;
        match result {
            Ok(at) => {
                let slot = offset_slot(offset);
                let grant = grants.get(&slot).copied();
                let exact = len == SLAB_SIZE
                    && offset % SLAB_SIZE as u64 == 0
                    && offset_device(offset) == device;
                let shared = flags & libc::MAP_SHARED != 0;
                let known = !self.tainted.contains(&description);
                // Whether this mapping can ever write the slab, whatever it asked for (a
                // reader's PROT_WRITE request is granted read-only): asked of the kernel itself.
                let owner = shared && self.owner_may_write(at, prot);
                if !exact
                    || prot & libc::PROT_EXEC != 0
                    || (known && (grant.is_none() || (owner && grant != Some(true))))
                {
                    self.violation(format!(
                        "mmap of offset {offset:#x} len {len:#x} prot {prot:#x} flags {flags:#x} on neuron{device} \
                         succeeded (grant {grant:?})"
                    ));
                }
                self.maps.push(Map {
                    addr: at,
                    len,
                    owner,
                    shared,
                });
            }
            Err(_) if addr != 0 => self.re_reserve(addr, SLAB_SIZE),
            Err(_) => {}
        }
    }

    /// Whether a mapping may be made writable (an owner's mapping); probes with mprotect and
    /// restores `prot`.
    fn owner_may_write(&mut self, at: usize, prot: i32) -> bool {
        // SAFETY: our own mapping of one slab.
        let writable =
            unsafe { libc::mprotect(at as *mut _, SLAB_SIZE, libc::PROT_READ | libc::PROT_WRITE) }
                == 0;
        // SAFETY: as above.
        unsafe { libc::mprotect(at as *mut _, SLAB_SIZE, prot) };
        self.calls += 2;
        writable
    }

    fn remap(&mut self) {
        if self.maps.is_empty() {
            return self.mmap_slab();
        }
        let index = self.rng.index(self.maps.len());
        let map = self.maps[index];
        match self.rng.below(5) {
            0 => {
                self.count(Class::Mprotect);
                let prot = self.rng.pick(&[
                    libc::PROT_READ,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::PROT_READ | libc::PROT_EXEC,
                    libc::PROT_NONE,
                    libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                ]);
                let half = self.rng.one_in(3) && map.len >= 2 * PAGE;
                let len = if half {
                    (map.len / 2) & !(PAGE - 1)
                } else {
                    map.len
                };
                // SAFETY: our own tracked mapping.
                let ok = unsafe { libc::mprotect(map.addr as *mut _, len, prot) } == 0;
                self.calls += 1;
                let write_granted = map.owner || !map.shared;
                if ok
                    && (prot & libc::PROT_EXEC != 0
                        || (prot & libc::PROT_WRITE != 0 && !write_granted))
                {
                    self.violation(format!("mprotect {prot:#x} of {map:?} succeeded"));
                }
            }
            1 => {
                self.count(Class::Mremap);
                let cell = self.free_cell();
                let (new_len, flags, target) = match self.rng.below(3) {
                    0 => (map.len + SLAB_SIZE, libc::MREMAP_MAYMOVE, 0),
                    1 => ((map.len / 2).max(PAGE) & !(PAGE - 1), 0, 0),
                    _ => match cell {
                        Some(cell) => (map.len, libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED, cell),
                        None => (map.len, libc::MREMAP_MAYMOVE, 0),
                    },
                };
                // SAFETY: our own tracked mapping, moved only into our own reserve.
                let ret =
                    unsafe { libc::mremap(map.addr as *mut _, map.len, new_len, flags, target) };
                self.calls += 1;
                if ret == libc::MAP_FAILED {
                    if target != 0 {
                        self.re_reserve(target, map.len);
                    }
                    return;
                }
                if new_len > map.len {
                    self.violation(format!("mremap grew {map:?} to {new_len:#x}"));
                }
                self.maps[index] = Map {
                    addr: ret as usize,
                    len: new_len,
                    ..map
                };
                if ret as usize != map.addr {
                    self.re_reserve(map.addr, map.len);
                } else {
                    self.re_reserve(map.addr + new_len, map.len - new_len);
                }
            }
            2 => {
                self.count(Class::Madvise);
                let advice = self.rng.pick(&[
                    libc::MADV_DONTFORK,
                    libc::MADV_DOFORK,
                    libc::MADV_DONTNEED,
                    libc::MADV_WILLNEED,
                    libc::MADV_COLD,
                    libc::MADV_PAGEOUT,
                    libc::MADV_DONTDUMP,
                    libc::MADV_DODUMP,
                    libc::MADV_REMOVE,
                    libc::MADV_FREE,
                    libc::MADV_POPULATE_READ,
                    libc::MADV_POPULATE_WRITE,
                ]);
                // SAFETY: advice on our own tracked mapping; none of them discards memory the
                // fuzzer relies on.
                unsafe { libc::madvise(map.addr as *mut _, map.len, advice) };
                self.calls += 1;
            }
            3 => {
                self.count(Class::MunmapHalf);
                let half = (map.len / 2) & !(PAGE - 1);
                let (gone, kept) = if half == 0 || self.rng.one_in(3) {
                    ((map.addr, map.len), None)
                } else if self.rng.one_in(2) {
                    ((map.addr, half), Some((map.addr + half, map.len - half)))
                } else {
                    ((map.addr + half, map.len - half), Some((map.addr, half)))
                };
                // SAFETY: our own tracked mapping (or part of it).
                if unsafe { libc::munmap(gone.0 as *mut _, gone.1) } != 0 {
                    self.violation(format!("munmap of part of {map:?}: errno {}", errno()));
                }
                self.calls += 1;
                match kept {
                    Some((addr, len)) => self.maps[index] = Map { addr, len, ..map },
                    None => {
                        self.maps.swap_remove(index);
                    }
                }
                self.re_reserve(gone.0, gone.1);
            }
            _ => {
                self.count(Class::Touch);
                let at = map.addr + PAGE * self.rng.index(map.len / PAGE);
                // SAFETY: the kernel copies from or to our mapping and reports EFAULT instead
                // of faulting us; writes only ever go to a mapping of our own.
                unsafe {
                    if self.rng.one_in(2) {
                        libc::write(self.devnull, at as *const _, PAGE);
                    } else {
                        libc::read(self.devzero, at as *mut _, 8);
                    }
                }
                self.calls += 1;
            }
        }
    }

    /// Forks a child that works with the inherited descriptors and mappings, then exits.
    fn fork_after_mmap(&mut self) {
        self.count(Class::ForkAfterMmap);
        let release_too = self.rng.one_in(2);
        let fds: Vec<i32> = self.files.iter().map(|f| f.fd).collect();
        let maps: Vec<(usize, usize)> = self.maps.iter().map(|m| (m.addr, m.len)).collect();
        let devnull = self.devnull;
        let report = self.child_report as *mut u64;
        // SAFETY: our own shared page, larger than `MAX_FILES` words.
        unsafe { ptr::write_bytes(report, 0, MAX_FILES) };
        // SAFETY: the child makes system calls only, on memory allocated before the fork.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                for (i, &fd) in fds.iter().enumerate() {
                    let mut info = DsInfo::default();
                    if libc::ioctl(fd, ACQUIRE as libc::Ioctl, &mut info) == 0 {
                        report.add(i).write_volatile(info.mmap_offset + 1);
                        let rw = libc::PROT_READ | libc::PROT_WRITE;
                        let at = libc::mmap(
                            ptr::null_mut(),
                            SLAB_SIZE,
                            rw,
                            libc::MAP_SHARED,
                            fd,
                            info.mmap_offset as i64,
                        );
                        if at != libc::MAP_FAILED {
                            at.cast::<u64>().add(16).write_volatile(1);
                            libc::munmap(at, SLAB_SIZE);
                        }
                        if release_too {
                            libc::ioctl(fd, RELEASE as libc::Ioctl, &mut info);
                        }
                    }
                }
                for &(addr, len) in &maps {
                    libc::write(devnull, addr as *const _, len.min(PAGE));
                }
                libc::_exit(0);
            }
        }
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        self.calls += 2 + 3 * fds.len() as u64;
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            self.violation(format!("a forked child ended with status {status:#x}"));
        }
        // The child's grants live on in our descriptions; its slabs are not ours to write.
        for (i, file) in self.files.iter().enumerate() {
            // SAFETY: reading back our own shared page.
            let offset = unsafe { report.add(i).read_volatile() };
            if offset != 0 {
                let slot = offset_slot(offset - 1);
                let grants = self.grants.entry(file.description).or_default();
                grants.insert(slot, false);
            }
        }
    }

    /// Closes a descriptor in another thread while this one issues an ioctl on it.
    fn close_in_other_thread(&mut self) {
        if self.files.is_empty() {
            return self.open_file();
        }
        self.count(Class::CloseInOtherThread);
        let File {
            fd, description, ..
        } = self.files.swap_remove(self.rng.index(self.files.len()));
        let closer = std::thread::spawn(move || {
            // SAFETY: the descriptor is ours and no longer tracked.
            unsafe { libc::close(fd) };
        });
        let mut arg = DsInfo::default();
        // SAFETY: a valid argument; the descriptor may be closed by now (EBADF).
        let won = unsafe { libc::ioctl(fd, ACQUIRE as libc::Ioctl, &mut arg) } == 0;
        closer.join().expect("closer thread");
        self.calls += 2;
        if won {
            // The description may live on in a dup: its new grant counts.
            let slot = offset_slot(arg.mmap_offset);
            self.grants
                .entry(description)
                .or_default()
                .insert(slot, true);
        }
    }

    fn open_dup_close(&mut self) {
        self.count(Class::OpenDupClose);
        match self.rng.below(3) {
            0 => self.open_file(),
            1 if !self.files.is_empty() && self.files.len() < MAX_FILES => {
                let which = self.rng.index(self.files.len());
                // SAFETY: duplicating our own descriptor.
                let fd = unsafe { libc::fcntl(self.files[which].fd, libc::F_DUPFD_CLOEXEC, 0) };
                self.calls += 1;
                if fd >= 0 {
                    let device = self.files[which].device;
                    let description = self.files[which].description;
                    self.files.push(File {
                        fd,
                        device,
                        description,
                    });
                }
            }
            _ if !self.files.is_empty() => {
                let file = self.files.swap_remove(self.rng.index(self.files.len()));
                // SAFETY: closing our own descriptor.
                unsafe { libc::close(file.fd) };
                self.calls += 1;
            }
            _ => self.open_file(),
        }
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..=44 => self.ioctl(),
            45..=64 => self.mmap_slab(),
            65..=84 => self.remap(),
            85..=86 => self.fork_after_mmap(),
            87..=88 => self.close_in_other_thread(),
            89..=97 => self.open_dup_close(),
            98 => {
                self.count(Class::SlotTableRead);
                let _ = slots_on(self.rng.index(DEVICES));
                self.calls += 1;
            }
            _ if self.rng.one_in(2) => self.sysfs_counter(),
            _ => self.events(),
        }
    }

    /// What event-driven consumers do: `METRICS_CTRL` (a valid mode or not) on a tracked file,
    /// a read of the posts and a poll that must not wait, or a write of `info/notify_delay` and
    /// a poll of a counter file. Posting is left enabled and notification off at the end
    /// ([`Fuzzer::quiet_events`]).
    fn events(&mut self) {
        self.count(Class::Events);
        let device = self.rng.index(DEVICES);
        match self.rng.below(3) {
            0 if !self.files.is_empty() => {
                let fd = self.files[self.rng.index(self.files.len())].fd;
                let mut mode: u32 = self.rng.pick(&[0, 1, 2, u32::MAX]);
                // SAFETY: METRICS_CTRL reads one u32 from our own variable.
                let ret = unsafe { libc::ioctl(fd, METRICS_CTRL as _, &raw mut mode) };
                let valid = mode <= 1;
                if (ret == 0) != valid || (!valid && errno() != libc::EINVAL) {
                    self.violation(format!(
                        "METRICS_CTRL mode {mode}: {ret}, errno {}",
                        errno()
                    ));
                }
            }
            1 => {
                let Ok(mut stream) = open_posts(&device_path(device)) else {
                    self.violation(format!("opening {} without waiting", device_path(device)));
                };
                let _ = read_available_posts(&mut stream);
                let mut pfd = libc::pollfd {
                    fd: std::os::fd::AsRawFd::as_raw_fd(&stream),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one pollfd, no wait.
                if unsafe { libc::poll(&mut pfd, 1, 0) } < 0 {
                    self.violation(format!("poll of the posts: errno {}", errno()));
                }
            }
            _ => {
                // Taken: off, and numbers of every length up to a day's 8 digits, with every
                // kind of ASCII whitespace around some. Refused: other negative numbers, a
                // sign, text, a vertical tab (not ASCII whitespace), more than a day (the
                // largest 32-bit number among them), a number over 32 bits, 11 digits.
                const TAKEN: [&str; 9] = [
                    "-1",
                    "0",
                    "\t42\t",
                    " 250\n",
                    "\r\n1000\r\n",
                    "\x0c60000\x0c",
                    "600000",
                    "3600000",
                    "86400000",
                ];
                const REFUSED: [&str; 10] = [
                    "\x0b7",
                    "-2",
                    "+5",
                    "x",
                    "12a",
                    "86400001",
                    "123456789",
                    "4294967295",
                    "4294967296",
                    "99999999999",
                ];
                let delay = if self.rng.below(2) == 0 {
                    self.rng.pick(&TAKEN)
                } else {
                    self.rng.pick(&REFUSED)
                };
                let path = format!("{}/info/notify_delay", sysfs_device(device));
                let accepted = fs::write(&path, delay).is_ok();
                if accepted != TAKEN.contains(&delay) {
                    self.violation(format!("{path} took {delay:?}: {accepted}"));
                }
                if accepted {
                    self.notify_delays[device] = Some(delay);
                }
                // A refused value changes nothing: it reads back what it last took.
                let shown = fs::read_to_string(&path);
                if let Some(last) = self.notify_delays[device] {
                    if shown.as_deref().map(str::trim).ok() != Some(last.trim()) {
                        self.violation(format!("{path} reads {shown:?}, not {last:?}"));
                    }
                }
                let total = format!(
                    "{}/neuron_core0/stats/status/success/total",
                    sysfs_device(device)
                );
                if let Ok(file) = fs::File::open(&total) {
                    let mut pfd = libc::pollfd {
                        fd: std::os::fd::AsRawFd::as_raw_fd(&file),
                        events: libc::POLLPRI,
                        revents: 0,
                    };
                    // SAFETY: one pollfd, no wait.
                    unsafe { libc::poll(&mut pfd, 1, 0) };
                }
            }
        }
        self.calls += 1;
    }

    /// Leaves every device posting, with notification off.
    fn quiet_events(&mut self) {
        for device in 0..DEVICES {
            if let Ok(file) = open_device(&device_path(device)) {
                if metrics_ctrl(&file, METRICS_ENABLE).is_err() {
                    self.violation(format!("resuming {}", device_path(device)));
                }
            }
            let path = format!("{}/info/notify_delay", sysfs_device(device));
            if fs::write(&path, "-1").is_err() {
                self.violation(format!("turning {path} off"));
            }
            self.notify_delays[device] = Some("-1");
        }
    }

    /// Reads the device's `core_count` (one time in eight), or a sysfs counter's `total` or
    /// `present` while slabs may be live, or (one time in eight) writes it, which resets it.
    fn sysfs_counter(&mut self) {
        self.count(Class::SysfsCounter);
        let device = self.rng.index(DEVICES);
        let cores = sysfs_core_count(device);
        if self.rng.below(8) == 0 {
            let path = format!("{}/core_count", sysfs_device(device));
            match fs::read_to_string(&path) {
                Ok(text) if text.trim().parse::<usize>() == Ok(cores) => {}
                Ok(text) => self.violation(format!(
                    "{path} holds {text:?}, but the device has {cores} neuron_core directories"
                )),
                Err(e) => self.violation(format!("reading {path}: {e}")),
            }
            self.calls += 1;
            return;
        }
        let core = self.rng.index(cores.max(1));
        let counter = self.rng.pick(&SYSFS_COUNTERS);
        let file = if self.rng.below(2) == 0 {
            "total"
        } else {
            "present"
        };
        let path = format!(
            "{}/neuron_core{core}/stats/{counter}/{file}",
            sysfs_device(device)
        );
        if self.rng.below(8) == 0 {
            if let Err(e) = fs::write(&path, "0\n") {
                self.violation(format!("writing {path}: {e}"));
            }
        } else {
            match fs::read_to_string(&path) {
                Ok(text) if text.trim().parse::<u64>().is_ok() => {}
                Ok(text) => self.violation(format!("{path} holds {text:?}, not a count")),
                Err(e) => self.violation(format!("reading {path}: {e}")),
            }
        }
        self.calls += 1;
    }

    /// Unmaps and closes everything the fuzzer holds.
    fn clean_up(&mut self) {
        for map in self.maps.drain(..) {
            // SAFETY: our own tracked mapping.
            unsafe { libc::munmap(map.addr as *mut _, map.len) };
        }
        for file in self.files.drain(..) {
            // SAFETY: our own descriptor.
            unsafe { libc::close(file.fd) };
        }
    }
}

/// Coverage of the module so far, for the progress lines.
struct Feedback {
    kcov: Collector,
    seen: HashSet<u64>,
    /// Calls at which to print the coverage reached so far.
    next_report: u64,
    report_every: u64,
}

impl Feedback {
    /// Moves what the last step traced into `seen`; returns how many points were new.
    fn absorb(&mut self) -> usize {
        let trace = self.kcov.take_trace();
        let before = self.seen.len();
        self.seen.extend(trace.iter().copied());
        self.kcov.extend(trace);
        self.seen.len() - before
    }

    fn progress(&mut self, calls: u64) {
        if calls >= self.next_report {
            println!(
                "ds-fuzz: {calls} calls: {} module points reached",
                self.seen.len()
            );
            self.next_report += self.report_every;
        }
    }
}

fn main() {
    let mut calls = 20_000u64;
    let mut seed = 0x00F0_22EDu64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse().ok());
        match arg.as_str() {
            "--calls" => calls = value().unwrap_or_else(|| usage()),
            "--seed" => seed = value().unwrap_or_else(|| usage()),
            _ => usage(),
        }
    }
    println!("ds-fuzz: seed {seed} calls {calls}");
    let mut feedback = Collector::from_env("fuzz").map(|kcov| Feedback {
        kcov,
        seen: HashSet::new(),
        next_report: calls / 10,
        report_every: (calls / 10).max(1),
    });
    let mut kernel_log = KernelLog::open().expect("/dev/kmsg");
    let mut fuzzer = Fuzzer::new(seed);
    for device in 0..DEVICES {
        fuzzer.start_helper(device);
    }
    let mut checked = 0;
    while fuzzer.calls < calls {
        fuzzer.step();
        if let Some(feedback) = feedback.as_mut() {
            feedback.absorb();
            feedback.progress(fuzzer.calls);
        }
        if fuzzer.calls - checked >= 1000 {
            checked = fuzzer.calls;
            let complaints = kernel_log.complaints();
            if let Some(first) = complaints.first() {
                fuzzer.violation(format!("kernel complaint: {first}"));
            }
        }
    }
    fuzzer.clean_up();
    fuzzer.stop_helpers();
    let complaints = kernel_log.complaints();
    if let Some(first) = complaints.first() {
        fuzzer.violation(format!("kernel complaint: {first}"));
    }
    println!("\n== fuzz figures (seed {seed})");
    println!("calls                     {}", fuzzer.calls);
    if let Some(feedback) = feedback.as_mut() {
        feedback.absorb();
        println!("module points reached     {}", feedback.seen.len());
        feedback.kcov.save();
    }
    fuzzer.quiet_events();
    for (class, count) in &fuzzer.classes {
        println!("{:<26}{count}", class.to_string());
    }
    // Forked children that ACQUIREd through inherited descriptors and exited without RELEASE
    // still own their slabs until the module reaps them, which it does at every ACQUIRE (and
    // every metrics period): one ACQUIRE per device, so that the check does not race the
    // period.
    for device in 0..DEVICES {
        if let Err(e) = reap_by_acquiring(device) {
            fuzzer.violation(format!("ACQUIRE/RELEASE on {}: {e}", device_path(device)));
        }
    }
    let owned: Vec<(usize, usize, i32)> = (0..DEVICES)
        .flat_map(|d| slots_on(d).into_iter().map(move |r| (d, r)))
        .filter(|(_, r)| r.pid != 0 || r.generation % 2 != 0)
        .map(|(d, r)| (d, r.slot, r.pid))
        .collect();
    println!("slots left owned          {}", owned.len());
    println!("kernel complaints         0");
    if !owned.is_empty() {
        fuzzer.violation(format!(
            "slots left owned after every fuzz process exited: {owned:?}"
        ));
    }
    println!("ds-fuzz: PASS");
}

/// Opens `device`, ACQUIREs this process's slab and RELEASEs it.
fn reap_by_acquiring(device: usize) -> io::Result<()> {
    let file = open_device(&device_path(device))?;
    acquire(&file, 0)?;
    release(&file, 0)?;
    Ok(())
}

fn usage() -> ! {
    eprintln!("usage: ds-fuzz [--calls N] [--seed S]");
    exit(2);
}
