//! Opening and closing: roles, header check, backends and their errors.

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;

use common::ScratchDir;
use nds::abi::layout::{NDS_REQUIRED_SIZE, NEURON_DATASTORE_SIZE, SLAB_GENERATION_OFFSET};
use nds::abi::records::NDS_HEADER_WORD;
use nds::{Backend, Datastore, Error};

#[test]
fn producer_creates_the_slab_and_commits_the_header() {
    let dir = ScratchDir::new();
    let path = dir.slab_path();
    let producer = Datastore::open(&Backend::file(&path), 0).unwrap();
    assert!(!producer.is_read_only());
    assert_eq!(producer.pid(), 0);
    assert_eq!(producer.mapped_len(), NEURON_DATASTORE_SIZE);
    producer.close().unwrap();

    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), NEURON_DATASTORE_SIZE);
    assert_eq!(&bytes[..8], b"nds\0\xa0\x86\x01\x00");
    assert_eq!(
        u64::from_le_bytes(bytes[..8].try_into().unwrap()),
        NDS_HEADER_WORD
    );
}

#[test]
fn producer_keeps_existing_contents() {
    let dir = ScratchDir::new();
    let backend = Backend::file(dir.slab_path());
    let first = Datastore::open(&backend, 0).unwrap();
    first.set_nd_counter(5, 99).unwrap();
    first.close().unwrap();
    let second = Datastore::open(&backend, 0).unwrap();
    assert_eq!(second.nd_counter(5).unwrap(), 99);
}

/// The permissions of this process's mappings of `path`, as `/proc/self/maps` shows them.
fn mappings_of(path: &Path) -> Vec<String> {
    let path = path.canonicalize().unwrap();
    let path = path.to_str().unwrap();
    let mut found: Vec<String> = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|line| line.ends_with(path))
        .filter_map(|line| line.split_whitespace().nth(1).map(str::to_owned))
        .collect();
    found.sort();
    found
}

#[test]
fn a_producer_maps_its_slab_shared_and_writable_a_reader_shared_and_read_only() {
    let dir = ScratchDir::new();
    let path = dir.slab_path();
    let producer = Datastore::open(&Backend::file(&path), 0).unwrap();
    assert_eq!(mappings_of(&path), ["rw-s"]);
    let reader = Datastore::open(&Backend::file(&path), 4242).unwrap();
    assert_eq!(mappings_of(&path), ["r--s", "rw-s"]);
    reader.close().unwrap();
    assert_eq!(mappings_of(&path), ["rw-s"], "the reader's mapping is gone");
    producer.close().unwrap();
    assert!(mappings_of(&path).is_empty());
}

#[test]
fn reader_on_a_blank_slab_fails_with_einval() {
    let dir = ScratchDir::new();
    let path = dir.slab_path();
    std::fs::write(&path, vec![0u8; NEURON_DATASTORE_SIZE]).unwrap();
    let error = Datastore::open(&Backend::file(&path), 77).unwrap_err();
    assert!(matches!(error, Error::BadHeader { found: 0 }), "{error}");
    assert_eq!(error.errno(), libc::EINVAL);
}

