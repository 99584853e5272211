// SPDX-License-Identifier: GPL-2.0

//! The slot pool of one device: who owns which slab, the slab's generation, the view that
//! mappings of it are made for, and which free slab the next owner gets.
//!
//! This is the original driver's state machine (one owner per thread group, no refcount, reuse
//! of the free slot released longest ago) with the release split into steps, so that the slow
//! parts run without the device lock, and a generation per slot:
//!
//! ```text
//!            assign                 begin_release               finish_release
//!   Free ─────────────▶ Owned ─────────────────────▶ Releasing ────────────────▶ Dirty
//!    ▲                                                                              │
//!    │                        finish_scrub                 begin_scrub              │
//!    └──────────────────────────────────────── Scrubbing ◀──────────────────────────┘
//! ```
//!
//! * `Owned`: a thread group writes the slab. Its generation is odd.
//! * `Releasing`: the generation moved on (even) and the slab's mappings are being removed;
//!   its counters still count as live until they are aggregated.
//! * `Dirty`: aggregated, not zeroed yet. `Scrubbing`: being zeroed. `Free`: zeroed.
//!
//! Every mapping of a slab is made for one *view* of it: a number that is new at every
//! assignment, release and [`SlotPool::renew_view`], and never repeats. A mapping shows the
//! slab only while the slot is owned with the view it was made for ([`SlotPool::shows`]).
//!
//! The pool is generic over the owner's identity, so that KUnit can drive it with plain
//! numbers; the device uses thread groups. See `nds_abi::layout` for the generation rules that
//! userspace relies on.

pub(crate) use crate::state::slot_index::{
    PerSlot,
    SlotIndex,
    SLOT_COUNT, //
};
use kernel::prelude::*;

/// Where a slot is in its life.
pub(crate) enum SlotState<O> {
    /// Zeroed, free.
    Free,
    /// Owned by a thread group.
    Owned(O),
    /// Released; its counters are not aggregated yet.
    Releasing,
    /// Aggregated, not zeroed yet.
    Dirty,
    /// Being zeroed.
    Scrubbing,
}

/// One slot's bookkeeping.
///
/// # Invariants
///
/// `generation` is odd exactly when `state` is `Owned`.
pub(crate) struct Slot<O> {
    state: SlotState<O>,
    /// The global tick stamped when the slot was last released; 0 if it never was.
    clear_tick: u64,
    /// Bumped on every assignment and every release.
    generation: u64,
    /// The view mappings are made for; bumped on every assignment, release and renewal.
    view: u64,
}

impl<O> Slot<O> {
    const fn new() -> Self {
        Self {
            state: SlotState::Free,
            clear_tick: 0,
            generation: 0,
            view: 0,
        }
    }

    /// The owner, if the slot is owned.
    pub(crate) fn owner(&self) -> Option<&O> {
        match &self.state {
            SlotState::Owned(owner) => Some(owner),
            _ => None,
        }
    }

    /// The tick of the last release; 0 if never released.
    pub(crate) fn clear_tick(&self) -> u64 {
        self.clear_tick
    }

    /// The generation.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The view a mapping made now is for.
    pub(crate) fn view(&self) -> u64 {
        self.view
    }

    /// Whether the slab's counters are live: counted by reading the slab, not in the totals.
    pub(crate) fn is_live(&self) -> bool {
        matches!(self.state, SlotState::Owned(_) | SlotState::Releasing)
    }
}

/// What a new owner can get.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// This free slot.
    Ready(SlotIndex),
    /// This slot, once it is zeroed (it is `Dirty`: whoever takes it zeroes it first).
    NeedsScrub(SlotIndex),
    /// The slot to hand out is being zeroed: wait until it is free.
    Wait,
    /// Every slot is owned or being released.
    Full,
}

/// The slots of one device.
pub(crate) struct SlotPool<O> {
    slots: PerSlot<Slot<O>>,
}

impl<O> SlotPool<O> {
    /// A pool of never-used slots.
    pub(crate) fn new() -> Self {
        Self {
            slots: PerSlot::from_fn(|_| Slot::new()),
        }
    }

    /// Slot `slot`.
    pub(crate) fn get(&self, slot: SlotIndex) -> &Slot<O> {
        &self.slots[slot]
    }

