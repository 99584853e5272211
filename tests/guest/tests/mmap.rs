//! mmap of slabs: exact length and granted offsets only, writable for the owner alone.

use neuron_ds_guest_tests::*;
use std::{
    io,
    sync::atomic::Ordering::{Acquire, Relaxed},
};

const RW: i32 = libc::PROT_READ | libc::PROT_WRITE;

#[test]
fn the_owner_maps_its_slab_writable_and_a_reader_sees_the_writes() {
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, 0).unwrap();
    let owner = Mapping::new(&file, SLAB_SIZE, RW, info.mmap_offset).unwrap();
    owner.write_u64(nc_offset(1, 1), 1234);
    let reader_file = open_device(DEVICE).unwrap();
    let producer = Producer::start(DEVICE, &[(0, 1, 77), (5, 40, 9)]).unwrap();
    let read = acquire(&reader_file, producer.pid).unwrap();
    let view = Mapping::new(&reader_file, SLAB_SIZE, libc::PROT_READ, read.mmap_offset).unwrap();
    assert_eq!(view.read_u64(nc_offset(0, 1)), 77);
    assert_eq!(view.read_u64(nc_offset(5, 40)), 9);
    assert_eq!(owner.read_u64(nc_offset(1, 1)), 1234);
    producer.exit();
}

#[test]
fn wrong_lengths_and_offsets_are_einval() {
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, 0).unwrap();
    for len in [4096, SLAB_SIZE - 4096, SLAB_SIZE + 4096, 2 * SLAB_SIZE] {
        assert_eq!(
            errno(Mapping::new(&file, len, RW, info.mmap_offset)),
            libc::EINVAL,
            "len {len}"
        );
    }
    let slot = offset_slot(info.mmap_offset);
    let other_slot = slab_offset(0, (slot + 1) % SLOTS, true);
    for offset in [
        info.mmap_offset + 4096,
        other_slot,
        1 << 40,
        slab_offset(1, slot, true),
    ] {
        assert_eq!(
            errno(Mapping::new(&file, SLAB_SIZE, RW, offset)),
            libc::EINVAL,
            "offset {offset:#x}"
        );
    }
    // A file that never acquired anything may map nothing, not even a real slab's offset.
    let stranger = open_device(DEVICE).unwrap();
    assert_eq!(
        errno(Mapping::new(
            &stranger,
            SLAB_SIZE,
            libc::PROT_READ,
            info.mmap_offset
        )),
        libc::EINVAL
    );
}

#[test]
fn a_reader_cannot_map_writable_or_make_its_mapping_writable() {
    let producer = Producer::start(DEVICE, &[]).unwrap();
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, producer.pid).unwrap();
    // A writable request is granted read-only (strict_reader_mappings=1 refuses it instead:
    // see the parameters tests).
    let asked_writable = Mapping::new(&file, SLAB_SIZE, RW, info.mmap_offset).unwrap();
    assert_eq!(asked_writable.permissions(), "r--s");
    assert_eq!(errno(asked_writable.protect(RW)), libc::EACCES);
    // The owner's window of the slab is not the reader's to map.
    let slot = offset_slot(info.mmap_offset);
    assert_eq!(
        errno(Mapping::new(
            &file,
            SLAB_SIZE,
            libc::PROT_READ,
            slab_offset(0, slot, true)
        )),
        libc::EINVAL
    );
    let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset).unwrap();
    assert_eq!(errno(view.protect(RW)), libc::EACCES);
    assert_eq!(
        errno(view.protect(libc::PROT_READ | libc::PROT_EXEC)),
        libc::EACCES
    );
    producer.exit();
}

#[test]
fn a_readers_write_through_its_mapping_faults() {
    let producer = Producer::start(DEVICE, &[(0, 1, 5)]).unwrap();
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, producer.pid).unwrap();
    let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset).unwrap();
    // The mapping is not inherited (VM_DONTCOPY), so the child maps it itself, then writes.
    let status = in_child(|| {
        let child_view = match Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset) {
            Ok(view) => view,
            Err(_) => return 3,
        };
        // SAFETY: deliberately writing to a read-only mapping; the kernel must fault.
        unsafe {
            child_view
                .addr()
                .add(nc_offset(0, 1))
                .cast::<u64>()
                .write_volatile(666)
        };
        4
    });
    assert!(libc::WIFSIGNALED(status), "status {status:#x}");
    assert_eq!(libc::WTERMSIG(status), libc::SIGSEGV);
    assert_eq!(
        view.read_u64(nc_offset(0, 1)),
        5,
        "the producer's counter is untouched"
    );
    producer.exit();
}

#[test]
fn a_mapping_is_not_inherited_across_fork() {
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, 0).unwrap();
    let owner = Mapping::new(&file, SLAB_SIZE, RW, info.mmap_offset).unwrap();
    let addr = owner.addr() as usize;
    let status = in_child(|| {
        // SAFETY: probing whether the page exists in the child with mincore-like msync.
        let ret = unsafe { libc::msync(addr as *mut libc::c_void, 4096, libc::MS_ASYNC) };
        if ret == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOMEM) {
            0
        } else {
            1
        }
    });
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status:#x}"
    );
}

