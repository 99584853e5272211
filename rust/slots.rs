// SPDX-License-Identifier: GPL-2.0

//! The slot table of one device: who owns which slab, and which free slab to hand out next.
//!
//! This is the original driver's state machine (single owner per thread group, no refcount,
//! LRU reuse by clear tick) plus two things it lacked: a generation per slot, and a count of
//! files that still hold a writable mapping of a slot, so that a released slab is not handed to
//! a new owner while its previous owner can still write into it.
//!
//! The table is generic over the owner's identity so that KUnit can drive it with plain
//! numbers; the device uses the thread-group leader's task.

use crate::abi::layout::NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE;
use kernel::prelude::*;

/// Number of slots (slabs) per device.
pub(crate) const SLOT_COUNT: usize = NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE;

/// One slot's bookkeeping.
///
/// # Invariants
///
/// `generation` is odd exactly when `owner` is `Some`.
pub(crate) struct Slot<O> {
    /// The thread group that owns the slab, if any.
    pub(crate) owner: Option<O>,
    /// The global clear tick stamped when the slab was last cleared; 0 if never.
    pub(crate) clear_tick: u64,
    /// Bumped on every assignment and every clear.
    pub(crate) generation: u64,
    /// Open files that created a writable mapping of this slab and are not released yet.
    pub(crate) writable_mappers: u32,
    /// The owner before the last clear; while writable mappings of the slab remain, only that
    /// thread group may be handed the slab again (it would only be writing into its own).
    previous_owner: Option<O>,
    /// A writable mapping outlived the last clear, so the slab may hold writes made after
    /// it was zeroed: it is zeroed again before a new owner gets it.
    pub(crate) written_after_clear: bool,
}

impl<O> Slot<O> {
    const fn new() -> Self {
        Self {
            owner: None,
            clear_tick: 0,
            generation: 0,
            writable_mappers: 0,
            previous_owner: None,
            written_after_clear: false,
        }
    }

    /// Free, and writable by nobody but possibly the caller: may be handed to the caller.
    fn is_available_to(&self, is_caller: &impl Fn(&O) -> bool) -> bool {
        self.owner.is_none()
            && (self.writable_mappers == 0 || self.previous_owner.as_ref().is_some_and(is_caller))
    }
}

/// The slots of one device.
pub(crate) struct SlotTable<O> {
    slots: [Slot<O>; SLOT_COUNT],
}

impl<O> SlotTable<O> {
    /// A table of never-used slots.
    pub(crate) fn new() -> Self {
        Self {
            slots: [const { Slot::new() }; SLOT_COUNT],
        }
    }

    /// The slot at `index`, if it exists.
    pub(crate) fn get(&self, index: usize) -> Option<&Slot<O>> {
        self.slots.get(index)
    }

