//! Slab files that shrink under their mapping.
//!
//! A slab file is mapped; if its owner (or anyone who may write the file) truncates it, the
//! kernel answers every later access to the vanished pages with SIGBUS, whose default action
//! kills the process. A monitor reading files that other users write must survive that, so
//! every file mapping is registered here, and a SIGBUS handler, installed with the first
//! registration, replaces the vanished pages of a registered mapping with anonymous zero pages
//! and lets the access run again: the slab then reads as zeros from the faulting page on, which
//! the slab's own checks (header, generation, record hashes) and the caller's look at the file
//! treat as the end of that slab. A SIGBUS at any other address goes to the handler that was
//! installed before (Rust's own stack-overflow handler, or the default action).
//!
//! The registry is a list of fixed-size chunks of atomics that only grows (up to the largest
//! number of file mappings open at once), so the handler reads it without locks or allocation;
//! it calls only `mmap`, `sigaction` and the previous handler.

use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

/// Mappings per chunk of the registry.
const CHUNK_LEN: usize = 64;

/// One registered mapping; `start == 0` marks a free entry.
struct Entry {
    start: AtomicUsize,
    end: AtomicUsize,
    writable: AtomicBool,
    truncated: AtomicBool,
}

impl Entry {
    const fn new() -> Self {
        Self {
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            writable: AtomicBool::new(false),
            truncated: AtomicBool::new(false),
        }
    }
}

struct Chunk {
    entries: [Entry; CHUNK_LEN],
    next: AtomicPtr<Chunk>,
}

