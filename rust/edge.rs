// SPDX-License-Identifier: GPL-2.0

//! The unsafe edge of the module: every raw pointer and every `bindings::` call lives here,
//! behind safe functions that the rest of the module uses.
//!
//! Linux 7.3's Rust API has no sysfs abstraction, no `capable()`, no accessor for a new VMA's
//! `vm_pgoff`, no per-registration data for misc devices, and only non-atomic accessors for a
//! `Page`'s contents (whose contract forbids racing writes, while userspace writes slabs
//! concurrently). Each of those gaps is bridged here once, with its safety argument.

use crate::{
    device::{
        DeviceState,
        OpenFile, //
    },
    metrics_worker::MetricsWorker,
};
use core::ptr::{
    null,
    null_mut,
    NonNull, //
};
use kernel::{
    bindings,
    miscdevice::{
        MiscDeviceOptions,
        MiscDeviceRegistration, //
    },
    mm::virt::VmaNew,
    module_param::KernelParam,
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
    str::CString,
    sync::{
        atomic::{
            atomic_load,
            atomic_store,
            ordering::Relaxed, //
        },
        Arc,
    },
    types::Opaque,
    workqueue::{
        DelayedWork,
        Work, //
    },
};

/// Bytes in one slab.
pub(crate) const SLAB_SIZE: usize = crate::abi::layout::NEURON_DATASTORE_SIZE;
/// Pages in one slab.
pub(crate) const SLAB_PAGES: usize = SLAB_SIZE / PAGE_SIZE;
const WORD: usize = core::mem::size_of::<u64>();

/// The memory of one slab: order-0 pages that are mapped into processes one by one.
///
/// The kernel accesses the contents only through atomic 8-byte loads and stores, because
/// the owner process writes the same memory concurrently through its mapping.
///
/// # Invariants
///
/// `pages` holds exactly [`SLAB_PAGES`] pages, owned for the lifetime of `self`.
pub(crate) struct SlabMemory {
    pages: KVec<Page>,
}

impl SlabMemory {
    /// Allocates a zeroed slab.
    pub(crate) fn new_zeroed() -> Result<Self> {
        let mut pages = KVec::with_capacity(SLAB_PAGES, GFP_KERNEL)?;
        for _ in 0..SLAB_PAGES {
            pages.push(Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?, GFP_KERNEL)?;
        }
        // INVARIANT: exactly `SLAB_PAGES` pages were pushed.
        Ok(Self { pages })
    }

    /// The slab's pages in address order, for inserting them into a VMA.
    pub(crate) fn pages(&self) -> &[Page] {
        &self.pages
    }

    /// Runs `f` with a pointer to the 8-byte word at byte `offset` of the slab, while that
    /// word's page is mapped in the kernel; `None` if `offset` is misaligned or out of range.
    fn with_word<R>(&self, offset: usize, f: impl FnOnce(*mut u64) -> R) -> Option<R> {
        if offset % WORD != 0 {
            return None;
        }
        let page = self.pages.get(offset / PAGE_SIZE)?;
        // SAFETY: `page` is a valid order-0 page owned by `self`.
        let base = unsafe { bindings::kmap_local_page(page.as_ptr()) };
        let word = base
            .cast::<u8>()
            .wrapping_add(offset % PAGE_SIZE)
            .cast::<u64>();
        let result = f(word);
        // SAFETY: `base` was returned by `kmap_local_page` above and is unmapped exactly once,
        // in the reverse order of mapping (no other local mapping was made in between).
        unsafe { bindings::kunmap_local(base) };
        Some(result)
    }

    /// The word at byte `offset`, read with one atomic load; 0 if the offset is invalid.
    pub(crate) fn load(&self, offset: usize) -> u64 {
        self.with_word(offset, |word| {
            // SAFETY: `word` points into a page mapped by `with_word`, is 8-byte aligned (the
            // page is and `offset` is a multiple of 8), and every kernel store to slab memory
            // is atomic (`store`, `zero`); userspace stores cannot tear an aligned 8-byte load.
            unsafe { atomic_load(word, Relaxed) }
        })
        .unwrap_or(0)
    }

