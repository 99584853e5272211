//! Objects (`nds_obj_handle_t`): local copies of datastore records, either created with
//! `nds_obj_new` or read from the slab, and the calls that create, publish, read and free them.

use std::ffi::{c_int, c_void};
use std::mem::size_of;
use std::ptr;

use nds::abi::records::{ModelMemUsage, ModelNodeInfo, ObjectType, ProcessInfo, ProcessInfoExt};
use nds::{Datastore, ModelEntry, ModelSlot, Snapshot};
use zerocopy::FromZeros;

use crate::{code, instance, int_result, ptr_result, NdsInstance, INVALID};

/// What an `nds_obj_handle_t` points to: a local copy of one record.
#[derive(Debug)]
pub struct NdsObject {
    /// The instance the object belongs to; by contract it outlives the object.
    instance: *const NdsInstance,
    origin: Origin,
    record: ObjectRecord,
}

/// How an object came to be, which decides what deleting it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// From `nds_obj_new`: deleting a committed model removes it from the datastore.
    Created,
    /// From a read call: deleting only frees the copy.
    Read,
}

#[derive(Debug)]
enum ObjectRecord {
    Model(Box<ModelObject>),
    ProcessInfo(ProcessInfo),
    ProcessInfoExt(ProcessInfoExt),
}

#[derive(Debug)]
struct ModelObject {
    /// Slot in the slab: taken by the first commit of a created model, or the one a read copy
    /// was read from.
    slot: Option<ModelSlot>,
    node_info: ModelNodeInfo,
    mem_usage: ModelMemUsage,
}

/// # Safety
///
/// `obj` is NULL or a live object from this library.
unsafe fn object<'a>(obj: *mut c_void) -> Option<&'a mut NdsObject> {
    // SAFETY: guaranteed by the caller.
    unsafe { obj.cast::<NdsObject>().as_mut() }
}

fn new_object(instance: *const NdsInstance, origin: Origin, record: ObjectRecord) -> *mut c_void {
    Box::into_raw(Box::new(NdsObject {
        instance,
        origin,
        record,
    }))
    .cast::<c_void>()
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
        Some(new_object(inst, Origin::Created, record))
    })
}

/// Publishes an object: process records overwrite theirs; a created model takes a free slot on
/// its first commit and keeps it afterwards, a read model copy rewrites the slot it came from.
///
/// # Safety
///
/// `obj` is NULL or a live object whose instance is still open.
#[no_mangle]
pub unsafe extern "C" fn nds_obj_commit(obj: *mut c_void) -> c_int {
    int_result(|| {
        // SAFETY: forwarded contract.
        let object = unsafe { object(obj) }.ok_or(INVALID)?;
        // SAFETY: objects never outlive their instance.
        let store = &unsafe { instance(object.instance) }?.store;
        match &mut object.record {
            ObjectRecord::ProcessInfo(info) => store.commit_process_info(info).map_err(code),
            ObjectRecord::ProcessInfoExt(info) => store.commit_process_info_ext(info).map_err(code),
            ObjectRecord::Model(model) => {
                let slot = match model.slot {
                    Some(slot) => slot,
                    None => {
                        let slot = store.allocate_model_slot().map_err(code)?;
                        model.slot = Some(slot);
                        slot
                    }
                };
                store
                    .commit_model(slot, &model.node_info, &model.mem_usage)
                    .map_err(code)
            }
        }
    })
}

/// Frees an object. A created model that was committed through a producer instance is first
/// deleted from the datastore (its record zeroed, its slot freed); read copies and process
/// records leave the datastore untouched.
///
/// # Safety
///
/// `obj` is NULL or a live object, not used afterwards, whose instance is still open.
#[no_mangle]
pub unsafe extern "C" fn nds_obj_delete(obj: *mut c_void) -> c_int {
    int_result(|| {
        if obj.is_null() {
            return Err(INVALID);
        }
        // SAFETY: the caller hands back ownership of a boxed object.
        let object = unsafe { Box::from_raw(obj.cast::<NdsObject>()) };
        // Freeing a read copy never changes the datastore, and process records are only ever
        // overwritten, never deleted.
        let (Origin::Created, ObjectRecord::Model(model)) = (object.origin, &object.record) else {
            return Ok(());
        };
        // SAFETY: objects never outlive their instance.
        let store = &unsafe { instance(object.instance) }?.store;
        match model.slot {
            Some(slot) if !store.is_read_only() => store.delete_model(slot).map_err(code),
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

/// Reads every consistent model into a `malloc`ed array of read copies (`*models` NULL and
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
            return Err(INVALID);
        }
        let found: Vec<_> = store
            .read_all_models()
            .map_err(code)?
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
                .ok_or(-libc::ENOMEM)?;
            // SAFETY: plain allocation; C frees it with free().
            let array = unsafe { libc::malloc(bytes) }.cast::<*mut c_void>();
            if array.is_null() {
                return Err(-libc::ENOMEM);
            }
            for (position, model) in found.iter().enumerate() {
                let handle = new_object(
                    inst,
                    Origin::Read,
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
        Some(new_object(inst, Origin::Read, read(store)?))
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