    /// Every slot with its index.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (SlotIndex, &Slot<O>)> {
        self.slots.iter()
    }

    /// The slots whose counters are live.
    pub(crate) fn live(&self) -> impl Iterator<Item = SlotIndex> + '_ {
        self.iter()
            .filter(|(_, slot)| slot.is_live())
            .map(|(index, _)| index)
    }

    /// The owned slot whose owner satisfies `matches`.
    pub(crate) fn find_owner(&self, mut matches: impl FnMut(&O) -> bool) -> Option<SlotIndex> {
        self.iter()
            .find(|(_, slot)| slot.owner().is_some_and(&mut matches))
            .map(|(index, _)| index)
    }

    /// Whether a mapping made for `view` shows slot `slot` now: it is owned, with that view.
    pub(crate) fn shows(&self, slot: SlotIndex, view: u64) -> bool {
        let slot = self.get(slot);
        slot.owner().is_some() && slot.view == view
    }

    /// The slot a new owner gets, by the original's rule: the first never-used slot, otherwise
    /// the one released longest ago (smallest clear tick), whether or not it is zeroed yet.
    pub(crate) fn choose(&self) -> Choice {
        let mut best: Option<(SlotIndex, &Slot<O>)> = None;
        for (index, slot) in self.iter() {
            let reusable = matches!(
                slot.state,
                SlotState::Free | SlotState::Dirty | SlotState::Scrubbing
            );
            if !reusable {
                continue;
            }
            if slot.clear_tick == 0 {
                best = Some((index, slot));
                break;
            }
            if best.is_none_or(|(_, chosen)| slot.clear_tick < chosen.clear_tick) {
                best = Some((index, slot));
            }
        }
        match best {
            None => Choice::Full,
            Some((index, slot)) => match slot.state {
                SlotState::Free => Choice::Ready(index),
                SlotState::Dirty => Choice::NeedsScrub(index),
                _ => Choice::Wait,
            },
        }
    }

    /// Makes `owner` the owner of free slot `slot`; returns the new (odd) generation.
    pub(crate) fn assign(&mut self, slot: SlotIndex, owner: O) -> Result<u64> {
        let slot = &mut self.slots[slot];
        if !matches!(slot.state, SlotState::Free) {
            return Err(EBUSY);
        }
        slot.state = SlotState::Owned(owner);
        // INVARIANT: a free slot's generation is even, so it is odd now.
        slot.generation = slot.generation.wrapping_add(1);
        slot.view = slot.view.wrapping_add(1);
        Ok(slot.generation)
    }

    /// The owner of owned slot `slot`, to update its record.
    pub(crate) fn owner_mut(&mut self, slot: SlotIndex) -> Option<&mut O> {
        match &mut self.slots[slot].state {
            SlotState::Owned(owner) => Some(owner),
            _ => None,
        }
    }

    /// Starts a new view of owned slot `slot`: mappings made for the old one show it no more.
    /// Returns the new view.
    pub(crate) fn renew_view(&mut self, slot: SlotIndex) -> Result<u64> {
        let slot = &mut self.slots[slot];
        if slot.owner().is_none() {
            return Err(EINVAL);
        }
        slot.view = slot.view.wrapping_add(1);
        Ok(slot.view)
    }

    /// Starts releasing owned slot `slot`: the owner is dropped, the generation and the view
    /// move on. Returns the new (even) generation.
    pub(crate) fn begin_release(&mut self, slot: SlotIndex) -> Result<u64> {
        let slot = &mut self.slots[slot];
        if slot.owner().is_none() {
            return Err(EINVAL);
        }
        slot.state = SlotState::Releasing;
        // INVARIANT: the slot was owned (odd generation).
        slot.generation = slot.generation.wrapping_add(1);
        slot.view = slot.view.wrapping_add(1);
        Ok(slot.generation)
    }

    /// Ends the release of slot `slot` once its counters are aggregated, stamping `tick`.
    pub(crate) fn finish_release(&mut self, slot: SlotIndex, tick: u64) -> Result {
        let slot = &mut self.slots[slot];
        if !matches!(slot.state, SlotState::Releasing) {
            return Err(EINVAL);
        }
        slot.state = SlotState::Dirty;
        slot.clear_tick = tick;
        Ok(())
    }

    /// The dirty slot released longest ago.
    pub(crate) fn oldest_dirty(&self) -> Option<SlotIndex> {
        self.iter()
            .filter(|(_, slot)| matches!(slot.state, SlotState::Dirty))
            .min_by_key(|(_, slot)| slot.clear_tick)
            .map(|(index, _)| index)
    }

    /// Claims dirty slot `slot` for zeroing; returns its generation, which the slab must show
    /// again once zeroed.
    pub(crate) fn begin_scrub(&mut self, slot: SlotIndex) -> Result<u64> {
        let slot = &mut self.slots[slot];
        if !matches!(slot.state, SlotState::Dirty) {
            return Err(EINVAL);
        }
        slot.state = SlotState::Scrubbing;
        Ok(slot.generation)
    }

    /// Slot `slot` is zeroed: it is free.
    pub(crate) fn finish_scrub(&mut self, slot: SlotIndex) -> Result {
        let slot = &mut self.slots[slot];
        if !matches!(slot.state, SlotState::Scrubbing) {
            return Err(EINVAL);
        }
        slot.state = SlotState::Free;
        Ok(())
    }
}