    /// Stores `value` at byte `offset` with one atomic store; ignored if the offset is invalid.
    pub(crate) fn store(&self, offset: usize, value: u64) {
        self.with_word(offset, |word| {
            // SAFETY: as in `load`: valid, aligned, and every kernel access to it is atomic.
            unsafe { atomic_store(word, value, Relaxed) }
        });
    }

    /// Zeroes the whole slab, word by word.
    pub(crate) fn zero(&self) {
        for page in self.pages.iter() {
            // SAFETY: `page` is a valid order-0 page owned by `self`.
            let base = unsafe { bindings::kmap_local_page(page.as_ptr()) }.cast::<u64>();
            for index in 0..PAGE_SIZE / WORD {
                // SAFETY: `index` is within the mapped page, the page is 8-byte aligned, and
                // every kernel access to slab memory is atomic.
                unsafe { atomic_store(base.wrapping_add(index), 0u64, Relaxed) };
            }
            // SAFETY: `base` came from `kmap_local_page` above and is unmapped once.
            unsafe { bindings::kunmap_local(base.cast::<c_void>().cast_const()) };
        }
    }
}

/// The file offset a new mapping asks for, in bytes; `None` if it does not fit in a `u64`.
pub(crate) fn vma_offset(vma: &VmaNew) -> Option<u64> {
    // SAFETY: `vma` is being set up by an `mmap` hook, which runs with the mmap lock held for
    // writing; the core set `vm_pgoff` before calling the hook and nothing changes it
    // concurrently.
    let pgoff = unsafe { (*vma.as_ptr()).vm_pgoff };
    u64::try_from(pgoff)
        .ok()?
        .checked_mul(u64::try_from(PAGE_SIZE).ok()?)
}

/// Whether every thread of `leader`'s thread group has exited (the group is dead, reaped or
/// not). 7.3's `Task` has no accessor for it.
pub(crate) fn thread_group_exited(leader: &kernel::task::Task) -> bool {
    // SAFETY: `leader` is a valid task for the borrow; a task's `signal` is set at creation,
    // stays valid while the task is referenced, and `live` is only changed atomically.
    let live = unsafe { &raw mut (*(*leader.as_ptr()).signal).live.counter };
    // SAFETY: `live` is a valid, aligned `c_int` that the kernel only updates atomically.
    unsafe { atomic_load(live, Relaxed) == 0 }
}

/// Whether the calling task may read another user's slab: `CAP_SYS_ADMIN` or `CAP_PERFMON`
/// in the initial user namespace.
pub(crate) fn may_read_other_users() -> bool {
    [bindings::CAP_SYS_ADMIN, bindings::CAP_PERFMON]
        .into_iter()
        .filter_map(|cap| c_int::try_from(cap).ok())
        // SAFETY: `capable` may be called from any process context with a capability number.
        .any(|cap| unsafe { bindings::capable(cap) })
}

/// The `node_name` module parameter: the kernel stores a pointer to its own copy of the
/// string here while loading the module, and frees it after unloading; NULL if not given.
///
/// 7.3's `module!` only declares integer and bool parameters, so this one is declared the way
/// `module!` declares those, with the kernel's `charp` operations.
static mut NODE_NAME: *mut c_char = null_mut();

#[link_section = "__param"]
#[used(compiler)]
static NODE_NAME_PARAM: KernelParam = KernelParam::new(bindings::kernel_param {
    name: kernel::str::as_char_ptr_in_const_context(c"node_name"),
    // The kernel sets up `__this_module` at load time; only its address is taken here.
    mod_: &raw mut bindings::__this_module,
    ops: &raw const bindings::param_ops_charp,
    // Not in sysfs: the name is used once, at load.
    perm: 0,
    level: -1,
    flags: 0,
    __bindgen_anon_1: bindings::kernel_param__bindgen_ty_1 {
        arg: (&raw mut NODE_NAME).cast::<c_void>(),
    },
});