    /// Every slot with its index.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Slot<O>)> {
        self.slots.iter().enumerate()
    }

    /// The first slot whose owner satisfies `matches`.
    pub(crate) fn find_owner(&self, mut matches: impl FnMut(&O) -> bool) -> Option<usize> {
        self.slots
            .iter()
            .position(|slot| slot.owner.as_ref().is_some_and(&mut matches))
    }

    /// The slot a new owner (`is_caller` tells it apart) gets: a slot the caller itself still
    /// holds a writable mapping of, if any, so that an owner cycling its slab through one open
    /// file keeps reusing one slot instead of holding on to many; otherwise the original LRU
    /// rule: the first never-used available slot, else the available slot cleared longest ago
    /// (smallest clear tick). `None` when none is available.
    pub(crate) fn choose_free(&self, is_caller: impl Fn(&O) -> bool) -> Option<usize> {
        let held_by_caller = self.slots.iter().position(|slot| {
            slot.owner.is_none()
                && slot.writable_mappers > 0
                && slot.previous_owner.as_ref().is_some_and(&is_caller)
        });
        if held_by_caller.is_some() {
            return held_by_caller;
        }
        let mut best: Option<(usize, u64)> = None;
        for (index, slot) in self.slots.iter().enumerate() {
            if !slot.is_available_to(&is_caller) {
                continue;
            }
            if slot.clear_tick == 0 {
                return Some(index);
            }
            if best.is_none_or(|(_, tick)| slot.clear_tick < tick) {
                best = Some((index, slot.clear_tick));
            }
        }
        best.map(|(index, _)| index)
    }

    /// Makes `owner` the owner of free slot `index`; returns the new generation.
    pub(crate) fn assign(&mut self, index: usize, owner: O) -> Result<u64> {
        let slot = self.slots.get_mut(index).ok_or(EINVAL)?;
        if slot.owner.is_some() {
            return Err(EBUSY);
        }
        slot.owner = Some(owner);
        slot.previous_owner = None;
        // INVARIANT: the slot was free, so its generation was even and is now odd.
        slot.generation = slot.generation.wrapping_add(1);
        Ok(slot.generation)
    }

    /// Frees owned slot `index`, stamping `tick`; returns the new generation.
    pub(crate) fn clear(&mut self, index: usize, tick: u64) -> Result<u64> {
        let slot = self.slots.get_mut(index).ok_or(EINVAL)?;
        let Some(owner) = slot.owner.take() else {
            return Err(EINVAL);
        };
        slot.previous_owner = Some(owner);
        slot.written_after_clear = slot.writable_mappers > 0;
        slot.clear_tick = tick;
        // INVARIANT: the slot was owned, so its generation was odd and is now even.
        slot.generation = slot.generation.wrapping_add(1);
        Ok(slot.generation)
    }

    /// Records one more open file holding a writable mapping of slot `index`.
    pub(crate) fn add_writable_mapper(&mut self, index: usize) -> Result {
        let slot = self.slots.get_mut(index).ok_or(EINVAL)?;
        slot.writable_mappers = slot.writable_mappers.checked_add(1).ok_or(EOVERFLOW)?;
        Ok(())
    }

    /// Records that a file holding a writable mapping of slot `index` was released.
    pub(crate) fn remove_writable_mapper(&mut self, index: usize) {
        if let Some(slot) = self.slots.get_mut(index) {
            slot.writable_mappers = slot.writable_mappers.saturating_sub(1);
        }
    }
}

#[kunit_tests(neuron_ds_slots)]
mod tests {
    use super::*;

    /// Acquires a slot for `owner` the way ACQUIRE with pid 0 does.
    fn acquire(table: &mut SlotTable<u32>, owner: u32) -> Result<usize> {
        if let Some(index) = table.find_owner(|o| *o == owner) {
            return Ok(index);
        }
        let index = table.choose_free(|o| *o == owner).ok_or(ENOMEM)?;
        table.assign(index, owner)?;
        Ok(index)
    }

    #[test]
    fn fresh_slots_are_handed_out_in_index_order() -> Result {
        let mut table = SlotTable::new();
        for (index, owner) in (1..=16u32).enumerate() {
            assert_eq!(acquire(&mut table, owner)?, index);
        }
        Ok(())
    }

    #[test]
    fn reacquire_by_the_same_owner_is_idempotent() -> Result {
        let mut table = SlotTable::new();
        let first = acquire(&mut table, 7)?;
        assert_eq!(acquire(&mut table, 7)?, first);
        assert_eq!(table.iter().filter(|(_, s)| s.owner.is_some()).count(), 1);
        Ok(())
    }

    #[test]
    fn seventeenth_owner_gets_enomem() -> Result {
        let mut table = SlotTable::new();
        for owner in 1..=16u32 {
            acquire(&mut table, owner)?;
        }
        assert_eq!(acquire(&mut table, 17), Err(ENOMEM));
        Ok(())
    }

    #[test]
    fn never_used_slot_wins_over_released_ones() -> Result {
        let mut table = SlotTable::new();
        acquire(&mut table, 1)?;
        acquire(&mut table, 2)?;
        table.clear(0, 5)?;
        // Slot 2 has never been used: it is chosen before the cleared slot 0.
        assert_eq!(acquire(&mut table, 3)?, 2);
        Ok(())
    }

