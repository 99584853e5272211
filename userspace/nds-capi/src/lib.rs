//! C API for the Neuron DataStore with the SDK's signatures: the `nds_*` calls of
//! `include/nrt/nds/neuron_ds.h` and the device calls of `include/ndl/ndl.h`, which state the
//! conventions.
//!
//! Every function validates its pointers (NULL gives `-EINVAL` or a NULL result), returns
//! libnds's values (negative errnos, and a positive ENOSPC for a full model table), and catches
//! panics so nothing unwinds into C.

mod device;
mod objects;

pub use device::{NdlDevice, NDL_DEVICE_CONTEXT_OFFSET};
pub use objects::NdsObject;

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use nds::{Datastore, Error};

/// `nds_instance_t`: an open datastore.
#[derive(Debug)]
pub struct NdsInstance {
    store: Datastore,
}

/// What a failed call returns: a negative errno, or libnds's positive ENOSPC.
type Code = c_int;

/// The code of a NULL pointer or an out-of-range argument.
const INVALID: Code = -libc::EINVAL;

/// Runs `body`, mapping success to 0, failures to their code and panics to `-EIO`.
fn int_result(body: impl FnOnce() -> Result<(), Code>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(code)) => code,
        Err(_) => -libc::EIO,
    }
}

/// Runs `body`, mapping `None` and panics to NULL.
fn ptr_result<T>(body: impl FnOnce() -> Option<*mut T>) -> *mut T {
    catch_unwind(AssertUnwindSafe(body))
        .ok()
        .flatten()
        .unwrap_or(ptr::null_mut())
}

/// The code libnds returns for `error`.
fn code(error: Error) -> Code {
    match error {
        // libnds reports a full model table as a positive 28.
        Error::NoFreeModelSlot => libc::ENOSPC,
        other => -other.errno(),
    }
}

/// # Safety
///
/// `inst` is NULL or a live instance from `nds_open`.
unsafe fn instance<'a>(inst: *const NdsInstance) -> Result<&'a NdsInstance, Code> {
    // SAFETY: guaranteed by the caller.
    unsafe { inst.as_ref() }.ok_or(INVALID)
}

fn core_index(pnc_index: c_int) -> Result<usize, Code> {
    usize::try_from(pnc_index).map_err(|_| INVALID)
}

fn to_index(index: u32) -> Result<usize, Code> {
    usize::try_from(index).map_err(|_| INVALID)
}

/// Opens `pid`'s datastore (0: own, read-write; otherwise read-only) into `*inst`.
///
/// # Safety
///
/// `device` is NULL or a live device; `inst` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn nds_open(
    device: *mut NdlDevice,
    pid: libc::pid_t,
    inst: *mut *mut NdsInstance,
) -> c_int {
    int_result(|| {
        // SAFETY: NULL or a live device per the caller.
        let device = unsafe { device.as_ref() }.ok_or(INVALID)?;
        if inst.is_null() {
            return Err(INVALID);
        }
        let store = Datastore::open(device.backend(), pid).map_err(code)?;
        // SAFETY: non-null and writable per the caller.
        unsafe { inst.write(Box::into_raw(Box::new(NdsInstance { store }))) };
        Ok(())
    })
}

/// Closes and frees an instance (freed even if closing reports an error).
///
/// # Safety
///
/// `inst` is NULL or a live instance that is not used afterwards, nor its objects.
#[no_mangle]
pub unsafe extern "C" fn nds_close(inst: *mut NdsInstance) -> c_int {
    int_result(|| {
        if inst.is_null() {
            return Err(INVALID);
        }
        // SAFETY: the caller hands back ownership of a boxed instance.
        let instance = unsafe { Box::from_raw(inst) };
        instance.store.close().map_err(code)
    })
}

/// Runs `op` on the instance's store.
///
/// # Safety
///
/// `inst` is NULL or a live instance.
unsafe fn with_store(
    inst: *const NdsInstance,
    op: impl FnOnce(&Datastore) -> Result<(), Code>,
) -> c_int {
    int_result(|| {
        // SAFETY: forwarded contract.
        let instance = unsafe { instance(inst) }?;
        op(&instance.store)
    })
}

/// Writes `value` through `out`.
///
/// # Safety
///
/// `out` is NULL or valid for writing a `u64`.
unsafe fn write_out(out: *mut u64, value: u64) -> Result<(), Code> {
    if out.is_null() {
        return Err(INVALID);
    }
    // SAFETY: non-null and writable per the caller.
    unsafe { out.write(value) };
    Ok(())
}