#[link_section = ".modinfo"]
#[used(compiler)]
static NODE_NAME_PARMTYPE: [u8; 25] = *b"parmtype=node_name:charp\0";

#[link_section = ".modinfo"]
#[used(compiler)]
static NODE_NAME_PARM: [u8; 71] =
    *b"parm=node_name:Device node base name: /dev/<name>0... (default neuron)\0";

/// The `node_name` parameter, if it was given.
pub(crate) fn node_name_parameter() -> Option<&'static CStr> {
    // SAFETY: the kernel writes `NODE_NAME` only while parsing parameters, before the module's
    // init runs, and frees the string only after the module's exit; `perm` 0 means no later
    // writes through sysfs.
    let name = unsafe { (&raw const NODE_NAME).read() };
    // SAFETY: a non-NULL value is a NUL-terminated string owned by the kernel as above.
    (!name.is_null()).then(|| unsafe { CStr::from_char_ptr(name) })
}

/// Cancels `worker`'s delayed work and waits until it is neither pending nor running.
///
/// 7.3's workqueue abstraction has no cancel; a self-rearming work item must be cancelled
/// before the module's code goes away.
pub(crate) fn cancel_metrics_worker(worker: &Arc<MetricsWorker>) {
    let field = core::ptr::from_ref::<DelayedWork<MetricsWorker>>(&worker.work);
    // SAFETY: `field` points to an initialised `DelayedWork` that `worker` keeps alive.
    let work = unsafe { Work::raw_get(DelayedWork::raw_as_work(field)) };
    // SAFETY: the `work_struct` of a `DelayedWork` is the `work` field of its `delayed_work`.
    let dwork = unsafe { kernel::container_of!(work, bindings::delayed_work, work) };
    // SAFETY: `dwork` is an initialised delayed work that outlives this call (we hold `worker`).
    let was_pending = unsafe { bindings::cancel_delayed_work_sync(dwork) };
    if was_pending {
        // SAFETY: enqueueing an `Arc` work item hands the queue one reference made with
        // `Arc::into_raw`; the work was pending and is now cancelled, so `run` will never take
        // that reference back, and it is ours to drop.
        drop(unsafe { Arc::from_raw(Arc::as_ptr(worker)) });
    }
}

/// A registered device node together with its name and the device state its files use.
///
/// # Invariants
///
/// Every `MiscDeviceRegistration<OpenFile>` in the module is the `registration` field of a
/// `DeviceNode` (this is the only place that registers one), and `name`'s heap buffer, which
/// the registration points to, is neither changed nor freed before the registration is
/// dropped (fields drop in declaration order).
#[pin_data]
pub(crate) struct DeviceNode {
    #[pin]
    registration: MiscDeviceRegistration<OpenFile>,
    state: Arc<DeviceState>,
    name: CString,
}

impl DeviceNode {
    /// Registers `/dev/<name>`, whose files will use `state`.
    pub(crate) fn new(name: CString, state: Arc<DeviceState>) -> impl PinInit<Self, Error> {
        // SAFETY: the bytes behind `name` live on the heap; moving the `CString` into `Self`
        // below does not move them, and by the type invariant they outlive the registration.
        let static_name: &'static CStr = unsafe { &*core::ptr::from_ref::<CStr>(&name) };
        try_pin_init!(Self {
            registration <- MiscDeviceRegistration::register(MiscDeviceOptions {
                name: static_name,
            }),
            state,
            name,
        })
    }

    /// The node that owns `registration`.
    pub(crate) fn of(registration: &MiscDeviceRegistration<OpenFile>) -> &Self {
        let field = core::ptr::from_ref(registration).cast_mut();
        // SAFETY: by the type invariant, `registration` is the `registration` field of a
        // `DeviceNode`, which lives at least as long as the borrow of its field.
        unsafe { &*kernel::container_of!(field, Self, registration) }
    }

    /// The device state shared by the node's files.
    pub(crate) fn state(&self) -> &Arc<DeviceState> {
        &self.state
    }

