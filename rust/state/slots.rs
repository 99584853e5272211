// SPDX-License-Identifier: GPL-2.0

//! The slot pool of one device: who owns which slab, the slab's generation, the view that
//! mappings of it are made for, and which free slab the next owner gets.
//!
//! This is the original driver's state machine (one owner per thread group, no refcount, reuse
//! of the free slot released longest ago) with the release split into steps, so that the slow
//! parts run without the device lock, and a generation per slot:
//!
//! ```text
//!             take                  begin_release               finish_release
//!   Free ─────────────▶ Owned ─────────────────────▶ Releasing ────────────────▶ Dirty
//!    ▲                                                                              │
//!    │                        finish_scrub       take / begin_scrub_oldest          │
//!    └──────────────────────────────────────── Scrubbing ◀──────────────────────────┘
//! ```
//!
//! A step that only one caller may end (`Releasing`, `Scrubbing`) is entered by a call that
//! returns a value naming the slot ([`Releasing`], [`Scrubbing`]) and ended by the call that
//! takes it back, so that no step can be ended twice, or for a slot in another state, and no
//! transition has a "cannot happen" error: each call finds the slots it acts on itself.
//!
//! * `Owned`: a thread group writes the slab. Its generation is odd.
//! * `Releasing`: the generation moved on (even) and the owner's mappings are being removed;
//!   its counters still count as live until they are aggregated.
//! * `Dirty`: aggregated, not zeroed yet. `Scrubbing`: its readers' mappings are being removed,
//!   then it is zeroed. `Free`: zeroed, mapped by nobody.
//!
//! Every mapping of a slab is made for one *view* of it: a number that is new at every
//! assignment, release and [`OwnedSlot::renew_view`], and never repeats. A mapping shows the
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
    /// The view that the last release ended, whose readers' mappings the zeroing ends.
    ended_view: u64,
}

impl<O> Slot<O> {
    const fn new() -> Self {
        Self {
            state: SlotState::Free,
            clear_tick: 0,
            generation: 0,
            view: 0,
            ended_view: 0,
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

/// A slot in a step of its life that only the holder of this value ends: made by the call that
/// enters the step, given up to the one that ends it. Neither is `Clone`, so each step ends
/// once, and the call ending it needs no check.
///
/// # Invariants
///
/// Slot `slot` is in the step the type names ([`Releasing`]: `Releasing`; [`Scrubbing`]:
/// `Scrubbing`), with generation `generation`, and only the call that consumes this value
/// takes it out of that step.
#[must_use = "the slot stays in this step until the value is given back to its pool"]
pub(crate) struct Step<const SCRUBBING: bool> {
    slot: SlotIndex,
    generation: u64,
    ended_view: u64,
}

/// A slot being released: its counters are not aggregated yet ([`SlotPool::finish_release`]).
pub(crate) type Releasing = Step<false>;

/// A dirty slot claimed for zeroing ([`SlotPool::finish_scrub`]).
pub(crate) type Scrubbing = Step<true>;

impl<const SCRUBBING: bool> Step<SCRUBBING> {
    /// The slot.
    pub(crate) fn slot(&self) -> SlotIndex {
        self.slot
    }

    /// Its generation: the one the release published, which a zeroed slab shows again.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The view the release ended: the one the owner's and readers' mappings were made for.
    pub(crate) fn ended_view(&self) -> u64 {
        self.ended_view
    }
}

/// What a new owner got ([`SlotPool::take`]).
pub(crate) enum Taken<O> {
    /// The owner owns this slot now, with this (odd) generation.
    Owned(SlotIndex, u64),
    /// The slot to hand out was dirty, and is claimed for the caller to zero before it tries
    /// again with the owner it gets back.
    MustScrub(Scrubbing, O),
    /// The slot to hand out is being zeroed by someone else, or every slot is owned but one
    /// that is being released: try again once it is free or dirty.
    Wait(O),
    /// Every slot is owned.
    Full,
}

/// An owned slot, shown with the view its caller named ([`SlotPool::owned_with_view`]).
pub(crate) struct OwnedSlot<'a, O> {
    owner: &'a mut O,
    view: &'a mut u64,
}

impl<O> OwnedSlot<'_, O> {
    /// The owner, to update its record.
    pub(crate) fn owner(&mut self) -> &mut O {
        self.owner
    }

    /// Starts a new view of the slot: mappings made for the old one show it no more. Returns
    /// the new view.
    pub(crate) fn renew_view(self) -> u64 {
        *self.view = self.view.wrapping_add(1);
        *self.view
    }
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

    /// The owned slot whose owner satisfies `matches`, with its owner.
    pub(crate) fn find_owner(
        &self,
        mut matches: impl FnMut(&O) -> bool,
    ) -> Option<(SlotIndex, &O)> {
        self.iter().find_map(|(index, slot)| {
            slot.owner()
                .filter(|owner| matches(owner))
                .map(|owner| (index, owner))
        })
    }

    /// Whether a mapping made for `view` shows slot `slot` now: it is owned, with that view.
    /// (The fault handler asks the device's copy of it, which needs no pool lock.)
    #[cfg(neuron_ds_kunit)]
    pub(crate) fn shows(&self, slot: SlotIndex, view: u64) -> bool {
        let slot = self.get(slot);
        slot.owner().is_some() && slot.view == view
    }

    /// Slot `slot` if a mapping made for `view` shows it now: it is owned, with that view.
    pub(crate) fn owned_with_view(
        &mut self,
        slot: SlotIndex,
        view: u64,
    ) -> Option<OwnedSlot<'_, O>> {
        match &mut self.slots[slot] {
            Slot {
                state: SlotState::Owned(owner),
                view: slot_view,
                ..
            } if *slot_view == view => Some(OwnedSlot {
                owner,
                view: slot_view,
            }),
            _ => None,
        }
    }

