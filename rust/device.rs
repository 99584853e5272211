// SPDX-License-Identifier: GPL-2.0

//! One Neuron device: its slabs, its slot table, the ioctls, `mmap`, release on close, and the
//! values its sysfs files show.
//!
//! # Lock order
//!
//! mmap lock (held by the core around `mmap`) → [`DeviceState::inner`] → [`OpenFile::grants`].
//! No lock is held while user memory is touched: ioctl arguments are copied in before locking
//! and copied out after unlocking.

use crate::{
    abi::{
        ioctl::{
            NeuronDsInfo,
            NEURON_IOCTL_ACQUIRE_NEURON_DS,
            NEURON_IOCTL_RELEASE_NEURON_DS, //
        },
        layout::SLAB_GENERATION_OFFSET,
        metrics::METRIC_POST_SIZE,
        sysfs::SYSFS_COUNTERS,
    },
    edge::{
        self,
        DeviceNode,
        SlabMemory,
        SysfsFile,
        SysfsNodeKind,
        SLAB_SIZE, //
    },
    metrics::{
        MetricsState,
        SlabValues, //
    },
    metrics_worker::MetricsHandle,
    reader::read_nc_counter,
    slots::{
        SlotTable,
        SLOT_COUNT, //
    },
    sysfs::SysfsTree,
    totals::{
        contribution,
        DeviceTotals, //
    },
};
use kernel::{
    fs::{
        File,
        Kiocb, //
    },
    iov::IovIterDest,
    miscdevice::{
        MiscDevice,
        MiscDeviceRegistration, //
    },
    mm::virt::VmaNew,
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    str::CString,
    sync::{
        aref::ARef,
        atomic::{
            ordering::Relaxed,
            Atomic, //
        },
        barrier::{
            smp_mb,
            Write, //
        },
        Arc, Mutex,
    },
    task::{
        Kuid,
        Task, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// The LRU clock: one tick per slab clear, shared by every device as in the original driver.
static CLEAR_TICK: Atomic<u64> = Atomic::new(1);

/// The thread group that owns a slab.
pub(crate) struct Owner {
    /// The group leader; identity is by task, never by number, since pids are reused and
    /// namespace-relative.
    leader: ARef<Task>,
    /// The owner's effective uid when it acquired the slab, for readers' permission checks.
    euid: Kuid,
}

impl PartialEq for Owner {
    fn eq(&self, other: &Self) -> bool {
        *self.leader == *other.leader
    }
}

/// State guarded by [`DeviceState::inner`].
struct Inner {
    slots: SlotTable<Owner>,
    /// Open files of this device per thread group: a group's slab is released when its count
    /// drops to zero (its last file is closed and unmapped, or it died).
    openers: KVec<(ARef<Task>, usize)>,
    totals: DeviceTotals,
    metrics: MetricsState,
}

/// Everything one device's files, ioctls and sysfs nodes share.
///
/// # Invariants
///
/// `slabs` holds exactly [`SLOT_COUNT`] slabs, and each slab's generation word equals its
/// slot's generation whenever `inner` is unlocked.
#[pin_data]
pub(crate) struct DeviceState {
    index: usize,
    core_count: usize,
    slabs: KVec<SlabMemory>,
    #[pin]
    inner: Mutex<Inner>,
}

/// The `mmap` offset that names slot `slot` of device `device`.
fn mmap_offset(device: usize, slot: usize) -> u64 {
    let slab = u64::try_from(SLAB_SIZE).unwrap_or(0);
    u64::try_from(device * SLOT_COUNT + slot).map_or(0, |n| n.wrapping_mul(slab))
}

/// The (device, slot) an `mmap` offset names, if it names one exactly.
fn decode_mmap_offset(offset: u64) -> Option<(usize, usize)> {
    let slab = u64::try_from(SLAB_SIZE).ok()?;
    if offset % slab != 0 {
        return None;
    }
    let n = usize::try_from(offset / slab).ok()?;
    Some((n / SLOT_COUNT, n % SLOT_COUNT))
}

impl DeviceState {
    /// A device with `core_count` NeuronCores and 16 zeroed slabs.
    pub(crate) fn new(index: usize, core_count: usize) -> Result<Arc<Self>> {
        let mut slabs = KVec::with_capacity(SLOT_COUNT, GFP_KERNEL)?;
        for _ in 0..SLOT_COUNT {
            slabs.push(SlabMemory::new_zeroed()?, GFP_KERNEL)?;
        }
        let totals = DeviceTotals::new(core_count)?;
        let metrics = MetricsState::new(u32::try_from(index)?, core_count)?;
        // INVARIANT: 16 slabs, all zero, matching the never-used slots' generation 0.
        Arc::pin_init(
            try_pin_init!(Self {
                index,
                core_count,
                slabs,
                inner <- new_mutex!(Inner {
                    slots: SlotTable::new(),
                    openers: KVec::new(),
                    totals,
                    metrics,
                }),
            }),
            GFP_KERNEL,
        )
    }

    fn slab(&self, slot: usize) -> Result<&SlabMemory> {
        self.slabs.get(slot).ok_or(EINVAL)
    }

    /// Gives `leader`'s thread group its slab, reusing the one it has; returns the slot.
    fn acquire_own(&self, inner: &mut Inner, leader: &Task, euid: Kuid) -> Result<usize> {
        if let Some(slot) = inner.slots.find_owner(|owner| *owner.leader == *leader) {
            return Ok(slot);
        }
        let slot = inner
            .slots
            .choose_free(|owner| *owner.leader == *leader)
            .ok_or(ENOMEM)?;
        let owner = Owner {
            leader: ARef::from(leader),
            euid,
        };
        let rezero = inner.slots.get(slot).is_some_and(|s| s.written_after_clear);
        let generation = inner.slots.assign(slot, owner)?;
        let slab = self.slab(slot)?;
        if rezero {
            // The previous owner may have written into the slab after its release, through a
            // mapping that outlived it; the new owner starts from zeros, not from leftovers.
            slab.zero();
        }
        slab.store(SLAB_GENERATION_OFFSET, generation);
        Ok(slot)
    }

    /// Aggregates slot `slot`'s counters into the totals, zeroes it and frees it.
    fn release_slot(&self, inner: &mut Inner, slot: usize) -> Result {
        let slab = self.slab(slot)?;
        inner
            .totals
            .add_slab(|core, index| read_nc_counter(slab, core, index));
        inner.metrics.on_release(slab);
        let tick = CLEAR_TICK.fetch_add(1, Relaxed);
        let generation = inner.slots.clear(slot, tick)?;
        // The new (even) generation is visible before any word is zeroed, so a reader that
        // finds the generation unchanged around its reads saw no part of the clear. Zeroing
        // covers the generation word too, hence the second store.
        slab.store(SLAB_GENERATION_OFFSET, generation);
        smp_mb(Write);
        slab.zero();
        slab.store(SLAB_GENERATION_OFFSET, generation);
        Ok(())
    }

    /// Releases every slab whose owner's thread group has exited.
    ///
    /// A group's slab is normally released when its last file on the device goes, but a group
    /// can own a slab through a file it did not open (inherited across `fork`, or passed over
    /// a socket), whose release waits for the other holders. Such a slab is released here, at
    /// the latest the next time anything looks at the device: an ACQUIRE or RELEASE, a file
    /// release, a sysfs read or a metrics period.
    fn release_abandoned(&self, inner: &mut Inner) -> Result {
        for slot in 0..SLOT_COUNT {
            let abandoned = inner
                .slots
                .get(slot)
                .and_then(|s| s.owner.as_ref())
                .is_some_and(|owner| edge::thread_group_exited(&owner.leader));
            if abandoned {
                self.release_slot(inner, slot)?;
            }
        }
        Ok(())
    }

    /// Releases the slab of `leader`'s thread group, if it has one.
    fn release_own(&self, inner: &mut Inner, leader: &Task) -> Result {
        match inner.slots.find_owner(|owner| *owner.leader == *leader) {
            Some(slot) => self.release_slot(inner, slot),
            None => Ok(()),
        }
    }

    /// Ends a metrics period of `elapsed_us` microseconds: posts every metric.
    pub(crate) fn post_metrics(&self, elapsed_us: u64) -> Result {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        self.release_abandoned(inner)?;
        let owned = inner
            .slots
            .iter()
            .filter(|(_, slot)| slot.owner.is_some())
            .filter_map(|(index, _)| self.slabs.get(index))
            .map(|slab| slab as &dyn SlabValues);
        inner.metrics.post(owned, elapsed_us)
    }

    /// The value a sysfs file shows.
    pub(crate) fn sysfs_show(&self, node: SysfsNodeKind, file: SysfsFile) -> Result<KVec<u8>> {
        let mut inner = self.inner.lock();
        self.release_abandoned(&mut inner)?;
        let text = match (node, file) {
            (SysfsNodeKind::Counter { core, node }, SysfsFile::Total) => {
                let counter = SYSFS_COUNTERS.get(node).ok_or(EINVAL)?;
                let released = inner.totals.get(core, node).ok_or(EINVAL)?.total;
                // Live totals: what owners have counted so far is part of the total.
                let live = inner
                    .slots
                    .iter()
                    .filter(|(_, slot)| slot.owner.is_some())
                    .filter_map(|(index, _)| self.slabs.get(index))
                    .map(|slab| {
                        let raw = read_nc_counter(slab, core, counter.source.index());
                        contribution(counter, raw)
                    })
                    .fold(0u64, u64::wrapping_add);
                CString::try_from_fmt(fmt!("{}\n", released.wrapping_add(live)))?
            }
            (SysfsNodeKind::Counter { core, node }, SysfsFile::Present) => {
                let present = inner.totals.get(core, node).ok_or(EINVAL)?.present;
                CString::try_from_fmt(fmt!("{present}\n"))?
            }
            (SysfsNodeKind::Datastore, SysfsFile::Slots) => return self.slot_table(&inner),
            _ => return Err(EINVAL),
        };
        let mut bytes = KVec::new();
        bytes.extend_from_slice(text.to_bytes(), GFP_KERNEL)?;
        Ok(bytes)
    }

    /// The slot table as text: one line per slot, owner pids in the reader's pid namespace.
    fn slot_table(&self, inner: &Inner) -> Result<KVec<u8>> {
        let reader = current!();
        let namespace = reader.active_pid_ns();
        let mut text = KVec::new();
        text.extend_from_slice(b"slot pid clear_tick generation\n", GFP_KERNEL)?;
        for (index, slot) in inner.slots.iter() {
            let pid = slot
                .owner
                .as_ref()
                .map_or(0, |owner| owner.leader.tgid_nr_ns(namespace));
            let line = CString::try_from_fmt(fmt!(
                "{index} {pid} {} {}\n",
                slot.clear_tick,
                slot.generation
            ))?;
            text.extend_from_slice(line.to_bytes(), GFP_KERNEL)?;
        }
        Ok(text)
    }

    /// A write to a sysfs file: zeroes a counter (its `total` and `present`).
    pub(crate) fn sysfs_store(&self, node: SysfsNodeKind, file: SysfsFile) -> Result {
        match (node, file) {
            (SysfsNodeKind::Counter { core, node }, SysfsFile::Total | SysfsFile::Present) => {
                self.inner.lock().totals.reset(core, node)
            }
            _ => Err(EINVAL),
        }
    }
}

/// A slab this file may map, granted by an ACQUIRE through it.
#[derive(Clone, Copy)]
struct Grant {
    /// The slot's generation at the ACQUIRE; a mapping of a since-reused slab is refused.
    generation: u64,
    /// Granted to the owner (pid 0) rather than to a reader.
    owner: bool,
}

/// State guarded by [`OpenFile::grants`].
struct Grants {
    granted: [Option<Grant>; SLOT_COUNT],
    /// Slots this file mapped writable, each counted once in the slot table.
    writable_mapped: [bool; SLOT_COUNT],
}

/// One open file of a device node.
#[pin_data]
pub(crate) struct OpenFile {
    device: Arc<DeviceState>,
    /// Leader of the thread group that opened the file.
    opener: ARef<Task>,
    #[pin]
    grants: Mutex<Grants>,
}

impl OpenFile {
    /// Copies the ioctl argument in.
    fn read_arg(arg: usize) -> Result<NeuronDsInfo> {
        let mut bytes = [0u8; core::mem::size_of::<NeuronDsInfo>()];
        UserSlice::new(UserPtr::from_addr(arg), bytes.len())
            .reader()
            .read_slice(&mut bytes)?;
        NeuronDsInfo::read_from_bytes(&bytes).map_err(|_| EINVAL)
    }

    /// `ACQUIRE_NEURON_DS`: pid 0 gets (or creates) the caller's slab, any other pid maps
    /// that process's slab for reading.
    fn acquire_ioctl(&self, arg: usize) -> Result<isize> {
        let mut info = Self::read_arg(arg)?;
        let caller = current!();
        let device = &*self.device;
        let slot = {
            let mut inner = device.inner.lock();
            device.release_abandoned(&mut inner)?;
            let (slot, owner) = match info.pid {
                0 => (
                    device.acquire_own(&mut inner, caller.group_leader(), Kuid::current_euid())?,
                    true,
                ),
                pid if pid < 0 => return Err(EINVAL),
                pid => {
                    let namespace = caller.active_pid_ns();
                    let slot = inner
                        .slots
                        .find_owner(|owner| owner.leader.tgid_nr_ns(namespace) == pid)
                        .ok_or(ENOENT)?;
                    let euid = inner
                        .slots
                        .get(slot)
                        .and_then(|s| s.owner.as_ref())
                        .map(|owner| owner.euid)
                        .ok_or(ENOENT)?;
                    if euid != Kuid::current_euid() && !edge::may_read_other_users() {
                        return Err(EPERM);
                    }
                    (slot, false)
                }
            };
            let generation = inner.slots.get(slot).ok_or(EINVAL)?.generation;
            let mut grants = self.grants.lock();
            let grant = grants.granted.get_mut(slot).ok_or(EINVAL)?;
            *grant = Some(Grant { generation, owner });
            slot
        };
        info.mmap_offset = mmap_offset(device.index, slot);
        info.size = u32::try_from(SLAB_SIZE)?;
        UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<NeuronDsInfo>(),
        )
        .writer()
        .write_slice(info.as_bytes())?;
        Ok(0)
    }

    /// `RELEASE_NEURON_DS`: the owner's slab is aggregated, zeroed and freed; a release of
    /// someone else's pid is a no-op that succeeds (readers call it when they detach).
    fn release_ioctl(&self, arg: usize) -> Result<isize> {
        let info = Self::read_arg(arg)?;
        let caller = current!();
        let leader = caller.group_leader();
        let own_pid = leader.tgid_nr_ns(caller.active_pid_ns());
        match info.pid {
            pid if pid < 0 => Err(EINVAL),
            pid if pid == 0 || pid == own_pid => {
                let mut inner = self.device.inner.lock();
                self.device.release_own(&mut inner, leader)?;
                self.device.release_abandoned(&mut inner)?;
                Ok(0)
            }
            _ => {
                self.device
                    .release_abandoned(&mut self.device.inner.lock())?;
                Ok(0)
            }
        }
    }

    /// Checks a new mapping against this file's grants; returns whether it may be writable.
    fn authorize_mapping(&self, vma: &VmaNew) -> Result<usize> {
        if vma.end().wrapping_sub(vma.start()) != SLAB_SIZE {
            return Err(EINVAL);
        }
        let offset = edge::vma_offset(vma).ok_or(EINVAL)?;
        let (device, slot) = decode_mmap_offset(offset).ok_or(EINVAL)?;
        if device != self.device.index {
            return Err(EINVAL);
        }
        let mut inner = self.device.inner.lock();
        let mut grants = self.grants.lock();
        let grant = grants.granted.get(slot).copied().flatten().ok_or(EINVAL)?;
        let state = inner.slots.get(slot).ok_or(EINVAL)?;
        if state.generation != grant.generation {
            // The slab was released (and maybe reused) since the ACQUIRE.
            return Err(EINVAL);
        }
        let caller = current!();
        let leader = caller.group_leader();
        let writable = grant.owner
            && state
                .owner
                .as_ref()
                .is_some_and(|owner| *owner.leader == *leader);
        vma.try_clear_mayexec().map_err(|_| EPERM)?;
        if writable {
            let mapped = grants.writable_mapped.get_mut(slot).ok_or(EINVAL)?;
            if !*mapped {
                inner.slots.add_writable_mapper(slot)?;
                *mapped = true;
            }
        } else {
            vma.try_clear_maywrite().map_err(|_| EPERM)?;
        }
        Ok(slot)
    }
}

#[vtable]
impl MiscDevice for OpenFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        let device = DeviceNode::of(misc).state().clone();
        let opener = ARef::from(current!().group_leader());
        {
            let mut inner = device.inner.lock();
            match inner.openers.iter_mut().find(|(task, _)| **task == *opener) {
                Some((_, count)) => *count += 1,
                None => inner.openers.push((opener.clone(), 1), GFP_KERNEL)?,
            }
        }
        KBox::try_pin_init(
            try_pin_init!(Self {
                device,
                opener,
                grants <- new_mutex!(Grants {
                    granted: [None; SLOT_COUNT],
                    writable_mapped: [false; SLOT_COUNT],
                }),
            }),
            GFP_KERNEL,
        )
    }

    fn release(this: Pin<KBox<Self>>, _file: &File) {
        let device = &*this.device;
        let mut inner = device.inner.lock();
        let last_of_group = match inner
            .openers
            .iter()
            .position(|(task, _)| **task == *this.opener)
        {
            Some(index) => {
                let done = inner.openers.get_mut(index).is_some_and(|(_, count)| {
                    *count -= 1;
                    *count == 0
                });
                if done {
                    // `index` was just found, so the removal cannot fail.
                    let _ = inner.openers.remove(index);
                }
                done
            }
            None => false,
        };
        // This file's writable mappings are gone (a mapping holds the file), so they stop
        // counting before the release below: a slab released here needs no second zeroing.
        let grants = this.grants.lock();
        for (slot, mapped) in grants.writable_mapped.iter().enumerate() {
            if *mapped {
                inner.slots.remove_writable_mapper(slot);
            }
        }
        drop(grants);
        let released = if last_of_group {
            // The group's last file is gone (closed and unmapped, or the process died).
            device.release_own(&mut inner, &this.opener)
        } else {
            Ok(())
        };
        if let Err(err) = released.and_then(|()| device.release_abandoned(&mut inner)) {
            pr_err!("releasing a slab on close failed: {err:?}\n");
        }
    }

    fn ioctl(me: Pin<&OpenFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        // The original matches the full command value; the size it encodes is a pointer's,
        // not the argument's, so the argument's own size is used for the copies.
        match cmd {
            NEURON_IOCTL_ACQUIRE_NEURON_DS => me.acquire_ioctl(arg),
            NEURON_IOCTL_RELEASE_NEURON_DS => me.release_ioctl(arg),
            _ => Err(ENOTTY),
        }
    }

    /// Returns the metric posts from the file position on, whole [`MetricPost`]s only; the
    /// position is the next sequence number wanted (0: from the oldest kept).
    ///
    /// [`MetricPost`]: crate::abi::metrics::MetricPost
    fn read_iter(mut kiocb: Kiocb<'_, Self::Ptr>, iov: &mut IovIterDest<'_>) -> Result<usize> {
        let max = iov.len() / METRIC_POST_SIZE;
        if max == 0 {
            return Err(EINVAL);
        }
        let device = kiocb.file().device.clone();
        let from = u64::try_from(*kiocb.ki_pos_mut()).unwrap_or(0);
        let posts = device.inner.lock().metrics.ring().read(from, max)?;
        let mut copied = 0;
        for post in posts.iter() {
            let bytes = post.as_bytes();
            if iov.copy_to_iter(bytes) != bytes.len() {
                return if copied == 0 { Err(EFAULT) } else { Ok(copied) };
            }
            copied += bytes.len();
            *kiocb.ki_pos_mut() = i64::try_from(post.seq + 1).unwrap_or(i64::MAX);
        }
        Ok(copied)
    }

    fn mmap(me: Pin<&OpenFile>, _file: &File, vma: &VmaNew) -> Result {
        let slot = me.authorize_mapping(vma)?;
        vma.set_dontcopy();
        vma.set_dontexpand();
        vma.set_dontdump();
        let mixed = vma.set_mixedmap();
        for (index, page) in me.device.slab(slot)?.pages().iter().enumerate() {
            mixed.vm_insert_page(vma.start() + index * PAGE_SIZE, page)?;
        }
        Ok(())
    }
}

