//! C API for the Neuron DataStore with the SDK's `nds_*` signatures; see
//! `include/neuron_ds.h` for the C declarations and conventions.
//!
//! Every function validates its pointers (NULL gives `-EINVAL` or a NULL result), returns
//! negative errnos, and catches panics so nothing unwinds into C.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::size_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use nds::abi::records::{ModelMemUsage, ModelNodeInfo, ObjectType, ProcessInfo, ProcessInfoExt};
use nds::{Backend, Datastore, Error, ModelEntry, ModelSlot, Snapshot};
use zerocopy::FromZeros;

/// `ndl_device_t`: names where slabs come from.
#[derive(Debug)]
pub struct NdlDevice {
    backend: Backend,
}

/// `nds_instance_t`: an open datastore.
#[derive(Debug)]
pub struct NdsInstance {
    store: Datastore,
}

/// What an `nds_obj_handle_t` points to: a local copy of one record.
#[derive(Debug)]
pub struct NdsObject {
    /// The instance the object belongs to; by contract it outlives the object.
    instance: *const NdsInstance,
    record: ObjectRecord,
}

#[derive(Debug)]
enum ObjectRecord {
    Model(Box<ModelObject>),
    ProcessInfo(ProcessInfo),
    ProcessInfoExt(ProcessInfoExt),
}

#[derive(Debug)]
struct ModelObject {
    /// Slot in the slab, once committed (producer) or when read (reader).
    slot: Option<ModelSlot>,
    node_info: ModelNodeInfo,
    mem_usage: ModelMemUsage,
}

/// Positive errno of a failed call.
type Errno = c_int;

/// Runs `body`, mapping success to 0, errors to `-errno` and panics to `-EIO`.
fn int_result(body: impl FnOnce() -> Result<(), Errno>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(errno)) => -errno,
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

fn errno(error: Error) -> Errno {
    error.errno()
}

/// # Safety
///
/// `inst` is NULL or a live instance from `nds_open`.
unsafe fn instance<'a>(inst: *const NdsInstance) -> Result<&'a NdsInstance, Errno> {
    // SAFETY: guaranteed by the caller.
    unsafe { inst.as_ref() }.ok_or(libc::EINVAL)
}

/// # Safety
///
/// `obj` is NULL or a live object from this library.
unsafe fn object<'a>(obj: *mut c_void) -> Option<&'a mut NdsObject> {
    // SAFETY: guaranteed by the caller.
    unsafe { obj.cast::<NdsObject>().as_mut() }
}

fn core_index(pnc_index: c_int) -> Result<usize, Errno> {
    usize::try_from(pnc_index).map_err(|_| libc::EINVAL)
}

fn to_index(index: u32) -> Result<usize, Errno> {
    usize::try_from(index).map_err(|_| libc::EINVAL)
}

/// # Safety
///
/// `path` is NULL or a NUL-terminated string.
unsafe fn new_device(path: *const c_char, make: fn(String) -> Backend) -> *mut NdlDevice {
    ptr_result(|| {
        if path.is_null() {
            return None;
        }
        // SAFETY: non-null and NUL-terminated per the caller.
        let path = unsafe { CStr::from_ptr(path) }.to_str().ok()?.to_owned();
        Some(Box::into_raw(Box::new(NdlDevice {
            backend: make(path),
        })))
    })
}

/// A device for the kernel node at `path` (e.g. `/dev/neuron0`); NULL for a NULL or
/// non-UTF-8 path. Free with `nds_device_close`.
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn nds_device_open(path: *const c_char) -> *mut NdlDevice {
    // SAFETY: forwarded contract.
    unsafe { new_device(path, Backend::device) }
}

/// A device backed by the slab file at `path`. Free with `nds_device_close`.
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn nds_device_open_file(path: *const c_char) -> *mut NdlDevice {
    // SAFETY: forwarded contract.
    unsafe { new_device(path, Backend::file) }
}

/// Frees a device; NULL is ignored.
///
/// # Safety
///
/// `device` is NULL or came from `nds_device_open*` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn nds_device_close(device: *mut NdlDevice) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !device.is_null() {
            // SAFETY: the caller hands back ownership of a boxed device.
            drop(unsafe { Box::from_raw(device) });
        }
    }));
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
        let device = unsafe { device.as_ref() }.ok_or(libc::EINVAL)?;
        if inst.is_null() {
            return Err(libc::EINVAL);
        }
        let store = Datastore::open(&device.backend, pid).map_err(errno)?;
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
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller hands back ownership of a boxed instance.
        let instance = unsafe { Box::from_raw(inst) };
        instance.store.close().map_err(errno)
    })
}