#[test]
fn reader_rejects_a_wrong_version() {
    let dir = ScratchDir::new();
    let path = dir.slab_path();
    let mut bytes = vec![0u8; NEURON_DATASTORE_SIZE];
    bytes[..8].copy_from_slice(&(NDS_HEADER_WORD + (1 << 32)).to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    assert!(matches!(
        Datastore::open(&Backend::file(&path), 77),
        Err(Error::BadHeader { .. })
    ));
}

#[test]
fn reader_opens_a_committed_slab_read_only() {
    let dir = ScratchDir::new();
    let (_producer, reader) = common::producer_and_reader(&dir);
    assert!(reader.is_read_only());
    assert_eq!(reader.pid(), 4242);
    reader.close().unwrap();
}

#[test]
fn reader_accepts_a_minimal_file_without_the_generation_word() {
    let dir = ScratchDir::new();
    let path = dir.slab_path();
    let mut bytes = vec![0u8; NDS_REQUIRED_SIZE];
    bytes[..8].copy_from_slice(&NDS_HEADER_WORD.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let reader = Datastore::open(&Backend::file(&path), 1).unwrap();
    assert_eq!(reader.mapped_len(), NDS_REQUIRED_SIZE);
    assert_eq!(reader.slab_generation(), None);
    assert!(!reader.slab_reused());
    assert_eq!(reader.nc_counter(15, 94).unwrap(), 0);
}

#[test]
fn reader_rejects_a_file_smaller_than_the_map() {
    let dir = ScratchDir::new();
    let path = dir.slab_path();
    let mut bytes = vec![0u8; NDS_REQUIRED_SIZE - 8];
    bytes[..8].copy_from_slice(&NDS_HEADER_WORD.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let error = Datastore::open(&Backend::file(&path), 1).unwrap_err();
    assert!(
        matches!(error, Error::SlabTooSmall { size } if size == (NDS_REQUIRED_SIZE - 8) as u64)
    );
    assert_eq!(error.errno(), libc::EINVAL);
    std::fs::write(&path, b"").unwrap();
    assert!(matches!(
        Datastore::open(&Backend::file(&path), 1),
        Err(Error::SlabTooSmall { size: 0 })
    ));
}

#[test]
fn missing_files_report_enoent() {
    let dir = ScratchDir::new();
    let error = Datastore::open(&Backend::file(dir.path().join("absent")), 5).unwrap_err();
    assert!(matches!(error, Error::Io { .. }));
    assert_eq!(error.errno(), libc::ENOENT);
    let error = Datastore::open(&Backend::device(dir.path().join("neuron9")), 0).unwrap_err();
    assert_eq!(error.errno(), libc::ENOENT);
}

#[test]
fn negative_pids_are_rejected() {
    let dir = ScratchDir::new();
    let error = Datastore::open(&Backend::file(dir.slab_path()), -1).unwrap_err();
    assert!(matches!(error, Error::InvalidPid(-1)));
    assert_eq!(error.errno(), libc::EINVAL);
    assert!(
        !dir.slab_path().exists(),
        "nothing is created for a rejected open"
    );
}

#[test]
fn device_backend_propagates_the_acquire_errno() {
    // A node that is not a Neuron device rejects the ioctl; the errno must come through.
    let dir = ScratchDir::new();
    let path = dir.path().join("not-a-device");
    std::fs::write(&path, b"x").unwrap();
    for pid in [0, 1234] {
        let error = Datastore::open(&Backend::device(&path), pid).unwrap_err();
        assert!(
            matches!(error, Error::Ioctl { request: "ACQUIRE", errno } if errno == libc::ENOTTY),
            "{error}"
        );
        assert_eq!(error.errno(), libc::ENOTTY);
    }
    assert_eq!(
        Backend::neuron_device(3),
        Backend::Device {
            path: "/dev/neuron3".into()
        }
    );
}

#[test]
fn slab_generation_change_is_visible_to_a_reader() {
    let dir = ScratchDir::new();
    let (_producer, reader) = common::producer_and_reader(&dir);
    assert_eq!(reader.slab_generation(), Some(0));
    assert!(!reader.slab_reused());
    // Stand in for the kernel: bump the generation as a release would.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.slab_path())
        .unwrap();
    file.write_all_at(&2u64.to_le_bytes(), SLAB_GENERATION_OFFSET as u64)
        .unwrap();
    assert_eq!(reader.slab_generation(), Some(2));
    assert!(reader.slab_reused());
}

/// A FIFO, a directory or a device where a slab file should be is refused at once with
/// `NotASlabFile` (EINVAL), for readers and producers alike: opening a FIFO for reading would
/// otherwise wait for a writer for good.
#[test]
fn a_path_that_is_not_a_regular_file_is_refused_without_waiting() {
    let dir = ScratchDir::new();
    let fifo = dir.slab_path();
    let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let (done, outcome) = std::sync::mpsc::channel();
    let paths = [
        fifo.clone(),
        fifo.parent().unwrap().to_path_buf(),
        "/dev/null".into(),
    ];
    std::thread::spawn(move || {
        for path in paths {
            for writable in [false, true] {
                let backend = Backend::file(&path);
                let opened = if writable {
                    Datastore::open(&backend, 0).map(|_| ())
                } else {
                    nds::Reader::open(&backend, 1).map(|_| ())
                };
                let _ = done.send((path.clone(), writable, opened));
            }
        }
    });
    for _ in 0..6 {
        let (path, writable, opened) = outcome
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("opening a FIFO waited instead of failing");
        match opened {
            Err(Error::NotASlabFile { path: named }) => assert_eq!(named, path),
            // A producer's open of a FIFO nobody reads fails in open(2) itself (ENXIO), of a
            // directory with EISDIR.
            Err(Error::Io { .. }) if writable => {}
            other => panic!("{} (writable {writable}): {other:?}", path.display()),
        }
    }
}