/// One registered device with its metrics worker and sysfs tree.
#[pin_data]
pub(crate) struct NeuronDevice {
    /// Declared first so that the worker stops before anything else goes away.
    metrics: Option<MetricsHandle>,
    /// Removed before the node is deregistered.
    sysfs: Option<SysfsTree>,
    #[pin]
    node: DeviceNode,
}

impl NeuronDevice {
    /// Creates device `index` (`/dev/<base_name><index>`) with `core_count` NeuronCores, posting
    /// metrics every `metrics_period_ms` (never if 0).
    pub(crate) fn new(
        base_name: &CStr,
        index: usize,
        core_count: usize,
        metrics_period_ms: u32,
    ) -> Result<Pin<KBox<Self>>> {
        let state = DeviceState::new(index, core_count)?;
        let name = CString::try_from_fmt(fmt!("{}{index}", base_name.to_str()?))?;
        let node_state = state.clone();
        let mut device = KBox::pin_init(
            try_pin_init!(Self {
                metrics: None,
                sysfs: None,
                node <- DeviceNode::new(name, node_state),
            }),
            GFP_KERNEL,
        )?;
        let tree = SysfsTree::build(&device.node, state.clone(), core_count)?;
        *device.as_mut().project().sysfs = Some(tree);
        if metrics_period_ms > 0 {
            *device.as_mut().project().metrics =
                Some(MetricsHandle::start(state, metrics_period_ms)?);
        }
        Ok(device)
    }
}