    /// The sysfs directory of the node's `struct device`.
    fn kobject(&self) -> *mut bindings::kobject {
        // SAFETY: the registration is live, so its `this_device` is a valid registered device.
        unsafe { &raw mut (*(*self.registration.as_raw()).this_device).kobj }
    }
}

/// A sysfs directory created by the module.
///
/// # Invariants
///
/// `kobj` came from `kobject_create_and_add` and `self` holds one reference to it.
pub(crate) struct SysfsDir {
    kobj: NonNull<bindings::kobject>,
}

// SAFETY: a kobject reference may be dropped from any thread.
unsafe impl Send for SysfsDir {}
// SAFETY: `SysfsDir` offers no access to the kobject through `&self` except as a parent.
unsafe impl Sync for SysfsDir {}

impl SysfsDir {
    fn create(parent: *mut bindings::kobject, name: &CStr) -> Result<Self> {
        // SAFETY: `parent` is a live kobject and `name` a NUL-terminated string, which the
        // call copies.
        let kobj = unsafe { bindings::kobject_create_and_add(name.as_char_ptr(), parent) };
        // INVARIANT: a non-NULL result is a new kobject holding one reference for us.
        NonNull::new(kobj).map(|kobj| Self { kobj }).ok_or(ENOMEM)
    }

    /// Creates directory `name` in the sysfs directory of `node`'s device.
    pub(crate) fn in_device(node: &DeviceNode, name: &CStr) -> Result<Self> {
        Self::create(node.kobject(), name)
    }

    /// Creates directory `name` inside `self`.
    pub(crate) fn child(&self, name: &CStr) -> Result<Self> {
        Self::create(self.kobj.as_ptr(), name)
    }

    /// Creates a directory `name` inside `self` whose files are served by `state` for `kind`.
    pub(crate) fn node(
        &self,
        name: &CStr,
        state: Arc<DeviceState>,
        kind: SysfsNodeKind,
    ) -> Result<SysfsNode> {
        SysfsNode::create(self.kobj.as_ptr(), name, state, kind)
    }
}

impl Drop for SysfsDir {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we hold one reference, given back exactly once here.
        unsafe { bindings::kobject_put(self.kobj.as_ptr()) };
    }
}

/// What a sysfs node directory shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SysfsNodeKind {
    /// An aggregated counter: `node` indexes `SYSFS_COUNTERS`; files `total` and `present`.
    Counter {
        /// The NeuronCore.
        core: usize,
        /// Index into `SYSFS_COUNTERS`.
        node: usize,
    },
    /// The device's slot table; file `slots`.
    Datastore,
}

/// A file inside a sysfs node directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SysfsFile {
    /// `total`: everything counted so far.
    Total,
    /// `present`: the last release's delta.
    Present,
    /// `slots`: the slot table.
    Slots,
}

/// The allocation behind a sysfs node: its kobject and what serves its files.
#[repr(C)]
struct NodeData {
    kobj: Opaque<bindings::kobject>,
    state: Arc<DeviceState>,
    kind: SysfsNodeKind,
}

/// A sysfs directory whose files the module serves.
///
/// # Invariants
///
/// `data` was initialised by `kobject_init_and_add` with one of this file's kobject types,
/// whose release frees it; `self` holds one reference to its kobject.
pub(crate) struct SysfsNode {
    data: NonNull<NodeData>,
}

// SAFETY: a kobject reference may be dropped from any thread.
unsafe impl Send for SysfsNode {}
// SAFETY: `SysfsNode` offers no access through `&self`.
unsafe impl Sync for SysfsNode {}

impl SysfsNode {
    /// Creates a directory `name` in the sysfs directory of `node`'s device, whose files are
    /// served by `state` for `kind`.
    pub(crate) fn in_device(
        node: &DeviceNode,
        name: &CStr,
        state: Arc<DeviceState>,
        kind: SysfsNodeKind,
    ) -> Result<Self> {
        Self::create(node.kobject(), name, state, kind)
    }

