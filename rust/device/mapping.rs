// SPDX-License-Identifier: GPL-2.0

//! The mapping authority: what a caller may map (`mmap`), where each view's mappings are kept,
//! how many there may be, and what each page of a mapping shows when it is touched.

use super::{
    DeviceState,
    FaultView,
    Inner,
    Owner, //
};
use crate::{
    shim::{
        capability::perfmon_capable,
        cgroup::CgroupName,
        clock::realtime_ns,
        thread_group::{
            Credentials,
            ThreadGroup, //
        },
        vma::{
            Fault,
            FaultOutcome, //
        },
    },
    state::{
        slab_values::SLAB_PAGES,
        slots::SlotIndex,
        windows::{
            Access,
            Placement, //
        },
    },
};
use kernel::{
    mm::Mm,
    prelude::*,
    sync::aref::ARef, //
};

/// The current task's address space, if it has one (kernel threads do not).
pub(super) fn current_image() -> Option<ARef<Mm>> {
    current!().mm().map(|mm| ARef::from(&**mm))
}

/// Whether `image` is the current task's address space.
fn is_current_image(image: Option<&ARef<Mm>>) -> bool {
    let current = current!().mm().map(|mm| mm.as_raw());
    image.map(|mm| mm.as_raw()) == current
}

impl Owner {
    /// The current task's thread group as an owner from now on: its address space and
    /// credentials are the tenure's.
    pub(super) fn current() -> Result<Self> {
        let group = ThreadGroup::current()?;
        Ok(Self {
            dumpable: group.is_dumpable().unwrap_or(false),
            group,
            image: current_image(),
            credentials: Credentials::current(),
            started_ns: realtime_ns(),
            cgroup: KBox::new(CgroupName::of_current(), GFP_KERNEL)?,
        })
    }

    /// Whether the group runs another image than the one the tenure's view began with, under
    /// other credentials: an `execve` that changed them (a set-id program, or a process that
    /// lowered its privileges and then executed). What the old image wrote belongs to
    /// credentials the group no longer has, so the tenure is over: it is released (and the
    /// slab zeroed) before anyone is admitted by the new credentials.
    pub(super) fn outlived(&self) -> bool {
        !self.group.runs_image(self.image.as_deref())
            && self.group.credentials() != Some(self.credentials)
    }

    /// Whether the current task may read this owner's slab: it is the owner, or the kernel's
    /// rule for reading another process lets it (unless `perfmon_only`), or it is
    /// `perfmon_capable()`. Evaluated now, against the owner's current credentials.
    pub(super) fn admits_current_reader(&self, perfmon_only: bool) -> bool {
        self.group.is_current()
            || (!perfmon_only && self.group.may_be_read_by_current())
            || perfmon_capable()
    }
}

impl DeviceState {
    /// Authorizes a new mapping of slot `slot`'s `access` window made for `view`, counts it,
    /// and returns the place it is moved to.
    ///
    /// The view must still be the slot's (not released, nor renewed, since the ACQUIRE that
    /// named it). A reader's window is mapped only by a caller the read rule admits now,
    /// whoever's grant it maps through (a description shared with another process, maybe
    /// across its set-uid `execve`, holds grants that process made). The owner's window is the
    /// owner's to map; the owner's first mapping from a new address space (after an `execve`
    /// with the same credentials) starts a new view first and removes the pages of every
    /// mapping made for the old one, so no reader that attached to the old image sees a byte
    /// the new one writes. After an `execve` that changed the credentials, the owner's window
    /// is refused (`EPERM`) until an ACQUIRE ends the old tenure and starts one from zeros.
    ///
    /// Checked, counted and placed under one hold of the device lock: the mapping counted is
    /// the one authorized, for the view it is placed at.
    pub(crate) fn authorize_mapping(
        &self,
        slot: SlotIndex,
        access: Access,
        view: u64,
    ) -> Result<(u64, Placement)> {
        let perfmon_only = self.config.attach_requires_perfmon;
        let (counted, renewed_from) = {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let Some(mut owned) = inner.pool.owned_with_view(slot, view) else {
                // Released (and maybe reused), or renewed, since the ACQUIRE.
                return Err(EINVAL);
            };
            let owner = owned.owner();
            let renew = match access {
                Access::Read if owner.outlived() => return Err(EINVAL),
                Access::Read if !owner.admits_current_reader(perfmon_only) => return Err(EPERM),
                Access::Read => false,
                Access::Owner if !owner.group.is_current() => return Err(EPERM),
                Access::Owner if is_current_image(owner.image.as_ref()) => false,
                Access::Owner if owner.credentials != Credentials::current() => return Err(EPERM),
                Access::Owner => {
                    owner.image = current_image();
                    true
                }
            };
            let placed = if renew {
                let renewed = owned.renew_view();
                self.view_moved(inner, slot);
                renewed
            } else {
                view
            };
            let counted = inner
                .mappings
                .try_add(slot, access, placed)
                .map(|()| placed);
            (counted, renew.then_some(view))
        };
        if let Some(old) = renewed_from {
            // The same slab goes on: the old view's pages go now, not at a zeroing.
            self.unmap_view(slot, old);
        }
        let placed = counted?;
        Ok((placed, Placement::of(slot, access, placed)))
    }