#[kunit_tests(neuron_ds_slots)]
mod tests {
    use super::*;

    type Pool = SlotPool<u32>;

    fn slot(index: usize) -> Result<SlotIndex> {
        SlotIndex::new(index).ok_or(EINVAL)
    }

    /// Takes a slot for `owner` the way ACQUIRE with pid 0 does, zeroing instantly.
    fn acquire(pool: &mut Pool, owner: u32) -> Result<usize> {
        if let Some(index) = pool.find_owner(|o| *o == owner) {
            return Ok(index.get());
        }
        let index = match pool.choose() {
            Choice::Ready(index) => index,
            Choice::NeedsScrub(index) => {
                pool.begin_scrub(index)?;
                pool.finish_scrub(index)?;
                index
            }
            Choice::Wait => return Err(EAGAIN),
            Choice::Full => return Err(ENOMEM),
        };
        pool.assign(index, owner)?;
        Ok(index.get())
    }

    /// Releases slot `index` all the way to `Dirty`.
    fn release(pool: &mut Pool, index: usize, tick: u64) -> Result {
        pool.begin_release(slot(index)?)?;
        pool.finish_release(slot(index)?, tick)
    }

    #[test]
    fn fresh_slots_are_handed_out_in_index_order() -> Result {
        let mut pool = Pool::new();
        for (index, owner) in (1..=16u32).enumerate() {
            assert_eq!(acquire(&mut pool, owner)?, index);
        }
        Ok(())
    }

    #[test]
    fn seventeenth_owner_finds_the_pool_full() -> Result {
        let mut pool = Pool::new();
        for owner in 1..=16u32 {
            acquire(&mut pool, owner)?;
        }
        assert_eq!(pool.choose(), Choice::Full);
        assert_eq!(acquire(&mut pool, 17), Err(ENOMEM));
        Ok(())
    }

    #[test]
    fn never_used_slot_wins_over_released_ones() -> Result {
        let mut pool = Pool::new();
        acquire(&mut pool, 1)?;
        acquire(&mut pool, 2)?;
        release(&mut pool, 0, 5)?;
        // Slot 2 has never been used: it is chosen before the released slot 0.
        assert_eq!(acquire(&mut pool, 3)?, 2);
        Ok(())
    }

    #[test]
    fn released_slots_are_reused_oldest_release_first() -> Result {
        let mut pool = Pool::new();
        for owner in 1..=16u32 {
            acquire(&mut pool, owner)?;
        }
        // Release slots 9, 3, 12 in that order (ticks 10, 11, 12).
        release(&mut pool, 9, 10)?;
        release(&mut pool, 3, 11)?;
        release(&mut pool, 12, 12)?;
        assert_eq!(acquire(&mut pool, 100)?, 9);
        assert_eq!(acquire(&mut pool, 101)?, 3);
        assert_eq!(acquire(&mut pool, 102)?, 12);
        assert_eq!(acquire(&mut pool, 103), Err(ENOMEM));
        Ok(())
    }

