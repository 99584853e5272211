// SPDX-License-Identifier: GPL-2.0

//! One open file of a device node: the ioctls, `mmap` of what an ACQUIRE through the file
//! granted and the faults of those mappings, `read` of the metric posts, and the release of its
//! group's slab on the group's last close.

use crate::{
    abi::{
        ioctl::{
            MetricsMode,
            NeuronDsInfo,
            NeuronMetricsCtrl,
            NEURON_IOCTL_ACQUIRE_NEURON_DS,
            NEURON_IOCTL_METRICS_CTRL,
            NEURON_IOCTL_RELEASE_NEURON_DS, //
        },
        ledger::{
            TenureEnd,
            TenureRecord,
            NDS_IOCTL_FOLLOW_LEDGER,
            TENURE_RECORD_SIZE, //
        },
        metrics::METRIC_POST_SIZE,
    },
    device::{
        Acquired,
        DeviceState,
        SLAB_SIZE, //
    },
    shim::{
        capability::opener_perfmon_capable,
        misc::{
            file_position,
            is_nonblocking,
            kiocb_file,
            MiscFile,
            PollEvents, //
        },
        shared_mapping::SharedMapping,
        thread_group::ThreadGroup,
        vma::{
            self,
            Fault,
            FaultOutcome, //
        },
        zeroed::zeroed_box,
    },
    state::{
        slots::PerSlot,
        windows::{
            Access,
            Placement,
            Window, //
        },
    },
};
use kernel::{
    fs::{
        File,
        Kiocb, //
    },
    iov::IovIterDest,
    mm::virt::{
        flags,
        VmaNew,
        VmaRef, //
    },
    new_mutex,
    prelude::*,
    sync::{
        atomic::{
            ordering::Relaxed,
            AtomicFlag, //
        },
        poll::PollTable,
        Arc,
        Mutex, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};
use zerocopy::IntoBytes;

/// A slab that mappings through this file may name, as an ACQUIRE through it found it. A
/// grant names a view; it admits nobody: whoever maps through the file (any process sharing
/// it) is checked again at `mmap` ([`DeviceState::authorize_mapping`]).
#[derive(Clone, Copy)]
struct Grant {
    /// The view of the slab the grant maps (see `device`); a mapping after the slab was
    /// released, or its view renewed, is refused.
    view: u64,
    /// Granted to the owner, whose window the mapping may then name.
    owner: bool,
}

/// One open file of a device node.
#[pin_data]
pub(crate) struct OpenFile {
    device: Arc<DeviceState>,
    /// The thread group that opened the file.
    opener: ThreadGroup,
    /// Whether `read` and `poll` serve the tenure ledger instead of the metric posts, for
    /// good once `FOLLOW_LEDGER` set it.
    follows_ledger: AtomicFlag,
    /// What the file may map, per slot. Never held together with the device lock.
    #[pin]
    grants: Mutex<PerSlot<Option<Grant>>>,
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
        let Acquired { slot, view, owner } = match info.pid {
            0 => self.device.acquire_own()?,
            pid if pid < 0 => return Err(EINVAL),
            pid => self.device.acquire_pid(pid)?,
        };
        self.grants.lock()[slot] = Some(Grant { view, owner });
        let access = if owner { Access::Owner } else { Access::Read };
        info.mmap_offset = Window {
            device: self.device.config().index,
            slot,
            access,
        }
        .offset();
        info.size = SLAB_SIZE as u32;
        UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<NeuronDsInfo>(),
        )
        .writer()
        .write_slice(info.as_bytes())?;
        Ok(0)
    }

    /// `METRICS_CTRL`: pauses or resumes the device's periodic metrics posting. An unknown
    /// mode is `EINVAL`, or ignored (0, as the original does) with
    /// `metrics_ctrl_accept_unknown=1`.
    fn metrics_ctrl_ioctl(&self, arg: usize) -> Result<isize> {
        let mut bytes = [0u8; core::mem::size_of::<NeuronMetricsCtrl>()];
        UserSlice::new(UserPtr::from_addr(arg), bytes.len())
            .reader()
            .read_slice(&mut bytes)?;
        let ctrl = NeuronMetricsCtrl::read_from_bytes(&bytes).map_err(|_| EINVAL)?;
        match MetricsMode::from_raw(ctrl.mode) {
            Some(mode) => self
                .device
                .set_metrics_paused(mode == MetricsMode::PeriodicDisable),
            None if self.device.config().accept_unknown_metrics_modes => {}
            None => return Err(EINVAL),
        }
        Ok(0)
    }

    /// `RELEASE_NEURON_DS`: the owner's slab is aggregated, zeroed and freed; a release of
    /// someone else's pid is a no-op that succeeds (readers call it when they detach).
    fn release_ioctl(&self, arg: usize) -> Result<isize> {
        let info = Self::read_arg(arg)?;
        let me = ThreadGroup::current()?;
        let own_pid = me.nr_in(current!().active_pid_ns());
        match info.pid {
            pid if pid < 0 => Err(EINVAL),
            pid if pid == 0 || pid == own_pid => {
                self.device.release_own(&me, TenureEnd::Release);
                Ok(0)
            }
            _ => Ok(0),
        }
    }
}

