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
//!   kept with the VMA, and each page is inserted by [`MiscFile::fault`] when first touched.
//! * No file is opened before [`MiscRegistration::start_serving`]: a module can register the
//!   node and still fail its `init`, after which the kernel frees the module's code whatever
//!   files are open.
//!
//! The device has no `llseek` (a seek gives `ESPIPE`); every open file holds the module.

use crate::shim::{
    shared_mapping::SharedMapping,
    vma::{
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
        Kiocb, //
    },
    iov::IovIterDest,
    mm::virt::VmaNew,
    prelude::*,
    str::CString,
    sync::{
        atomic::{
            ordering::{
                Acquire,
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
    /// then makes `VM_MIXEDMAP`, so that its faults can insert pages.
    fn mmap(this: Pin<&Self>, vma: &VmaNew) -> Result<u64>;

    /// Answers a page fault of a mapping made by [`MiscFile::mmap`].
    fn fault(this: Pin<&Self>, fault: &Fault<'_>) -> FaultOutcome;
}

/// The events `poll` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PollEvents(bindings::__poll_t);

impl PollEvents {
    /// Nothing is ready.
    pub(crate) const NONE: Self = Self(0);
    /// A `read` would return data without waiting (`EPOLLIN | EPOLLRDNORM`).
    pub(crate) const READABLE: Self = Self(bindings::POLLIN | bindings::POLLRDNORM);
}

/// `IOCB_NOWAIT` (`include/linux/fs.h`: `RWF_NOWAIT`), which the bindings lack.
const IOCB_NOWAIT: c_int = 0x8;

/// Whether the read of `kiocb` must not wait: its file is `O_NONBLOCK`, or it is a
/// `RWF_NOWAIT` read.
pub(crate) fn is_nonblocking<T: ForeignOwnable>(kiocb: &Kiocb<'_, T>) -> bool {
    let raw = kiocb.as_raw();
    // SAFETY: the kiocb and its file are valid for the read it describes; `ki_flags` is set
    // when it is made, and `f_flags` is read once (`fcntl` may change it at any time, and the
    // read sees one of the values).
    let (flags, file_flags) = unsafe {
        (
            (*raw).ki_flags,
            core::ptr::read_volatile(&raw const (*(*raw).ki_filp).f_flags),
        )
    };
    flags & IOCB_NOWAIT != 0 || file_flags & bindings::O_NONBLOCK != 0
}

/// The file position of `file`, where its next `read` starts.
pub(crate) fn file_position(file: &File) -> i64 {
    // SAFETY: `file` is valid for the borrow; the position is a 64-bit word that `read` and
    // `lseek` update, read once here (a racing update gives one of its values).
    unsafe { core::ptr::read_volatile(&raw const (*file.as_ptr()).f_pos) }
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
        match T::mmap(this, area) {
            Ok(tag) => {
                // What `Fault::from_raw` requires of every VMA with these operations; nothing
                // clears the flag afterwards, and splitting or moving the VMA keeps it.
                area.set_mixedmap();
                // SAFETY: the VMA is being set up under the mmap write lock, so nothing else
                // reads its operations or private data. The core calls a file's `mmap` on a
                // new VMA and these operations are the only ones it gets; they keep no
                // reference in `vm_private_data` (a plain tag), so splitting or moving the VMA
                // copies it as is.
                unsafe {
                    (*vma).vm_private_data =
                        core::ptr::without_provenance_mut(usize::try_from(tag).unwrap_or(0));
                    (*vma).vm_ops = &Self::VM_OPERATIONS;
                }
                0
            }
            Err(err) => err.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the core for a page fault of a VMA with these operations, with the VMA's read
    /// lock (or the mmap read lock) held.
    unsafe extern "C" fn fault(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
        // SAFETY: `vmf` is valid and the VMA read-locked for the call; `mmap` made the VMA
        // `VM_MIXEDMAP` when it installed these operations.
        let fault = unsafe { Fault::from_raw(vmf) };
        // SAFETY: only `mmap` of a file of these operations installs them, and a VMA holds a
        // reference to its file, so the file is open (its `release` has not run) while the VMA
        // exists.
        let this = unsafe { Self::borrow((*(*vmf).__bindgen_anon_1.vma).vm_file) };
        T::fault(this, &fault).into_raw()
    }
}
