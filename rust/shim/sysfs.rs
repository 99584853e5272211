// SPDX-License-Identifier: GPL-2.0

//! sysfs directories, and files whose reads and writes a Rust object serves.
//!
//! C header: [`include/linux/sysfs.h`](srctree/include/linux/sysfs.h)
//!
//! 7.3's `kernel` crate has no sysfs abstraction. A [`SysfsDir`] is a plain directory; a
//! [`SysfsNode`] is a directory whose files a [`SysfsFiles`] implementation serves. The files'
//! attributes are allocated per node and removed before the node's data is freed: removing a
//! sysfs file waits until no read or write of it is in progress, and none starts afterwards, so
//! no callback can reach freed data, however long the kobject itself lives on.

use core::{
    fmt,
    marker::{
        PhantomData,
        PhantomPinned, //
    },
    ptr::{
        null_mut,
        NonNull, //
    },
};
use kernel::{
    bindings,
    page::PAGE_SIZE,
    prelude::*,
    sync::Arc, //
};

/// A file of a sysfs directory: its name and its mode.
pub(crate) struct SysfsFile {
    /// The file name.
    pub(crate) name: &'static CStr,
    /// Permission bits; files without a write bit reject writes.
    pub(crate) mode: u16,
}

/// Serves the files of a sysfs directory.
pub(crate) trait SysfsFiles: Send + Sync {
    /// The files; `show` and `store` receive an index into this table.
    const FILES: &'static [SysfsFile];

    /// Writes the contents of file `file` into `text`.
    fn show(&self, file: usize, text: &mut SysfsText<'_>) -> Result;

    /// Takes a write of `input` to file `file`.
    fn store(&self, file: usize, input: &[u8]) -> Result;
}

/// The contents of a sysfs file being read: at most a page.
pub(crate) struct SysfsText<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl SysfsText<'_> {
    /// Appends `bytes`; `EFBIG` if they do not fit.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result {
        let end = self.len.checked_add(bytes.len()).ok_or(EFBIG)?;
        self.buf
            .get_mut(self.len..end)
            .ok_or(EFBIG)?
            .copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }
}

impl fmt::Write for SysfsText<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes()).map_err(|_| fmt::Error)
    }
}

/// Something a sysfs directory can be created in.
///
/// # Safety
///
/// [`SysfsParent::kobject`] returns a pointer to a live, registered kobject that stays live as
/// long as `self` does.
pub(crate) unsafe trait SysfsParent {
    /// The parent's kobject, valid as long as `self` is.
    fn kobject(&self) -> *mut bindings::kobject;
}

/// A plain sysfs directory.
///
/// # Invariants
///
/// `kobj` came from `kobject_create_and_add` and `self` holds one reference to it.
pub(crate) struct SysfsDir {
    kobj: NonNull<bindings::kobject>,
}

// SAFETY: a kobject reference may be dropped from any thread.
unsafe impl Send for SysfsDir {}
// SAFETY: `SysfsDir` offers no access to the kobject through `&self` but as a parent.
unsafe impl Sync for SysfsDir {}

impl SysfsDir {
    /// Creates directory `name` in `parent`.
    pub(crate) fn new(parent: &impl SysfsParent, name: &CStr) -> Result<Self> {
        // SAFETY: `parent`'s kobject is live while `parent` is borrowed, and the new kobject
        // takes its own reference to it; `name` is NUL-terminated and copied by the call.
        let kobj =
            unsafe { bindings::kobject_create_and_add(name.as_char_ptr(), parent.kobject()) };
        // INVARIANT: a non-NULL result is a new kobject holding one reference for us.
        NonNull::new(kobj).map(|kobj| Self { kobj }).ok_or(ENOMEM)
    }
}

// SAFETY: by the type invariant, `self` holds a reference to the registered kobject.
unsafe impl SysfsParent for SysfsDir {
    fn kobject(&self) -> *mut bindings::kobject {
        self.kobj.as_ptr()
    }
}

impl Drop for SysfsDir {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: by the type invariant we hold one reference, given back exactly once here.
        unsafe { bindings::kobject_put(self.kobj.as_ptr()) };
    }
}

