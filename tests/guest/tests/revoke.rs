//! A release revokes the owner's writable mappings: a producer that RELEASEs but keeps its
//! mapping (and its file) pins nothing, writes into nobody's slab, and reuse follows the
//! original LRU order.

use neuron_ds_guest_tests::*;
use std::os::unix::process::ExitStatusExt;

/// The value of counter 1 of core 0 in `pid`'s slab, read through a reader's mapping.
fn successes_of(pid: i32) -> u64 {
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, pid).unwrap();
    let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset).unwrap();
    view.read_u64(nc_offset(0, 1))
}

#[test]
fn a_stale_writable_mapping_pins_nothing_and_its_writes_fault() {
    let mut stale = Producer::start(DEVICE, &[(0, 1, 5)]).unwrap();
    let stale_slot = offset_slot(stale.offset);
    assert_eq!(
        stale.release_keeping_mapping(),
        0,
        "no page of the owner's mapping survives its release"
    );
    // Sixteen new owners all get a slab.
    let owners: Vec<Producer> = (0..SLOTS)
        .map(|n| Producer::start(DEVICE, &[]).unwrap_or_else(|e| panic!("owner {n}: {e}")))
        .collect();
    let heir = owners
        .iter()
        .find(|owner| offset_slot(owner.offset) == stale_slot)
        .expect("the released slot is handed out again");
    assert_eq!(successes_of(heir.pid), 0, "the heir starts from zeros");
    // The stale mapping's write faults and never reaches the heir's slab.
    let ended = stale.write_through_mapping();
    assert_eq!(
        ended.and_then(|status| status.signal()),
        Some(libc::SIGBUS),
        "a write through a revoked mapping faults"
    );
    assert_eq!(successes_of(heir.pid), 0, "the heir's slab is untouched");
    owners.into_iter().for_each(Producer::exit);
}

#[test]
fn after_sixteen_releases_the_next_owner_gets_the_slot_released_longest_ago() {
    let mut stale = Producer::start(DEVICE, &[]).unwrap();
    stale.release_keeping_mapping();
    let mut owners: Vec<Option<Producer>> = (0..SLOTS)
        .map(|_| Some(Producer::start(DEVICE, &[]).unwrap()))
        .collect();
    // Release all sixteen in a scrambled order.
    let order = [9, 3, 14, 0, 7, 12, 1, 15, 5, 10, 2, 13, 6, 11, 4, 8];
    let released: Vec<usize> = order
        .iter()
        .map(|&i| {
            let owner = owners[i].take().unwrap();
            let slot = offset_slot(owner.offset);
            owner.release_and_exit();
            slot
        })
        .collect();
    let next = Producer::start(DEVICE, &[]).unwrap();
    assert_eq!(offset_slot(next.offset), released[0]);
    next.exit();
    drop(stale);
}
