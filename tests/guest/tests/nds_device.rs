//! The `nds` client library over the real device: the same API the host tests exercise on
//! files, now through ACQUIRE, mmap and RELEASE of the loaded module.

use nds::{Backend, Datastore, Error, Snapshot};
use nds_abi::records::ProcessInfo;
use neuron_ds_guest_tests::{sysfs_counter, DEVICE};
use zerocopy::FromZeros;

#[test]
fn a_producer_and_a_reader_share_the_slab_through_the_device() {
    let before = sysfs_counter(1, "status", "success", "total");
    let backend = Backend::device(DEVICE);
    let producer = Datastore::open(&backend, 0).expect("producer open");
    producer.increment_nc_counter(1, 1, 5).unwrap();
    producer.or_nd_counter(3, 1).unwrap();
    let mut info = ProcessInfo::new_zeroed();
    info.set_tag(b"guest-producer").unwrap();
    producer.commit_process_info(&info).unwrap();

    // A reader of our own pid gets a second, read-only mapping of the same slab.
    let reader = Datastore::open(&backend, std::process::id() as i32).expect("reader open");
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

    // Closing the producer releases the slab: counted in sysfs, zeroed, generation moved.
    producer.close().unwrap();
    assert!(reader.slab_reused());
    assert_eq!(reader.nc_counter(1, 1).unwrap(), 0);
    assert_eq!(sysfs_counter(1, "status", "success", "total"), before + 5);
    reader.close().unwrap();
}

#[test]
fn a_reader_of_a_process_without_a_slab_gets_enoent() {
    let err = Datastore::open(&Backend::device(DEVICE), 1).unwrap_err();
    assert_eq!(err.errno(), libc::ENOENT);
}