    /// The slot a new owner gets, by the original's rule: the first never-used slot, otherwise
    /// the one released longest ago (smallest clear tick), whether or not it is zeroed yet.
    fn choose(&self) -> Option<SlotIndex> {
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
                return Some(index);
            }
            if best.is_none_or(|(_, chosen)| slot.clear_tick < chosen.clear_tick) {
                best = Some((index, slot));
            }
        }
        best.map(|(index, _)| index)
    }

    /// Gives `owner` the slot the original's rule picks (see [`SlotPool::choose`]) if it is
    /// free; claims it for zeroing if it is dirty.
    pub(crate) fn take(&mut self, owner: O) -> Taken<O> {
        let Some(index) = self.choose() else {
            // A slot being released is dirty within the release's bounded steps: the 16th
            // owner waits for it rather than being refused while nobody owns it.
            let releasing = self
                .slots
                .iter()
                .any(|(_, slot)| matches!(slot.state, SlotState::Releasing));
            return if releasing {
                Taken::Wait(owner)
            } else {
                Taken::Full
            };
        };
        let slot = &mut self.slots[index];
        match slot.state {
            SlotState::Free => {
                slot.state = SlotState::Owned(owner);
                // INVARIANT: a free slot's generation is even, so it is odd now.
                slot.generation = slot.generation.wrapping_add(1);
                slot.view = slot.view.wrapping_add(1);
                Taken::Owned(index, slot.generation)
            }
            SlotState::Dirty => Taken::MustScrub(Self::begin_scrub(index, slot), owner),
            _ => Taken::Wait(owner),
        }
    }

    /// Starts releasing the first owned slot for which `matches` holds of its index and owner,
    /// if there is one: the owner leaves (it is returned), the generation and the view move on
    /// (the new generation is even).
    pub(crate) fn begin_release(
        &mut self,
        mut matches: impl FnMut(SlotIndex, &O) -> bool,
    ) -> Option<(Releasing, O)> {
        let (index, slot) = self
            .slots
            .iter_mut()
            .find(|(index, slot)| slot.owner().is_some_and(|owner| matches(*index, owner)))?;
        let SlotState::Owned(owner) = core::mem::replace(&mut slot.state, SlotState::Releasing)
        else {
            // `find` only found owned slots.
            return None;
        };
        // INVARIANT: the slot was owned (odd generation).
        slot.generation = slot.generation.wrapping_add(1);
        slot.ended_view = slot.view;
        slot.view = slot.view.wrapping_add(1);
        // INVARIANT: the slot is `Releasing` now, which only `finish_release` ends.
        let releasing = Step {
            slot: index,
            generation: slot.generation,
            ended_view: slot.ended_view,
        };
        Some((releasing, owner))
    }

    /// Ends a release once the slot's counters are aggregated, stamping `tick`.
    pub(crate) fn finish_release(&mut self, releasing: Releasing, tick: u64) {
        let slot = &mut self.slots[releasing.slot];
        // By the type invariant of `releasing`, the slot is `Releasing`.
        slot.state = SlotState::Dirty;
        slot.clear_tick = tick;
    }

    /// Claims the dirty slot released longest ago for zeroing, if there is one.
    pub(crate) fn begin_scrub_oldest(&mut self) -> Option<Scrubbing> {
        let (index, slot) = self
            .slots
            .iter_mut()
            .filter(|(_, slot)| matches!(slot.state, SlotState::Dirty))
            .min_by_key(|(_, slot)| slot.clear_tick)?;
        Some(Self::begin_scrub(index, slot))
    }

    /// Claims dirty slot `slot` (at `index`) for zeroing.
    fn begin_scrub(index: SlotIndex, slot: &mut Slot<O>) -> Scrubbing {
        slot.state = SlotState::Scrubbing;
        // INVARIANT: the slot is `Scrubbing` now, which only `finish_scrub` ends.
        Step {
            slot: index,
            generation: slot.generation,
            ended_view: slot.ended_view,
        }
    }

    /// The slot is zeroed: it is free.
    pub(crate) fn finish_scrub(&mut self, scrubbing: Scrubbing) {
        // By the type invariant of `scrubbing`, the slot is `Scrubbing`.
        self.slots[scrubbing.slot].state = SlotState::Free;
    }
}

