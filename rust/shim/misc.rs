// SPDX-License-Identifier: GPL-2.0

//! Misc devices whose files reach the registration's data, share one address space, and whose
//! mappings are filled by a page-fault handler.
//!
//! C header: [`include/linux/miscdevice.h`](srctree/include/linux/miscdevice.h)
//!
//! 7.3's `MiscDevice` gives `open` only the registration, takes a `'static` name, cannot install
//! VMA operations and cannot set a file's address space; this registration has its own file
//! operations that do all four:
//!
//! * Every file's `f_mapping` is the address space [`MiscFile::mapping`] names, so that one
//!   [`SharedMapping::unmap_pages`] reaches every mapping of a range in every process (DRM sets
//!   `f_mapping` at open for the same reason).
//! * A mapping gets no pages at `mmap`: [`MiscFile::mmap`] checks the request and returns a tag
//!   kept with the VMA, and each page is inserted by [`MiscFile::fault`] when first touched, as
//!   a `VM_PFNMAP` special entry that `get_user_pages` cannot take a reference through.
//! * No file is opened before [`MiscRegistration::start_serving`]: a module can register the
//!   node and still fail its `init`, after which the kernel frees the module's code whatever
//!   files are open.
//!
//! The device has no `llseek` (a seek gives `ESPIPE`); every open file holds the module.

use crate::shim::{
    shared_mapping::SharedMapping,
    vma::{
        self,
        Fault,
        FaultOutcome, //
    },
};
use core::marker::PhantomData;
use kernel::{
    bindings,
    error::to_result,
    fs::{
        File,
        Kiocb,
        LocalFile, //
    },
    iov::IovIterDest,
    mm::virt::{
        VmaNew,
        VmaRef, //
    },
    prelude::*,
    str::CString,
    sync::{
        atomic::{
            atomic_load,
            ordering::{
                Acquire,
                Relaxed,
                Release, //
            },
            AtomicFlag,
        },
        poll::PollTable,
    },
    types::{
        ForeignOwnable,
        Opaque, //
    },
};

/// The open files of a misc device.
pub(crate) trait MiscFile: Sized + Send + Sync {
    /// What the registration holds for every file.
    type Data: Send + Sync;

    /// Opens a file of the device whose registration holds `data`.
    fn open(data: &Self::Data) -> Result<Pin<KBox<Self>>>;

    /// The address space the file's mappings are kept in; it must be the same for every file
    /// whose mappings are to be found together.
    fn mapping(&self) -> &SharedMapping;

    /// The file's last reference is gone: every mapping of it is unmapped and it is closed.
    fn release(this: Pin<KBox<Self>>);

    /// `unlocked_ioctl`.
    fn ioctl(this: Pin<&Self>, cmd: u32, arg: usize) -> Result<isize>;

    /// `read_iter`; [`is_nonblocking`] tells whether it may wait.
    fn read_iter(kiocb: Kiocb<'_, Pin<KBox<Self>>>, iov: &mut IovIterDest<'_>) -> Result<usize>;

