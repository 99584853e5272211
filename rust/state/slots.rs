// SPDX-License-Identifier: GPL-2.0

//! The slot pool of one device: who owns which slab, the slab's generation, and which free slab
//! the next owner gets.
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
//! * `Releasing`: the generation moved on (even) and the owner's writable mappings are being
//!   revoked; the slab's counters still count as live until they are aggregated.
//! * `Dirty`: aggregated, not zeroed yet. `Scrubbing`: being zeroed. `Free`: zeroed.
//!
//! The pool is generic over the owner's identity and over what identifies an address space
//! holding a writable mapping, so that KUnit can drive it with plain numbers; the device uses
//! thread-group leaders and `mm_struct`s. See `nds_abi::layout` for the generation rules that
//! userspace relies on.

use crate::abi::layout::NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE;
use kernel::prelude::*;

/// Number of slots (slabs) per device.
pub(crate) const SLOT_COUNT: usize = NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE;

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
/// `generation` is odd exactly when `state` is `Owned`; `writers` is empty unless `state` is
/// `Owned`.
pub(crate) struct Slot<O, W> {
    state: SlotState<O>,
    /// The global tick stamped when the slot was last released; 0 if it never was.
    clear_tick: u64,
    /// Bumped on every assignment and every release.
    generation: u64,
    /// The address spaces that may hold a writable mapping of the slab.
    writers: KVec<W>,
}

impl<O, W> Slot<O, W> {
    const fn new() -> Self {
        Self {
            state: SlotState::Free,
            clear_tick: 0,
            generation: 0,
            writers: KVec::new(),
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

    /// Whether the slab's counters are live: counted by reading the slab, not in the totals.
    pub(crate) fn is_live(&self) -> bool {
        matches!(self.state, SlotState::Owned(_) | SlotState::Releasing)
    }
}

/// What a new owner can get.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// This free slot.
    Ready(usize),
    /// This slot, once it is zeroed (it is `Dirty`: whoever takes it zeroes it first).
    NeedsScrub(usize),
    /// The slot to hand out is being zeroed: wait until it is free.
    Wait,
    /// Every slot is owned or being released.
    Full,
}

/// The slots of one device.
pub(crate) struct SlotPool<O, W> {
    slots: [Slot<O, W>; SLOT_COUNT],
}

impl<O, W: PartialEq> SlotPool<O, W> {
    /// A pool of never-used slots.
    pub(crate) fn new() -> Self {
        Self {
            slots: [const { Slot::new() }; SLOT_COUNT],
        }
    }

    /// The slot at `index`, if it exists.
    pub(crate) fn get(&self, index: usize) -> Option<&Slot<O, W>> {
        self.slots.get(index)
    }

    fn get_mut(&mut self, index: usize) -> Result<&mut Slot<O, W>> {
        self.slots.get_mut(index).ok_or(EINVAL)
    }

    /// Every slot with its index.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Slot<O, W>)> {
        self.slots.iter().enumerate()
    }