#[test]
fn a_readers_view_ends_with_the_tenure_and_the_generation_moves_on() {
    let producer = Producer::start(DEVICE, &[(0, 1, 12)]).unwrap();
    let slot = offset_slot(producer.offset);
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, producer.pid).unwrap();
    let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset).unwrap();
    let owned = view.read_u64(GENERATION_OFFSET);
    assert_eq!(owned % 2, 1);
    assert_eq!(view.read_u64(nc_offset(0, 1)), 12);
    producer.release_and_exit();
    assert_eq!(slots()[slot].generation, owned + 1, "released: even");
    // The view ended. Until the slab is zeroed the mapping shows the tenure as it ended, its
    // generation moved on; from then on zeros, its generation word too (not the generation it
    // attached to either). Read counter first: once zeros, always zeros.
    let counter = view.read_u64(nc_offset(0, 1));
    let generation = view.read_u64(GENERATION_OFFSET);
    match counter {
        12 => assert!(generation == owned + 1 || generation == 0, "{generation}"),
        0 => assert_eq!(generation, 0, "a zeroed counter under the ended generation"),
        other => panic!("counter {other} through a view of the ended tenure"),
    }
    // The zeroing comes by itself, without a next owner: the work item one tick later.
    eventually("the ended view reads zeros", || {
        view.read_u64(GENERATION_OFFSET) == 0
    });
    assert_eq!(view.read_u64(nc_offset(0, 1)), 0);
    // The next owner of that slab gets yet another generation, which the old view never shows.
    let mut next = Vec::new();
    loop {
        let p = Producer::start(DEVICE, &[(0, 1, 99)]).unwrap();
        let same = p.offset == info.mmap_offset;
        next.push(p);
        if same || next.len() == SLOTS {
            break;
        }
    }
    assert_eq!(slots()[slot].generation, owned + 2);
    assert_eq!(view.read_u64(GENERATION_OFFSET), 0);
    assert_eq!(view.read_u64(nc_offset(0, 1)), 0);
    next.into_iter().for_each(Producer::exit);
}

#[test]
fn an_ended_view_shows_the_tenure_as_it_ended_or_zeros_never_a_partly_zeroed_slab() {
    // The zeroing removes the readers' pages before it zeroes the first byte. Were a slab
    // zeroed (page by page, from the first) under a reader's pages, a reader that reads a word
    // of page 0 and then one of page 16 would see the first zeroed and the second not.
    const EARLY: (usize, usize) = (0, 1);
    const LATE: (usize, usize) = (15, 94);
    let page = |(core, index)| nc_offset(core, index) / 4096;
    assert_eq!((page(EARLY), page(LATE)), (0, 16));
    let file = open_device(DEVICE).unwrap();
    let mut reads = 0u64;
    for cycle in 1..=50u64 {
        let producer = Producer::start(
            DEVICE,
            &[(EARLY.0, EARLY.1, cycle), (LATE.0, LATE.1, cycle)],
        )
        .unwrap();
        let info = acquire(&file, producer.pid).unwrap();
        let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset).unwrap();
        let early = view.atomic_u64(nc_offset(EARLY.0, EARLY.1));
        let late = view.atomic_u64(nc_offset(LATE.0, LATE.1));
        assert_eq!((early.load(Relaxed), late.load(Relaxed)), (cycle, cycle));
        reads += std::thread::scope(|scope| {
            let watcher = scope.spawn(|| {
                let deadline = std::time::Instant::now() + EVENTUALLY;
                let mut seen = 0u64;
                loop {
                    // Acquire: the second load is not made before the first.
                    let first = early.load(Acquire);
                    let second = late.load(Relaxed);
                    seen += 1;
                    match (first, second) {
                        (0, 0) => return seen,
                        (0, later) => panic!("cycle {cycle}: page 0 zeroed, page 16 {later}"),
                        pair => assert!(pair.0 == cycle && pair.1 <= cycle, "{pair:?}"),
                    }
                    assert!(std::time::Instant::now() < deadline, "never zeroed");
                }
            });
            producer.release_and_exit();
            watcher.join().unwrap()
        });
    }
    println!("{reads} reads of two pages across 50 releases and zeroings");
}

/// The calling thread's minor page faults so far (`RUSAGE_THREAD`).
fn thread_minor_faults() -> i64 {
    // SAFETY: an all-zero `rusage` is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live, writable `rusage`, the one thing getrusage writes.
    let status = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(status, 0);
    usage.ru_minflt
}