    #[test]
    fn a_dirty_slot_is_chosen_by_its_tick_and_must_be_zeroed_first() -> Result {
        let mut pool = Pool::new();
        for owner in 1..=16u32 {
            acquire(&mut pool, owner)?;
        }
        release(&mut pool, 4, 1)?;
        assert_eq!(pool.choose(), Choice::NeedsScrub(slot(4)?));
        assert_eq!(pool.assign(slot(4)?, 99), Err(EBUSY));
        pool.begin_scrub(slot(4)?)?;
        // While another task zeroes it, the oldest slot is not handed out: wait.
        assert_eq!(pool.choose(), Choice::Wait);
        pool.finish_scrub(slot(4)?)?;
        assert_eq!(pool.choose(), Choice::Ready(slot(4)?));
        Ok(())
    }

    #[test]
    fn the_oldest_dirty_slot_is_zeroed_first() -> Result {
        let mut pool = Pool::new();
        for owner in 1..=3u32 {
            acquire(&mut pool, owner)?;
        }
        release(&mut pool, 2, 7)?;
        release(&mut pool, 0, 8)?;
        assert_eq!(pool.oldest_dirty(), Some(slot(2)?));
        pool.begin_scrub(slot(2)?)?;
        assert_eq!(pool.oldest_dirty(), Some(slot(0)?));
        assert_eq!(pool.begin_scrub(slot(1)?), Err(EINVAL));
        Ok(())
    }

    #[test]
    fn a_releasing_slot_is_live_and_not_reusable() -> Result {
        let mut pool = Pool::new();
        for owner in 1..=16u32 {
            acquire(&mut pool, owner)?;
        }
        pool.begin_release(slot(6)?)?;
        assert!(pool.get(slot(6)?).is_live());
        assert_eq!(pool.find_owner(|o| *o == 7), None);
        assert_eq!(pool.choose(), Choice::Full);
        pool.finish_release(slot(6)?, 1)?;
        assert!(!pool.get(slot(6)?).is_live());
        assert_eq!(pool.live().count(), 15);
        Ok(())
    }

    #[test]
    fn generation_is_odd_exactly_while_owned() -> Result {
        let mut pool = Pool::new();
        let index = slot(acquire(&mut pool, 1)?)?;
        let owned = pool.get(index).generation();
        assert_eq!(owned % 2, 1);
        let released = pool.begin_release(index)?;
        assert_eq!(released, owned + 1);
        pool.finish_release(index, 1)?;
        assert_eq!(pool.begin_scrub(index)?, released);
        pool.finish_scrub(index)?;
        assert_eq!(pool.assign(index, 2)?, owned + 2);
        Ok(())
    }

    #[test]
    fn a_view_shows_the_slab_only_within_its_tenure_and_never_again() -> Result {
        let mut pool = Pool::new();
        let index = slot(acquire(&mut pool, 1)?)?;
        let first = pool.get(index).view();
        assert!(pool.shows(index, first));
        // A renewal leaves the owner, but not the mappings made before it.
        let renewed = pool.renew_view(index)?;
        assert!(!pool.shows(index, first));
        assert!(pool.shows(index, renewed));
        assert_eq!(pool.get(index).owner(), Some(&1));
        pool.begin_release(index)?;
        assert!(!pool.shows(index, renewed));
        assert!(!pool.shows(index, pool.get(index).view()));
        assert_eq!(pool.renew_view(index), Err(EINVAL));
        pool.finish_release(index, 1)?;
        pool.begin_scrub(index)?;
        pool.finish_scrub(index)?;
        // The next tenure of the slot has a view no earlier mapping was made for.
        pool.assign(index, 2)?;
        let next = pool.get(index).view();
        assert!(pool.shows(index, next));
        for old in [first, renewed] {
            assert!(!pool.shows(index, old));
        }
        Ok(())
    }

    #[test]
    fn out_of_order_transitions_are_refused() -> Result {
        let mut pool = Pool::new();
        assert_eq!(pool.begin_release(slot(0)?).map(|_| ()), Err(EINVAL));
        assert_eq!(pool.finish_release(slot(0)?, 1), Err(EINVAL));
        assert_eq!(pool.finish_scrub(slot(0)?), Err(EINVAL));
        let index = slot(acquire(&mut pool, 1)?)?;
        assert_eq!(pool.assign(index, 2), Err(EBUSY));
        assert!(pool.owner_mut(index).is_some());
        Ok(())
    }
}