    /// Slot `slot`'s view moved on under `inner` (a new owner, a release or a renewal): its
    /// faults see the new one from now on, and its mappings are counted from zero.
    pub(super) fn view_moved(&self, inner: &mut Inner, slot: SlotIndex) {
        let state = inner.pool.get(slot);
        let view = state.view();
        inner.mappings.move_view(slot, view);
        *self.fault_views[slot].lock() = FaultView {
            view,
            owned: state.owner().is_some(),
        };
    }

    /// Whether a VMA made for `view` of the window at `placement` may be split in two:
    /// `ENOMEM` at the bound of a view whose mappings still count.
    pub(crate) fn may_split_mapping(&self, placement: Placement, view: u64) -> Result {
        self.inner
            .lock()
            .mappings
            .may_split(placement.slot, placement.access, view)
    }

    /// A VMA the core copied from one made for `view` at `placement` (a split, an `mremap`
    /// copy) now exists.
    pub(crate) fn mapping_copied(&self, placement: Placement, view: u64) {
        self.inner
            .lock()
            .mappings
            .add_copy(placement.slot, placement.access, view);
    }

    /// A VMA made for `view` at `placement` is gone.
    pub(crate) fn mapping_gone(&self, placement: Placement, view: u64) {
        self.inner
            .lock()
            .mappings
            .remove(placement.slot, placement.access, view);
    }

    /// Removes the pages of every mapping of view `view` of slot `slot`'s windows, in every
    /// process; their next accesses fault into [`DeviceState::fault`].
    pub(super) fn unmap_view(&self, slot: SlotIndex, view: u64) {
        for access in Access::ALL {
            self.unmap_window(slot, access, view);
        }
    }

    /// Removes the pages of every mapping of view `view` of slot `slot`'s `access` window; they
    /// count against nothing from then on (nothing visits them again).
    pub(super) fn unmap_window(&self, slot: SlotIndex, access: Access, view: u64) {
        let placement = Placement::of(slot, access, view);
        self.mapping.unmap_pages(placement.first_page(), SLAB_PAGES);
        self.inner.lock().mappings.revoked(slot, access, view);
    }

    /// Answers a fault of a mapping made for view `fault.tag()`: the slab's page while the view
    /// is the slot's; afterwards zeros for a reader's window, `SIGBUS` for the owner's.
    ///
    /// Decided and inserted under the slot's fault lock alone, which every move of the slot's
    /// view takes too, and before it removes the old view's pages: no page of the slab is
    /// inserted for an ended view, and those inserted before are removed by the release (the
    /// owner's) and by the zeroing (the readers'). The insertion may allocate page tables and
    /// wait for memory reclaim; it holds neither the device lock nor any other slot's.
    pub(crate) fn fault<'a>(&'a self, fault: &Fault<'a>) -> FaultOutcome {
        let Some((placement, page)) = Placement::containing(fault.page()) else {
            return Fault::sigbus();
        };
        let view = fault.tag();
        if placement.is_of(view) {
            let shown = self.fault_views[placement.slot].lock();
            if shown.owned && shown.view == view {
                // The whole window at once: an attaching process touches every page of it.
                return fault.insert_around(self.slab(placement.slot).pages(), page);
            }
        }
        match (placement.access, self.zeros.pages().first()) {
            (Access::Read, Some(zeros)) => fault.insert(zeros),
            _ => Fault::sigbus(),
        }
    }
}