#[test]
fn a_fault_maps_the_rest_of_a_split_mapping_at_the_right_places() {
    // The first fault of a window maps all its pages that the VMA covers. Split VMAs (the
    // head and tail unmapped) start and end inside the window: every page must still land at
    // its own place, and none outside what is left.
    const PAGE: usize = 4096;
    const PAGES: usize = SLAB_SIZE / PAGE;
    let (head, tail) = (10, 6);
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, 0).unwrap();
    let owner = Mapping::new(&file, SLAB_SIZE, RW, info.mmap_offset).unwrap();
    // SAFETY: the head and the tail of our own mapping, never used again.
    unsafe {
        assert_eq!(libc::munmap(owner.addr().cast(), head * PAGE), 0);
        let tail_start = owner.addr().add((PAGES - tail) * PAGE);
        assert_eq!(libc::munmap(tail_start.cast(), tail * PAGE), 0);
    }
    // First touch in the middle of what is left, then a marker in every page of it: that is
    // one page fault, not one per page. Counted as the thread's minor faults (mincore cannot
    // tell: on Linux 7.2 its page walk skips VM_PFNMAP mappings and reports them absent).
    let faults_before = thread_minor_faults();
    owner.write_u64(30 * PAGE + 8, 1);
    for page in head..PAGES - tail {
        owner.write_u64(page * PAGE + 8, 1000 + page as u64);
    }
    assert_eq!(
        thread_minor_faults() - faults_before,
        1,
        "one fault mapped every page left"
    );
    // The reader's window of the same slab, through the owner's file as a forked monitor would.
    let reader_window = info.mmap_offset - SLAB_SIZE as u64;
    let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, reader_window).unwrap();
    // SAFETY: the head of the reader's own mapping, never used again.
    unsafe { assert_eq!(libc::munmap(view.addr().cast(), head * PAGE), 0) };
    assert_eq!(view.read_u64(40 * PAGE + 8), 1040);
    for page in head..PAGES - tail {
        assert_eq!(
            view.read_u64(page * PAGE + 8),
            1000 + page as u64,
            "page {page}"
        );
    }
    for page in PAGES - tail..PAGES {
        assert_eq!(
            view.read_u64(page * PAGE + 8),
            0,
            "page {page} was never written"
        );
    }
}

#[test]
fn a_reader_window_has_at_most_1024_vmas_and_the_next_owner_still_gets_the_slot() {
    let mut producer = Producer::start(DEVICE, &[(0, 1, 3)]).unwrap();
    let slot = offset_slot(producer.offset);
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, producer.pid).unwrap();
    // A reader asks for 10,000 VMAs of the one window: the bound's worth are made, and every
    // mmap past it is refused with ENOMEM.
    let mut views = Vec::new();
    let mut refused = 0;
    for _ in 0..10_000 {
        match Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset) {
            Ok(view) => views.push(view),
            Err(e) => {
                assert_eq!(
                    e.raw_os_error(),
                    Some(libc::ENOMEM),
                    "mmap past the bound: {e}"
                );
                refused += 1;
            }
        }
    }
    assert_eq!(views.len(), MAPPINGS_PER_VIEW);
    assert_eq!(refused, 10_000 - MAPPINGS_PER_VIEW);
    assert_eq!(views[MAPPINGS_PER_VIEW - 1].read_u64(nc_offset(0, 1)), 3);
    // At the bound, splitting one of them (unmapping a page inside it) is refused too.
    // SAFETY: one page in the middle of our own mapping.
    let split = unsafe { libc::munmap(views[0].addr().add(8 * 4096).cast(), 4096) };
    assert_eq!(
        (split, io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::ENOMEM)),
        "a split past the bound"
    );
    // The owner's own window is not the readers' to fill.
    let owner_window = Mapping::new(&file, SLAB_SIZE, RW, producer.offset);
    assert!(
        owner_window.is_err(),
        "a reader's file maps no owner window"
    );
    // One VMA gone, one more can be made; moved with mremap, it is still counted once.
    views.pop();
    let moved = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset)
        .unwrap()
        .moved()
        .unwrap();
    assert_eq!(moved.read_u64(nc_offset(0, 1)), 3);
    assert_eq!(
        errno(Mapping::new(
            &file,
            SLAB_SIZE,
            libc::PROT_READ,
            info.mmap_offset
        )),
        libc::ENOMEM
    );
    // The slot goes to the next owner with every one of them mapped; the readers read zeros.
    producer.release_keeping_mapping();
    let owners: Vec<Producer> = (0..SLOTS)
        .map(|_| Producer::start(DEVICE, &[]).unwrap())
        .collect();
    assert!(owners.iter().any(|owner| offset_slot(owner.offset) == slot));
    assert_eq!(moved.read_u64(nc_offset(0, 1)), 0);
    assert_eq!(views[0].read_u64(nc_offset(0, 1)), 0);
    owners.into_iter().for_each(Producer::exit);
    // Every VMA unmapped, the bound's worth can be mapped again.
    drop((views, moved));
    let producer = Producer::start(DEVICE, &[]).unwrap();
    let info = acquire(&file, producer.pid).unwrap();
    let again: Vec<Mapping> = (0..MAPPINGS_PER_VIEW)
        .map(|n| {
            Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset)
                .unwrap_or_else(|e| panic!("mapping {n} after all were unmapped: {e}"))
        })
        .collect();
    drop(again);
    producer.exit();
}
