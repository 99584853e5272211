// SPDX-License-Identifier: GPL-2.0

//! One open file of a device node: the ioctls, `mmap` of what an ACQUIRE through the file
//! granted, `read` of the metric posts, and the release of its group's slab on the group's last
//! close.

use crate::{
    abi::{
        ioctl::{
            NeuronDsInfo,
            NEURON_IOCTL_ACQUIRE_NEURON_DS,
            NEURON_IOCTL_RELEASE_NEURON_DS, //
        },
        metrics::METRIC_POST_SIZE,
    },
    device::{
        decode_mmap_offset,
        mmap_offset,
        Access,
        Acquired,
        DeviceState,
        SLAB_SIZE, //
    },
    shim::{
        misc::{
            MiscRegistration,
            WithData, //
        },
        vma::{
            self,
            VmaTicket, //
        },
    },
    state::slots::SLOT_COUNT,
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
    sync::{aref::ARef, Arc, Mutex},
    task::{
        Kuid,
        Task, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// A slab this file may map, granted by an ACQUIRE through it.
#[derive(Clone, Copy)]
struct Grant {
    /// The slot's generation at the ACQUIRE; a mapping after the slab was released is refused.
    generation: u64,
    /// Granted to the owner, who may map the owner's window.
    owner: bool,
}

/// One open file of a device node.
#[pin_data]
pub(crate) struct OpenFile {
    device: Arc<DeviceState>,
    /// Leader of the thread group that opened the file.
    opener: ARef<Task>,
    /// What the file may map, per slot. Never held together with the device lock.
    #[pin]
    grants: Mutex<[Option<Grant>; SLOT_COUNT]>,
}

impl WithData for OpenFile {
    type Data = Arc<DeviceState>;
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

    /// `ACQUIRE_NEURON_DS`: pid 0 gets (or creates) the caller's slab; any other pid maps that
    /// process's slab, for reading unless it is the caller's own.
    fn acquire_ioctl(&self, arg: usize) -> Result<isize> {
        let mut info = Self::read_arg(arg)?;
        let acquired = match info.pid {
            0 => {
                let caller = current!();
                self.device
                    .acquire_own(caller.group_leader(), Kuid::current_euid())?
            }
            pid if pid < 0 => return Err(EINVAL),
            pid => self.device.acquire_pid(pid)?,
        };
        let Acquired {
            slot,
            generation,
            owner,
        } = acquired;
        *self.grants.lock().get_mut(slot).ok_or(EINVAL)? = Some(Grant { generation, owner });
        let access = if owner { Access::Owner } else { Access::Read };
        info.mmap_offset = mmap_offset(self.device.config().index, slot, access);
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
                self.device.release_own(leader)?;
                Ok(0)
            }
            _ => Ok(0),
        }
    }

    /// Checks a new mapping against this file's grants and the slab's state, and sets its
    /// protection: the owner's window may be writable; a reader's never is. Returns the slot,
    /// and for the owner's window the ticket that counts the mapping.
    fn authorize_mapping(&self, vma: &VmaNew) -> Result<(usize, Option<VmaTicket>)> {
        if vma.end() - vma.start() != SLAB_SIZE {
            return Err(EINVAL);
        }
        let offset = vma::offset(vma).ok_or(EINVAL)?;
        let (device, slot, access) = decode_mmap_offset(offset).ok_or(EINVAL)?;
        if device != self.device.config().index {
            return Err(EINVAL);
        }
        let grant = self
            .grants
            .lock()
            .get(slot)
            .copied()
            .flatten()
            .ok_or(EINVAL)?;
        vma.try_clear_mayexec().map_err(|_| EPERM)?;
        let ticket = match access {
            Access::Owner => {
                if !grant.owner {
                    return Err(EINVAL);
                }
                let caller = current!();
                let mm = caller.mm().ok_or(EINVAL)?;
                self.device
                    .authorize_mapping(slot, grant.generation, Some(mm))?
            }
            Access::Read => {
                self.device
                    .authorize_mapping(slot, grant.generation, None)?;
                if !vma.writable() {
                    vma.try_clear_maywrite()?;
                } else if self.device.config().strict_reader_mappings {
                    return Err(EPERM);
                } else {
                    vma::make_read_only(vma);
                }
                None
            }
        };
        Ok((slot, ticket))
    }
}

#[vtable]
impl MiscDevice for OpenFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        let device = MiscRegistration::open(file, misc)?.data().clone();
        let opener = ARef::from(current!().group_leader());
        let (file_device, file_opener) = (device.clone(), opener.clone());
        let file = KBox::try_pin_init(
            try_pin_init!(Self {
                device: file_device,
                opener: file_opener,
                grants <- new_mutex!([None; SLOT_COUNT]),
            }),
            GFP_KERNEL,
        )?;
        // Counted last: if anything above failed, there is nothing to undo.
        device.add_opener(&opener)?;
        Ok(file)
    }

    fn release(this: Pin<KBox<Self>>, _file: &File) {
        // The file is gone, and with it every mapping made through it (a mapping holds its
        // file): when it was its group's last, the group's slab goes too.
        if this.device.remove_opener(&this.opener) {
            if let Err(err) = this.device.release_own(&this.opener) {
                pr_err!("releasing a slab on close failed: {err:?}\n");
            }
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
        let posts = device.read_posts(from, max)?;
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

    /// Maps the slab pages. They are inserted after the checks, without the device lock: a
    /// writable mapping's address space was recorded under the lock, and a release revokes it
    /// only after taking that address space's mmap lock, which this `mmap` holds until the
    /// mapping is complete. A read-only mapping that races with a release shows the slab's next
    /// state, which the generation word tells readers about.
    fn mmap(me: Pin<&OpenFile>, _file: &File, vma: &VmaNew) -> Result {
        let (slot, ticket) = me.authorize_mapping(vma)?;
        // VM_IO keeps the mapping out of fork for good (VM_DONTCOPY alone can be undone with
        // madvise) and out of get_user_pages.
        vma.set_io();
        vma.set_dontcopy();
        vma.set_dontexpand();
        vma.set_dontdump();
        let mixed = vma.set_mixedmap();
        for (index, page) in me.device.slab(slot)?.pages().iter().enumerate() {
            mixed.vm_insert_page(vma.start() + index * PAGE_SIZE, page)?;
        }
        if let Some(ticket) = ticket {
            ticket.attach(vma);
        }
        Ok(())
    }
}
