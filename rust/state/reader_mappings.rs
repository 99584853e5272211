// SPDX-License-Identifier: GPL-2.0

//! How many VMAs of each slot's reader window exist, device-wide, and the bound on them.
//!
//! Revoking a reader's view removes the pages of every VMA of the window, one VMA at a time,
//! before the slot's next owner gets it: without a bound, a reader that maps one window tens
//! of thousands of times (up to `vm.max_map_count`) would make the next owner's ACQUIRE wait
//! for all of them. Each new VMA (an `mmap`, a split, an `mremap` copy) is counted, and an
//! `mmap` or a split past the bound is refused with `ENOMEM`, as the core refuses a mapping
//! past the process's own limit. Counted without a lock: the count is only ever raised by
//! one and checked in the same atomic step, so concurrent mappings cannot pass it together
//! (a split's check and its count are two steps, by the core's design, so concurrent splits
//! may pass it by as many as they are).

use crate::state::slots::{
    PerSlot,
    SlotIndex, //
};
use kernel::{
    prelude::*,
    sync::atomic::{
        ordering::Relaxed,
        Atomic, //
    },
};

/// VMAs of one slot's reader window that may exist at once, all processes together: far more
/// than every monitor of a host needs (one each), few enough that removing them all is short
/// (`Documentation/performance.rst`, *ACQUIRE after a reader's 10,000 mmaps*).
pub(crate) const READER_MAPPINGS_PER_SLOT: u32 = 1024;

/// The reader-window VMAs of each slot.
pub(crate) struct ReaderMappings {
    counts: PerSlot<Atomic<u32>>,
}

impl ReaderMappings {
    /// No VMA of any slot.
    pub(crate) fn new() -> Self {
        Self {
            counts: PerSlot::from_fn(|_| Atomic::new(0)),
        }
    }

    /// Counts a new mapping of `slot`'s reader window; `ENOMEM` if the bound is reached.
    pub(crate) fn try_add(&self, slot: SlotIndex) -> Result {
        if update(&self.counts[slot], |count| {
            (count < READER_MAPPINGS_PER_SLOT).then_some(count + 1)
        }) {
            Ok(())
        } else {
            Err(ENOMEM)
        }
    }

    /// Whether a VMA of `slot`'s reader window may be split in two; `ENOMEM` at the bound.
    pub(crate) fn may_split(&self, slot: SlotIndex) -> Result {
        if self.counts[slot].load(Relaxed) < READER_MAPPINGS_PER_SLOT {
            Ok(())
        } else {
            Err(ENOMEM)
        }
    }

    /// Counts a VMA the core copied from a counted one (a split it allowed, an `mremap` copy):
    /// it exists whatever the bound.
    pub(crate) fn add_copy(&self, slot: SlotIndex) {
        self.counts[slot].fetch_add(1, Relaxed);
    }

    /// A counted VMA of `slot`'s reader window is gone.
    pub(crate) fn remove(&self, slot: SlotIndex) {
        // Never below zero: every removal is of a VMA that was counted.
        update(&self.counts[slot], |count| count.checked_sub(1));
    }

    /// The reader-window VMAs of `slot`.
    pub(crate) fn count(&self, slot: SlotIndex) -> u32 {
        self.counts[slot].load(Relaxed)
    }
}

/// Replaces `counter`'s value by what `change` makes of it, atomically; `false` (and no
/// change) if `change` gives `None`.
fn update(counter: &Atomic<u32>, change: impl Fn(u32) -> Option<u32>) -> bool {
    let mut current = counter.load(Relaxed);
    loop {
        let Some(new) = change(current) else {
            return false;
        };
        match counter.cmpxchg(current, new, Relaxed) {
            Ok(_) => return true,
            Err(seen) => current = seen,
        }
    }
}

#[kunit_tests(neuron_ds_reader_mappings)]
mod tests {
    use super::*;

    #[test]
    fn mappings_past_the_bound_are_refused_until_one_goes() -> Result {
        let mappings = ReaderMappings::new();
        let slot = SlotIndex::new(3).ok_or(EINVAL)?;
        let other = SlotIndex::new(4).ok_or(EINVAL)?;
        for _ in 0..READER_MAPPINGS_PER_SLOT {
            mappings.try_add(slot)?;
        }
        assert_eq!(mappings.try_add(slot), Err(ENOMEM));
        assert_eq!(mappings.may_split(slot), Err(ENOMEM));
        assert_eq!(mappings.count(slot), READER_MAPPINGS_PER_SLOT);
        // Another slot's bound is its own.
        mappings.try_add(other)?;
        mappings.remove(slot);
        assert_eq!(mappings.may_split(slot), Ok(()));
        mappings.try_add(slot)?;
        assert_eq!(mappings.count(slot), READER_MAPPINGS_PER_SLOT);
        Ok(())
    }

    #[test]
    fn copies_are_counted_past_the_bound_and_removals_stop_at_zero() -> Result {
        let mappings = ReaderMappings::new();
        let slot = SlotIndex::new(0).ok_or(EINVAL)?;
        for _ in 0..READER_MAPPINGS_PER_SLOT {
            mappings.try_add(slot)?;
        }
        mappings.add_copy(slot);
        assert_eq!(mappings.count(slot), READER_MAPPINGS_PER_SLOT + 1);
        for _ in 0..READER_MAPPINGS_PER_SLOT + 2 {
            mappings.remove(slot);
        }
        assert_eq!(mappings.count(slot), 0);
        mappings.try_add(slot)?;
        assert_eq!(mappings.count(slot), 1);
        Ok(())
    }
}