    /// The indexes of the slots whose counters are live.
    pub(crate) fn live(&self) -> impl Iterator<Item = usize> + '_ {
        self.iter()
            .filter(|(_, slot)| slot.is_live())
            .map(|(index, _)| index)
    }

    /// The owned slot whose owner satisfies `matches`.
    pub(crate) fn find_owner(&self, mut matches: impl FnMut(&O) -> bool) -> Option<usize> {
        self.slots
            .iter()
            .position(|slot| slot.owner().is_some_and(&mut matches))
    }

    /// The slot a new owner gets, by the original's rule: the first never-used slot, otherwise
    /// the one released longest ago (smallest clear tick), whether or not it is zeroed yet.
    pub(crate) fn choose(&self) -> Choice {
        let mut best: Option<(usize, u64)> = None;
        for (index, slot) in self.iter() {
            let reusable = matches!(
                slot.state,
                SlotState::Free | SlotState::Dirty | SlotState::Scrubbing
            );
            if !reusable {
                continue;
            }
            if slot.clear_tick == 0 {
                best = Some((index, 0));
                break;
            }
            if best.is_none_or(|(_, tick)| slot.clear_tick < tick) {
                best = Some((index, slot.clear_tick));
            }
        }
        let Some((index, _)) = best else {
            return Choice::Full;
        };
        match self.slots.get(index).map(|slot| &slot.state) {
            Some(SlotState::Free) => Choice::Ready(index),
            Some(SlotState::Dirty) => Choice::NeedsScrub(index),
            _ => Choice::Wait,
        }
    }

    /// Makes `owner` the owner of free slot `index`; returns the new (odd) generation.
    pub(crate) fn assign(&mut self, index: usize, owner: O) -> Result<u64> {
        let slot = self.get_mut(index)?;
        if !matches!(slot.state, SlotState::Free) {
            return Err(EBUSY);
        }
        slot.state = SlotState::Owned(owner);
        // INVARIANT: a free slot's generation is even, so it is odd now; `writers` is empty.
        slot.generation = slot.generation.wrapping_add(1);
        Ok(slot.generation)
    }

    /// Records that address space `writer` may hold a writable mapping of owned slot `index`.
    pub(crate) fn add_writer(&mut self, index: usize, writer: W) -> Result {
        let slot = self.get_mut(index)?;
        if slot.owner().is_none() {
            return Err(EINVAL);
        }
        if !slot.writers.contains(&writer) {
            slot.writers.push(writer, GFP_KERNEL)?;
        }
        Ok(())
    }

    /// Starts releasing owned slot `index`: the owner is dropped and the generation moves on.
    /// Returns the new (even) generation and the address spaces whose writable mappings must be
    /// revoked.
    pub(crate) fn begin_release(&mut self, index: usize) -> Result<(u64, KVec<W>)> {
        let slot = self.get_mut(index)?;
        if slot.owner().is_none() {
            return Err(EINVAL);
        }
        slot.state = SlotState::Releasing;
        // INVARIANT: the slot was owned (odd generation); the writers leave with the owner.
        slot.generation = slot.generation.wrapping_add(1);
        Ok((slot.generation, core::mem::take(&mut slot.writers)))
    }

    /// Ends the release of slot `index` once its counters are aggregated, stamping `tick`.
    pub(crate) fn finish_release(&mut self, index: usize, tick: u64) -> Result {
        let slot = self.get_mut(index)?;
        if !matches!(slot.state, SlotState::Releasing) {
            return Err(EINVAL);
        }
        slot.state = SlotState::Dirty;
        slot.clear_tick = tick;
        Ok(())
    }

    /// The dirty slot released longest ago.
    pub(crate) fn oldest_dirty(&self) -> Option<usize> {
        self.iter()
            .filter(|(_, slot)| matches!(slot.state, SlotState::Dirty))
            .min_by_key(|(_, slot)| slot.clear_tick)
            .map(|(index, _)| index)
    }

    /// Claims dirty slot `index` for zeroing; returns its generation, which the slab must show
    /// again once zeroed.
    pub(crate) fn begin_scrub(&mut self, index: usize) -> Result<u64> {
        let slot = self.get_mut(index)?;
        if !matches!(slot.state, SlotState::Dirty) {
            return Err(EINVAL);
        }
        slot.state = SlotState::Scrubbing;
        Ok(slot.generation)
    }

    /// Slot `index` is zeroed: it is free.
    pub(crate) fn finish_scrub(&mut self, index: usize) -> Result {
        let slot = self.get_mut(index)?;
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

    type Pool = SlotPool<u32, u32>;

    /// Takes a slot for `owner` the way ACQUIRE with pid 0 does, zeroing instantly.
    fn acquire(pool: &mut Pool, owner: u32) -> Result<usize> {
        if let Some(index) = pool.find_owner(|o| *o == owner) {
            return Ok(index);
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
        Ok(index)
    }

    /// Releases slot `index` all the way to `Dirty`.
    fn release(pool: &mut Pool, index: usize, tick: u64) -> Result {
        pool.begin_release(index)?;
        pool.finish_release(index, tick)
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
        assert_eq!(pool.choose(), Choice::NeedsScrub(4));
        assert_eq!(pool.assign(4, 99), Err(EBUSY));
        pool.begin_scrub(4)?;
        // While another task zeroes it, the oldest slot is not handed out: wait.
        assert_eq!(pool.choose(), Choice::Wait);
        pool.finish_scrub(4)?;
        assert_eq!(pool.choose(), Choice::Ready(4));
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
        assert_eq!(pool.oldest_dirty(), Some(2));
        pool.begin_scrub(2)?;
        assert_eq!(pool.oldest_dirty(), Some(0));
        assert_eq!(pool.begin_scrub(1), Err(EINVAL));
        Ok(())
    }

    #[test]
    fn a_releasing_slot_is_live_and_not_reusable() -> Result {
        let mut pool = Pool::new();
        for owner in 1..=16u32 {
            acquire(&mut pool, owner)?;
        }
        pool.begin_release(6)?;
        assert!(pool.get(6).ok_or(EINVAL)?.is_live());
        assert_eq!(pool.find_owner(|o| *o == 7), None);
        assert_eq!(pool.choose(), Choice::Full);
        pool.finish_release(6, 1)?;
        assert!(!pool.get(6).ok_or(EINVAL)?.is_live());
        assert_eq!(pool.live().count(), 15);
        Ok(())
    }

    #[test]
    fn generation_is_odd_exactly_while_owned() -> Result {
        let mut pool = Pool::new();
        let slot = acquire(&mut pool, 1)?;
        let owned = pool.get(slot).ok_or(EINVAL)?.generation();
        assert_eq!(owned % 2, 1);
        let (released, _) = pool.begin_release(slot)?;
        assert_eq!(released, owned + 1);
        pool.finish_release(slot, 1)?;
        assert_eq!(pool.begin_scrub(slot)?, released);
        pool.finish_scrub(slot)?;
        assert_eq!(pool.assign(slot, 2)?, owned + 2);
        Ok(())
    }

    #[test]
    fn writers_are_recorded_once_and_handed_over_at_release() -> Result {
        let mut pool = Pool::new();
        let slot = acquire(&mut pool, 1)?;
        pool.add_writer(slot, 10)?;
        pool.add_writer(slot, 10)?;
        pool.add_writer(slot, 11)?;
        let (_, writers) = pool.begin_release(slot)?;
        assert_eq!(&writers[..], &[10, 11]);
        // A slot that is not owned takes no writer.
        assert_eq!(pool.add_writer(slot, 12), Err(EINVAL));
        Ok(())
    }

    #[test]
    fn out_of_order_transitions_are_refused() -> Result {
        let mut pool = Pool::new();
        assert_eq!(pool.begin_release(0).map(|_| ()), Err(EINVAL));
        assert_eq!(pool.finish_release(0, 1), Err(EINVAL));
        assert_eq!(pool.finish_scrub(0), Err(EINVAL));
        assert_eq!(pool.assign(SLOT_COUNT, 1), Err(EINVAL));
        let slot = acquire(&mut pool, 1)?;
        assert_eq!(pool.assign(slot, 2), Err(EBUSY));
        Ok(())
    }
}
