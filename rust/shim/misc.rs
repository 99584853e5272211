// SPDX-License-Identifier: GPL-2.0

//! A misc device registration that carries data for its files, and owns its name.
//!
//! C header: [`include/linux/miscdevice.h`](srctree/include/linux/miscdevice.h)
//!
//! In 7.3 a [`MiscDevice`]'s `open` only receives the [`MiscDeviceRegistration`], and the
//! registration needs a `'static` name. [`MiscRegistration`] keeps the registration next to the
//! data and the name it is registered with, and finds the one from the other.

use kernel::{
    bindings,
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
}

impl<T: WithData> MiscRegistration<T> {
    /// Registers `/dev/<name>`, whose files reach `data`.
    pub(crate) fn register(name: CString, data: T::Data) -> impl PinInit<Self, Error> {
        // SAFETY: the bytes behind `name` live on the heap; moving the `CString` into `Self`
        // below does not move them, and by the type invariant they outlive the registration.
        let static_name: &'static CStr = unsafe { &*core::ptr::from_ref::<CStr>(&name) };
        try_pin_init!(Self {
            registration <- MiscDeviceRegistration::register(MiscDeviceOptions {
                name: static_name,
            }),
            data,
            name,
        })
    }

    /// The registration that `registration` (as a file's `open` receives it) belongs to.
    pub(crate) fn of(registration: &MiscDeviceRegistration<T>) -> &Self {
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