/// How the kobject that owns a file calls into it: a plain kobject's files are
/// `kobj_attribute`s, a device's files are `device_attribute`s. Both begin with the `attribute`
/// and continue with `show` and `store`.
///
/// # Safety
///
/// `Raw` is a `#[repr(C)]` C attribute type that begins with its `attribute`, and
/// [`AttributeFlavor::raw`] fills in callbacks that the kernel calls, for that attribute only,
/// with a pointer to it as the `attr` argument, and `T`'s [`show`] / [`store`] behind them.
pub(crate) unsafe trait AttributeFlavor {
    /// The C attribute type.
    type Raw: Copy;
    /// The C attribute for `attr`, calling into `T`'s file at the same index.
    fn raw<T: SysfsFiles>(attr: bindings::attribute, show: bool, store: bool) -> Self::Raw;
}

/// Files of a plain kobject ([`SysfsDir`]).
pub(crate) struct KobjectFiles;

/// Files of a `struct device`.
pub(crate) struct DeviceFiles;

/// One file of a [`FileGroup`].
///
/// # Invariants
///
/// `raw` is the first field and begins with the file's `attribute`; `served` points to the
/// object that serves the file, kept alive by the [`FileGroup`] that owns this file (an `Arc`
/// of its own, which no write to the group moves or invalidates); `index` is this file's
/// index in [`SysfsFiles::FILES`].
#[repr(C)]
struct GroupFile<F: AttributeFlavor, T: SysfsFiles> {
    raw: F::Raw,
    index: usize,
    served: *const T,
}

// Not derived: a derive would ask `F` and `T` to be `Clone` too.
impl<F: AttributeFlavor, T: SysfsFiles> Clone for GroupFile<F, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F: AttributeFlavor, T: SysfsFiles> Copy for GroupFile<F, T> {}

/// The attribute group of a directory's files, and the object that serves them.
///
/// # Invariants
///
/// `group.attrs` points to `attrs`, a NULL-terminated array of pointers to the `attribute`s of
/// `files`; neither vector is resized after construction. `groups[0]` points to `group`, so the
/// whole is pinned (and `!Unpin`). Every file's `served` is `served`'s pointer.
pub(crate) struct FileGroup<F: AttributeFlavor, T: SysfsFiles> {
    group: bindings::attribute_group,
    groups: [*const bindings::attribute_group; 2],
    attrs: KVec<*mut bindings::attribute>,
    files: KVec<GroupFile<F, T>>,
    /// Owns what every file's `served` points to.
    _served: Arc<T>,
    _flavor: PhantomData<F>,
    _pinned: PhantomPinned,
}

// SAFETY: the raw pointers only point into the group's own allocations; the C side reads them
// while the group is registered, and `served` is `Send`.
unsafe impl<F: AttributeFlavor, T: SysfsFiles> Send for FileGroup<F, T> {}
// SAFETY: shared access only reads the group, and `served` is `Sync`.
unsafe impl<F: AttributeFlavor, T: SysfsFiles> Sync for FileGroup<F, T> {}

