// SPDX-License-Identifier: GPL-2.0

//! Who owns which slab: ACQUIRE for the caller's own slab or another process's, a thread
//! group's open files, and the reaping of owners that died or outlived their tenure.

use super::{
    DeviceState,
    Owner, //
};
use crate::{
    abi::ledger::TenureEnd,
    shim::thread_group::ThreadGroup,
    state::slots::{
        PerSlot,
        SlotIndex,
        Taken, //
    },
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// What an ACQUIRE grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Acquired {
    /// The slot.
    pub(crate) slot: SlotIndex,
    /// The view of the slab that mappings through the grant are made for.
    pub(crate) view: u64,
    /// Granted to the slab's owner (which may map it writable) rather than to a reader.
    pub(crate) owner: bool,
}

impl DeviceState {
    /// Counts one more open file of `opener`'s thread group.
    pub(crate) fn add_opener(&self, opener: &ThreadGroup) -> Result {
        let mut inner = self.inner.lock();
        match inner
            .openers
            .iter_mut()
            .find(|(group, _)| group.same_as(opener))
        {
            Some((_, count)) => *count += 1,
            None => inner.openers.push((opener.clone(), 1), GFP_KERNEL)?,
        }
        Ok(())
    }

    /// Counts one file of `opener`'s group less; returns whether it was the group's last.
    pub(crate) fn remove_opener(&self, opener: &ThreadGroup) -> bool {
        let mut inner = self.inner.lock();
        let Some(index) = inner
            .openers
            .iter()
            .position(|(group, _)| group.same_as(opener))
        else {
            return false;
        };
        let last = inner.openers.get_mut(index).is_some_and(|(_, count)| {
            *count -= 1;
            *count == 0
        });
        if last {
            // `index` was just found, so the removal cannot fail.
            let _ = inner.openers.remove(index);
        }
        last
    }

    /// The slab of the caller's thread group, taking one if it has none: the first never-used
    /// slot, otherwise the one released longest ago; `ENOMEM` if all 16 are owned (one that is
    /// being released is waited for, interruptibly). A slab the group's earlier image held
    /// under other credentials ([`Owner::outlived`]) is released first, and the caller gets a
    /// zeroed one.
    pub(crate) fn acquire_own(self: &Arc<Self>) -> Result<Acquired> {
        // The metrics worker now sums this owner's slab too.
        self.worker_coverage.record_current();
        self.reap_exited_owners();
        let mut owner = Owner::current()?;
        let mut inner = self.inner.lock();
        loop {
            let own = inner
                .pool
                .find_owner(|owned| owned.group.same_as(&owner.group))
                .map(|(slot, owned)| (slot, owned.outlived()));
            match own {
                Some((slot, false)) => {
                    return Ok(Acquired {
                        slot,
                        view: inner.pool.get(slot).view(),
                        owner: true,
                    })
                }
                Some((slot, true)) => {
                    drop(inner);
                    self.release_slot(TenureEnd::Outlived, |index, owned| {
                        index == slot && owned.outlived()
                    });
                    inner = self.inner.lock();
                    continue;
                }
                None => {}
            }
            match inner.pool.take(owner) {
                Taken::Owned(slot, generation) => {
                    self.view_moved(&mut inner, slot);
                    self.publish_generation(slot, generation);
                    return Ok(Acquired {
                        slot,
                        view: inner.pool.get(slot).view(),
                        owner: true,
                    });
                }
                Taken::MustScrub(scrubbing, back) => {
                    // The worker has not got to it yet: zero it here, then try again.
                    owner = back;
                    drop(inner);
                    self.scrub(scrubbing);
                    inner = self.inner.lock();
                }
                Taken::Wait(back) => {
                    owner = back;
                    if self.slot_freed.wait_interruptible(&mut inner) {
                        return Err(ERESTARTSYS);
                    }
                }
                Taken::Full => return Err(ENOMEM),
            }
        }
    }

    /// The slab of the process `pid` (in the caller's pid namespace) for the caller: the
    /// owner's grant if it is the caller's own, otherwise a reader's. `ENOENT` if the process
    /// owns no slab here (a group that has exited does not answer for its number, which may be
    /// another process's by now, nor does a tenure its group outlived); `EPERM` if the caller
    /// may not read it: the kernel's rule for reading another process, evaluated now against
    /// the owner's current credentials ([`ThreadGroup::may_be_read_by_current`]), or
    /// `perfmon_capable()`; only the latter with
    /// [`DeviceConfig::attach_requires_perfmon`](super::DeviceConfig).
    ///
    /// The check is made under the device lock with the view it grants, so the grant is only
    /// good for the tenure and the view it was checked against; `mmap` checks the caller again
    /// ([`DeviceState::authorize_mapping`]).
    pub(crate) fn acquire_pid(&self, pid: i32) -> Result<Acquired> {
        let caller = current!();
        let namespace = caller.active_pid_ns();
        let inner = self.inner.lock();
        let (slot, owner) = inner
            .pool
            .find_owner(|owner| {
                owner.group.nr_in(namespace) == pid
                    && !owner.group.has_exited()
                    && !owner.outlived()
            })
            .ok_or(ENOENT)?;
        if !owner.admits_current_reader(self.config.attach_requires_perfmon) {
            return Err(EPERM);
        }
        Ok(Acquired {
            slot,
            view: inner.pool.get(slot).view(),
            owner: owner.group.is_current(),
        })
    }

    /// Releases the slab of thread group `group`, if it has one; `end` says how its tenure
    /// ended.
    pub(crate) fn release_own(self: &Arc<Self>, group: &ThreadGroup, end: TenureEnd) {
        self.release_slot(end, |_, owner| owner.group.same_as(group));
    }

    /// Releases every slab whose owner's thread group has exited, or outlived its tenure
    /// ([`Owner::outlived`]).
    ///
    /// A group's slab is normally released when its last file on the device goes, but a group
    /// can own a slab through a file it did not open (inherited across `fork`, or passed over a
    /// socket), whose release waits for the other holders; and a group that executed a program
    /// under other credentials keeps its files. This is where such slabs are released; it runs
    /// before a new owner takes a slot and once per metrics period.
    pub(crate) fn reap_exited_owners(self: &Arc<Self>) {
        let ended = |owner: &Owner| owner.group.has_exited() || owner.outlived();
        let reaped = {
            let inner = self.inner.lock();
            PerSlot::from_fn(|slot| inner.pool.get(slot).owner().is_some_and(ended))
        };
        for (slot, _) in reaped.iter().filter(|(_, reaped)| **reaped) {
            // Checked again under the lock: the group's last close may have released it since.
            // An exited group's tenure was reaped, whatever it ran last.
            let end = {
                let inner = self.inner.lock();
                match inner.pool.get(slot).owner() {
                    Some(owner) if owner.group.has_exited() => TenureEnd::Reaped,
                    _ => TenureEnd::Outlived,
                }
            };
            self.release_slot(end, |index, owner| index == slot && ended(owner));
        }
    }
}
