//! Coverage of the module's code with KCOV (the `cov` kernel): which instrumentation points
//! of neuron_ds the calling thread reached.
//!
//! KCOV traces one thread: every basic block of instrumented code that thread runs appends the
//! return address of its `__sanitizer_cov_trace_pc` call to a buffer shared with userspace.
//! Only the module is instrumented in the `cov` kernel. A process takes part when the
//! environment names a directory (`NEURON_DS_KCOV_DIR`): [`Collector::from_env`] starts
//! tracing and [`Collector::save`] writes the points reached, as offsets into the module's
//! sections, to a file of its own there. `ds-coverage` adds the files up.
//!
//! The guest test suites take part another way: with `NEURON_DS_KCOV_THREADS` naming the
//! directory, every thread that opens a device, issues an ioctl or reloads the module through
//! this crate's helpers collects ([`follow_thread`]) and saves when it exits ([`end_thread`] for a main
//! thread, whose thread-locals are never dropped).

use std::{
    cell::RefCell,
    collections::{BTreeMap, HashSet},
    fs,
    io::{self, Write},
    ptr::NonNull,
    sync::atomic::{AtomicU64, Ordering},
};

/// The environment variable naming the directory coverage files go to.
pub const DIR_VAR: &str = "NEURON_DS_KCOV_DIR";
/// The environment variable naming the directory the followed threads' files go to.
pub const THREADS_VAR: &str = "NEURON_DS_KCOV_THREADS";
/// `KCOV_INIT_TRACE`: `_IOR('c', 1, unsigned long)`.
const KCOV_INIT_TRACE: u32 = 0x8008_6301;
/// `KCOV_ENABLE`: `_IO('c', 100)`.
const KCOV_ENABLE: u32 = 0x6364;
/// `KCOV_DISABLE`: `_IO('c', 101)`.
const KCOV_DISABLE: u32 = 0x6365;
/// `KCOV_REMOTE_ENABLE`: `_IOW('c', 102, struct kcov_remote_arg)`, 24 bytes without handles.
const KCOV_REMOTE_ENABLE: u32 = 0x4018_6366;
/// Words each worker run may trace before its points are appended to the buffer.
const REMOTE_WORDS: u32 = 1 << 16;
/// `KCOV_TRACE_PC`: collect program counters (not comparison operands).
const KCOV_TRACE_PC: usize = 0;
/// Words in the buffer: one call of a module entry point reaches a few hundred points, and
/// the buffer is drained after every call.
const WORDS: usize = 1 << 18;
/// Executable sections of a module, where instrumentation points live.
pub const CODE_SECTIONS: [&str; 3] = [".text", ".init.text", ".exit.text"];

/// Start addresses of the module's code sections while it is loaded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sections(BTreeMap<u64, String>);

impl Sections {
    /// The sections of the loaded module `module` (empty if it is not loaded).
    pub fn of(module: &str) -> Self {
        let mut map = BTreeMap::new();
        for name in CODE_SECTIONS {
            let path = format!("/sys/module/{module}/sections/{name}");
            if let Some(start) = fs::read_to_string(path)
                .ok()
                .and_then(|t| u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok())
            {
                map.insert(start, name.to_owned());
            }
        }
        Self(map)
    }

    /// Whether the module was loaded when these were read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The start of `.text`, if known.
    pub fn text(&self) -> Option<u64> {
        self.0
            .iter()
            .find(|(_, name)| name.as_str() == ".text")
            .map(|(start, _)| *start)
    }

    /// The section `pc` falls in (the one starting last at or before it) and its offset.
    pub fn locate(&self, pc: u64) -> Option<(&str, u64)> {
        let (start, name) = self.0.range(..=pc).next_back()?;
        Some((name.as_str(), pc - start))
    }
}

/// What a [`Collector`] traces.
#[derive(Clone, Copy)]
enum Enable {
    /// The calling thread.
    Thread,
    /// The work kernel threads do under this common handle.
    Remote(u32),
}

