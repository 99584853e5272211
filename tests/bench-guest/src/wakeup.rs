//! Wakeup latency of a reader blocked in `read()`: on the device's metric posts, after the
//! metrics worker posts a period, and on a pipe, after a thread that slept for the same period
//! writes to it. Both wakers stamp `CLOCK_MONOTONIC` just before they wake the reader (the post
//! carries its stamp in `posted_ns`, the pipe carries it as its 8 bytes); the reader subtracts
//! it from its own clock as soon as its `read` returns.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use nds_abi::layout::nc_counter_offset;
use nds_abi::metrics::{MetricPost, METRIC_POST_SIZE};

use super::{check, context, Device, Mapping, Result, DEVICE};

/// Wakeups averaged into one sample.
const WAKEUPS_PER_SAMPLE: u32 = 3;
/// The NC counter bumped before each wait, so that the next period has a delta to post: the
/// success count (`NERR_OK`), index 1.
const SUCCESS_COUNTER: usize = 1;

/// `CLOCK_MONOTONIC` now, in nanoseconds.
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    u64::try_from(now.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(now.tv_nsec).unwrap_or(0)
}

/// The module's metrics period: the binary's argument, the `metrics_period_ms` the module was
/// loaded with (the parameter is not readable in sysfs).
pub(crate) fn metrics_period() -> Result<Duration> {
    let argument = std::env::args().nth(1).unwrap_or_default();
    match argument.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(io::Error::other(format!(
            "usage: nds-bench-guest <metrics_period_ms of the loaded module>, not {argument:?}"
        ))),
    }
}

/// Sets or clears `O_NONBLOCK` on `file`.
fn set_nonblocking(file: &File, nonblocking: bool) -> Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is an open descriptor owned by `file`.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) }, "F_GETFL")?;
    let flags = if nonblocking {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) }, "F_SETFL").map(drop)
}

/// Reads and drops everything `file` has now, without waiting.
fn drain(file: &mut File, buf: &mut [u8]) -> Result<()> {
    set_nonblocking(file, true)?;
    let drained = loop {
        match file.read(buf) {
            Ok(0) => break Ok(()),
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => break Ok(()),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => break context(Err(error), "drain"),
        }
    };
    set_nonblocking(file, false)?;
    drained
}

/// Waits in one blocking `read` of `file`; returns what it read.
fn wait(file: &mut File, buf: &mut [u8], step: &str) -> Result<usize> {
    loop {
        match file.read(buf) {
            Ok(0) => return Err(io::Error::other(format!("{step}: end of file"))),
            Ok(n) => return Ok(n),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return context(Err(error), step),
        }
    }
}

/// The mean of [`WAKEUPS_PER_SAMPLE`] wakeups of `wakeup`, in nanoseconds.
pub(crate) fn sample(mut wakeup: impl FnMut() -> Result<u64>) -> Result<f64> {
    let mut total = 0u64;
    for _ in 0..WAKEUPS_PER_SAMPLE {
        total = total.saturating_add(wakeup()?);
    }
    Ok(total as f64 / f64::from(WAKEUPS_PER_SAMPLE))
}

/// A reader of the device's posts that owns a slab and bumps a counter in it before each wait.
pub(crate) struct PostWaiter {
    device: Device,
    mapping: Mapping,
    posts: File,
    buf: Vec<u8>,
}

impl PostWaiter {
    pub(crate) fn new() -> Result<Self> {
        let device = Device::open()?;
        let offset = device.acquire()?;
        let mapping = Mapping::new(device.0.as_raw_fd(), offset, 0)?;
        let posts = context(OpenOptions::new().read(true).open(DEVICE), DEVICE)?;
        Ok(Self {
            device,
            mapping,
            posts,
            buf: vec![0; 256 * METRIC_POST_SIZE],
        })
    }

    /// One wakeup: nanoseconds from the period's stamp to this reader running again.
    pub(crate) fn wakeup(&mut self) -> Result<u64> {
        drain(&mut self.posts, &mut self.buf)?;
        let offset = nc_counter_offset(0, SUCCESS_COUNTER)
            .map_err(|error| io::Error::other(format!("{error:?}")))?;
        // SAFETY: an aligned u64 inside this process's own writable slab mapping.
        let counter = unsafe {
            &*self
                .mapping
                .0
                .as_ptr()
                .cast::<u8>()
                .add(offset)
                .cast::<AtomicU64>()
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let n = wait(&mut self.posts, &mut self.buf, "read of the posts")?;
        let woke = monotonic_ns();
        if n < METRIC_POST_SIZE {
            return Err(io::Error::other("a read returned less than a post"));
        }
        let at = core::mem::offset_of!(MetricPost, posted_ns);
        let mut stamp = [0u8; 8];
        stamp.copy_from_slice(&self.buf[at..at + 8]);
        Ok(woke.saturating_sub(u64::from_ne_bytes(stamp)))
    }
}

impl Drop for PostWaiter {
    fn drop(&mut self) {
        let _ = self.device.release();
    }
}

/// A reader of a pipe that a thread writes its stamp into every `period`.
pub(crate) struct PipeWaiter {
    read_end: File,
    stop: Arc<AtomicBool>,
    writer: Option<JoinHandle<()>>,
    buf: Vec<u8>,
}

impl PipeWaiter {
    pub(crate) fn new(period: Duration) -> Result<Self> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes its two descriptors into `fds`, which has room for two.
        let created = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        check(created, "pipe2")?;
        // SAFETY: both descriptors were just created and are owned by nothing else.
        let (read_end, mut write_end) =
            unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let writer = thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                thread::sleep(period);
                if write_end.write_all(&monotonic_ns().to_ne_bytes()).is_err() {
                    return;
                }
            }
        });
        Ok(Self {
            read_end,
            stop,
            writer: Some(writer),
            buf: vec![0; 4096],
        })
    }

    /// One wakeup: nanoseconds from the writer's stamp to this reader running again.
    pub(crate) fn wakeup(&mut self) -> Result<u64> {
        drain(&mut self.read_end, &mut self.buf)?;
        let n = wait(&mut self.read_end, &mut self.buf, "read of the pipe")?;
        let woke = monotonic_ns();
        if n < 8 {
            return Err(io::Error::other("a read returned less than a stamp"));
        }
        let mut stamp = [0u8; 8];
        stamp.copy_from_slice(&self.buf[..8]);
        Ok(woke.saturating_sub(u64::from_ne_bytes(stamp)))
    }
}

impl Drop for PipeWaiter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}