    /// `poll`: registers `table` with what wakes the file and returns the ready events
    /// ([`PollEvents`]); [`file_position`] is where a `read` would start.
    fn poll(this: Pin<&Self>, file: &File, table: PollTable<'_>) -> PollEvents;

    /// Checks and sets up a new mapping (its flags; no page is inserted here). Returns the tag
    /// that [`Fault::tag`] gives back for every fault of the mapping, which the registration
    /// then makes `VM_PFNMAP` ([`vma::set_pfnmap`], which refuses a copy-on-write mapping), so
    /// that its faults insert special entries.
    fn mmap(this: Pin<&Self>, vma: &VmaNew) -> Result<u64>;

    /// Whether a VMA of a mapping made by [`MiscFile::mmap`] with tag `tag` may be split in
    /// two (the part from `address` on becoming a VMA of its own); an error refuses the split
    /// (`munmap`, `mprotect` or `mremap` of part of the mapping) with it.
    fn may_split(this: Pin<&Self>, vma: &VmaRef, tag: u64, address: usize) -> Result;

    /// `vma` is a new VMA copied from one of the file's with tag `tag` (which it keeps): a part
    /// split off, or the copy an `mremap` moves the mapping to (whose old VMA is then closed).
    fn vma_opened(this: Pin<&Self>, vma: &VmaRef, tag: u64);

    /// A VMA of the file's mappings, with tag `tag`, is going away (unmapped, or its process's
    /// address space torn down), or a mapping `mmap` accepted is refused afterwards.
    fn vma_closed(this: Pin<&Self>, vma: &VmaRef, tag: u64);

    /// Answers a page fault of a mapping made by [`MiscFile::mmap`]. The pages it inserts are
    /// borrowed from `this` for the fault: the file's data, which lives until every mapping of
    /// the file is gone.
    fn fault<'a>(this: Pin<&'a Self>, fault: &Fault<'a>) -> FaultOutcome;
}

/// The events `poll` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PollEvents(bindings::__poll_t);

impl PollEvents {
    /// Nothing is ready.
    pub(crate) const NONE: Self = Self(0);
    /// A `read` would return data without waiting (`EPOLLIN | EPOLLRDNORM`).
    pub(crate) const READABLE: Self = Self(bindings::POLLIN | bindings::POLLRDNORM);
    /// A `read` would fail without waiting (`EPOLLERR`).
    pub(crate) const ERROR: Self = Self(bindings::POLLERR);
}

/// `IOCB_NOWAIT` (`include/linux/fs.h`: `RWF_NOWAIT`), which the bindings lack.
const IOCB_NOWAIT: c_int = 0x8;

/// Whether the read of `kiocb` must not wait: its file is `O_NONBLOCK`, or it is a
/// `RWF_NOWAIT` read.
pub(crate) fn is_nonblocking<T: ForeignOwnable>(kiocb: &Kiocb<'_, T>) -> bool {
    let raw = kiocb.as_raw();
    // SAFETY: the kiocb and its file are valid for the read it describes; `ki_flags` is set
    // when it is made. `f_flags` is read once, as `READ_ONCE` would (an aligned word, which
    // `fcntl(F_SETFL)` may store at any time; the read sees one of the values).
    let (flags, file_flags) = unsafe {
        (
            (*raw).ki_flags,
            atomic_load(&raw mut (*(*raw).ki_filp).f_flags, Relaxed),
        )
    };
    flags & IOCB_NOWAIT != 0 || file_flags & bindings::O_NONBLOCK != 0
}

/// The file `kiocb` reads.
pub(crate) fn kiocb_file<'a, T: ForeignOwnable>(kiocb: &'a Kiocb<'_, T>) -> &'a LocalFile {
    // SAFETY: the kiocb's file is valid for as long as the kiocb is used, which the borrow
    // does not outlive; a read's `fdget_pos` (if it took no position lock) is on this thread,
    // which is what `LocalFile` allows.
    unsafe { LocalFile::from_raw_file((*kiocb.as_raw()).ki_filp) }
}

/// The file position of `file`, where its next `read` starts.
pub(crate) fn file_position(file: &File) -> i64 {
    // SAFETY: `file` is valid for the borrow; the position is an aligned 64-bit word that
    // `read` and `lseek` update, read once here as `READ_ONCE` would (a racing update gives
    // one of its values).
    unsafe { atomic_load(&raw mut (*file.as_ptr()).f_pos, Relaxed) }
}

/// A registered misc device `/dev/<name>` with its data.
///
/// # Invariants
///
/// * `raw` is registered with `misc_register`, under `name`, whose heap buffer is neither
///   changed nor freed before `raw` is deregistered (in `drop`, before the fields are dropped),
///   and with the file operations of [`FileOps<T>`], which no other registration uses.
/// * Every file of the device was opened after `serving` was set.
#[pin_data(PinnedDrop)]
pub(crate) struct MiscRegistration<T: MiscFile> {
    #[pin]
    raw: Opaque<bindings::miscdevice>,
    data: T::Data,
    name: CString,
    serving: AtomicFlag,
}

// SAFETY: the registration may be dropped from any thread; `T::Data` is `Send`.
unsafe impl<T: MiscFile> Send for MiscRegistration<T> {}
// SAFETY: shared access reads `data` (`Sync`) and the atomic flag; the C side serializes its
// own use of `raw`.
unsafe impl<T: MiscFile> Sync for MiscRegistration<T> {}

impl<T: MiscFile> MiscRegistration<T> {
    /// Registers `/dev/<name>`, whose files reach `data` once [`Self::start_serving`] is
    /// called; until then every open fails with `ENODEV`.
    pub(crate) fn register(name: CString, data: T::Data) -> impl PinInit<Self, Error> {
        let name_ptr = name.as_char_ptr();
        try_pin_init!(Self {
            data,
            name,
            serving: AtomicFlag::new(false),
            raw <- Opaque::try_ffi_init(move |slot: *mut bindings::miscdevice| {
                // SAFETY: `slot` is valid for writes; the name's bytes live on the heap, which
                // moving the `CString` into `Self` does not move, and they outlive the
                // registration (type invariant).
                unsafe {
                    slot.write(bindings::miscdevice {
                        minor: bindings::MISC_DYNAMIC_MINOR as c_int,
                        name: name_ptr,
                        fops: FileOps::<T>::build(),
                        ..pin_init::zeroed()
                    })
                };
                // SAFETY: `slot` holds a complete `miscdevice`, pinned for as long as it is
                // registered (it is deregistered in `drop`).
                to_result(unsafe { bindings::misc_register(slot) })
            }),
        })
    }

