//! No kernel path can hold on to a slab page past a tenure. The windows are mapped as special
//! page-table entries (`VM_PFNMAP`), so every `get_user_pages` caller is refused with EFAULT
//! instead of taking a reference that outlives the release: a reader's `vmsplice` into a pipe
//! (which would otherwise show the next tenant's writes, uid 1000 reading uid 1001), an
//! `O_DIRECT` write to a RAM disk, an io_uring fixed buffer. And a device file is never taken
//! for a shmem file: `fcntl` seals are refused on `/dev/neuron0` and on a node of the same
//! device made on ramfs, where owners still map their slabs writable.

use neuron_ds_guest_tests::{identity::Identity, *};
use std::{
    ffi::CString,
    fs::{self, File, OpenOptions},
    io::{self, Read},
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt},
    },
};

const PAGE: usize = 4096;
const WORDS_PER_PAGE: usize = PAGE / 8;
const RW: i32 = libc::PROT_READ | libc::PROT_WRITE;
/// The uid of the first owner and of the reader, who may read that owner's slab.
const READER_UID: u32 = 1000;
/// The uid of the next tenants, whom the reader may not read.
const NEXT_UID: u32 = 1001;
/// What the first owner fills its first page with ("ND_FIRST").
const FIRST_MARKER: u64 = 0x4E44_5F46_4952_5354;
/// What the next tenants fill their first page with ("ND_NEXT!").
const NEXT_MARKER: u64 = 0x4E44_5F4E_4558_5421;
/// `IORING_REGISTER_BUFFERS`.
const IORING_REGISTER_BUFFERS: libc::c_uint = 0;
/// `sizeof(struct io_uring_params)`.
const IO_URING_PARAMS_SIZE: usize = 120;
/// `RAMFS_MAGIC`, the `f_type` of a ramfs.
const RAMFS_MAGIC: i64 = 0x8584_58f6;
/// The brd RAM disk the `O_DIRECT` writes go to.
const RAM_DISK: &str = "/dev/ram0";

/// The errno of the last failed call.
fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A pipe: its read end and its write end.
fn pipe() -> (File, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", io::Error::last_os_error());
    // SAFETY: two fresh descriptors, each owned once from here on.
    unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// How many bytes `pipe` holds (`FIONREAD`).
fn pipe_bytes(pipe: &File) -> i32 {
    let mut bytes: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int, into `bytes`.
    let rc = unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut bytes) };
    assert_eq!(rc, 0, "FIONREAD: {}", io::Error::last_os_error());
    bytes
}