const _: () = assert!(SLAB_SIZE <= u32::MAX as usize);

impl OpenFile {
    /// `read` of a file that follows the ledger: whole [`TenureRecord`]s from the file position
    /// on (the next sequence number wanted), each as its reader may read it; waits for the
    /// first when there is none yet, unless the read must not wait (`EAGAIN`).
    fn read_ledger(
        mut kiocb: Kiocb<'_, Pin<KBox<Self>>>,
        iov: &mut IovIterDest<'_>,
    ) -> Result<usize> {
        let max = iov.len() / TENURE_RECORD_SIZE;
        if max == 0 {
            return Err(EINVAL);
        }
        let device = kiocb.file().device.clone();
        let nonblocking = is_nonblocking(&kiocb);
        // One record at a time, in a buffer of its own: too large for the stack, and copied
        // out with no lock held.
        let mut record = zeroed_box::<TenureRecord>(GFP_KERNEL)?;
        let mut copied = 0;
        while copied / TENURE_RECORD_SIZE < max {
            let from = u64::try_from(*kiocb.ki_pos_mut()).unwrap_or(0);
            // Only the first record may be waited for.
            let waits = copied == 0 && !nonblocking;
            match device.read_tenure(from, kiocb_file(&kiocb), !waits, &mut record) {
                Ok(()) => {}
                Err(err) if copied == 0 => return Err(err),
                Err(_) => break,
            }
            let bytes = record.as_bytes();
            if iov.copy_to_iter(bytes) != bytes.len() {
                return if copied == 0 { Err(EFAULT) } else { Ok(copied) };
            }
            copied += bytes.len();
            *kiocb.ki_pos_mut() = i64::try_from(record.seq + 1).unwrap_or(i64::MAX);
        }
        Ok(copied)
    }
}

impl MiscFile for OpenFile {
    type Data = Arc<DeviceState>;

    fn open(device: &Arc<DeviceState>) -> Result<Pin<KBox<Self>>> {
        let opener = ThreadGroup::current()?;
        let counted = opener.clone();
        let file = KBox::try_pin_init(
            try_pin_init!(Self {
                device: device.clone(),
                opener,
                follows_ledger: AtomicFlag::new(false),
                grants <- new_mutex!(PerSlot::from_fn(|_| None)),
            }),
            GFP_KERNEL,
        )?;
        // Counted last: if anything above failed, there is nothing to undo.
        device.add_opener(&counted)?;
        Ok(file)
    }

    fn mapping(&self) -> &SharedMapping {
        self.device.mapping()
    }

    fn release(this: Pin<KBox<Self>>) {
        // The file is gone, and with it every mapping made through it (a mapping holds its
        // file): when it was its group's last, the group's slab goes too.
        if this.device.remove_opener(&this.opener) {
            this.device.release_own(&this.opener, TenureEnd::LastClose);
        }
    }

    fn ioctl(this: Pin<&Self>, cmd: u32, arg: usize) -> Result<isize> {
        // The original matches the full command value; the size it encodes is a pointer's,
        // not the argument's, so the argument's own size is used for the copies.
        match cmd {
            NEURON_IOCTL_ACQUIRE_NEURON_DS => this.acquire_ioctl(arg),
            NEURON_IOCTL_RELEASE_NEURON_DS => this.release_ioctl(arg),
            NEURON_IOCTL_METRICS_CTRL => this.metrics_ctrl_ioctl(arg),
            NDS_IOCTL_FOLLOW_LEDGER => {
                // From now on this file reads the ledger, from its position: the first record
                // kept unless a `pread` names a sequence number.
                this.follows_ledger.store(true, Relaxed);
                Ok(0)
            }
            _ => Err(ENOTTY),
        }
    }