    /// Lets files be opened from now on.
    pub(crate) fn start_serving(&self) {
        self.serving.store(true, Release);
    }

    /// The registration whose `miscdevice` is `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is the `miscdevice` of a live registration that uses [`FileOps<T>`].
    unsafe fn from_raw<'a>(raw: *mut bindings::miscdevice) -> &'a Self {
        // SAFETY: by the type invariant, only a `MiscRegistration<T>` registers `FileOps<T>`,
        // so `raw` is the `raw` field of one, which lives as long as it is registered.
        unsafe { &*kernel::container_of!(Opaque::cast_from(raw).cast_mut(), Self, raw) }
    }
}

#[pinned_drop]
impl<T: MiscFile> PinnedDrop for MiscRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `raw` is registered (type invariant). Deregistering takes the lock that
        // `misc_open` holds while calling `open`, so no open of this registration is running
        // afterwards or starts later.
        unsafe { bindings::misc_deregister(self.raw.get()) };
    }
}

/// The file and VMA operations of the files of a `MiscRegistration<T>`.
struct FileOps<T>(PhantomData<T>);

impl<T: MiscFile> FileOps<T> {
    const FILE_OPERATIONS: bindings::file_operations = bindings::file_operations {
        owner: (&raw const bindings::__this_module).cast_mut(),
        open: Some(Self::open),
        release: Some(Self::release),
        unlocked_ioctl: Some(Self::ioctl),
        #[cfg(CONFIG_COMPAT)]
        compat_ioctl: bindings::compat_ptr_ioctl,
        read_iter: Some(Self::read_iter),
        poll: Some(Self::poll),
        mmap: Some(Self::mmap),
        ..pin_init::zeroed()
    };

    const VM_OPERATIONS: bindings::vm_operations_struct = bindings::vm_operations_struct {
        open: Some(Self::vma_open),
        close: Some(Self::vma_close),
        may_split: Some(Self::may_split),
        fault: Some(Self::fault),
        ..pin_init::zeroed()
    };