/// `fcntl(file, cmd, arg)`: its result or its errno.
fn fcntl(file: &File, cmd: i32, arg: i32) -> io::Result<i32> {
    // SAFETY: the seal commands take an int argument and touch no memory of ours.
    let ret = unsafe { libc::fcntl(file.as_raw_fd(), cmd, arg) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Asserts that both seal commands are refused with EINVAL on `file` (a node at `path`): the
/// kernel must not take it for a shmem file, whose inode the seals would be read from.
fn assert_seals_refused(file: &File, path: &str) {
    match fcntl(file, libc::F_GET_SEALS, 0) {
        Ok(seals) => panic!(
            "F_GET_SEALS on {path} returned seals {seals:#x}: the device file passes for a shmem \
             file"
        ),
        Err(e) => assert_eq!(
            e.raw_os_error(),
            Some(libc::EINVAL),
            "F_GET_SEALS on {path}: {e}, not EINVAL"
        ),
    }
    match fcntl(file, libc::F_ADD_SEALS, libc::F_SEAL_WRITE) {
        Ok(_) => panic!("F_ADD_SEALS(F_SEAL_WRITE) on {path} sealed a device file"),
        Err(e) => assert_eq!(
            e.raw_os_error(),
            Some(libc::EINVAL),
            "F_ADD_SEALS(F_SEAL_WRITE) on {path}: {e}, not EINVAL (EPERM: it was taken for a \
             shmem file, sealed against sealing)"
        ),
    }
}

/// A forked process that became a uid of its own and owns a slab, the first page of whose
/// owner window it filled with a marker; it holds the slab until dropped (SIGKILL: its exit
/// closes its device file, which releases the slab).
struct Tenant {
    pid: i32,
    /// The mmap offset its ACQUIRE returned.
    offset: u64,
}

impl Tenant {
    /// What the child failed at, by the step number it reports.
    const STEPS: [&'static str; 4] = ["open", "become the uid", "ACQUIRE", "mmap"];

    fn start(uid: u32, marker: u64) -> Self {
        let (mut ready, ready_child) = pipe();
        // SAFETY: the child only makes system calls, then waits to be killed.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let report = |words: [u64; 2]| {
                // SAFETY: writing 16 bytes from `words` to our end of the pipe.
                unsafe { libc::write(ready_child.as_raw_fd(), words.as_ptr().cast(), 16) };
            };
            let outcome = Self::own(uid, marker);
            match outcome {
                Ok(offset) => report([0, offset]),
                Err((step, errno)) => {
                    report([step, errno as u64]);
                    // SAFETY: leaving the child without running the parent's destructors.
                    unsafe { libc::_exit(1) };
                }
            }
            loop {
                // SAFETY: waits for the SIGKILL that ends the tenure.
                unsafe { libc::pause() };
            }
        }
        assert!(pid > 0, "fork: {}", io::Error::last_os_error());
        drop(ready_child);
        // Reaps the child if it reports a failure or none.
        let mut tenant = Self { pid, offset: 0 };
        let mut words = [0u8; 16];
        if let Err(e) = ready.read_exact(&mut words) {
            panic!("tenant uid {uid}: no report ({e})");
        }
        let step = u64::from_ne_bytes(words[..8].try_into().unwrap());
        let value = u64::from_ne_bytes(words[8..].try_into().unwrap());
        if step != 0 {
            let what = Self::STEPS[step as usize - 1];
            let error = io::Error::from_raw_os_error(value as i32);
            panic!("tenant uid {uid}: {what} failed: {error}");
        }
        tenant.offset = value;
        tenant
    }

    /// The child's part: opens the node as root (as acquire.rs does, so that only the
    /// module's rules apply to the uid), becomes `uid`, owns, maps and fills; the mapping is
    /// kept (leaked) until the process dies. Returns its offset, or the failing step and errno.
    fn own(uid: u32, marker: u64) -> Result<u64, (u64, i32)> {
        let step = |n: u64| move |e: io::Error| (n, e.raw_os_error().unwrap_or(0));
        let file = open_device(DEVICE).map_err(step(1))?;
        Identity::User(uid).assume().map_err(step(2))?;
        // SAFETY: prctl on the calling process. Dumpable again (the uid switch cleared it),
        // as a process its user started would be, so that a reader of its uid may read it;
        // and killed if the test dies, as the uid switch cleared any earlier death signal.
        unsafe {
            libc::prctl(libc::PR_SET_DUMPABLE, 1);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        }
        let info = acquire(&file, 0).map_err(step(3))?;
        let slab = Mapping::new(&file, SLAB_SIZE, RW, info.mmap_offset).map_err(step(4))?;
        for word in 0..WORDS_PER_PAGE {
            slab.write_u64(word * 8, marker);
        }
        std::mem::forget(slab);
        std::mem::forget(file);
        Ok(info.mmap_offset)
    }
}

impl Drop for Tenant {
    fn drop(&mut self) {
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// The reader's part, in a forked child: opens the node as root, becomes `READER_UID`, maps
/// `owner`'s slab read-only, splices the window's first page into `pipe`, unmaps. Returns
/// 0 if the whole page went into the pipe, 100 + errno if vmsplice failed, else the step
/// that failed.
fn splice_first_page(owner: i32, pipe: i32) -> i32 {
    let Ok(file) = open_device(DEVICE) else {
        return 1;
    };
    if Identity::User(READER_UID).assume().is_err() {
        return 2;
    }
    let Ok(info) = acquire(&file, owner) else {
        return 3;
    };
    let Ok(view) = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset) else {
        return 4;
    };
    // Touched first, as a reader does: with the page table filled, GUP-fast finds the page
    // without ever looking at the VMA.
    if view.read_u64(0) != FIRST_MARKER {
        return 6;
    }
    let iov = libc::iovec {
        iov_base: view.addr().cast(),
        iov_len: PAGE,
    };
    // SAFETY: one iovec over the first page of our own mapping, which vmsplice only reads.
    let spliced = unsafe { libc::vmsplice(pipe, &iov, 1, 0) };
    let errno = last_errno();
    // The reader is done with the window before the tenure ends.
    drop(view);
    match spliced {
        n if n == PAGE as isize => 0,
        n if n >= 0 => 5,
        _ => 100 + errno,
    }
}

#[test]
fn vmsplice_of_a_reader_window_holds_no_page_of_the_next_tenant() {
    let owner = Tenant::start(READER_UID, FIRST_MARKER);
    let slot = offset_slot(owner.offset);
    let (mut pipe_out, pipe_in) = pipe();
    let (owner_pid, pipe_fd) = (owner.pid, pipe_in.as_raw_fd());
    let status = in_child(|| splice_first_page(owner_pid, pipe_fd));
    assert!(
        libc::WIFEXITED(status),
        "the reader died: status {status:#x}"
    );
    match libc::WEXITSTATUS(status) {
        code if code == 100 + libc::EFAULT => {
            assert_eq!(
                pipe_bytes(&pipe_out),
                0,
                "a failed vmsplice left bytes in the pipe"
            );
            return;
        }
        0 => {}
        code if code >= 100 => panic!(
            "vmsplice of the reader window: {}, neither EFAULT nor the page",
            io::Error::from_raw_os_error(code - 100)
        ),
        code => panic!(
            "the reader failed at step {code} (1 open, 2 become uid {READER_UID}, 3 ACQUIRE, \
             4 mmap, 5 a partial vmsplice, 6 the owner's marker not seen)"
        ),
    }
    // The pipe holds the page: end the tenure and hand the slot to another uid. The
    // released slot is handed out last, so every slot is taken to get it.
    drop(owner);
    let tenants: Vec<Tenant> = (0..SLOTS)
        .map(|_| Tenant::start(NEXT_UID, NEXT_MARKER))
        .collect();
    assert!(
        tenants.iter().any(|t| offset_slot(t.offset) == slot),
        "slot {slot} was not handed out again"
    );
    let mut page = vec![0u8; PAGE];
    pipe_out
        .read_exact(&mut page)
        .expect("read the spliced page");
    let leaked = page
        .chunks_exact(8)
        .filter(|word| u64::from_ne_bytes((*word).try_into().unwrap()) == NEXT_MARKER)
        .count();
    assert_eq!(
        leaked, 0,
        "{leaked} of {WORDS_PER_PAGE} words of the page uid {READER_UID} spliced before the \
         release are uid {NEXT_UID}'s marker: the pipe kept a slab page into the next tenure"
    );
    drop(tenants);
}

/// `pwrite` of the page at `addr` to the start of `disk`, expecting EFAULT; `what` names the
/// page for the messages.
fn assert_direct_write_refused(disk: &File, addr: *const u8, what: &str) {
    // SAFETY: reads PAGE bytes at `addr`, the start of a mapping of the caller's.
    let written = unsafe { libc::pwrite(disk.as_raw_fd(), addr.cast(), PAGE, 0) };
    let errno = last_errno();
    assert!(
        written < 0,
        "an O_DIRECT write from {what} wrote {written} bytes: the block layer took a \
         reference on a slab page"
    );
    assert_eq!(
        errno,
        libc::EFAULT,
        "an O_DIRECT write from {what}: {}, not EFAULT",
        io::Error::from_raw_os_error(errno)
    );
}

/// A page of private, writable anonymous memory: the control that a kernel path works.
struct AnonymousPage(*mut u8);

impl AnonymousPage {
    fn new() -> Self {
        // SAFETY: a fresh anonymous mapping chosen by the kernel.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                RW,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED, "{}", io::Error::last_os_error());
        // SAFETY: the page was just mapped writable.
        unsafe { addr.cast::<u8>().write_bytes(0x5A, PAGE) };
        Self(addr.cast())
    }
}

impl Drop for AnonymousPage {
    fn drop(&mut self) {
        // SAFETY: exactly the page mapped in `new`, unmapped once.
        unsafe { libc::munmap(self.0.cast(), PAGE) };
    }
}

/// This process's own slab: its owner window, and its file (closing which releases it).
/// The window is declared first, so it is unmapped before the file closes.
struct OwnSlab {
    window: Mapping,
    file: File,
    info: DsInfo,
}

impl OwnSlab {
    fn acquire_on(path: &str) -> Self {
        Self::through(
            open_device(path).unwrap_or_else(|e| panic!("open {path}: {e}")),
            path,
        )
    }

    /// ACQUIREs and maps through `file`, a node at `path`.
    fn through(file: File, path: &str) -> Self {
        let info = acquire(&file, 0).unwrap_or_else(|e| panic!("ACQUIRE through {path}: {e}"));
        let window = Mapping::new(&file, SLAB_SIZE, RW, info.mmap_offset)
            .unwrap_or_else(|e| panic!("mmap of the owner window through {path}: {e}"));
        Self { window, file, info }
    }
}

#[test]
fn o_direct_write_from_a_reader_window_takes_no_page_reference() {
    let disk = match OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(RAM_DISK)
    {
        Ok(disk) => disk,
        Err(e) if e.kind() == io::ErrorKind::NotFound => panic!(
            "{RAM_DISK} does not exist: the guest kernel lacks CONFIG_BLK_DEV_RAM, which this \
             test needs"
        ),
        Err(e) => panic!("open {RAM_DISK} O_WRONLY|O_DIRECT: {e}"),
    };
    // Control: direct I/O from ordinary memory goes through.
    let control = AnonymousPage::new();
    // SAFETY: reads PAGE bytes of the control page.
    let written = unsafe { libc::pwrite(disk.as_raw_fd(), control.0.cast(), PAGE, 0) };
    assert_eq!(
        written,
        PAGE as isize,
        "an O_DIRECT write from an anonymous page: {}",
        io::Error::last_os_error()
    );

    let producer = Producer::start(DEVICE, &[(0, 1, 7)]).unwrap();
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, producer.pid).unwrap();
    let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset).unwrap();
    assert_eq!(
        view.read_u64(nc_offset(0, 1)),
        7,
        "the reader sees the slab"
    );
    assert_direct_write_refused(&disk, view.addr(), "a reader window");

    let own = OwnSlab::acquire_on(DEVICE);
    own.window.write_u64(nc_offset(0, 1), 8);
    assert_direct_write_refused(&disk, own.window.addr(), "the owner's window");
    drop(own);
    drop(view);
    producer.exit();
}