    #[test]
    fn released_slots_are_reused_oldest_clear_first() -> Result {
        let mut table = SlotTable::new();
        for owner in 1..=16u32 {
            acquire(&mut table, owner)?;
        }
        // Release slots 9, 3, 12 in that order (ticks 10, 11, 12).
        table.clear(9, 10)?;
        table.clear(3, 11)?;
        table.clear(12, 12)?;
        assert_eq!(acquire(&mut table, 100)?, 9);
        assert_eq!(acquire(&mut table, 101)?, 3);
        assert_eq!(acquire(&mut table, 102)?, 12);
        assert_eq!(acquire(&mut table, 103), Err(ENOMEM));
        Ok(())
    }

    #[test]
    fn a_slot_still_writable_by_its_old_owner_is_not_reused() -> Result {
        let mut table = SlotTable::new();
        for owner in 1..=16u32 {
            acquire(&mut table, owner)?;
        }
        table.add_writable_mapper(4)?;
        table.clear(4, 1)?;
        assert!(table.get(4).ok_or(EINVAL)?.written_after_clear);
        assert_eq!(acquire(&mut table, 50), Err(ENOMEM));
        table.remove_writable_mapper(4);
        assert_eq!(acquire(&mut table, 50)?, 4);
        Ok(())
    }

    #[test]
    fn its_old_owner_may_take_back_a_slot_it_can_still_write() -> Result {
        let mut table = SlotTable::new();
        for owner in 1..=16u32 {
            acquire(&mut table, owner)?;
        }
        // Owner 5 (slot 4) keeps a writable mapping across its release, as a runtime that
        // keeps its device file open does; it may cycle as often as it likes.
        table.add_writable_mapper(4)?;
        for tick in 1..=40 {
            table.clear(4, tick)?;
            assert_eq!(acquire(&mut table, 5)?, 4);
        }
        Ok(())
    }

    #[test]
    fn an_owner_cycling_through_one_file_reuses_one_slot() -> Result {
        let mut table = SlotTable::new();
        let first = acquire(&mut table, 9)?;
        table.add_writable_mapper(first)?;
        for tick in 1..=20 {
            table.clear(first, tick)?;
            assert_eq!(acquire(&mut table, 9)?, first);
        }
        // Everybody else still has the 15 other slots.
        for owner in 10..25u32 {
            assert_ne!(acquire(&mut table, owner)?, first);
        }
        Ok(())
    }

    #[test]
    fn a_slot_released_without_writable_mappings_needs_no_second_zeroing() -> Result {
        let mut table = SlotTable::new();
        acquire(&mut table, 1)?;
        table.clear(0, 1)?;
        assert!(!table.get(0).ok_or(EINVAL)?.written_after_clear);
        Ok(())
    }

    #[test]
    fn generation_is_odd_while_owned_and_changes_on_reuse() -> Result {
        let mut table = SlotTable::new();
        for owner in 1..=16u32 {
            acquire(&mut table, owner)?;
        }
        let owned = table.get(5).ok_or(EINVAL)?.generation;
        assert_eq!(owned % 2, 1);
        let cleared = table.clear(5, 1)?;
        assert_eq!(cleared % 2, 0);
        // The only available slot is 5, so the next owner reuses it.
        assert_eq!(acquire(&mut table, 99)?, 5);
        let reused = table.get(5).ok_or(EINVAL)?.generation;
        assert_eq!(reused % 2, 1);
        assert_ne!(reused, owned);
        Ok(())
    }

    #[test]
    fn clearing_a_free_slot_is_refused() {
        let mut table: SlotTable<u32> = SlotTable::new();
        assert_eq!(table.clear(0, 1), Err(EINVAL));
        assert_eq!(table.clear(SLOT_COUNT, 1), Err(EINVAL));
    }
}