    const fn build() -> &'static bindings::file_operations {
        &Self::FILE_OPERATIONS
    }

    /// The file's data.
    ///
    /// # Safety
    ///
    /// `file` is a file of a `MiscRegistration<T>` between a successful `open` and its
    /// `release`, and the returned borrow does not outlive that.
    unsafe fn borrow<'a>(file: *mut bindings::file) -> Pin<&'a T> {
        // SAFETY: after a successful `open`, `private_data` is a `Pin<KBox<T>>` made foreign,
        // taken back only in `release` (the function's contract).
        unsafe { <Pin<KBox<T>> as ForeignOwnable>::borrow((*file).private_data) }
    }

    /// # Safety
    ///
    /// Called by `misc_open` for a file of a registration using these operations, with the
    /// file's `private_data` set to the registration's `miscdevice`.
    unsafe extern "C" fn open(inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: as this function's contract says.
        let registration = unsafe { MiscRegistration::<T>::from_raw((*file).private_data.cast()) };
        if !registration.serving.load(Acquire) {
            return ENODEV.to_errno();
        }
        // SAFETY: both come from the VFS, which is opening `file` on `inode`.
        let ret = unsafe { bindings::generic_file_open(inode, file) };
        if ret != 0 {
            return ret;
        }
        let this = match T::open(&registration.data) {
            Ok(this) => this,
            Err(err) => return err.to_errno(),
        };
        let mapping = this.mapping().as_raw();
        // SAFETY: the file is being opened, so nothing else uses it. Its address space is
        // replaced before any mapping of it can exist; the `SharedMapping` is borrowed from the
        // file's data, which lives until `release`, and the VFS does not use `f_mapping` after
        // `release` returns.
        unsafe {
            (*file).f_mapping = mapping;
            (*file).private_data = this.into_foreign();
        }
        0
    }

    /// # Safety
    ///
    /// Called by the VFS once, when the last reference to an opened file is gone.
    unsafe extern "C" fn release(_inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: `private_data` is the `Pin<KBox<T>>` that `open` made foreign; this is the
        // only place that takes it back.
        let this = unsafe { <Pin<KBox<T>> as ForeignOwnable>::from_foreign((*file).private_data) };
        T::release(this);
        0
    }

    /// # Safety
    ///
    /// Called by the VFS for an opened file.
    unsafe extern "C" fn ioctl(file: *mut bindings::file, cmd: c_uint, arg: c_ulong) -> c_long {
        // SAFETY: the file is open for the whole call.
        let this = unsafe { Self::borrow(file) };
        match T::ioctl(this, cmd, arg) {
            Ok(ret) => c_long::try_from(ret).unwrap_or(c_long::MAX),
            Err(err) => err.to_errno() as c_long,
        }
    }

    /// # Safety
    ///
    /// Called by the VFS for an opened file, with valid `kiocb` and `iter`.
    unsafe extern "C" fn read_iter(
        kiocb: *mut bindings::kiocb,
        iter: *mut bindings::iov_iter,
    ) -> isize {
        // SAFETY: the kiocb is valid for the call, and its file's private data is a
        // `Pin<KBox<T>>` made foreign (the file is open).
        let kiocb = unsafe { Kiocb::from_raw(kiocb) };
        // SAFETY: `iter` is a valid destination iterator for the call.
        let iov = unsafe { IovIterDest::from_raw(iter) };
        match T::read_iter(kiocb, iov) {
            Ok(read) => isize::try_from(read).unwrap_or(isize::MAX),
            Err(err) => err.to_errno() as isize,
        }
    }

    /// # Safety
    ///
    /// Called by the VFS for an opened file, with a poll table that is NULL or valid for the
    /// call.
    unsafe extern "C" fn poll(
        file: *mut bindings::file,
        table: *mut bindings::poll_table,
    ) -> bindings::__poll_t {
        // SAFETY: the file is open for the whole call.
        let this = unsafe { Self::borrow(file) };
        // SAFETY: as for `borrow`.
        let borrowed = unsafe { File::from_raw_file(file) };
        // SAFETY: the table is NULL or valid for the call (the function's contract).
        let table = unsafe { PollTable::from_raw(table) };
        T::poll(this, borrowed, table).0
    }

    /// # Safety
    ///
    /// Called by the core's `mmap` for an opened file, with a VMA being set up under the mmap
    /// write lock.
    unsafe extern "C" fn mmap(
        file: *mut bindings::file,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: the file is open for the whole call.
        let this = unsafe { Self::borrow(file) };
        // SAFETY: the VMA is being set up and the mmap write lock is held for the call.
        let area = unsafe { VmaNew::from_raw(vma) };
        let tag = match T::mmap(this, area) {
            Ok(tag) => tag,
            Err(err) => return err.to_errno(),
        };
        if let Err(err) = vma::set_pfnmap(area) {
            // Refused after `T` accepted it: the core calls no `close` for a mapping whose
            // `mmap` failed, so `T` forgets it here.
            T::vma_closed(this, area, tag);
            return err.to_errno();
        }
        // SAFETY: the VMA is being set up under the mmap write lock, so nothing else reads its
        // operations or private data. The core calls a file's `mmap` on a new VMA and these
        // operations are the only ones it gets, on a VMA that `set_pfnmap` just set up, as
        // `Fault::from_raw` requires of every VMA with them; they keep no reference in
        // `vm_private_data` (a plain tag), so splitting or moving the VMA copies it as is.
        unsafe {
            (*vma).vm_private_data =
                core::ptr::without_provenance_mut(usize::try_from(tag).unwrap_or(0));
            (*vma).vm_ops = &Self::VM_OPERATIONS;
        }
        0
    }

    /// The file's data, the VMA, and the tag `mmap` gave it, of a VMA with these operations.
    ///
    /// # Safety
    ///
    /// `vma` has these operations and is valid, with the mmap lock held (or the VMA's own
    /// lock), for `'a`.
    unsafe fn of_vma<'a>(vma: *mut bindings::vm_area_struct) -> (Pin<&'a T>, &'a VmaRef, u64) {
        // SAFETY: only `mmap` of a file of these operations installs them, and a VMA holds a
        // reference to its file until after its `close`, so the file is open (its `release`
        // has not run) while the VMA exists.
        let this = unsafe { Self::borrow((*vma).vm_file) };
        // SAFETY: `mmap` set the private data to the tag with the operations, and nothing
        // changes it afterwards (a split or a move copies it); the VMA is locked.
        let tag = unsafe { (*vma).vm_private_data }.addr() as u64;
        // SAFETY: valid and locked for `'a` (the function's contract).
        (this, unsafe { VmaRef::from_raw(vma) }, tag)
    }

    /// # Safety
    ///
    /// Called by the core, with the mmap write lock held, for a new VMA copied from one with
    /// these operations (a split, or an `mremap` move).
    unsafe extern "C" fn vma_open(vma: *mut bindings::vm_area_struct) {
        // SAFETY: the copy has the operations of the VMA it was copied from (these), and the
        // mmap lock is held for the call.
        let (this, vma, tag) = unsafe { Self::of_vma(vma) };
        T::vma_opened(this, vma, tag);
    }

    /// # Safety
    ///
    /// Called by the core for a VMA with these operations that is going away, with the mmap
    /// lock held: for writing (a failed setup, an `mremap`, the teardown of an address space),
    /// or for reading (`munmap` takes the write lock, detaches the VMAs and downgrades it to
    /// the read lock before it closes them).
    unsafe extern "C" fn vma_close(vma: *mut bindings::vm_area_struct) {
        // SAFETY: as this function's contract says; the VMA still holds its file, and a
        // detached VMA is no one else's to change.
        let (this, vma, tag) = unsafe { Self::of_vma(vma) };
        T::vma_closed(this, vma, tag);
    }

    /// # Safety
    ///
    /// Called by the core, with the mmap write lock held, before a VMA with these operations
    /// is split at `address`.
    unsafe extern "C" fn may_split(vma: *mut bindings::vm_area_struct, address: c_ulong) -> c_int {
        // SAFETY: as this function's contract says.
        let (this, vma, tag) = unsafe { Self::of_vma(vma) };
        match T::may_split(this, vma, tag, address) {
            Ok(()) => 0,
            Err(err) => err.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the core for a page fault of a VMA with these operations, with the VMA's read
    /// lock (or the mmap read lock) held.
    unsafe extern "C" fn fault(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
        // SAFETY: only `mmap` of a file of these operations installs them, and a VMA holds a
        // reference to its file, so the file is open (its `release` has not run) while the VMA
        // exists.
        let this = unsafe { Self::borrow((*(*vmf).__bindgen_anon_1.vma).vm_file) };
        // SAFETY: `vmf` is valid and the VMA read-locked for the call; `mmap` set the VMA up
        // with `set_pfnmap` when it installed these operations. The pages the handler inserts
        // are borrowed from `this` for the fault (`MiscFile::fault`'s signature), so they are
        // the file's data or kept alive by it, and the file is released only after its last
        // mapping is gone.
        let fault = unsafe { Fault::from_raw(vmf) };
        T::fault(this, &fault).into_raw()
    }
}