/// `struct kcov_remote_arg` without handles: only the common handle is used.
#[repr(C)]
struct RemoteArg {
    trace_mode: u32,
    area_size: u32,
    num_handles: u32,
    common_handle: u64,
}
const _: () = assert!(core::mem::size_of::<RemoteArg>() == 24);

/// The coverage of the calling thread, or of the kernel work done on its tasks' behalf.
pub struct Collector {
    fd: i32,
    area: NonNull<AtomicU64>,
    /// Remote coverage: the kernel appends a worker's points when its run ends, so the buffer
    /// is read from where the last drain stopped instead of being emptied under it.
    remote: bool,
    /// Entries of a remote buffer already read.
    read: usize,
    pcs: HashSet<u64>,
    sections: Sections,
    dir: String,
    tag: String,
    /// Failed loads saved so far, each to a file of its own.
    failed_loads: u32,
}

impl Collector {
    /// Starts collecting for the calling thread if `NEURON_DS_KCOV_DIR` is set; `tag` names
    /// its file (the pid and thread id are added).
    pub fn from_env(tag: &str) -> Option<Self> {
        let dir = std::env::var(DIR_VAR).ok()?;
        match Self::start(&dir, tag) {
            Ok(collector) => Some(collector),
            Err(e) => {
                eprintln!("kcov: cannot collect coverage: {e}");
                std::process::exit(4);
            }
        }
    }

    /// Starts collecting for the calling thread into directory `dir`.
    pub fn start(dir: &str, tag: &str) -> io::Result<Self> {
        Self::open(dir, tag, Enable::Thread)
    }

    /// Starts collecting what kernel workers run on behalf of the calling thread and of every
    /// task it creates from now on (they inherit `handle`, a nonzero 32-bit number unique to
    /// this session), into directory `dir`. The module's workers report to the handle of the
    /// last task that acquired or released a slab; the points arrive when a worker's run ends.
    pub fn start_remote(dir: &str, tag: &str, handle: u32) -> io::Result<Self> {
        Self::open(dir, tag, Enable::Remote(handle))
    }