    fn create(
        parent: *mut bindings::kobject,
        name: &CStr,
        state: Arc<DeviceState>,
        kind: SysfsNodeKind,
    ) -> Result<Self> {
        let ktype = match kind {
            SysfsNodeKind::Counter { .. } => &raw const COUNTER_KTYPE.0,
            SysfsNodeKind::Datastore => &raw const DATASTORE_KTYPE.0,
        };
        let data = KBox::into_raw(KBox::new(
            NodeData {
                kobj: Opaque::zeroed(),
                state,
                kind,
            },
            GFP_KERNEL,
        )?);
        // SAFETY: `data` is a valid allocation whose kobject is zeroed, as `kobject_init`
        // requires; `parent` is live; the format consumes exactly one string argument.
        let ret = unsafe {
            bindings::kobject_init_and_add(
                (*data).kobj.get(),
                ktype,
                parent,
                c"%s".as_char_ptr(),
                name.as_char_ptr(),
            )
        };
        if ret != 0 {
            // SAFETY: after `kobject_init_and_add`, even a failed one, the kobject must be
            // released with `kobject_put`; our release callback then frees `data`.
            unsafe { bindings::kobject_put((*data).kobj.get()) };
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: initialised with our ktype; the initial reference is ours.
        NonNull::new(data).map(|data| Self { data }).ok_or(EINVAL)
    }
}

impl Drop for SysfsNode {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we hold one reference, given back exactly once; the
        // kobject's files are removed before its release frees `data`.
        unsafe { bindings::kobject_put((*self.data.as_ptr()).kobj.get()) };
    }
}

/// # Safety
///
/// `kobj` must be the kobject of a live `NodeData`.
unsafe fn node_data<'a>(kobj: *mut bindings::kobject) -> &'a NodeData {
    let field = Opaque::cast_from(kobj).cast_mut();
    // SAFETY: by the function's contract `kobj` is the `kobj` field of a live `NodeData`.
    unsafe { &*kernel::container_of!(field, NodeData, kobj) }
}

fn file_of(attr: *const bindings::attribute) -> Option<SysfsFile> {
    if core::ptr::eq(attr, &raw const TOTAL_ATTR.0) {
        Some(SysfsFile::Total)
    } else if core::ptr::eq(attr, &raw const PRESENT_ATTR.0) {
        Some(SysfsFile::Present)
    } else if core::ptr::eq(attr, &raw const SLOTS_ATTR.0) {
        Some(SysfsFile::Slots)
    } else {
        None
    }
}

/// # Safety
///
/// Called by sysfs for a file of one of our kobject types, with a `PAGE_SIZE` buffer.
unsafe extern "C" fn node_show(
    kobj: *mut bindings::kobject,
    attr: *mut bindings::attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: sysfs only calls this for kobjects of our types, which live in a `NodeData`
    // while their files exist.
    let data = unsafe { node_data(kobj) };
    let text = file_of(attr)
        .ok_or(EINVAL)
        .and_then(|file| data.state.sysfs_show(data.kind, file));
    match text {
        Ok(text) => {
            let bytes = &text[..];
            let len = bytes.len().min(PAGE_SIZE - 1);
            // SAFETY: `buf` holds `PAGE_SIZE` bytes and `len` is below that; the source is a
            // distinct kernel allocation.
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), len) };
            isize::try_from(len).unwrap_or(0)
        }
        Err(err) => err.to_errno() as isize,
    }
}

/// # Safety
///
/// Called by sysfs for a file of one of our kobject types.
unsafe extern "C" fn node_store(
    kobj: *mut bindings::kobject,
    attr: *mut bindings::attribute,
    _buf: *const c_char,
    count: usize,
) -> isize {
    // SAFETY: as in `node_show`.
    let data = unsafe { node_data(kobj) };
    let result = file_of(attr)
        .ok_or(EINVAL)
        .and_then(|file| data.state.sysfs_store(data.kind, file));
    match result {
        Ok(()) => isize::try_from(count).unwrap_or(isize::MAX),
        Err(err) => err.to_errno() as isize,
    }
}