impl Chunk {
    const fn new() -> Self {
        Self {
            entries: [const { Entry::new() }; CHUNK_LEN],
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

static FIRST: Chunk = Chunk::new();
static INSTALL: Once = Once::new();
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(4096);

/// The SIGBUS disposition found when the handler was installed; written once inside
/// [`INSTALL`], before the handler can run, and only read after.
struct Previous(std::cell::UnsafeCell<MaybeUninit<libc::sigaction>>);

// SAFETY: written once under `INSTALL` before any reader can exist, read-only afterwards.
unsafe impl Sync for Previous {}

static PREVIOUS: Previous = Previous(std::cell::UnsafeCell::new(MaybeUninit::zeroed()));

/// Every entry of the registry, chunk after chunk.
fn entries() -> impl Iterator<Item = &'static Entry> {
    let mut chunk: Option<&'static Chunk> = Some(&FIRST);
    std::iter::from_fn(move || {
        let current = chunk?;
        let next = current.next.load(Ordering::Acquire);
        // SAFETY: chunks are leaked boxes, never freed, published with Release below.
        chunk = unsafe { next.as_ref() };
        Some(current)
    })
    .flat_map(|chunk| chunk.entries.iter())
}

/// A registered file mapping; dropping it unregisters the range (before it is unmapped).
#[derive(Debug)]
pub(crate) struct TruncationGuard {
    entry: &'static Entry,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("start", &self.start.load(Ordering::Relaxed))
            .field("end", &self.end.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl TruncationGuard {
    /// Registers the mapping `base..base + len` (writable or not), installing the handler on
    /// first use.
    pub(crate) fn register(base: *const u8, len: usize, writable: bool) -> Self {
        INSTALL.call_once(install);
        let start = base as usize;
        let entry = loop {
            let free = entries().find(|entry| {
                entry
                    .start
                    .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            });
            match free {
                Some(entry) => break entry,
                None => append_chunk(),
            }
        };
        entry.truncated.store(false, Ordering::Relaxed);
        entry.writable.store(writable, Ordering::Relaxed);
        entry
            .end
            .store(start.saturating_add(len), Ordering::Relaxed);
        // Publishes the range: the handler matches only entries whose start is a real address.
        entry.start.store(start, Ordering::Release);
        Self { entry }
    }

    /// Whether a SIGBUS was caught in this mapping: the file shrank under it.
    pub(crate) fn truncated(&self) -> bool {
        self.entry.truncated.load(Ordering::Acquire)
    }
}

impl Drop for TruncationGuard {
    fn drop(&mut self) {
        self.entry.end.store(0, Ordering::Relaxed);
        self.entry.start.store(0, Ordering::Release);
    }
}

/// Adds an empty chunk at the end of the registry.
fn append_chunk() {
    let fresh = Box::into_raw(Box::new(Chunk::new()));
    let mut last: &'static Chunk = &FIRST;
    loop {
        match last.next.compare_exchange(
            ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return,
            // SAFETY: as in `entries`: a published chunk is never freed.
            Err(next) => last = unsafe { &*next },
        }
    }
}

fn install() {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if let Ok(page) = usize::try_from(page) {
        if page.is_power_of_two() {
            PAGE_SIZE.store(page, Ordering::Relaxed);
        }
    }
    // SAFETY: a zeroed sigaction is a valid value; the handler has the SA_SIGINFO signature;
    // PREVIOUS is written here, once, before the new handler is installed.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as SigInfoHandler as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
        libc::sigemptyset(&mut action.sa_mask);
        let previous = (*PREVIOUS.0.get()).as_mut_ptr();
        libc::sigaction(libc::SIGBUS, &action, previous);
    }
}

/// A handler installed with `SA_SIGINFO`.
type SigInfoHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let address = unsafe { (*info).si_addr() } as usize;
    let owner = entries().find(|entry| {
        let start = entry.start.load(Ordering::Acquire);
        start != 0
            && start != usize::MAX
            && (start..entry.end.load(Ordering::Relaxed)).contains(&address)
    });
    if let Some(entry) = owner {
        let page = address & !(PAGE_SIZE.load(Ordering::Relaxed) - 1);
        let end = entry.end.load(Ordering::Relaxed);
        let protection = if entry.writable.load(Ordering::Relaxed) {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: page..end lies inside a mapping this crate owns (it is registered), so
        // replacing it with anonymous memory affects only that slab's view, which is unmapped
        // as a whole when the handle closes.
        let replaced = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                end - page,
                protection,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if replaced != libc::MAP_FAILED {
            entry.truncated.store(true, Ordering::Release);
            return;
        }
    }
    // SAFETY: PREVIOUS was written before this handler was installed.
    let previous = unsafe { (*PREVIOUS.0.get()).assume_init_ref() };
    chain(previous, signal, info, context);
}

/// Hands a SIGBUS that is not ours to the disposition found at installation.
fn chain(
    previous: &libc::sigaction,
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Back to the default action; returning re-runs the access, which now kills the
        // process as it would have without this module (an ignored SIGBUS would loop forever).
        // SAFETY: a zeroed sigaction with SIG_DFL is valid.
        unsafe {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signal, &default, ptr::null_mut());
        }
    } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous disposition was installed with this signature.
        let function: SigInfoHandler = unsafe { std::mem::transmute(handler) };
        function(signal, info, context);
    } else {
        // SAFETY: a handler without SA_SIGINFO takes the signal number only.
        let function: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        function(signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_reused_and_the_registry_grows() {
        let base = 0x1000_0000usize as *const u8;
        let guards: Vec<TruncationGuard> = (0..CHUNK_LEN + 3)
            .map(|index| TruncationGuard::register(base.wrapping_add(index * 8192), 4096, false))
            .collect();
        assert!(
            !FIRST.next.load(Ordering::Acquire).is_null(),
            "a second chunk"
        );
        let registered = entries()
            .filter(|entry| {
                let start = entry.start.load(Ordering::Acquire);
                (0x1000_0000..0x2000_0000).contains(&start)
            })
            .count();
        assert_eq!(registered, CHUNK_LEN + 3);
        drop(guards);
        let left = entries()
            .filter(|entry| {
                (0x1000_0000..0x2000_0000).contains(&entry.start.load(Ordering::Acquire))
            })
            .count();
        assert_eq!(left, 0);
    }
}