/// Runs `op` on the instance's store.
///
/// # Safety
///
/// `inst` is NULL or a live instance.
unsafe fn with_store(
    inst: *const NdsInstance,
    op: impl FnOnce(&Datastore) -> Result<(), Errno>,
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
unsafe fn write_out(out: *mut u64, value: u64) -> Result<(), Errno> {
    if out.is_null() {
        return Err(libc::EINVAL);
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
unsafe fn read_in(value: *const u64) -> Result<u64, Errno> {
    if value.is_null() {
        return Err(libc::EINVAL);
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
                .map_err(errno)
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
                .map_err(errno)
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
                .map_err(errno)?;
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
                .map_err(errno)
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
                .map_err(errno)
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
                .map_err(errno)
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
                .map_err(errno)
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
            let read = store.nd_counter(to_index(counter_index)?).map_err(errno)?;
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
                .map_err(errno)
        })
    }
}

fn new_object(instance: *const NdsInstance, record: ObjectRecord) -> *mut c_void {
    Box::into_raw(Box::new(NdsObject { instance, record })).cast::<c_void>()
}

/// A new, zeroed local object of `type` (`OBJECT_TYPE_*`); NULL for a bad instance or type.
///
/// # Safety
///
/// `inst` is NULL or a live instance that outlives the object.
#[no_mangle]
pub unsafe extern "C" fn nds_obj_new(inst: *mut NdsInstance, r#type: c_int) -> *mut c_void {
    ptr_result(|| {
        if inst.is_null() {
            return None;
        }
        let record = match ObjectType::from_raw(r#type)? {
            ObjectType::ModelNodeInfo => ObjectRecord::Model(Box::new(ModelObject {
                slot: None,
                node_info: ModelNodeInfo::new_zeroed(),
                mem_usage: ModelMemUsage::new_zeroed(),
            })),
            ObjectType::ProcessInfo => ObjectRecord::ProcessInfo(ProcessInfo::new_zeroed()),
            ObjectType::ProcessInfoExt => {
                ObjectRecord::ProcessInfoExt(ProcessInfoExt::new_zeroed())
            }
        };
        Some(new_object(inst, record))
    })
}

/// Publishes an object: process records overwrite theirs, a model takes a free slot on its
/// first commit and keeps it afterwards.
///
/// # Safety
///
/// `obj` is NULL or a live object whose instance is still open.
#[no_mangle]
pub unsafe extern "C" fn nds_obj_commit(obj: *mut c_void) -> c_int {
    int_result(|| {
        // SAFETY: forwarded contract.
        let object = unsafe { object(obj) }.ok_or(libc::EINVAL)?;
        // SAFETY: objects never outlive their instance.
        let store = &unsafe { instance(object.instance) }?.store;
        match &mut object.record {
            ObjectRecord::ProcessInfo(info) => store.commit_process_info(info).map_err(errno),
            ObjectRecord::ProcessInfoExt(info) => {
                store.commit_process_info_ext(info).map_err(errno)
            }
            ObjectRecord::Model(model) => {
                let slot = match model.slot {
                    Some(slot) => slot,
                    None => {
                        let slot = store.allocate_model_slot().map_err(errno)?;
                        model.slot = Some(slot);
                        slot
                    }
                };
                store
                    .commit_model(slot, &model.node_info, &model.mem_usage)
                    .map_err(errno)
            }
        }
    })
}

/// Frees an object; for a model committed through a producer instance, first deletes it from
/// the datastore (zeroing its record and freeing its slot). Reader copies are only freed.
///
/// # Safety
///
/// `obj` is NULL or a live object, not used afterwards, whose instance is still open.
#[no_mangle]
pub unsafe extern "C" fn nds_obj_delete(obj: *mut c_void) -> c_int {
    int_result(|| {
        if obj.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller hands back ownership of a boxed object.
        let object = unsafe { Box::from_raw(obj.cast::<NdsObject>()) };
        let ObjectRecord::Model(model) = &object.record else {
            // Process records are only ever overwritten, never deleted.
            return Ok(());
        };
        // SAFETY: objects never outlive their instance.
        let store = &unsafe { instance(object.instance) }?.store;
        match model.slot {
            Some(slot) if !store.is_read_only() => store.delete_model(slot).map_err(errno),
            _ => Ok(()),
        }
    })
}

/// Runs `project` on the object's record, NULL for NULL or another object type.
///
/// # Safety
///
/// `obj` is NULL or a live object.
unsafe fn project<T>(
    obj: *mut c_void,
    project: impl FnOnce(&mut ObjectRecord) -> Option<&mut T>,
) -> *mut T {
    ptr_result(|| {
        // SAFETY: forwarded contract.
        let object = unsafe { object(obj) }?;
        project(&mut object.record).map(ptr::from_mut)
    })
}

/// The model node info of a model object; NULL otherwise.
///
/// # Safety
///
/// `obj` is NULL or a live object; the result lives as long as the object.
#[no_mangle]
pub unsafe extern "C" fn nds_obj_handle_to_model_node_info(obj: *mut c_void) -> *mut ModelNodeInfo {
    // SAFETY: forwarded contract.
    unsafe {
        project(obj, |record| match record {
            ObjectRecord::Model(model) => Some(&mut model.node_info),
            _ => None,
        })
    }
}

/// The memory-usage grid of a model object; NULL otherwise.
///
/// # Safety
///
/// `obj` is NULL or a live object; the result lives as long as the object.
#[no_mangle]
pub unsafe extern "C" fn nds_obj_handle_to_model_node_mem_usage(
    obj: *mut c_void,
) -> *mut ModelMemUsage {
    // SAFETY: forwarded contract.
    unsafe {
        project(obj, |record| match record {
            ObjectRecord::Model(model) => Some(&mut model.mem_usage),
            _ => None,
        })
    }
}

/// The process info of a process-info object; NULL otherwise.
///
/// # Safety
///
/// `obj` is NULL or a live object; the result lives as long as the object.
#[no_mangle]
pub unsafe extern "C" fn nds_obj_handle_to_process_info(obj: *mut c_void) -> *mut ProcessInfo {
    // SAFETY: forwarded contract.
    unsafe {
        project(obj, |record| match record {
            ObjectRecord::ProcessInfo(info) => Some(info),
            _ => None,
        })
    }
}

/// The extended process info of a process-info-ext object; NULL otherwise.
///
/// # Safety
///
/// `obj` is NULL or a live object; the result lives as long as the object.
#[no_mangle]
pub unsafe extern "C" fn nds_obj_handle_to_process_info_ext(
    obj: *mut c_void,
) -> *mut ProcessInfoExt {
    // SAFETY: forwarded contract.
    unsafe {
        project(obj, |record| match record {
            ObjectRecord::ProcessInfoExt(info) => Some(info),
            _ => None,
        })
    }
}

/// Reads every consistent model into a `malloc`ed array of new objects (`*models` NULL and
/// `*count` 0 when there are none). Torn slots are skipped.
///
/// # Safety
///
/// `inst` is NULL or a live instance; `models` and `count` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nds_read_all_model_nodes(
    inst: *mut NdsInstance,
    models: *mut *mut *mut c_void,
    count: *mut usize,
) -> c_int {
    int_result(|| {
        // SAFETY: forwarded contract.
        let store = &unsafe { instance(inst) }?.store;
        if models.is_null() || count.is_null() {
            return Err(libc::EINVAL);
        }
        let found: Vec<_> = store
            .read_all_models()
            .map_err(errno)?
            .into_iter()
            .filter_map(|entry| match entry {
                ModelEntry::Valid(model) => Some(model),
                ModelEntry::Torn(_) => None,
            })
            .collect();
        let array = if found.is_empty() {
            ptr::null_mut()
        } else {
            let bytes = found
                .len()
                .checked_mul(size_of::<*mut c_void>())
                .ok_or(libc::ENOMEM)?;
            // SAFETY: plain allocation; C frees it with free().
            let array = unsafe { libc::malloc(bytes) }.cast::<*mut c_void>();
            if array.is_null() {
                return Err(libc::ENOMEM);
            }
            for (position, model) in found.iter().enumerate() {
                let handle = new_object(
                    inst,
                    ObjectRecord::Model(Box::new(ModelObject {
                        slot: Some(model.slot),
                        node_info: model.node_info,
                        mem_usage: model.mem_usage,
                    })),
                );
                // SAFETY: `position < found.len()`, within the allocation.
                unsafe { array.add(position).write(handle) };
            }
            array
        };
        // SAFETY: non-null and writable per the caller.
        unsafe {
            models.write(array);
            count.write(found.len());
        }
        Ok(())
    })
}

