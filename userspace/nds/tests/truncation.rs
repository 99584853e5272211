//! A slab file truncated under its handles: reads see zeros and say so, writes go nowhere, and
//! nothing dies of SIGBUS; a SIGBUS anywhere else still kills as it always did.

mod common;

use std::fs::OpenOptions;

use common::ScratchDir;
use nds::abi::layout::NEURON_DATASTORE_SIZE;
use nds::{Backend, Datastore, Reader, SlabRead};

fn truncate(path: &std::path::Path) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(0)
        .unwrap();
}

#[test]
fn a_reader_of_a_truncated_file_reads_zeros_and_knows_it() {
    let dir = ScratchDir::new();
    let path = dir.slab_path();
    let producer = Datastore::open(&Backend::file(&path), 0).unwrap();
    producer.set_nd_counter(5, 99).unwrap();
    producer.set_nc_counter(3, 1, 7).unwrap();
    let reader = Reader::open(&Backend::file(&path), 4242).unwrap();
    assert_eq!(reader.nd_counter(5).unwrap(), 99);
    assert!(!reader.file_truncated());

    truncate(&path);
    assert_eq!(
        reader.nd_counter(5).unwrap(),
        0,
        "the vanished page reads as zeros"
    );
    assert_eq!(reader.nc_counter(3, 1).unwrap(), 0);
    assert!(reader.file_truncated());
    let mut counters = Box::new(nds::CounterSnapshot::new());
    assert!(matches!(
        reader.snapshot(&mut counters),
        SlabRead::Valid(_) | SlabRead::Moved { .. } | SlabRead::Torn
    ));
    assert!(counters.nd.iter().all(|&value| value == 0));
    assert!(reader.read_all_models().unwrap_or_default().is_empty());

    // The producer's writes land in private pages now; it does not die either.
    producer.set_nd_counter(5, 100).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "nothing reached the file"
    );
    reader.close().unwrap();
    producer.close().unwrap();

    // A new slab at the same path is mapped and read as usual.
    let producer = Datastore::open(&Backend::file(&path), 0).unwrap();
    producer.set_nd_counter(5, 3).unwrap();
    let reader = Reader::open(&Backend::file(&path), 4242).unwrap();
    assert_eq!(reader.nd_counter(5).unwrap(), 3);
    assert!(!reader.file_truncated());
    assert_eq!(reader.mapped_len(), NEURON_DATASTORE_SIZE);
}

#[test]
fn a_sigbus_outside_slab_mappings_still_kills() {
    let dir = ScratchDir::new();
    // The handler is installed by the first slab file mapping.
    let slab = dir.slab_path();
    let _producer = Datastore::open(&Backend::file(&slab), 0).unwrap();
    let _reader = Reader::open(&Backend::file(&slab), 4242).unwrap();

    // A file this crate did not map, mapped and then truncated.
    let other = dir.path().join("other");
    std::fs::write(&other, vec![1u8; 4096]).unwrap();
    let file = std::fs::File::open(&other).unwrap();
    let map = memmap2::MmapOptions::new()
        .map_raw_read_only(&file)
        .unwrap();
    truncate(&other);
    let address = map.as_ptr();

    // SAFETY: the child only reads the mapping and exits; it allocates nothing.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork");
    if child == 0 {
        // SAFETY: a mapped address; reading it raises SIGBUS, which is the point.
        let byte = unsafe { std::ptr::read_volatile(address) };
        // SAFETY: _exit has no preconditions.
        unsafe { libc::_exit(i32::from(byte)) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    assert!(libc::WIFSIGNALED(status), "status {status:#x}");
    assert_eq!(libc::WTERMSIG(status), libc::SIGBUS);
}