/// Reads the value `value` points to.
///
/// # Safety
///
/// `value` is NULL or valid for reading a `u64`.
unsafe fn read_in(value: *const u64) -> Result<u64, Code> {
    if value.is_null() {
        return Err(INVALID);
    }
    // SAFETY: non-null and readable per the caller.
    Ok(unsafe { value.read() })
}

/// Adds `increment` to NC counter `counter_index` of core `pnc_index`.
///
/// # Safety
///
/// `inst` is NULL or a live instance.
#[no_mangle]
pub unsafe extern "C" fn nds_increment_nc_counter(
    inst: *mut NdsInstance,
    pnc_index: c_int,
    counter_index: u32,
    increment: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        with_store(inst, |store| {
            store
                .increment_nc_counter(core_index(pnc_index)?, to_index(counter_index)?, increment)
                .map_err(code)
        })
    }
}

/// Subtracts `decrement` from NC counter `counter_index` of core `pnc_index`.
///
/// # Safety
///
/// `inst` is NULL or a live instance.
#[no_mangle]
pub unsafe extern "C" fn nds_decrement_nc_counter(
    inst: *mut NdsInstance,
    pnc_index: c_int,
    counter_index: u32,
    decrement: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        with_store(inst, |store| {
            store
                .decrement_nc_counter(core_index(pnc_index)?, to_index(counter_index)?, decrement)
                .map_err(code)
        })
    }
}

/// Reads NC counter `counter_index` of core `pnc_index` into `*value`.
///
/// # Safety
///
/// `inst` is NULL or a live instance; `value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nds_get_nc_counter(
    inst: *mut NdsInstance,
    pnc_index: c_int,
    counter_index: u32,
    value: *mut u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        with_store(inst, |store| {
            let read = store
                .nc_counter(core_index(pnc_index)?, to_index(counter_index)?)
                .map_err(code)?;
            write_out(value, read)
        })
    }
}

/// Stores `*value` in NC counter `counter_index` of core `pnc_index`.
///
/// # Safety
///
/// `inst` is NULL or a live instance; `value` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn nds_set_nc_counter(
    inst: *mut NdsInstance,
    pnc_index: c_int,
    counter_index: u32,
    value: *mut u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        with_store(inst, |store| {
            let new_value = read_in(value)?;
            store
                .set_nc_counter(core_index(pnc_index)?, to_index(counter_index)?, new_value)
                .map_err(code)
        })
    }
}

/// Adds `increment` to ND counter `counter_index`.
///
/// # Safety
///
/// `inst` is NULL or a live instance.
#[no_mangle]
pub unsafe extern "C" fn nds_increment_nd_counter(
    inst: *mut NdsInstance,
    counter_index: u32,
    increment: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        with_store(inst, |store| {
            store
                .increment_nd_counter(to_index(counter_index)?, increment)
                .map_err(code)
        })
    }
}

/// Subtracts `decrement` from ND counter `counter_index`.
///
/// # Safety
///
/// `inst` is NULL or a live instance.
#[no_mangle]
pub unsafe extern "C" fn nds_decrement_nd_counter(
    inst: *mut NdsInstance,
    counter_index: u32,
    decrement: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        with_store(inst, |store| {
            store
                .decrement_nd_counter(to_index(counter_index)?, decrement)
                .map_err(code)
        })
    }
}

/// Sets bit `bit_index` of ND counter `counter_index`.
///
/// # Safety
///
/// `inst` is NULL or a live instance.
#[no_mangle]
pub unsafe extern "C" fn nds_or_nd_counter(
    inst: *mut NdsInstance,
    counter_index: u32,
    bit_index: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        with_store(inst, |store| {
            store
                .or_nd_counter(to_index(counter_index)?, bit_index)
                .map_err(code)
        })
    }
}

/// Reads ND counter `counter_index` into `*value`.
///
/// # Safety
///
/// `inst` is NULL or a live instance; `value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nds_get_nd_counter(
    inst: *mut NdsInstance,
    counter_index: u32,
    value: *mut u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        with_store(inst, |store| {
            let read = store.nd_counter(to_index(counter_index)?).map_err(code)?;
            write_out(value, read)
        })
    }
}

/// Stores `*value` in ND counter `counter_index`.
///
/// # Safety
///
/// `inst` is NULL or a live instance; `value` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn nds_set_nd_counter(
    inst: *mut NdsInstance,
    counter_index: u32,
    value: *mut u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        with_store(inst, |store| {
            let new_value = read_in(value)?;
            store
                .set_nd_counter(to_index(counter_index)?, new_value)
                .map_err(code)
        })
    }
}
