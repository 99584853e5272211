// SPDX-License-Identifier: GPL-2.0

//! How many VMAs of each window of each slot's current view exist, all processes together, and
//! the bound on them.
//!
//! Ending a view removes the pages of every VMA made for it, one VMA at a time, inside a
//! RELEASE, an exit or another owner's ACQUIRE: without a bound, a process that maps a window
//! tens of thousands of times (up to `vm.max_map_count`, and more with `CLONE_VM` siblings
//! keeping a dead owner's address space) would make someone else's call wait for all of them.
//! Each new VMA of the current view (an `mmap`, a split, an `mremap` copy) is counted, and an
//! `mmap` or a split past the bound is refused with `ENOMEM`, as the core refuses a mapping
//! past the process's own limit.
//!
//! The bound is per view: a view starts with no VMA counted, and the VMAs that processes keep
//! of views that ended count against nothing (their pages are gone, and their places are never
//! visited again, see `state::windows`). A VMA of an ended view can no longer be split, so
//! that no mapping of a view grows in number after the view's end, before its pages are
//! removed.

use crate::state::{
    slots::{
        PerSlot,
        SlotIndex, //
    },
    windows::Access,
};
use kernel::prelude::*;

/// VMAs of one window of one view that may exist at once, all processes together: far more
/// than every monitor of a host needs (one each), few enough that removing them all is short
/// (`Documentation/performance.rst`, *ACQUIRE after a reader's 10,000 mmaps*).
pub(crate) const MAPPINGS_PER_VIEW: u32 = 1024;

/// The counted VMAs of one slot's current view.
#[derive(Clone, Copy, Default)]
struct SlotMappings {
    view: u64,
    /// Per window ([`Access::index`]).
    counts: [u32; 2],
}

/// The counted VMAs of every slot's current view.
pub(crate) struct ViewMappings {
    slots: PerSlot<SlotMappings>,
}

impl ViewMappings {
    /// No VMA counted, every slot at view 0.
    pub(crate) fn new() -> Self {
        Self {
            slots: PerSlot::from_fn(|_| SlotMappings::default()),
        }
    }

    /// Slot `slot`'s view is `view` from now on, with no VMA counted.
    pub(crate) fn start_view(&mut self, slot: SlotIndex, view: u64) {
        self.slots[slot] = SlotMappings {
            view,
            counts: [0; 2],
        };
    }

    /// The count of `slot`'s `access` window if `view` is the slot's current view.
    fn current(&mut self, slot: SlotIndex, access: Access, view: u64) -> Option<&mut u32> {
        let mappings = &mut self.slots[slot];
        (mappings.view == view).then(|| &mut mappings.counts[access.index()])
    }

    /// Counts a new mapping of view `view` of `slot`'s `access` window: `ENOMEM` at the bound,
    /// `EINVAL` if the view is not the slot's current one.
    pub(crate) fn try_add(&mut self, slot: SlotIndex, access: Access, view: u64) -> Result {
        let count = self.current(slot, access, view).ok_or(EINVAL)?;
        if *count >= MAPPINGS_PER_VIEW {
            return Err(ENOMEM);
        }
        *count += 1;
        Ok(())
    }

    /// Whether a VMA of view `view` of `slot`'s `access` window may be split in two: `ENOMEM`
    /// at the bound, and for a view that ended.
    pub(crate) fn may_split(&mut self, slot: SlotIndex, access: Access, view: u64) -> Result {
        match self.current(slot, access, view) {
            Some(count) if *count < MAPPINGS_PER_VIEW => Ok(()),
            _ => Err(ENOMEM),
        }
    }

    /// Counts a VMA the core copied from one of view `view` (a split it allowed, an `mremap`
    /// copy): it exists whatever the bound. One of an ended view counts against nothing.
    pub(crate) fn add_copy(&mut self, slot: SlotIndex, access: Access, view: u64) {
        if let Some(count) = self.current(slot, access, view) {
            *count = count.saturating_add(1);
        }
    }