impl<F: AttributeFlavor, T: SysfsFiles> FileGroup<F, T> {
    /// The attribute group for `T::FILES`, served by `served`.
    pub(crate) fn new(served: T) -> Result<Pin<KBox<Self>>> {
        let count = T::FILES.len();
        let served = Arc::new(served, GFP_KERNEL)?;
        let served_ptr = Arc::as_ptr(&served);
        // Every slot is overwritten below; the vectors are allocated whole, at their final
        // size, so that nothing after the allocations can fail or move a file.
        let unused = GroupFile {
            raw: F::raw::<T>(pin_init::zeroed(), false, false),
            index: 0,
            served: served_ptr,
        };
        let mut group = KBox::new(
            Self {
                group: pin_init::zeroed(),
                groups: [core::ptr::null(); 2],
                attrs: KVec::from_elem(null_mut(), count + 1, GFP_KERNEL)?,
                files: KVec::from_elem(unused, count, GFP_KERNEL)?,
                _served: served,
                _flavor: PhantomData,
                _pinned: PhantomPinned,
            },
            GFP_KERNEL,
        )?;
        let this = &mut *group;
        let files = this.files.iter_mut().zip(T::FILES.iter()).enumerate();
        for ((index, (slot, file)), attr) in files.zip(this.attrs.iter_mut()) {
            // `struct attribute` has lockdep fields only with CONFIG_DEBUG_LOCK_ALLOC.
            #[allow(clippy::needless_update)]
            let mut c_attr = bindings::attribute {
                name: file.name.as_char_ptr(),
                mode: file.mode,
                ..pin_init::zeroed()
            };
            // What `sysfs_attr_init()` does for an attribute that is not static.
            #[cfg(CONFIG_DEBUG_LOCK_ALLOC)]
            {
                c_attr.key = kernel::static_lock_class!().as_ptr();
            }
            #[cfg(not(CONFIG_DEBUG_LOCK_ALLOC))]
            let _ = &mut c_attr;
            let raw = F::raw::<T>(c_attr, file.mode & 0o444 != 0, file.mode & 0o222 != 0);
            *slot = GroupFile {
                raw,
                index,
                served: served_ptr,
            };
            *attr = core::ptr::from_mut(slot).cast::<bindings::attribute>();
        }
        this.group.__bindgen_anon_2.attrs = this.attrs.as_mut_ptr();
        // Last: the one pointer into the group itself, after which it is only shared.
        this.groups[0] = &raw const this.group;
        // INVARIANT: `attrs` holds every file's attribute and, last, the NULL it was filled
        // with; neither vector changes size anymore; the group is pinned from here on.
        Ok(KBox::into_pin(group))
    }

    /// The group, for `sysfs_create_group`.
    fn raw_group(&self) -> *const bindings::attribute_group {
        &raw const self.group
    }

    /// The NULL-terminated list of this one group, for `device_create_with_groups`.
    pub(crate) fn raw_groups(&self) -> *mut *const bindings::attribute_group {
        self.groups.as_ptr().cast_mut()
    }
}

/// Runs a file's `show`.
///
/// # Safety
///
/// `attr` must be the attribute of a live [`GroupFile<F, T>`], and `buf` a page that sysfs
/// provides for the file's contents.
unsafe fn show<F: AttributeFlavor, T: SysfsFiles>(attr: *mut c_void, buf: *mut c_char) -> isize {
    let file = attr.cast::<GroupFile<F, T>>();
    // SAFETY: by the function's contract and `GroupFile`'s invariant, `file` is live and its
    // `served` points to the object its group keeps alive while its files exist.
    let (index, served) = unsafe { ((*file).index, &*(*file).served) };
    // SAFETY: sysfs passes a buffer of `PAGE_SIZE` bytes that nothing else uses during the call.
    let buf = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), PAGE_SIZE) };
    let mut text = SysfsText { buf, len: 0 };
    match served.show(index, &mut text) {
        Ok(()) => isize::try_from(text.len).unwrap_or(0),
        Err(err) => err.to_errno() as isize,
    }
}

/// Runs a file's `store`.
///
/// # Safety
///
/// `attr` must be the attribute of a live [`GroupFile<F, T>`], and `buf` must hold `count`
/// bytes written by userspace.
unsafe fn store<F: AttributeFlavor, T: SysfsFiles>(
    attr: *mut c_void,
    buf: *const c_char,
    count: usize,
) -> isize {
    let file = attr.cast::<GroupFile<F, T>>();
    // SAFETY: as in `show`.
    let (index, served) = unsafe { ((*file).index, &*(*file).served) };
    // SAFETY: sysfs passes `count` readable bytes that stay unchanged during the call.
    let input = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
    match served.store(index, input) {
        Ok(()) => isize::try_from(count).unwrap_or(isize::MAX),
        Err(err) => err.to_errno() as isize,
    }
}