#[kunit_tests(neuron_ds_device)]
mod tests {
    use super::*;
    use crate::abi::{
        layout::nc_counter_offset,
        sysfs::{
            sysfs_counter,
            SysfsGroup, //
        },
    };

    fn node_of(group: SysfsGroup, name: &str) -> Result<usize> {
        let wanted = sysfs_counter(group, name).ok_or(EINVAL)?;
        SYSFS_COUNTERS
            .iter()
            .position(|c| c == wanted)
            .ok_or(EINVAL)
    }

    fn shown(device: &DeviceState, core: usize, node: usize, file: SysfsFile) -> Result<KVec<u8>> {
        device.sysfs_show(SysfsNodeKind::Counter { core, node }, file)
    }

    #[test]
    fn ioctl_numbers_match_the_original_abi() {
        assert_eq!(NEURON_IOCTL_ACQUIRE_NEURON_DS, 0x8008_4E47);
        assert_eq!(NEURON_IOCTL_RELEASE_NEURON_DS, 0x8008_4E48);
    }

    #[test]
    fn mmap_offsets_name_device_and_slot() {
        assert_eq!(decode_mmap_offset(mmap_offset(0, 0)), Some((0, 0)));
        assert_eq!(decode_mmap_offset(mmap_offset(3, 15)), Some((3, 15)));
        assert_eq!(decode_mmap_offset(mmap_offset(1, 2) + 4096), None);
    }

