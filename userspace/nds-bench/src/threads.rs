//! Two-thread runs, CPU pinning, and the producer that hammers a slab while it is read.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nds::{Backend, Producer};
use nds_abi::counters::{NDS_ND_COUNTER_COUNT, NDS_TOTAL_NC_COUNTER_COUNT};
use nds_abi::layout::NDS_TOTAL_NEURONCORE_COUNT;

/// The CPU the measuring thread runs on.
pub const MEASURING_CPU: usize = 0;
/// The CPU of the second lane and of the hammering producer: the other core.
pub const OTHER_CPU: usize = 1;

/// Pins the calling thread to `cpu`.
///
/// # Errors
///
/// When the CPU does not exist or the affinity cannot be set.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: `cpu_set_t` is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `cpu` is within the set, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is a valid set of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Runs `lane0` on the calling thread and `lane1` on a thread pinned to [`OTHER_CPU`], each
/// `iters` times, started together; returns the wall time until both are done.
///
/// Divided by `iters`, that is the cost of one operation while the other CPU does the same.
///
/// # Panics
///
/// If `lane1` panics.
pub fn run_pair<A, B>(iters: u64, lane0: A, lane1: B) -> Duration
where
    A: Fn(),
    B: Fn() + Sync,
{
    let start_line = Barrier::new(2);
    thread::scope(|scope| {
        let other = scope.spawn(|| {
            // Without a second CPU the lanes simply share one; the run still completes.
            let _ = pin_to_cpu(OTHER_CPU);
            start_line.wait();
            for _ in 0..iters {
                lane1();
            }
        });
        start_line.wait();
        let start = Instant::now();
        for _ in 0..iters {
            lane0();
        }
        other.join().expect("the second lane panicked");
        start.elapsed()
    })
}

/// A producer thread, pinned to [`OTHER_CPU`], that increments every counter of a slab in turn
/// as fast as it can until dropped.
#[derive(Debug)]
pub struct Hammer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<nds::Result<u64>>>,
}

impl Hammer {
    /// Opens the slab file at `path` as its producer and starts hammering.
    ///
    /// # Errors
    ///
    /// Those of [`Producer::open`].
    pub fn start(path: &Path) -> nds::Result<Self> {
        let producer = Producer::open(&Backend::file(path))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            let _ = pin_to_cpu(OTHER_CPU);
            let mut sweeps = 0;
            while !flag.load(Ordering::Relaxed) {
                for index in 0..NDS_ND_COUNTER_COUNT {
                    producer.increment_nd_counter(index, 1)?;
                }
                for core in 0..NDS_TOTAL_NEURONCORE_COUNT {
                    for index in 0..NDS_TOTAL_NC_COUNTER_COUNT {
                        producer.increment_nc_counter(core, index, 1)?;
                    }
                }
                sweeps += 1;
            }
            Ok(sweeps)
        });
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the producer and returns how many full sweeps over the counters it made.
    ///
    /// # Errors
    ///
    /// An increment that failed in the producer.
    ///
    /// # Panics
    ///
    /// If the producer thread panicked.
    pub fn stop(mut self) -> nds::Result<u64> {
        self.finish().unwrap_or(Ok(0))
    }

    fn finish(&mut self) -> Option<nds::Result<u64>> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take()?;
        Some(thread.join().expect("the hammering producer panicked"))
    }
}

impl Drop for Hammer {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;
    use crate::counters::Counter;
    use crate::slab::ScratchSlab;

    #[test]
    fn both_lanes_run_every_iteration() {
        let lane0 = AtomicU64::new(0);
        let lane1 = AtomicU64::new(0);
        run_pair(
            1000,
            || {
                lane0.fetch_add(1, Ordering::Relaxed);
            },
            || {
                lane1.fetch_add(1, Ordering::Relaxed);
            },
        );
        assert_eq!(lane0.into_inner(), 1000);
        assert_eq!(lane1.into_inner(), 1000);
    }

    #[test]
    fn the_hammer_sweeps_every_counter_until_stopped() {
        let slab = ScratchSlab::new("unit-hammer").unwrap();
        let reader = {
            let _producer = slab.producer().unwrap();
            slab.reader().unwrap()
        };
        let hammer = Hammer::start(&slab.path()).unwrap();
        let last = Counter::Nc {
            core: 15,
            index: 94,
        };
        while last.read(&reader).unwrap() == 0 {
            thread::yield_now();
        }
        let sweeps = hammer.stop().unwrap();
        assert!(sweeps >= 1);
        assert_eq!(Counter::Nd(0).read(&reader).unwrap(), sweeps);
        assert_eq!(last.read(&reader).unwrap(), sweeps);
    }
}