    /// Returns the metric posts from the file position on, whole [`MetricPost`]s only; the
    /// position is the next sequence number wanted (0: from the oldest kept). Waits for a post
    /// when there is none yet, unless the read must not wait (`EAGAIN`). `EPERM` unless the
    /// file's opener was `perfmon_capable()`: a post carries values of single processes (the
    /// last model id, versions, and with one tenant its own per-period counts), which the
    /// original sends to firmware, never to users.
    ///
    /// [`MetricPost`]: crate::abi::metrics::MetricPost
    fn read_iter(
        mut kiocb: Kiocb<'_, Pin<KBox<Self>>>,
        iov: &mut IovIterDest<'_>,
    ) -> Result<usize> {
        if kiocb.file().follows_ledger.load(Relaxed) {
            return Self::read_ledger(kiocb, iov);
        }
        if !opener_perfmon_capable(kiocb_file(&kiocb)) {
            return Err(EPERM);
        }
        let max = iov.len() / METRIC_POST_SIZE;
        if max == 0 {
            return Err(EINVAL);
        }
        let device = kiocb.file().device.clone();
        let from = u64::try_from(*kiocb.ki_pos_mut()).unwrap_or(0);
        let posts = device.wait_for_posts(from, max, is_nonblocking(&kiocb))?;
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

    /// Readable once a post past the file position exists; an error at once for a file whose
    /// opener may not read posts (a `read` fails with `EPERM`).
    #[inline]
    fn poll(this: Pin<&Self>, file: &File, table: PollTable<'_>) -> PollEvents {
        if this.follows_ledger.load(Relaxed) {
            let from = u64::try_from(file_position(file)).unwrap_or(0);
            return if this.device.poll_ledger(file, &table, from) {
                PollEvents::READABLE
            } else {
                PollEvents::NONE
            };
        }
        if !opener_perfmon_capable(file) {
            return PollEvents::ERROR;
        }
        let from = u64::try_from(file_position(file)).unwrap_or(0);
        if this.device.poll_posts(file, &table, from) {
            PollEvents::READABLE
        } else {
            PollEvents::NONE
        }
    }

    /// Checks a new mapping against this file's grants and the caller, sets its protection (the
    /// owner's window may be writable; a reader's never is) and moves it to its view's place.
    /// Returns the view, the mapping's tag. No page is inserted here: each is inserted by
    /// [`OpenFile::fault`] when first touched, while the mapping's view lasts.
    fn mmap(this: Pin<&Self>, area: &VmaNew) -> Result<u64> {
        if area.end() - area.start() != SLAB_SIZE {
            return Err(EINVAL);
        }
        let window = vma::offset(area).and_then(Window::at).ok_or(EINVAL)?;
        if window.device != this.device.config().index {
            return Err(EINVAL);
        }
        let grant = this.grants.lock()[window.slot].ok_or(EINVAL)?;
        area.try_clear_mayexec().map_err(|_| EPERM)?;
        match window.access {
            Access::Owner if !grant.owner => return Err(EINVAL),
            // A private copy of the owner's window would be copy-on-write, which special
            // entries cannot be: a private owner mapping is read-only for good, and refused
            // if asked to be writable.
            Access::Owner if area.flags() & flags::SHARED != 0 => {}
            Access::Owner if area.writable() => return Err(EINVAL),
            Access::Owner => area.try_clear_maywrite()?,
            Access::Read if !area.writable() => area.try_clear_maywrite()?,
            Access::Read if this.device.config().strict_reader_mappings => return Err(EPERM),
            Access::Read => vma::make_read_only(area),
        }
        // The registration makes the mapping VM_PFNMAP | VM_IO: out of get_user_pages, and out
        // of fork for good (VM_DONTCOPY alone can be undone with madvise).
        area.set_dontcopy();
        area.set_dontexpand();
        area.set_dontdump();
        let (view, placement) =
            this.device
                .authorize_mapping(window.slot, window.access, grant.view)?;
        if let Err(err) = vma::place_at(area, placement.first_page()) {
            // Counted, and refused after all: no `close` comes for it.
            this.device.mapping_gone(placement, view);
            return Err(err);
        }
        if view != grant.view {
            // The owner's new image started a new view: this grant follows it.
            if let Some(current) = this.grants.lock()[window.slot].as_mut() {
                current.view = view;
            }
        }
        Ok(view)
    }

    fn may_split(this: Pin<&Self>, vma: &VmaRef, view: u64, _address: usize) -> Result {
        match Placement::containing(vma::first_page(vma)) {
            Some((placement, _)) => this.device.may_split_mapping(placement, view),
            None => Ok(()),
        }
    }

    fn vma_opened(this: Pin<&Self>, vma: &VmaRef, view: u64) {
        if let Some((placement, _)) = Placement::containing(vma::first_page(vma)) {
            this.device.mapping_copied(placement, view);
        }
    }

    fn vma_closed(this: Pin<&Self>, vma: &VmaRef, view: u64) {
        if let Some((placement, _)) = Placement::containing(vma::first_page(vma)) {
            this.device.mapping_gone(placement, view);
        }
    }

    fn fault<'a>(this: Pin<&'a Self>, fault: &Fault<'a>) -> FaultOutcome {
        this.get_ref().device.fault(fault)
    }
}
