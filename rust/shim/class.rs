// SPDX-License-Identifier: GPL-2.0

//! Device classes and class devices: `/sys/class/<class>/<device>`, which is
//! `/sys/devices/virtual/<class>/<device>` for a device without a parent.
//!
//! C header: [`include/linux/device/class.h`](srctree/include/linux/device/class.h)

use crate::shim::sysfs::{
    DeviceFiles,
    FileGroup,
    SysfsFiles,
    SysfsParent, //
};
use core::ptr::NonNull;
use kernel::{
    bindings,
    error::from_err_ptr,
    prelude::*,
    sync::Arc, //
};

/// A device class created at run time.
///
/// # Invariants
///
/// `raw` came from `class_create` and is destroyed exactly once, in `drop`; its name lives as
/// long as the module.
pub(crate) struct Class {
    raw: NonNull<bindings::class>,
}

// SAFETY: classes may be used and destroyed from any thread.
unsafe impl Send for Class {}
// SAFETY: `&Class` only hands the class to functions that may be called concurrently.
unsafe impl Sync for Class {}

impl Class {
    /// Creates class `name`; `EEXIST` if a class of that name exists.
    ///
    /// The class keeps a pointer to `name`: module memory (a literal or a module parameter),
    /// which outlives the class. `class_destroy` releases the class before it returns unless a
    /// reference to the class's kobject is still held elsewhere (only a debug kernel's delayed
    /// kobject release does that), and the release reads the name only for `pr_debug`.
    pub(crate) fn new(name: &'static CStr) -> Result<Arc<Self>> {
        // SAFETY: `name` is NUL-terminated and lives as long as the module (`'static`).
        let raw = from_err_ptr(unsafe { bindings::class_create(name.as_char_ptr()) })?;
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: the class was just created with `name`, which is `'static`.
        Ok(Arc::new(Self { raw }, GFP_KERNEL)?)
    }
}

impl Drop for Class {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: by the type invariant the class is live and destroyed only here; every device
        // of the class holds an `Arc` to it, so none is left.
        unsafe { bindings::class_destroy(self.raw.as_ptr()) };
    }
}

/// A device of a [`Class`] with no device node, whose own files `T` serves.
///
/// # Invariants
///
/// `raw` came from `device_create_with_groups` with `_files`' group, and is unregistered exactly
/// once, in `drop`, before `_files` is freed; `class` keeps the device's class alive.
pub(crate) struct ClassDevice<T: SysfsFiles> {
    raw: NonNull<bindings::device>,
    _files: Pin<KBox<FileGroup<DeviceFiles, T>>>,
    _class: Arc<Class>,
}

// SAFETY: devices may be unregistered from any thread; `T` is `Send`.
unsafe impl<T: SysfsFiles> Send for ClassDevice<T> {}
// SAFETY: `&ClassDevice` only gives out the kobject as a parent and `&T`, which is `Sync`.
unsafe impl<T: SysfsFiles> Sync for ClassDevice<T> {}

impl<T: SysfsFiles> ClassDevice<T> {
    /// Creates device `name` in `class`, with the files `T::FILES` served by `served`.
    pub(crate) fn new(class: Arc<Class>, name: &CStr, served: T) -> Result<Self> {
        let files = FileGroup::new(served)?;
        // SAFETY: the class is live (we hold it); no parent and no device number make a virtual
        // device without a node; the groups list is pinned and outlives the device (`drop`);
        // the format consumes exactly one string argument.
        let raw = from_err_ptr(unsafe {
            bindings::device_create_with_groups(
                class.raw.as_ptr(),
                core::ptr::null_mut(),
                0,
                core::ptr::null_mut(),
                files.raw_groups(),
                c"%s".as_char_ptr(),
                name.as_char_ptr(),
            )
        })?;
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: created just now with `_files`' group.
        Ok(Self {
            raw,
            _files: files,
            _class: class,
        })
    }
}

// SAFETY: the device is registered (and its kobject live) while `self` lives.
unsafe impl<T: SysfsFiles> SysfsParent for ClassDevice<T> {
    fn kobject(&self) -> *mut bindings::kobject {
        // SAFETY: the device is registered while `self` lives.
        unsafe { &raw mut (*self.raw.as_ptr()).kobj }
    }
}

impl<T: SysfsFiles> Drop for ClassDevice<T> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant the device is registered and unregistered only here.
        // Unregistering removes its files, waiting for running `show`/`store` calls, so `files`
        // may be freed afterwards.
        unsafe { bindings::device_unregister(self.raw.as_ptr()) };
    }
}
