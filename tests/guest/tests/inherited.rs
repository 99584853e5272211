//! A process that ACQUIREs its own slab through a descriptor it inherited (it never opened
//! the device itself) must not leave that slab owned after it exits: no file release tells
//! the module, so the next ACQUIRE (or metrics period) releases it.

use neuron_ds_guest_tests::*;

#[test]
fn a_slab_acquired_through_an_inherited_descriptor_does_not_outlive_its_owner() {
    let file = open_device(DEVICE).unwrap();
    let status = in_child(|| match acquire(&file, 0) {
        Ok(_) => 0,
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => 1,
        Err(_) => 2,
    });
    assert!(libc::WIFEXITED(status), "status {status:#x}");
    // The parent's own ACQUIRE first releases the dead child's slab.
    let info = acquire(&file, 0).unwrap();
    let owned: Vec<SlotRow> = slots()
        .into_iter()
        .filter(|r| r.generation % 2 == 1)
        .collect();
    assert_eq!(
        owned,
        vec![slots()[offset_slot(info.mmap_offset)]],
        "exit code {}: only the parent owns a slab after the child exited",
        libc::WEXITSTATUS(status)
    );
    drop(file);
    assert!(slots().iter().all(|r| r.generation % 2 == 0));
}
