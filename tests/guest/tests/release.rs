//! What owners leave behind: every counter lands in the sysfs totals exactly once, whether
//! the owner released, exited or was killed.

use neuron_ds_guest_tests::*;
use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

fn success(core: usize) -> u64 {
    sysfs_counter(core, "status", "success", "total")
}

#[test]
fn totals_equal_what_producers_wrote_however_they_ended() {
    let before = [success(0), success(1)];
    let flops_before = sysfs_counter(1, "other_info", "flop_count", "total");
    let hbm_before = sysfs_counter(0, "status", "hw_repairable_hbm_ue_error", "total");
    let released = Producer::start(DEVICE, &[(0, 1, 10), (1, 1, 1), (1, 29, 50)]).unwrap();
    let exited = Producer::start(DEVICE, &[(0, 1, 200), (0, 40, 3)]).unwrap();
    let killed = Producer::start(DEVICE, &[(0, 1, 3000), (1, 1, 7), (1, 29, 4)]).unwrap();
    // Live totals: what running owners counted is already part of the total.
    assert_eq!(success(0), before[0] + 3210);
    released.release_and_exit();
    exited.exit();
    killed.kill();
    assert_eq!(success(0), before[0] + 3210);
    assert_eq!(success(1), before[1] + 8);
    assert_eq!(
        sysfs_counter(1, "other_info", "flop_count", "total"),
        flops_before + 2 * 54
    );
    assert_eq!(
        sysfs_counter(0, "status", "hw_repairable_hbm_ue_error", "total"),
        hbm_before + 3
    );
    assert_eq!(
        slots().iter().filter(|r| r.pid != 0).count(),
        0,
        "no slot left owned"
    );
}

#[test]
fn present_is_the_last_release_and_writing_a_file_zeroes_the_counter() {
    let producer = Producer::start(DEVICE, &[(1, 4, 6)]).unwrap();
    producer.exit();
    assert_eq!(sysfs_counter(1, "status", "timeout", "present"), 6);
    let path = format!(
        "{}/neuron_core1/stats/status/timeout/total",
        sysfs_device(0)
    );
    std::fs::write(&path, "0\n").unwrap();
    assert_eq!(sysfs_counter(1, "status", "timeout", "total"), 0);
    assert_eq!(sysfs_counter(1, "status", "timeout", "present"), 0);
}

#[test]
fn a_killed_owner_frees_its_slot_and_zeroes_its_slab() {
    let producer = Producer::start(DEVICE, &[(0, 1, 1)]).unwrap();
    let slot = offset_slot(producer.offset);
    let pid = producer.pid;
    assert_eq!(slots()[slot].pid, pid);
    producer.kill();
    let row = slots()[slot];
    assert_eq!(row.pid, 0);
    assert_eq!(row.generation % 2, 0);
    assert!(row.clear_tick > 0);
}

/// A release copies the slab's final counters before it takes the device lock, so a sysfs read
/// can come between the copy and the move into the totals: it must still count the slab once,
/// as live, never twice and never not at all.
#[test]
fn a_total_read_during_releases_counts_each_slab_exactly_once() {
    const CYCLES: u64 = 300;
    const ADDED: u64 = 7;
    let before = success(0);
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !done.load(Ordering::Relaxed) {
                seen.push(success(0));
            }
            seen
        })
    };
    // One thread group acquires and releases again and again: each release is a full one. The
    // file is opened here, as the child may not allocate (the reader thread may hold the
    // allocator's lock when it forks).
    let file = open_device(DEVICE).unwrap();
    let status = in_child(|| {
        for _ in 0..CYCLES {
            let Ok(info) = acquire(&file, 0) else {
                return 2;
            };
            let Ok(slab) = Mapping::new(
                &file,
                SLAB_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                info.mmap_offset,
            ) else {
                return 3;
            };
            slab.atomic_u64(nc_offset(0, 1))
                .fetch_add(ADDED, Ordering::Relaxed);
            drop(slab);
            if release(&file, 0).is_err() {
                return 4;
            }
        }
        0
    });
    done.store(true, Ordering::Relaxed);
    let seen = reader.join().unwrap();
    assert_eq!(status, 0, "the owner failed (wait status {status})");
    assert!(
        seen.len() > 10,
        "only {} reads during the releases",
        seen.len()
    );
    for pair in seen.windows(2) {
        assert!(pair[0] <= pair[1], "the total went back: {pair:?}");
    }
    let most = before + CYCLES * ADDED;
    assert!(
        seen.iter().all(|total| (before..=most).contains(total)),
        "a total outside {before}..={most}: {:?}",
        seen.iter().find(|total| !(before..=most).contains(*total))
    );
    assert_eq!(success(0), most);
}