    #[test]
    fn owner_release_aggregates_then_zeroes_and_bumps_the_generation() -> Result {
        let device = DeviceState::new(0, 2)?;
        let task = current!();
        let leader = task.group_leader();
        let mut inner = device.inner.lock();
        let slot = device.acquire_own(&mut inner, leader, Kuid::current_euid())?;
        assert_eq!(
            device.acquire_own(&mut inner, leader, Kuid::current_euid())?,
            slot
        );
        let slab = device.slab(slot)?;
        let owned_generation = slab.load(SLAB_GENERATION_OFFSET);
        assert_eq!(owned_generation % 2, 1);
        // Core 1: 3 successes and 10 MACs.
        slab.store(nc_counter_offset(1, 1).map_err(|_| EINVAL)?, 3);
        slab.store(nc_counter_offset(1, 29).map_err(|_| EINVAL)?, 10);
        device.release_own(&mut inner, leader)?;
        assert_eq!(inner.slots.get(slot).ok_or(EINVAL)?.owner.is_some(), false);
        assert_eq!(slab.load(nc_counter_offset(1, 1).map_err(|_| EINVAL)?), 0);
        assert_eq!(slab.load(SLAB_GENERATION_OFFSET), owned_generation + 1);
        let success = node_of(SysfsGroup::Status, "success")?;
        let flops = node_of(SysfsGroup::OtherInfo, "flop_count")?;
        assert_eq!(inner.totals.get(1, success).ok_or(EINVAL)?.total, 3);
        assert_eq!(inner.totals.get(1, flops).ok_or(EINVAL)?.total, 20);
        // A release without a slab is a no-op.
        device.release_own(&mut inner, leader)?;
        assert_eq!(inner.totals.get(1, success).ok_or(EINVAL)?.total, 3);
        Ok(())
    }

