// SPDX-License-Identifier: GPL-2.0

//! How many VMAs of each window of each slot's views exist, all processes together, and the
//! bound on them.
//!
//! Ending a view removes the pages of every VMA made for it, one VMA at a time, inside a
//! RELEASE, an exit or another owner's ACQUIRE: without a bound, a process that maps a window
//! tens of thousands of times (up to `vm.max_map_count`, and more with `CLONE_VM` siblings
//! keeping a dead owner's address space) would make someone else's call wait for all of them.
//! Each new VMA (an `mmap`, a split, an `mremap` copy) is counted, and an `mmap` or a split past
//! the bound is refused with `ENOMEM`, as the core refuses a mapping past the process's own
//! limit.
//!
//! The bound is per view: a view starts with no VMA counted. A view that ended keeps its counts
//! until the pages of each of its windows are removed ([`ViewMappings::revoked`]): until then
//! its VMAs are still to be visited, and a split of one still counts against it. From then on
//! its VMAs count against nothing and may be split freely: their places are never visited
//! again (see `state::windows`).

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

/// The counted VMAs of one view of a slot, per window ([`Access::index`]).
#[derive(Clone, Copy, Default)]
struct Counted {
    view: u64,
    counts: [u32; 2],
    /// Per window, whether its VMAs are still to be visited (their pages removed).
    pending: [bool; 2],
}

impl Counted {
    /// The count of `access`'s VMAs of `view`, if this is `view` and they are still counted.
    fn of(&mut self, access: Access, view: u64) -> Option<&mut u32> {
        let window = access.index();
        (self.view == view && self.pending[window]).then(|| &mut self.counts[window])
    }
}

/// The views of one slot whose VMAs count: the current one, and the one that ended last until
/// its pages are removed.
#[derive(Clone, Copy, Default)]
struct SlotMappings {
    current: Counted,
    ended: Counted,
}

/// The counted VMAs of every slot's views.
pub(crate) struct ViewMappings {
    slots: PerSlot<SlotMappings>,
}

impl ViewMappings {
    /// No VMA counted, every slot at view 0.
    pub(crate) fn new() -> Self {
        Self {
            slots: PerSlot::from_fn(|_| SlotMappings {
                current: Counted {
                    pending: [true; 2],
                    ..Counted::default()
                },
                ended: Counted::default(),
            }),
        }
    }

    /// Slot `slot`'s view moves on to `view`, with no VMA counted. The view that was current
    /// keeps its counts until its pages are removed ([`ViewMappings::revoked`]); a view ended
    /// earlier has had them removed by then (a slot's view moves on again only after).
    pub(crate) fn move_view(&mut self, slot: SlotIndex, view: u64) {
        let mappings = &mut self.slots[slot];
        mappings.ended = mappings.current;
        mappings.current = Counted {
            view,
            counts: [0; 2],
            pending: [true; 2],
        };
    }

    /// The pages of every VMA of view `view` of `slot`'s `access` window are removed: those
    /// VMAs count against nothing any more.
    pub(crate) fn revoked(&mut self, slot: SlotIndex, access: Access, view: u64) {
        let ended = &mut self.slots[slot].ended;
        if ended.view == view {
            ended.pending[access.index()] = false;
        }
    }

    /// The count of `slot`'s `access` VMAs of `view`, if they are still counted.
    fn counted(&mut self, slot: SlotIndex, access: Access, view: u64) -> Option<&mut u32> {
        let SlotMappings { current, ended } = &mut self.slots[slot];
        match current.of(access, view) {
            Some(count) => Some(count),
            None => ended.of(access, view),
        }
    }

    /// Counts a new mapping of view `view` of `slot`'s `access` window: `ENOMEM` at the bound,
    /// `EINVAL` if the view is not the slot's current one.
    pub(crate) fn try_add(&mut self, slot: SlotIndex, access: Access, view: u64) -> Result {
        let count = self.slots[slot].current.of(access, view).ok_or(EINVAL)?;
        if *count >= MAPPINGS_PER_VIEW {
            return Err(ENOMEM);
        }
        *count += 1;
        Ok(())
    }

    /// Whether a VMA of view `view` of `slot`'s `access` window may be split in two: `ENOMEM`
    /// at the bound of a view whose VMAs still count.
    pub(crate) fn may_split(&mut self, slot: SlotIndex, access: Access, view: u64) -> Result {
        match self.counted(slot, access, view) {
            Some(count) if *count >= MAPPINGS_PER_VIEW => Err(ENOMEM),
            _ => Ok(()),
        }
    }

    /// Counts a VMA the core copied from one of view `view` (a split it allowed, an `mremap`
    /// copy): it exists whatever the bound.
    pub(crate) fn add_copy(&mut self, slot: SlotIndex, access: Access, view: u64) {
        if let Some(count) = self.counted(slot, access, view) {
            *count = count.saturating_add(1);
        }
    }

    /// A VMA of view `view` of `slot`'s `access` window is gone.
    pub(crate) fn remove(&mut self, slot: SlotIndex, access: Access, view: u64) {
        if let Some(count) = self.counted(slot, access, view) {
            // Never below zero: every removal of a counted view is of a VMA counted for it.
            *count = count.saturating_sub(1);
        }
    }

    /// The counted VMAs of `slot`'s `access` window of its current view.
    #[cfg(neuron_ds_kunit)]
    pub(crate) fn count(&self, slot: SlotIndex, access: Access) -> u32 {
        self.slots[slot].current.counts[access.index()]
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
        mappings.move_view(three, 5);
        mappings.move_view(four, 9);
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
    fn an_ended_view_counts_until_its_pages_are_removed_and_then_for_nothing() -> Result {
        let mut mappings = ViewMappings::new();
        let slot = slot(0)?;
        mappings.move_view(slot, 1);
        for _ in 0..MAPPINGS_PER_VIEW {
            mappings.try_add(slot, Access::Read, 1)?;
        }
        mappings.move_view(slot, 2);
        assert_eq!(mappings.count(slot, Access::Read), 0);
        // No new mapping of the ended view; until its readers' pages are removed, a split of
        // one of its VMAs still counts against it (and is refused at its bound).
        assert_eq!(mappings.try_add(slot, Access::Read, 1), Err(EINVAL));
        assert_eq!(mappings.may_split(slot, Access::Read, 1), Err(ENOMEM));
        mappings.remove(slot, Access::Read, 1);
        assert_eq!(mappings.may_split(slot, Access::Read, 1), Ok(()));
        mappings.add_copy(slot, Access::Read, 1);
        assert_eq!(mappings.may_split(slot, Access::Read, 1), Err(ENOMEM));
        // Its owner's window was revoked already: split freely.
        mappings.revoked(slot, Access::Owner, 1);
        assert_eq!(mappings.may_split(slot, Access::Owner, 1), Ok(()));
        // Once its readers' pages are gone, its VMAs count against nothing.
        mappings.revoked(slot, Access::Read, 1);
        assert_eq!(mappings.may_split(slot, Access::Read, 1), Ok(()));
        mappings.add_copy(slot, Access::Read, 1);
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