/// # Safety
///
/// Called once by the kobject core when the last reference to one of our kobjects is gone.
unsafe extern "C" fn node_release(kobj: *mut bindings::kobject) {
    let field = Opaque::cast_from(kobj).cast_mut();
    // SAFETY: our kobjects live in a `NodeData` allocated by `KBox` in `SysfsNode::create`;
    // with the last reference gone nobody else uses it.
    drop(unsafe { KBox::from_raw(kernel::container_of!(field, NodeData, kobj)) });
}

/// Read-only C tables that point at each other.
#[repr(transparent)]
struct CTable<T>(T);

// SAFETY: the C side only reads these tables, which are never written after compilation.
unsafe impl<T> Sync for CTable<T> {}

// `struct attribute` has lockdep fields only with CONFIG_DEBUG_LOCK_ALLOC.
#[allow(clippy::needless_update)]
static TOTAL_ATTR: CTable<bindings::attribute> = CTable(bindings::attribute {
    name: kernel::str::as_char_ptr_in_const_context(c"total"),
    mode: 0o644,
    ..pin_init::zeroed()
});
// `struct attribute` has lockdep fields only with CONFIG_DEBUG_LOCK_ALLOC.
#[allow(clippy::needless_update)]
static PRESENT_ATTR: CTable<bindings::attribute> = CTable(bindings::attribute {
    name: kernel::str::as_char_ptr_in_const_context(c"present"),
    mode: 0o644,
    ..pin_init::zeroed()
});
// `struct attribute` has lockdep fields only with CONFIG_DEBUG_LOCK_ALLOC.
#[allow(clippy::needless_update)]
static SLOTS_ATTR: CTable<bindings::attribute> = CTable(bindings::attribute {
    name: kernel::str::as_char_ptr_in_const_context(c"slots"),
    mode: 0o444,
    ..pin_init::zeroed()
});

static COUNTER_ATTRS: CTable<[*const bindings::attribute; 3]> =
    CTable([&raw const TOTAL_ATTR.0, &raw const PRESENT_ATTR.0, null()]);
static DATASTORE_ATTRS: CTable<[*const bindings::attribute; 2]> =
    CTable([&raw const SLOTS_ATTR.0, null()]);

static COUNTER_GROUP: CTable<bindings::attribute_group> = CTable(bindings::attribute_group {
    __bindgen_anon_2: bindings::attribute_group__bindgen_ty_2 {
        attrs_const: (&raw const COUNTER_ATTRS.0).cast::<*const bindings::attribute>(),
    },
    ..pin_init::zeroed()
});
static DATASTORE_GROUP: CTable<bindings::attribute_group> = CTable(bindings::attribute_group {
    __bindgen_anon_2: bindings::attribute_group__bindgen_ty_2 {
        attrs_const: (&raw const DATASTORE_ATTRS.0).cast::<*const bindings::attribute>(),
    },
    ..pin_init::zeroed()
});

static COUNTER_GROUPS: CTable<[*const bindings::attribute_group; 2]> =
    CTable([&raw const COUNTER_GROUP.0, null()]);
static DATASTORE_GROUPS: CTable<[*const bindings::attribute_group; 2]> =
    CTable([&raw const DATASTORE_GROUP.0, null()]);

static SYSFS_OPS: CTable<bindings::sysfs_ops> = CTable(bindings::sysfs_ops {
    show: Some(node_show),
    store: Some(node_store),
});

static COUNTER_KTYPE: CTable<bindings::kobj_type> = CTable(bindings::kobj_type {
    release: Some(node_release),
    sysfs_ops: &raw const SYSFS_OPS.0,
    default_groups: (&raw const COUNTER_GROUPS.0)
        .cast::<*const bindings::attribute_group>()
        .cast_mut(),
    ..pin_init::zeroed()
});
static DATASTORE_KTYPE: CTable<bindings::kobj_type> = CTable(bindings::kobj_type {
    release: Some(node_release),
    sysfs_ops: &raw const SYSFS_OPS.0,
    default_groups: (&raw const DATASTORE_GROUPS.0)
        .cast::<*const bindings::attribute_group>()
        .cast_mut(),
    ..pin_init::zeroed()
});