#[cfg(neuron_ds_kunit)]
#[kernel::prelude::kunit_tests(neuron_ds_slots)]
mod tests {
    use super::*;
    use kernel::prelude::*;

    type Pool = SlotPool<u32>;

    fn slot(index: usize) -> Result<SlotIndex> {
        SlotIndex::new(index).ok_or(EINVAL)
    }

    /// Takes a slot for `owner` the way ACQUIRE with pid 0 does, zeroing instantly.
    fn acquire(pool: &mut Pool, owner: u32) -> Result<usize> {
        if let Some((index, _)) = pool.find_owner(|o| *o == owner) {
            return Ok(index.get());
        }
        loop {
            match pool.take(owner) {
                Taken::Owned(index, _) => return Ok(index.get()),
                Taken::MustScrub(scrubbing, _) => pool.finish_scrub(scrubbing),
                Taken::Wait(_) => return Err(EAGAIN),
                Taken::Full => return Err(ENOMEM),
            }
        }
    }

    /// Starts releasing the slot of `owner`.
    fn begin(pool: &mut Pool, owner: u32) -> Result<Releasing> {
        let (releasing, released) = pool.begin_release(|_, o| *o == owner).ok_or(EINVAL)?;
        assert_eq!(released, owner);
        Ok(releasing)
    }

    /// Releases the slot of `owner` all the way to `Dirty`.
    fn release(pool: &mut Pool, owner: u32, tick: u64) -> Result {
        let releasing = begin(pool, owner)?;
        pool.finish_release(releasing, tick);
        Ok(())
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
        assert!(matches!(pool.take(17), Taken::Full));
        Ok(())
    }

    #[test]
    fn never_used_slot_wins_over_released_ones() -> Result {
        let mut pool = Pool::new();
        acquire(&mut pool, 1)?;
        acquire(&mut pool, 2)?;
        release(&mut pool, 1, 5)?;
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
        release(&mut pool, 10, 10)?;
        release(&mut pool, 4, 11)?;
        release(&mut pool, 13, 12)?;
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
        release(&mut pool, 5, 1)?;
        let Taken::MustScrub(scrubbing, back) = pool.take(99) else {
            return Err(EINVAL);
        };
        assert_eq!((scrubbing.slot(), back), (slot(4)?, 99));
        // While another task zeroes it, the oldest slot is not handed out: wait.
        assert!(matches!(pool.take(99), Taken::Wait(99)));
        assert!(pool.begin_scrub_oldest().is_none());
        pool.finish_scrub(scrubbing);
        assert!(matches!(pool.take(99), Taken::Owned(index, _) if index == slot(4)?));
        Ok(())
    }

    #[test]
    fn the_oldest_dirty_slot_is_zeroed_first() -> Result {
        let mut pool = Pool::new();
        for owner in 1..=3u32 {
            acquire(&mut pool, owner)?;
        }
        release(&mut pool, 3, 7)?;
        release(&mut pool, 1, 8)?;
        let first = pool.begin_scrub_oldest().ok_or(EINVAL)?;
        let second = pool.begin_scrub_oldest().ok_or(EINVAL)?;
        assert_eq!((first.slot(), second.slot()), (slot(2)?, slot(0)?));
        // Slot 1 is owned, not dirty.
        assert!(pool.begin_scrub_oldest().is_none());
        Ok(())
    }