/// An io_uring instance.
struct Ring(OwnedFd);

impl Ring {
    fn new() -> Self {
        let mut params = [0u8; IO_URING_PARAMS_SIZE];
        // SAFETY: `params` is a zeroed `struct io_uring_params` for the kernel to fill.
        let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) };
        match (fd, last_errno()) {
            (-1, libc::ENOSYS) => {
                panic!("io_uring_setup: ENOSYS: the guest kernel lacks io_uring (CONFIG_IO_URING)")
            }
            (-1, errno) => panic!(
                "io_uring_setup: {} (EPERM: kernel.io_uring_disabled is set)",
                io::Error::from_raw_os_error(errno)
            ),
            // SAFETY: a fresh descriptor, owned once from here on.
            (fd, _) => Self(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        }
    }

    /// `IORING_REGISTER_BUFFERS` of one buffer, the page at `addr`.
    fn register_page(&self, addr: *mut u8) -> io::Result<()> {
        let iov = libc::iovec {
            iov_base: addr.cast(),
            iov_len: PAGE,
        };
        // SAFETY: one iovec, which the kernel reads; the page it names is ours.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                self.0.as_raw_fd(),
                IORING_REGISTER_BUFFERS,
                &iov,
                1u32,
            )
        };
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// Registers the page at `addr` as a fixed buffer of a new ring, expecting EFAULT.
fn assert_fixed_buffer_refused(addr: *mut u8, what: &str) {
    match Ring::new().register_page(addr) {
        Ok(()) => panic!(
            "{what} was registered as an io_uring fixed buffer: its page is pinned for as long \
             as the ring lives"
        ),
        Err(e) => assert_eq!(
            e.raw_os_error(),
            Some(libc::EFAULT),
            "registering {what}: {e}, not EFAULT"
        ),
    }
}

