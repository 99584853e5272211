// SPDX-License-Identifier: GPL-2.0

//! A misc device registration that carries data for its files, and owns its name.
//!
//! C header: [`include/linux/miscdevice.h`](srctree/include/linux/miscdevice.h)
//!
//! A [`MiscDevice`]'s `open` only receives the [`MiscDeviceRegistration`], and the
//! registration needs a `'static` name. [`MiscRegistration`] keeps the registration next to the
//! data and the name it is registered with, and finds the one from the other.
//!
//! An open file of the device holds the module, on every supported release: 7.3's registration
//! sets `file_operations.owner`, so `misc_open` takes the reference; 7.2's leaves it NULL, and
//! [`MiscRegistration::open`] has the file take it ([`FileOwner`]).

use kernel::{
    bindings,
    fs::File,
    miscdevice::{
        MiscDevice,
        MiscDeviceOptions,
        MiscDeviceRegistration, //
    },
    prelude::*,
    str::CString, //
};

/// A misc device whose registrations carry data of type [`WithData::Data`].
pub(crate) trait WithData: MiscDevice {
    /// What every file of the device can reach.
    type Data: Send + Sync;
}

/// A registered misc device `/dev/<name>` with its data.
///
/// # Invariants
///
/// * `registration` is registered under `name`, whose heap buffer is neither changed nor freed
///   before the registration is dropped (fields drop in declaration order).
/// * This is the only place in the module that creates a [`MiscDeviceRegistration`] (the
///   packaging tests check that no other file of `rust/` calls `MiscDeviceRegistration::register`),
///   so every registration of a `T` is the `registration` field of a `MiscRegistration<T>`.
#[pin_data]
pub(crate) struct MiscRegistration<T: WithData> {
    #[pin]
    registration: MiscDeviceRegistration<T>,
    data: T::Data,
    name: CString,
    #[pin]
    file_owner: FileOwner,
}

impl<T: WithData> MiscRegistration<T> {
    /// Registers `/dev/<name>`, whose files reach `data`.
    pub(crate) fn register(name: CString, data: T::Data) -> impl PinInit<Self, Error> {
        // SAFETY: the bytes behind `name` live on the heap; moving the `CString` into `Self`
        // below does not move them, and by the type invariant they outlive the registration.
        let static_name: &'static CStr = unsafe { &*core::ptr::from_ref::<CStr>(&name) };
        let options = MiscDeviceOptions { name: static_name };
        // `file_owner` comes first: files may be opened as soon as the device is registered.
        try_pin_init!(Self {
            file_owner: FileOwner::new::<T>(options),
            registration <- MiscDeviceRegistration::register(options),
            data,
            name,
        })
    }

    /// The registration that a file is being opened on: what a [`MiscDevice`]'s `open` calls
    /// with its two arguments. From then on the file holds the module until its release, so the
    /// module cannot be unloaded while a file or a mapping of the device exists.
    pub(crate) fn open<'a>(
        file: &File,
        registration: &'a MiscDeviceRegistration<T>,
    ) -> Result<&'a Self> {
        let this = Self::of(registration);
        this.file_owner.hold(file, registration)?;
        Ok(this)
    }

    /// The registration that `registration` (as a file's `open` receives it) belongs to.
    fn of(registration: &MiscDeviceRegistration<T>) -> &Self {
        let field = core::ptr::from_ref(registration).cast_mut();
        // SAFETY: by the type invariant, every registration of a `T` is the `registration` field
        // of a `MiscRegistration<T>`, which lives at least as long as the borrow of its field.
        unsafe { &*kernel::container_of!(field, Self, registration) }
    }

    /// The data the device's files reach.
    pub(crate) fn data(&self) -> &T::Data {
        &self.data
    }

    /// The device number of the node (`MISC_MAJOR`, the minor the registration got).
    pub(crate) fn devt(&self) -> bindings::dev_t {
        // SAFETY: the registration is live, so its `minor` was set by `misc_register` and does not
        // change until deregistration.
        let minor = unsafe { (*self.registration.as_raw()).minor };
        let minor = bindings::dev_t::try_from(minor).unwrap_or(0);
        (bindings::MISC_MAJOR << bindings::MINORBITS) | minor
    }
}

/// Makes a file of the device hold the module, where the registration does not.
///
/// # Invariants
///
/// `fops` is the kernel crate's `file_operations` for the device with `owner` set to this
/// module; it is written only in [`FileOwner::new`] and lives at a fixed address (pinned) as long
/// as the registration, which the module outlives every file it holds.
#[cfg(kernel_version = "7.2")]
struct FileOwner {
    fops: kernel::types::Opaque<bindings::file_operations>,
}

// SAFETY: after `new`, `fops` is only read (by the kernel and by `hold`), from any thread.
#[cfg(kernel_version = "7.2")]
unsafe impl Send for FileOwner {}
// SAFETY: as for `Send`.
#[cfg(kernel_version = "7.2")]
unsafe impl Sync for FileOwner {}

#[cfg(kernel_version = "7.2")]
impl FileOwner {
    /// A copy of the `file_operations` that `options` registers `T` with, owned by this module.
    fn new<T: MiscDevice>(options: MiscDeviceOptions) -> Self {
        // SAFETY: `into_raw` points `fops` to the kernel crate's `'static` operations for `T`.
        let mut fops = unsafe { options.into_raw::<T>().fops.read() };
        fops.owner = &raw mut bindings::__this_module;
        Self {
            fops: kernel::types::Opaque::new(fops),
        }
    }

    /// Has `file`, being opened on `registration`, hold the module: `replace_fops()` to the
    /// owned copy after the reference `fops_get()` would have taken; the kernel drops it after
    /// the file's release, as for any driver's `owner` (`fops_put()` in `__fput()`).
    fn hold<T: MiscDevice>(&self, file: &File, registration: &MiscDeviceRegistration<T>) -> Result {
        let raw = file.as_ptr();
        // SAFETY: `file` is valid for the borrow. While `misc_open` calls the device's `open`,
        // `private_data` is the registration's `miscdevice`, and nothing else uses the file;
        // afterwards it is the file's own data, never the `miscdevice`.
        if unsafe { (*raw).private_data } != registration.as_raw().cast() {
            // Not a file being opened on this registration.
            return Err(EINVAL);
        }
        // SAFETY: as above.
        if unsafe { (*raw).f_op } == self.fops.get().cast_const() {
            // Holding the module already.
            return Ok(());
        }
        // SAFETY: `__this_module` is this module, which is running this code.
        if !unsafe { bindings::try_module_get(&raw mut bindings::__this_module) } {
            // The module is being unloaded.
            return Err(ENODEV);
        }
        // SAFETY: the file is being opened (checked above), so its operations may be replaced;
        // the old ones have no owner (nothing to put), the new ones have the same functions and
        // live as long as the module (type invariant), which the file now holds.
        unsafe { (*raw).f_op = self.fops.get() };
        Ok(())
    }
}

/// 7.3's registration sets `file_operations.owner`: `misc_open` already has every file hold
/// the module.
#[cfg(not(kernel_version = "7.2"))]
struct FileOwner;

#[cfg(not(kernel_version = "7.2"))]
impl FileOwner {
    #[expect(
        clippy::extra_unused_type_parameters,
        reason = "the same call as 7.2's, which copies `T`'s operations"
    )]
    fn new<T: MiscDevice>(_options: MiscDeviceOptions) -> Self {
        Self
    }

    fn hold<T: MiscDevice>(
        &self,
        _file: &File,
        _registration: &MiscDeviceRegistration<T>,
    ) -> Result {
        Ok(())
    }
}