    #[test]
    fn a_releasing_slot_is_live_and_not_reusable() -> Result {
        let mut pool = Pool::new();
        for owner in 1..=16u32 {
            acquire(&mut pool, owner)?;
        }
        let releasing = begin(&mut pool, 7)?;
        assert_eq!(releasing.slot(), slot(6)?);
        assert!(pool.get(slot(6)?).is_live());
        assert_eq!(pool.find_owner(|o| *o == 7), None);
        // A second release of the same owner finds nothing to release.
        assert!(pool.begin_release(|_, o| *o == 7).is_none());
        // The 17th owner waits for the slot being released, then must zero it.
        assert!(matches!(pool.take(17), Taken::Wait(17)));
        pool.finish_release(releasing, 1);
        assert!(matches!(pool.take(17), Taken::MustScrub(_, 17)));
        assert!(!pool.get(slot(6)?).is_live());
        assert_eq!(pool.live().count(), 15);
        Ok(())
    }

    #[test]
    fn a_release_picks_by_index_and_owner() -> Result {
        let mut pool = Pool::new();
        acquire(&mut pool, 5)?;
        acquire(&mut pool, 6)?;
        let second = slot(1)?;
        // As the reaper picks: this slot, if its owner still is the one it found there.
        assert!(pool
            .begin_release(|index, o| index == second && *o == 5)
            .is_none());
        let (releasing, _) = pool
            .begin_release(|index, o| index == second && *o == 6)
            .ok_or(EINVAL)?;
        assert_eq!(releasing.slot(), second);
        pool.finish_release(releasing, 1);
        assert_eq!(pool.find_owner(|o| *o == 5), Some((slot(0)?, &5)));
        Ok(())
    }

    #[test]
    fn generation_is_odd_exactly_while_owned() -> Result {
        let mut pool = Pool::new();
        // Every slot used, so that the one released is the one handed out next.
        let index = slot(acquire(&mut pool, 1)?)?;
        for owner in 2..=16u32 {
            acquire(&mut pool, owner)?;
        }
        let owned = pool.get(index).generation();
        assert_eq!(owned % 2, 1);
        let releasing = begin(&mut pool, 1)?;
        let released = releasing.generation();
        assert_eq!(released, owned + 1);
        assert_eq!(pool.get(index).generation(), released);
        pool.finish_release(releasing, 1);
        let scrubbing = pool.begin_scrub_oldest().ok_or(EINVAL)?;
        assert_eq!(scrubbing.generation(), released);
        pool.finish_scrub(scrubbing);
        assert!(matches!(pool.take(99), Taken::Owned(i, g) if i == index && g == owned + 2));
        Ok(())
    }

    #[test]
    fn a_view_shows_the_slab_only_within_its_tenure_and_never_again() -> Result {
        let mut pool = Pool::new();
        let index = slot(acquire(&mut pool, 1)?)?;
        for owner in 2..=16u32 {
            acquire(&mut pool, owner)?;
        }
        let first = pool.get(index).view();
        assert!(pool.shows(index, first));
        // A renewal leaves the owner, but not the mappings made before it.
        let renewed = pool
            .owned_with_view(index, first)
            .ok_or(EINVAL)?
            .renew_view();
        assert!(!pool.shows(index, first));
        assert!(pool.owned_with_view(index, first).is_none());
        assert!(pool.shows(index, renewed));
        assert_eq!(pool.get(index).owner(), Some(&1));
        let releasing = begin(&mut pool, 1)?;
        assert_eq!(releasing.ended_view(), renewed);
        assert!(!pool.shows(index, renewed));
        assert!(!pool.shows(index, pool.get(index).view()));
        assert!(pool
            .owned_with_view(index, pool.get(index).view())
            .is_none());
        pool.finish_release(releasing, 1);
        let scrubbing = pool.begin_scrub_oldest().ok_or(EINVAL)?;
        // The zeroing ends the readers' view.
        assert_eq!(scrubbing.ended_view(), renewed);
        pool.finish_scrub(scrubbing);
        // The next tenure of the slot has a view no earlier mapping was made for.
        assert_eq!(acquire(&mut pool, 99)?, index.get());
        let next = pool.get(index).view();
        assert!(pool.shows(index, next));
        for old in [first, renewed] {
            assert!(!pool.shows(index, old));
        }
        Ok(())
    }

    #[test]
    fn an_owned_slot_with_its_view_gives_its_owner_to_update() -> Result {
        let mut pool = Pool::new();
        let index = slot(acquire(&mut pool, 1)?)?;
        let view = pool.get(index).view();
        *pool.owned_with_view(index, view).ok_or(EINVAL)?.owner() = 9;
        assert_eq!(pool.find_owner(|o| *o == 9), Some((index, &9)));
        // A free slot and a stale view give nothing.
        assert!(pool.owned_with_view(slot(1)?, 0).is_none());
        assert!(pool.owned_with_view(index, view + 1).is_none());
        Ok(())
    }
}
