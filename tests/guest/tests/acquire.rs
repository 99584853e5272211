//! ACQUIRE and RELEASE at the ioctl level: ownership, readers, limits and bad arguments.

use neuron_ds_guest_tests::*;
use std::thread;

fn own_pid() -> i32 {
    std::process::id() as i32
}

#[test]
fn own_acquire_returns_the_slab_size_and_a_slot_offset() {
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, 0).unwrap();
    assert_eq!(info.size as usize, SLAB_SIZE);
    assert_eq!(info.mmap_offset % SLAB_SIZE as u64, 0);
    assert_eq!(offset_device(info.mmap_offset), 0);
    assert!(
        offset_is_owner(info.mmap_offset),
        "the owner is given its writable window"
    );
    let row = slots()[offset_slot(info.mmap_offset)];
    assert_eq!(row.pid, own_pid());
    assert_eq!(row.generation % 2, 1, "owned slots have an odd generation");
}

#[test]
fn acquiring_the_own_pid_is_the_owners_acquire() {
    // As in the original, only pid 0 creates: the own pid finds nothing before that.
    let file = open_device(DEVICE).unwrap();
    assert_eq!(errno(acquire(&file, own_pid())), libc::ENOENT);
    let own = acquire(&file, 0).unwrap();
    let by_pid = acquire(&file, own_pid()).unwrap();
    assert_eq!(
        by_pid.mmap_offset, own.mmap_offset,
        "the own pid gets the owner's writable window, not a reader's"
    );
    assert!(offset_is_owner(by_pid.mmap_offset));
}