    /// A VMA of view `view` of `slot`'s `access` window is gone.
    pub(crate) fn remove(&mut self, slot: SlotIndex, access: Access, view: u64) {
        if let Some(count) = self.current(slot, access, view) {
            // Never below zero: every removal of the current view is of a VMA counted for it.
            *count = count.saturating_sub(1);
        }
    }

    /// The counted VMAs of `slot`'s `access` window of its current view.
    #[cfg(neuron_ds_kunit)]
    pub(crate) fn count(&self, slot: SlotIndex, access: Access) -> u32 {
        self.slots[slot].counts[access.index()]
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_view_mappings)]
mod tests {
    use super::*;

    fn slot(index: usize) -> Result<SlotIndex> {
        SlotIndex::new(index).ok_or(EINVAL)
    }

    #[test]
    fn mappings_past_the_bound_are_refused_until_one_goes() -> Result {
        let mut mappings = ViewMappings::new();
        let (three, four) = (slot(3)?, slot(4)?);
        mappings.start_view(three, 5);
        mappings.start_view(four, 9);
        for _ in 0..MAPPINGS_PER_VIEW {
            mappings.try_add(three, Access::Read, 5)?;
        }
        assert_eq!(mappings.try_add(three, Access::Read, 5), Err(ENOMEM));
        assert_eq!(mappings.may_split(three, Access::Read, 5), Err(ENOMEM));
        // The owner's window and another slot have bounds of their own.
        mappings.try_add(three, Access::Owner, 5)?;
        mappings.try_add(four, Access::Read, 9)?;
        mappings.remove(three, Access::Read, 5);
        assert_eq!(mappings.may_split(three, Access::Read, 5), Ok(()));
        mappings.try_add(three, Access::Read, 5)?;
        assert_eq!(mappings.count(three, Access::Read), MAPPINGS_PER_VIEW);
        assert_eq!(mappings.count(three, Access::Owner), 1);
        Ok(())
    }

    #[test]
    fn a_new_view_starts_from_zero_and_the_ended_ones_count_for_nothing() -> Result {
        let mut mappings = ViewMappings::new();
        let slot = slot(0)?;
        mappings.start_view(slot, 1);
        for _ in 0..MAPPINGS_PER_VIEW {
            mappings.try_add(slot, Access::Read, 1)?;
        }
        mappings.start_view(slot, 2);
        assert_eq!(mappings.count(slot, Access::Read), 0);
        // The ended view's VMAs: no new one, no split, and their copies and removals do not
        // touch the new view's count.
        assert_eq!(mappings.try_add(slot, Access::Read, 1), Err(EINVAL));
        assert_eq!(mappings.may_split(slot, Access::Read, 1), Err(ENOMEM));
        mappings.add_copy(slot, Access::Read, 1);
        mappings.remove(slot, Access::Read, 1);
        mappings.remove(slot, Access::Read, 1);
        assert_eq!(mappings.count(slot, Access::Read), 0);
        for _ in 0..MAPPINGS_PER_VIEW {
            mappings.try_add(slot, Access::Read, 2)?;
        }
        assert_eq!(mappings.count(slot, Access::Read), MAPPINGS_PER_VIEW);
        Ok(())
    }

    #[test]
    fn copies_are_counted_past_the_bound_and_removals_stop_at_zero() -> Result {
        let mut mappings = ViewMappings::new();
        let slot = slot(0)?;
        for _ in 0..MAPPINGS_PER_VIEW {
            mappings.try_add(slot, Access::Owner, 0)?;
        }
        mappings.add_copy(slot, Access::Owner, 0);
        assert_eq!(mappings.count(slot, Access::Owner), MAPPINGS_PER_VIEW + 1);
        for _ in 0..MAPPINGS_PER_VIEW + 2 {
            mappings.remove(slot, Access::Owner, 0);
        }
        assert_eq!(mappings.count(slot, Access::Owner), 0);
        mappings.try_add(slot, Access::Owner, 0)?;
        assert_eq!(mappings.count(slot, Access::Owner), 1);
        Ok(())
    }
}