    #[test]
    fn sysfs_total_is_live_and_present_is_the_last_release() -> Result {
        let device = DeviceState::new(0, 1)?;
        let task = current!();
        let leader = task.group_leader();
        let success = node_of(SysfsGroup::Status, "success")?;
        let offset = nc_counter_offset(0, 1).map_err(|_| EINVAL)?;
        let slot = {
            let mut inner = device.inner.lock();
            device.acquire_own(&mut inner, leader, Kuid::current_euid())?
        };
        device.slab(slot)?.store(offset, 4);
        assert_eq!(&shown(&device, 0, success, SysfsFile::Total)?[..], b"4\n");
        assert_eq!(&shown(&device, 0, success, SysfsFile::Present)?[..], b"0\n");
        {
            let mut inner = device.inner.lock();
            device.release_own(&mut inner, leader)?;
        }
        assert_eq!(&shown(&device, 0, success, SysfsFile::Total)?[..], b"4\n");
        assert_eq!(&shown(&device, 0, success, SysfsFile::Present)?[..], b"4\n");
        device.sysfs_store(
            SysfsNodeKind::Counter {
                core: 0,
                node: success,
            },
            SysfsFile::Total,
        )?;
        assert_eq!(&shown(&device, 0, success, SysfsFile::Total)?[..], b"0\n");
        assert_eq!(
            device.sysfs_store(SysfsNodeKind::Datastore, SysfsFile::Slots),
            Err(EINVAL)
        );
        Ok(())
    }
}