/// Reads a record into a new object, NULL if it is empty or torn.
///
/// # Safety
///
/// `inst` is NULL or a live instance.
unsafe fn read_object(
    inst: *mut NdsInstance,
    read: impl FnOnce(&Datastore) -> Option<ObjectRecord>,
) -> *mut c_void {
    ptr_result(|| {
        // SAFETY: forwarded contract.
        let store = &unsafe { instance(inst) }.ok()?.store;
        Some(new_object(inst, read(store)?))
    })
}

/// Reads the process-info record into a new object; NULL when empty or torn.
///
/// # Safety
///
/// `inst` is NULL or a live instance that outlives the object.
#[no_mangle]
pub unsafe extern "C" fn nds_read_process_info(inst: *mut NdsInstance) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe {
        read_object(inst, |store| match store.read_process_info().ok()? {
            Snapshot::Valid(info) => Some(ObjectRecord::ProcessInfo(info)),
            Snapshot::Empty | Snapshot::Torn => None,
        })
    }
}

/// Reads the process-info-ext record into a new object; NULL when empty or torn.
///
/// # Safety
///
/// `inst` is NULL or a live instance that outlives the object.
#[no_mangle]
pub unsafe extern "C" fn nds_read_process_info_ext(inst: *mut NdsInstance) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe {
        read_object(inst, |store| match store.read_process_info_ext().ok()? {
            Snapshot::Valid(info) => Some(ObjectRecord::ProcessInfoExt(info)),
            Snapshot::Empty | Snapshot::Torn => None,
        })
    }
}