/// # Safety
///
/// Called by sysfs for a file of a [`SysfsNode<T>`], with a page-sized `buf`.
unsafe extern "C" fn kobject_show<T: SysfsFiles>(
    _kobj: *mut bindings::kobject,
    attr: *mut bindings::kobj_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: the node's files are `GroupFile<KobjectFiles, T>` whose `raw` is `*attr`.
    unsafe { show::<KobjectFiles, T>(attr.cast(), buf) }
}

/// # Safety
///
/// Called by sysfs for a file of a [`SysfsNode<T>`] with `count` bytes in `buf`.
unsafe extern "C" fn kobject_store<T: SysfsFiles>(
    _kobj: *mut bindings::kobject,
    attr: *mut bindings::kobj_attribute,
    buf: *const c_char,
    count: usize,
) -> isize {
    // SAFETY: as in `kobject_show`.
    unsafe { store::<KobjectFiles, T>(attr.cast(), buf, count) }
}

/// # Safety
///
/// Called by the driver core for a file of a device created with a [`FileGroup<DeviceFiles, T>`].
unsafe extern "C" fn device_show<T: SysfsFiles>(
    _dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: the device's files are `GroupFile<DeviceFiles, T>` whose `raw` is `*attr`.
    unsafe { show::<DeviceFiles, T>(attr.cast(), buf) }
}

/// # Safety
///
/// Called by the driver core for a file of a device created with a [`FileGroup<DeviceFiles, T>`].
unsafe extern "C" fn device_store<T: SysfsFiles>(
    _dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    buf: *const c_char,
    count: usize,
) -> isize {
    // SAFETY: as in `device_show`.
    unsafe { store::<DeviceFiles, T>(attr.cast(), buf, count) }
}

// SAFETY: `kobj_attribute` begins with its `attribute`, and sysfs calls a kobject attribute's
// callbacks with that attribute (`kobj_attr_show`/`kobj_attr_store`).
unsafe impl AttributeFlavor for KobjectFiles {
    type Raw = bindings::kobj_attribute;

    fn raw<T: SysfsFiles>(attr: bindings::attribute, show: bool, store: bool) -> Self::Raw {
        kobj_attribute(
            attr,
            show.then_some(kobject_show::<T> as KobjShow),
            store.then_some(kobject_store::<T> as KobjStore),
        )
    }
}

/// The C type of a `kobj_attribute`'s `show`.
type KobjShow = unsafe extern "C" fn(
    *mut bindings::kobject,
    *mut bindings::kobj_attribute,
    *mut c_char,
) -> isize;
/// The C type of a `kobj_attribute`'s `store`.
type KobjStore = unsafe extern "C" fn(
    *mut bindings::kobject,
    *mut bindings::kobj_attribute,
    *const c_char,
    usize,
) -> isize;

/// A `kobj_attribute` with `show` and `store`: plain fields in 7.2.
#[cfg(kernel_version = "7.2")]
fn kobj_attribute(
    attr: bindings::attribute,
    show: Option<KobjShow>,
    store: Option<KobjStore>,
) -> bindings::kobj_attribute {
    bindings::kobj_attribute { attr, show, store }
}

/// A `kobj_attribute` with `show` and `store`: 7.3 put each in a union with a variant taking a
/// `const` attribute (`__SYSFS_FUNCTION_ALTERNATIVE`), the way `device_attribute` already was.
#[cfg(not(kernel_version = "7.2"))]
fn kobj_attribute(
    attr: bindings::attribute,
    show: Option<KobjShow>,
    store: Option<KobjStore>,
) -> bindings::kobj_attribute {
    bindings::kobj_attribute {
        attr,
        __bindgen_anon_1: bindings::kobj_attribute__bindgen_ty_1 { show },
        __bindgen_anon_2: bindings::kobj_attribute__bindgen_ty_2 { store },
    }
}

// SAFETY: `device_attribute` begins with its `attribute`, and the driver core calls a device
// attribute's callbacks with that attribute (`dev_attr_show`/`dev_attr_store`).
unsafe impl AttributeFlavor for DeviceFiles {
    type Raw = bindings::device_attribute;