    fn open(dir: &str, tag: &str, enable: Enable) -> io::Result<Self> {
        let os_error = || io::Error::last_os_error();
        // SAFETY: opening, sizing and mapping the calling thread's own KCOV buffer; the
        // mapping is owned by the returned value and unmapped in `Drop`.
        unsafe {
            let fd = libc::open(
                c"/sys/kernel/debug/kcov".as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC,
            );
            if fd < 0 {
                return Err(os_error());
            }
            if libc::ioctl(fd, KCOV_INIT_TRACE as libc::Ioctl, WORDS) != 0 {
                let e = os_error();
                libc::close(fd);
                return Err(e);
            }
            let area = libc::mmap(
                std::ptr::null_mut(),
                WORDS * 8,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            if area == libc::MAP_FAILED {
                let e = os_error();
                libc::close(fd);
                return Err(e);
            }
            let enabled = match enable {
                Enable::Thread => libc::ioctl(fd, KCOV_ENABLE as libc::Ioctl, KCOV_TRACE_PC),
                Enable::Remote(handle) => {
                    let arg = RemoteArg {
                        trace_mode: KCOV_TRACE_PC as u32,
                        area_size: REMOTE_WORDS,
                        num_handles: 0,
                        common_handle: u64::from(handle),
                    };
                    libc::ioctl(fd, KCOV_REMOTE_ENABLE as libc::Ioctl, &arg)
                }
            };
            if enabled != 0 {
                let e = os_error();
                libc::munmap(area, WORDS * 8);
                libc::close(fd);
                return Err(e);
            }
            let area = NonNull::new(area.cast::<AtomicU64>()).expect("mmap returned NULL");
            area.as_ref().store(0, Ordering::Relaxed);
            Ok(Self {
                fd,
                area,
                remote: matches!(enable, Enable::Remote(_)),
                read: 0,
                pcs: HashSet::new(),
                sections: Sections::of("neuron_ds"),
                dir: dir.to_owned(),
                tag: tag.to_owned(),
                failed_loads: 0,
            })
        }
    }

    fn word(&self, index: usize) -> &AtomicU64 {
        assert!(index < WORDS);
        // SAFETY: `index` is inside the mapping, which lives as long as `self`; the kernel
        // writes it concurrently, so it is only read through atomics.
        unsafe { self.area.add(index).as_ref() }
    }

    /// Moves the points traced since the last drain into the set, and empties the buffer;
    /// returns how many of them were new.
    pub fn drain(&mut self) -> usize {
        let count = (self.word(0).load(Ordering::Acquire) as usize).min(WORDS - 1);
        let before = self.pcs.len();
        let first = if self.remote { self.read + 1 } else { 1 };
        for index in first..=count {
            let pc = self.word(index).load(Ordering::Relaxed);
            self.pcs.insert(pc);
        }
        // A remote buffer is emptied only once half full: a worker appending at that moment
        // may lose its points, and a run that reaches nothing new is the common case.
        if !self.remote || count > WORDS / 2 {
            self.word(0).store(0, Ordering::Relaxed);
            self.read = 0;
        } else {
            self.read = count;
        }
        self.pcs.len() - before
    }

    /// The points traced since the last drain, emptying the buffer (not added to the set).
    pub fn take_trace(&mut self) -> Vec<u64> {
        let count = (self.word(0).load(Ordering::Relaxed) as usize).min(WORDS - 1);
        let trace = (1..=count)
            .map(|index| self.word(index).load(Ordering::Relaxed))
            .collect();
        self.word(0).store(0, Ordering::Relaxed);
        trace
    }

    /// Every distinct point drained so far.
    pub fn pcs(&self) -> &HashSet<u64> {
        &self.pcs
    }

    /// Adds points collected elsewhere (e.g. taken with [`Collector::take_trace`]).
    pub fn extend(&mut self, pcs: impl IntoIterator<Item = u64>) {
        self.pcs.extend(pcs);
    }

    /// The module was (re)loaded, or is gone: later points are located in its sections now
    /// (a point of a module that is gone is saved as its address, `? <pc>`).
    pub fn refresh_sections(&mut self) {
        let sections = Sections::of("neuron_ds");
        if sections != self.sections {
            self.save_as_of_now();
            self.sections = sections;
        }
    }

    /// This thread just loaded the module, or tried to: the points drained since the last save
    /// are its `init`'s (the caller saved before the load), located in the sections of the
    /// module loaded now (`.init.text` keeps its address after init), or, if the load failed,
    /// saved as addresses to a file of their own, `<tag>-load<n>`, since the code was somewhere
    /// else each time (ds-coverage places each file's addresses on one set of sections).
    pub fn loaded(&mut self) {
        self.drain();
        self.sections = Sections::of("neuron_ds");
        if !self.sections.is_empty() {
            self.save_as_of_now();
            return;
        }
        self.failed_loads += 1;
        let load_tag = format!("{}-load{}", self.tag, self.failed_loads);
        let tag = std::mem::replace(&mut self.tag, load_tag);
        self.save_as_of_now();
        self.tag = tag;
    }

    /// Writes the points drained so far (draining first) to the file of tag `tag`, which later
    /// saves use too: a thread that loads the module several times keeps each load's points
    /// apart (a thread's KCOV stays enabled until it exits, so it cannot start a second
    /// collector).
    pub fn save_as(&mut self, tag: &str) {
        tag.clone_into(&mut self.tag);
        self.save();
    }

    /// Writes the points drained so far (draining first) to this collector's file.
    pub fn save(&mut self) {
        self.drain();
        self.save_as_of_now();
    }

    fn save_as_of_now(&mut self) {
        if self.pcs.is_empty() {
            return;
        }
        let mut text = String::new();
        for pc in self.pcs.drain() {
            match self.sections.locate(pc) {
                Some((section, offset)) => text.push_str(&format!("{section} {offset:x}\n")),
                None => text.push_str(&format!("? {pc:x}\n")),
            }
        }
        // SAFETY: plain system calls.
        let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
        let path = format!("{}/{}-{pid}-{tid}.cov", self.dir, self.tag);
        let written = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(text.as_bytes()));
        if let Err(e) = written {
            eprintln!("kcov: {path}: {e}");
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        // Closing alone leaves the task attached to the buffer until it exits, so that an
        // exec'd image could not start its own (EBUSY). Disabling works only from the task
        // that enabled it, where collectors are dropped; elsewhere it fails harmlessly.
        // SAFETY: our own mapping and descriptor, released once.
        unsafe {
            libc::ioctl(self.fd, KCOV_DISABLE as libc::Ioctl, 0);
            libc::munmap(self.area.as_ptr().cast(), WORDS * 8);
            libc::close(self.fd);
        }
    }
}

/// What following the calling thread came to.
enum Followed {
    Collecting(Collector),
    /// The variable is not set, or KCOV could not be opened for this thread (said once).
    Not,
}

impl Drop for Followed {
    fn drop(&mut self) {
        if let Followed::Collecting(collector) = self {
            collector.save();
        }
    }
}

thread_local! {
    static FOLLOWED: RefCell<Option<Followed>> = const { RefCell::new(None) };
}

/// With `NEURON_DS_KCOV_THREADS` set, starts collecting for the calling thread the first
/// time, and drains its buffer (which holds every point passed, not every distinct one) the
/// next times, so that a long test does not fill it. The file is tagged with the program's
/// name.
pub fn follow_thread() {
    FOLLOWED.with_borrow_mut(|followed| match followed {
        Some(Followed::Collecting(collector)) => {
            collector.drain();
        }
        Some(Followed::Not) => {}
        None => {
            let Ok(dir) = std::env::var(THREADS_VAR) else {
                *followed = Some(Followed::Not);
                return;
            };
            let program = std::env::current_exe()
                .ok()
                .and_then(|path| path.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "guest".to_owned());
            *followed = Some(match Collector::start(&dir, &program) {
                Ok(collector) => Followed::Collecting(collector),
                Err(e) => {
                    eprintln!("kcov: not following this thread of {program}: {e}");
                    Followed::Not
                }
            });
        }
    });
}

/// The module was unloaded or loaded by the calling thread (a test that reloads it): what its
/// followed collector reached so far is kept with the sections it ran in, and later points
/// are located in the module loaded now (which may sit elsewhere).
pub fn module_replaced() {
    FOLLOWED.with_borrow_mut(|followed| {
        if let Some(Followed::Collecting(collector)) = followed {
            collector.drain();
            collector.refresh_sections();
        }
    });
}

/// Runs `load` (a load of the module by the calling thread) with the thread followed, and
/// keeps what the module's `init` reached apart ([`Collector::loaded`]).
pub fn following_load<R>(load: impl FnOnce() -> R) -> R {
    follow_thread();
    FOLLOWED.with_borrow_mut(|followed| {
        if let Some(Followed::Collecting(collector)) = followed {
            collector.refresh_sections();
            collector.save();
        }
    });
    let result = load();
    FOLLOWED.with_borrow_mut(|followed| {
        if let Some(Followed::Collecting(collector)) = followed {
            collector.loaded();
        }
    });
    result
}

/// Saves what the calling thread reached since [`follow_thread`] started, if it did, and
/// stops following it (before an exec, whose image follows itself, or at a main thread's
/// end); a later [`follow_thread`] starts again.
pub fn end_thread() {
    FOLLOWED.with_borrow_mut(|followed| {
        followed.take();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_located_in_the_section_that_starts_last_before_them() {
        let sections = Sections(BTreeMap::from([
            (0x1000, ".text".to_owned()),
            (0x9000, ".exit.text".to_owned()),
        ]));
        assert_eq!(sections.locate(0x1005), Some((".text", 5)));
        assert_eq!(sections.locate(0x9010), Some((".exit.text", 0x10)));
        assert_eq!(sections.locate(0xfff), None);
        assert_eq!(sections.text(), Some(0x1000));
    }
}
