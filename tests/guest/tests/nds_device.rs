//! The `nds` client library over the real device: the same API the host tests exercise on
//! files, now through ACQUIRE, mmap and RELEASE of the loaded module.

use nds::{Backend, Datastore, Error, Snapshot};
use nds_abi::records::ProcessInfo;
use neuron_ds_guest_tests::{eventually, sysfs_counter, DEVICE};
use zerocopy::FromZeros;

/// Reads one byte from `fd`; false at end of file.
fn wait_for(fd: i32) -> bool {
    let mut byte = 0u8;
    // SAFETY: reading one byte into a local.
    unsafe { libc::read(fd, (&raw mut byte).cast(), 1) == 1 }
}

/// Writes one byte to `fd`.
fn signal(fd: i32) {
    // SAFETY: writing one byte from a local.
    assert_eq!(unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) }, 1);
}

fn pipe() -> [i32; 2] {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    fds
}

#[test]
fn a_producer_and_a_reader_share_the_slab_through_the_device() {
    let before = sysfs_counter(1, "status", "success", "total");
    let (ready, close) = (pipe(), pipe());
    // SAFETY: the child only makes system calls and library calls that do, then `_exit`s.
    let child = unsafe { libc::fork() };
    if child == 0 {
        // The producer, in a process of its own (a reader of its own pid would be its owner).
        let code = (|| {
            let producer = Datastore::open(&Backend::device(DEVICE), 0).ok()?;
            producer.increment_nc_counter(1, 1, 5).ok()?;
            producer.or_nd_counter(3, 1).ok()?;
            let mut info = ProcessInfo::new_zeroed();
            info.set_tag(b"guest-producer").ok()?;
            producer.commit_process_info(&info).ok()?;
            signal(ready[1]);
            wait_for(close[0]);
            producer.close().ok()
        })()
        .map_or(1, |()| 0);
        signal(ready[1]);
        // SAFETY: ending the forked child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    assert!(wait_for(ready[0]), "the producer started");
    let reader = Datastore::open(&Backend::device(DEVICE), child).expect("reader open");
    assert!(reader.is_read_only());
    assert_eq!(reader.nc_counter(1, 1).unwrap(), 5);
    assert_eq!(reader.nd_counter(3).unwrap(), 2);
    match reader.read_process_info().unwrap() {
        Snapshot::Valid(read) => assert_eq!(read.tag(), b"guest-producer"),
        other => panic!("expected the committed record, got {other:?}"),
    }
    assert!(matches!(
        reader.increment_nc_counter(1, 1, 1),
        Err(Error::ReadOnly)
    ));
    let generation = reader
        .slab_generation()
        .expect("the device maps the generation page");
    assert_eq!(generation % 2, 1);
    assert!(!reader.slab_reused());

    // Closing the producer releases the slab: counted in sysfs, generation moved, then zeroed
    // (the words are zeroed shortly after the release, before anyone gets the slab again).
    signal(close[1]);
    assert!(wait_for(ready[0]));
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status:#x}"
    );
    assert!(reader.slab_reused());
    assert_eq!(sysfs_counter(1, "status", "success", "total"), before + 5);
    eventually("the slab is zeroed", || {
        reader.nc_counter(1, 1).unwrap() == 0
    });
    reader.close().unwrap();
}

#[test]
fn a_reader_of_a_process_without_a_slab_gets_enoent() {
    let err = Datastore::open(&Backend::device(DEVICE), 1).unwrap_err();
    assert_eq!(err.errno(), libc::ENOENT);
}
