// SPDX-License-Identifier: GPL-2.0

//! Cancelling work items, which 7.3's workqueue abstraction cannot do.
//!
//! C header: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)
//!
//! A work item that re-queues itself, or one queued from code that may run until the module
//! unloads, must be cancelled before the module's code goes away.

use kernel::{
    bindings,
    sync::Arc,
    workqueue::{
        HasDelayedWork,
        HasWork,
        Work,
        WorkItem, //
    },
};

/// The `work_struct` of `item`'s work field `ID`.
fn raw_work<T, const ID: u64>(item: &Arc<T>) -> *mut bindings::work_struct
where
    T: HasWork<T, ID>,
{
    let ptr = Arc::as_ptr(item).cast_mut();
    // SAFETY: `ptr` points to a valid `T` that `item` keeps alive.
    let work = unsafe { T::raw_get_work(ptr) };
    // SAFETY: `raw_get_work` returns a pointer to a valid `Work` inside `*ptr`.
    unsafe { Work::raw_get(work) }
}

/// Gives back the reference that the queue took when it accepted `item`, once a cancel found it
/// pending (so its `run` will never take the reference back).
fn drop_queued_reference<T>(item: &Arc<T>) {
    // SAFETY: enqueueing an `Arc` work item hands the queue one reference made with
    // `Arc::into_raw`; the work was pending and is now cancelled, so that reference is ours.
    drop(unsafe { Arc::from_raw(Arc::as_ptr(item)) });
}

/// Cancels `item`'s delayed work `ID` and waits until it is neither pending nor running.
pub(crate) fn cancel_delayed_work_sync<T, const ID: u64>(item: &Arc<T>)
where
    T: HasDelayedWork<T, ID> + WorkItem<ID, Pointer = Arc<T>>,
{
    let work = raw_work(item);
    // SAFETY: by `HasDelayedWork`'s contract, the `work_struct` is the `work` field of a
    // `delayed_work`.
    let dwork = unsafe { kernel::container_of!(work, bindings::delayed_work, work) };
    // SAFETY: `dwork` is an initialised delayed work that `item` keeps alive.
    if unsafe { bindings::cancel_delayed_work_sync(dwork) } {
        drop_queued_reference(item);
    }
}