#[test]
fn io_uring_cannot_register_a_slab_window_as_a_fixed_buffer() {
    // Control: an anonymous page is registered, so a refusal below is the window's.
    let control = AnonymousPage::new();
    Ring::new()
        .register_page(control.0)
        .expect("registering an anonymous page as a fixed buffer");

    // io_uring pins its buffers for writing, which a read-only reader window never allowed;
    // the owner's writable window is the one only `VM_PFNMAP` keeps out.
    let producer = Producer::start(DEVICE, &[]).unwrap();
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, producer.pid).unwrap();
    let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset).unwrap();
    view.read_u64(0);
    assert_fixed_buffer_refused(view.addr(), "a reader window");

    let own = OwnSlab::acquire_on(DEVICE);
    own.window.write_u64(nc_offset(0, 1), 1);
    assert_fixed_buffer_refused(own.window.addr(), "the owner's window");
    drop(own);
    drop(view);
    producer.exit();
}

#[test]
fn seals_are_refused_on_the_device_node() {
    let file = open_device(DEVICE).unwrap();
    assert_seals_refused(&file, DEVICE);
}

/// A ramfs mounted on a fresh directory, unmounted and removed when dropped.
struct RamfsMount {
    dir: String,
}

impl RamfsMount {
    fn new() -> Self {
        let dir = format!("/tmp/ds-pinning-ramfs-{}", std::process::id());
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {dir}: {e}"));
        let path = CString::new(dir.as_str()).unwrap();
        // SAFETY: NUL-terminated strings; ramfs takes no mount data.
        let rc = unsafe {
            libc::mount(
                c"none".as_ptr(),
                path.as_ptr(),
                c"ramfs".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            let error = io::Error::last_os_error();
            let _ = fs::remove_dir(&dir);
            panic!("mount -t ramfs none {dir}: {error}");
        }
        Self { dir }
    }
}

impl Drop for RamfsMount {
    fn drop(&mut self) {
        let path = CString::new(self.dir.as_str()).unwrap();
        // SAFETY: a NUL-terminated path. Detached, so that a file a failed test left open
        // cannot keep the mount.
        unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
        let _ = fs::remove_dir(&self.dir);
    }
}

#[test]
fn seals_are_refused_on_a_node_made_on_ramfs_and_owners_still_map_writable() {
    let mount = RamfsMount::new();
    let path = CString::new(mount.dir.as_str()).unwrap();
    // SAFETY: a plain C struct, for which zeros are valid.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statfs for the kernel to fill.
    assert_eq!(unsafe { libc::statfs(path.as_ptr(), &mut stat) }, 0);
    assert_eq!(
        stat.f_type as i64, RAMFS_MAGIC,
        "{} is not a ramfs",
        mount.dir
    );
    // A node of the same device on a filesystem that is not shmem, as a container's mknod
    // would make: nothing may take its inode for a shmem one.
    let device = fs::metadata(DEVICE).unwrap();
    assert!(device.file_type().is_char_device(), "{DEVICE}");
    let node = format!("{}/neuron0", mount.dir);
    let node_path = CString::new(node.as_str()).unwrap();
    // SAFETY: a NUL-terminated path.
    let rc = unsafe { libc::mknod(node_path.as_ptr(), libc::S_IFCHR | 0o600, device.rdev()) };
    assert_eq!(rc, 0, "mknod {node}: {}", io::Error::last_os_error());

    let file = open_device(&node).unwrap_or_else(|e| panic!("open {node}: {e}"));
    assert_seals_refused(&file, &node);
    let own = OwnSlab::through(file, &node);
    assert!(
        offset_is_owner(own.info.mmap_offset),
        "ACQUIRE through {node} returned a reader's offset"
    );
    assert_eq!(own.window.permissions(), "rw-s");
    assert_eq!(
        slots()[offset_slot(own.info.mmap_offset)].pid,
        std::process::id() as i32,
        "the slot table shows the slab as ours"
    );
    own.window.write_u64(nc_offset(0, 1), 0xABCD);
    assert_eq!(own.window.read_u64(nc_offset(0, 1)), 0xABCD);
    // The reader's window of the same slot, through the owner's file, shows the write.
    let reader_window = own.info.mmap_offset - SLAB_SIZE as u64;
    let view = Mapping::new(&own.file, SLAB_SIZE, libc::PROT_READ, reader_window).unwrap();
    assert_eq!(view.read_u64(nc_offset(0, 1)), 0xABCD);
    drop(view);
    let OwnSlab { window, file, .. } = own;
    drop(window);
    release(&file, 0).expect("RELEASE through the ramfs node");
    drop(file);
    drop(mount);
}
