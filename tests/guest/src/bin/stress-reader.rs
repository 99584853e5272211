//! One reader of the stress campaign: `stress-reader DEVICE SEED`.
//!
//! Until its stdin is closed, it picks a random owner from the slot table, attaches to its
//! slab with the nds library (ACQUIRE of that pid, read-only mmap, header check), takes a
//! snapshot (every counter, under the library's generation protocol, then the process-info
//! record, closed by the library's `moved` check) and detaches. A record read while the slab
//! stayed with the tenure attached to must belong to it: its tag names the pid in the owner
//! word and its build field is the generation.
//! Prints `S name=value ...` (see `neuron_ds_guest_tests::stress::ReaderStats`) and exits 1 if
//! any record was inconsistent.

use nds::{Backend, CounterSnapshot, Error, Reader, SlabRead, Snapshot};
use neuron_ds_guest_tests::{
    kcov::Collector,
    rng::Rng,
    slots_on,
    stress::{ReaderStats, OWNER_ND_COUNTER},
};
use std::process::exit;

/// Whether the controller closed our stdin (the signal to stop).
fn told_to_stop() -> bool {
    let mut poll = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polling our own stdin without blocking.
    unsafe { libc::poll(&mut poll, 1, 0) > 0 }
}

/// One attach, snapshot and detach of `pid`'s slab.
fn snapshot(backend: &Backend, pid: i32, stats: &mut ReaderStats) {
    let store = match Reader::open(backend, pid) {
        Ok(store) => store,
        Err(Error::Ioctl { errno, .. }) if errno == libc::ENOENT => {
            stats.gone += 1;
            return;
        }
        Err(Error::BadHeader { .. }) => {
            stats.no_header += 1;
            return;
        }
        Err(error) if error.errno() == libc::EINVAL => {
            stats.stale += 1;
            return;
        }
        Err(error) => {
            eprintln!("stress-reader: attaching to {pid}: {error}");
            stats.mismatches += 1;
            return;
        }
    };
    stats.attached += 1;
    let before = store.attached_generation().unwrap_or(0);
    // The record first: the owner word is written before it, so a later read finds it.
    let record = store.read_process_info().unwrap_or(Snapshot::Torn);
    let mut counters = Box::new(CounterSnapshot::new());
    // A kernel slab found free (even) at attach time reads as moved too.
    let owner = match store.snapshot(&mut counters) {
        SlabRead::Valid(counters) => Some(counters.nd[OWNER_ND_COUNTER]),
        SlabRead::Moved { .. } | SlabRead::Torn => None,
    };
    // Covers the record read too: nothing above belonged to another tenure if it finds none.
    match owner.filter(|_| store.moved().is_none()) {
        None => stats.moved += 1,
        Some(owner) => match record {
            Snapshot::Valid(info) => {
                let tag = String::from_utf8_lossy(info.tag()).into_owned();
                // The owner word is written before the record, in the same tenure.
                if tag != format!("stress-{owner}") || info.runtime_version.build != before as u32 {
                    eprintln!(
                        "stress-reader: record {tag:?} build {} in a slab of owner {owner} \
                         generation {before}",
                        info.runtime_version.build
                    );
                    stats.mismatches += 1;
                } else {
                    stats.valid += 1;
                }
            }
            Snapshot::Empty => stats.empty += 1,
            Snapshot::Torn => stats.torn += 1,
        },
    }
    close(store, pid, stats);
}

fn close(store: Reader, pid: i32, stats: &mut ReaderStats) {
    if let Err(error) = store.close() {
        eprintln!("stress-reader: detaching from {pid}: {error}");
        stats.mismatches += 1;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [device, seed] = &args[..] else {
        eprintln!("usage: stress-reader DEVICE SEED");
        exit(2);
    };
    let device: usize = device.parse().expect("DEVICE");
    let backend = Backend::neuron_device(device as u32);
    let mut rng = Rng::new(seed.parse().expect("SEED"));
    let mut stats = ReaderStats::default();
    let mut kcov = Collector::from_env("stress");
    while !told_to_stop() {
        if let Some(kcov) = kcov.as_mut() {
            kcov.drain();
        }
        let owners: Vec<i32> = slots_on(device)
            .iter()
            .map(|r| r.pid)
            .filter(|p| *p != 0)
            .collect();
        if owners.is_empty() {
            std::thread::yield_now();
            continue;
        }
        snapshot(&backend, rng.pick(&owners), &mut stats);
    }
    if let Some(kcov) = kcov.as_mut() {
        kcov.save();
    }
    print!("{}", stats.line());
    exit(i32::from(stats.mismatches != 0));
}