#[test]
fn reacquire_from_another_thread_returns_the_same_slab() {
    let file = open_device(DEVICE).unwrap();
    let first = acquire(&file, 0).unwrap();
    let again = thread::spawn(|| {
        let other = open_device(DEVICE).unwrap();
        acquire(&other, 0).unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(first.mmap_offset, again.mmap_offset);
    assert_eq!(slots().iter().filter(|r| r.pid == own_pid()).count(), 1);
}

#[test]
fn reading_a_process_without_a_slab_is_enoent() {
    let file = open_device(DEVICE).unwrap();
    // pid 1 (init) never acquires a slab.
    assert_eq!(errno(acquire(&file, 1)), libc::ENOENT);
}

#[test]
fn negative_pids_are_einval() {
    let file = open_device(DEVICE).unwrap();
    assert_eq!(errno(acquire(&file, -1)), libc::EINVAL);
    assert_eq!(errno(release(&file, i32::MIN)), libc::EINVAL);
}

#[test]
fn bad_argument_pointers_are_efault() {
    let file = open_device(DEVICE).unwrap();
    for bad in [0usize, 1, 0xffff_ffff_8000_0000, usize::MAX - 8] {
        assert_eq!(
            errno(ioctl(&file, ACQUIRE, bad)),
            libc::EFAULT,
            "pointer {bad:#x}"
        );
        assert_eq!(
            errno(ioctl(&file, RELEASE, bad)),
            libc::EFAULT,
            "pointer {bad:#x}"
        );
    }
    // A read-only page: the pid can be read, the result cannot be written back.
    let page = Mapping::anonymous_read_only();
    assert_eq!(
        errno(ioctl(&file, ACQUIRE, page.addr() as usize)),
        libc::EFAULT
    );
}

#[test]
fn unknown_commands_are_enotty() {
    let file = open_device(DEVICE).unwrap();
    for cmd in [0x8008_4E46u32, 0x8008_4E49, 0x4018_4E47, 0xC018_4E47, 0] {
        assert_eq!(errno(ioctl(&file, cmd, 0)), libc::ENOTTY, "cmd {cmd:#x}");
    }
}

#[test]
fn the_seventeenth_owner_gets_enomem() {
    let producers: Vec<Producer> = (0..SLOTS)
        .map(|_| Producer::start(DEVICE, &[]).unwrap())
        .collect();
    let mut offsets: Vec<u64> = producers.iter().map(|p| p.offset).collect();
    offsets.sort();
    offsets.dedup();
    assert_eq!(offsets.len(), SLOTS, "16 owners hold 16 distinct slabs");
    let file = open_device(DEVICE).unwrap();
    assert_eq!(errno(acquire(&file, 0)), libc::ENOMEM);
    drop(file);
    producers.into_iter().for_each(Producer::exit);
}

#[test]
fn released_slabs_are_reused_oldest_release_first() {
    let mut producers: Vec<Option<Producer>> = (0..SLOTS)
        .map(|_| Some(Producer::start(DEVICE, &[]).unwrap()))
        .collect();
    // Release three owners in a scrambled order; the next owners must get their slots back
    // in the same order (smallest clear tick first).
    let order = [11usize, 2, 7];
    let mut released = Vec::new();
    for &i in &order {
        let producer = producers[i].take().unwrap();
        released.push(offset_slot(producer.offset));
        producer.release_and_exit();
    }
    let next: Vec<Producer> = (0..order.len())
        .map(|_| Producer::start(DEVICE, &[]).unwrap())
        .collect();
    let got: Vec<usize> = next.iter().map(|p| offset_slot(p.offset)).collect();
    assert_eq!(got, released);
    next.into_iter().for_each(Producer::exit);
    producers.into_iter().flatten().for_each(Producer::exit);
}

#[test]
fn a_readers_release_of_another_pid_is_a_successful_no_op() {
    let producer = Producer::start(DEVICE, &[]).unwrap();
    let file = open_device(DEVICE).unwrap();
    acquire(&file, producer.pid).unwrap();
    assert_eq!(release(&file, producer.pid).unwrap(), 0);
    let row = slots()[offset_slot(producer.offset)];
    assert_eq!(row.pid, producer.pid, "the owner still has its slab");
    producer.exit();
}

#[test]
fn another_users_slab_needs_cap_sys_admin_or_cap_perfmon() {
    let producer = Producer::start(DEVICE, &[]).unwrap();
    let target = producer.pid;
    // An unprivileged uid (setuid drops every capability) is refused. The node is opened
    // before dropping privileges, so this is the module's rule, not the node's mode.
    let status = in_child(|| {
        let Ok(file) = open_device(DEVICE) else {
            return 2;
        };
        // SAFETY: plain system calls in the forked child.
        if unsafe { libc::setgid(1000) } != 0 || unsafe { libc::setuid(1000) } != 0 {
            return 100;
        }
        match acquire(&file, target) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => 0,
            Ok(_) => 1,
            Err(_) => 3,
        }
    });
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status:#x}"
    );
    // Root (CAP_SYS_ADMIN) may read it.
    let file = open_device(DEVICE).unwrap();
    acquire(&file, target).unwrap();
    producer.exit();
}

#[test]
fn an_owner_keeping_its_descriptor_can_cycle_its_slab_indefinitely() {
    // Like a runtime that keeps its device file open: ACQUIRE, map, unmap, RELEASE, again.
    // Each RELEASE leaves a writable mapping counted against the open file (the module cannot
    // see the munmap), which must not use the device up.
    let file = open_device(DEVICE).unwrap();
    for cycle in 0..3 * SLOTS {
        let info = acquire(&file, 0).unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        let slab = Mapping::new(
            &file,
            SLAB_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            info.mmap_offset,
        )
        .unwrap();
        assert_eq!(
            slab.read_u64(nc_offset(0, 1)),
            0,
            "cycle {cycle}: a fresh slab is zero"
        );
        slab.write_u64(nc_offset(0, 1), 1);
        drop(slab);
        release(&file, 0).unwrap();
    }
    // Another process still gets a slab.
    let other = Producer::start(DEVICE, &[]).unwrap();
    other.exit();
}