    fn raw<T: SysfsFiles>(attr: bindings::attribute, show: bool, store: bool) -> Self::Raw {
        bindings::device_attribute {
            attr,
            __bindgen_anon_1: bindings::device_attribute__bindgen_ty_1 {
                show: if show { Some(device_show::<T>) } else { None },
            },
            __bindgen_anon_2: bindings::device_attribute__bindgen_ty_2 {
                store: if store { Some(device_store::<T>) } else { None },
            },
        }
    }
}

/// A sysfs directory whose files `T` serves.
///
/// # Invariants
///
/// `files`' group was created on `dir`'s kobject and stays there until `drop` removes it.
pub(crate) struct SysfsNode<T: SysfsFiles> {
    files: Pin<KBox<FileGroup<KobjectFiles, T>>>,
    dir: SysfsDir,
}

impl<T: SysfsFiles> SysfsNode<T> {
    /// Creates directory `name` in `parent` with `T::FILES`, served by `served`.
    pub(crate) fn new(parent: &impl SysfsParent, name: &CStr, served: T) -> Result<Self> {
        let files = FileGroup::new(served)?;
        let dir = SysfsDir::new(parent, name)?;
        // SAFETY: `dir`'s kobject is live, and the group is pinned and outlives its registration
        // (removed in `drop` before `files` is freed).
        kernel::error::to_result(unsafe {
            bindings::sysfs_create_group(dir.kobject(), files.raw_group())
        })?;
        // INVARIANT: the group was just created on `dir`.
        Ok(Self { files, dir })
    }
}

// SAFETY: the node's directory is registered while the node lives.
unsafe impl<T: SysfsFiles> SysfsParent for SysfsNode<T> {
    fn kobject(&self) -> *mut bindings::kobject {
        self.dir.kobject()
    }
}

impl<T: SysfsFiles> SysfsNode<T> {
    /// What wakes the pollers of `file` (`sysfs_notify`); one of a file the node does not
    /// have wakes nobody, as `sysfs_notify` finds no such file.
    pub(crate) fn notifier(&self, file: &'static SysfsFile) -> SysfsNotifier {
        let kobj = self.dir.kobj;
        // SAFETY: the directory's kobject is live while `self` is (type invariant of
        // `SysfsDir`); the new reference is the notifier's.
        unsafe { bindings::kobject_get(kobj.as_ptr()) };
        // INVARIANT: the reference just taken.
        SysfsNotifier {
            kobj,
            name: file.name,
        }
    }
}

/// Wakes the pollers of one sysfs file: `poll()` of the file returns `POLLERR | POLLPRI` after
/// [`SysfsNotifier::notify`], until the file is read again from its start.
///
/// # Invariants
///
/// `self` holds one reference to `kobj`.
pub(crate) struct SysfsNotifier {
    kobj: NonNull<bindings::kobject>,
    name: &'static CStr,
}

// SAFETY: a kobject reference may be used and dropped from any thread.
unsafe impl Send for SysfsNotifier {}
// SAFETY: `sysfs_notify` may be called concurrently.
unsafe impl Sync for SysfsNotifier {}

impl SysfsNotifier {
    /// Notifies the file's pollers (nothing happens once the file is removed). May sleep.
    pub(crate) fn notify(&self) {
        // SAFETY: the kobject is referenced (type invariant), so it is valid even after its
        // directory is removed, in which case `sysfs_notify` finds no file; `name` is
        // NUL-terminated and `'static`.
        unsafe {
            bindings::sysfs_notify(
                self.kobj.as_ptr(),
                core::ptr::null(),
                self.name.as_char_ptr(),
            )
        };
    }
}

impl Drop for SysfsNotifier {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: by the type invariant we hold one reference, given back exactly once here.
        unsafe { bindings::kobject_put(self.kobj.as_ptr()) };
    }
}

impl<T: SysfsFiles> Drop for SysfsNode<T> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant the group is on `dir`'s kobject. Removing it waits for
        // running `show`/`store` calls and prevents new ones, so `files` may be freed afterwards.
        unsafe { bindings::sysfs_remove_group(self.dir.kobject(), self.files.raw_group()) };
    }
}
