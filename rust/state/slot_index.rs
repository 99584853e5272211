// SPDX-License-Identifier: GPL-2.0

//! Slot indexes that can only name one of a device's slots, and one value per slot.
//!
//! An index is checked once, where it comes from outside (an `mmap` offset), and never again:
//! indexing a [`PerSlot`] with a [`SlotIndex`] cannot fail, and the compiler can see that it
//! cannot (the index is masked to the slot count, a power of two), so no dead bounds check or
//! "cannot happen" error path is left behind.

use crate::abi::layout::NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE;
use core::ops::{
    Index,
    IndexMut, //
};
use kernel::prelude::*;

/// Number of slots (slabs) per device.
pub(crate) const SLOT_COUNT: usize = NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE;

const _: () = assert!(SLOT_COUNT.is_power_of_two() && SLOT_COUNT <= 1 << 8);

/// `SLOT_COUNT - 1`: every index fits under it.
const MASK: u8 = (SLOT_COUNT - 1) as u8;

/// One of a device's slots.
///
/// # Invariants
///
/// The index is below [`SLOT_COUNT`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotIndex(u8);

impl SlotIndex {
    /// Slot `index`, if there is one.
    pub(crate) fn new(index: usize) -> Option<Self> {
        (index < SLOT_COUNT).then(|| Self::masked(index))
    }

    /// Slot `index % SLOT_COUNT`.
    const fn masked(index: usize) -> Self {
        // INVARIANT: masked below `SLOT_COUNT`; the cast keeps every bit under the mask.
        Self((index & MASK as usize) as u8)
    }

    /// Every slot, in index order.
    pub(crate) fn all() -> impl Iterator<Item = Self> {
        (0..SLOT_COUNT).map(Self::masked)
    }

    /// The index as a number below [`SLOT_COUNT`].
    pub(crate) const fn get(self) -> usize {
        // The mask changes nothing (type invariant); it tells the compiler the bound.
        (self.0 & MASK) as usize
    }
}

/// One `T` per slot.
pub(crate) struct PerSlot<T> {
    items: [T; SLOT_COUNT],
}

impl<T> PerSlot<T> {
    /// `make(slot)` for every slot.
    pub(crate) fn from_fn(mut make: impl FnMut(SlotIndex) -> T) -> Self {
        Self {
            items: core::array::from_fn(|index| make(SlotIndex::masked(index))),
        }
    }

    /// Initializes one `T` per slot with `make(slot)`, in place; stops at the first error,
    /// dropping what was made.
    pub(crate) fn try_init(mut make: impl FnMut(SlotIndex) -> Result<T>) -> impl Init<Self, Error> {
        try_init!(Self {
            items <- pin_init::init_array_from_fn(move |index| make(SlotIndex::masked(index))),
        })
    }

    /// Every slot with its value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (SlotIndex, &T)> {
        SlotIndex::all().zip(self.items.iter())
    }

    /// Every slot with its value, to change.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (SlotIndex, &mut T)> {
        SlotIndex::all().zip(self.items.iter_mut())
    }
}

impl<T> Index<SlotIndex> for PerSlot<T> {
    type Output = T;

    fn index(&self, slot: SlotIndex) -> &T {
        // PANIC: never, `slot.get()` is below `SLOT_COUNT`, the array's length.
        &self.items[slot.get()]
    }
}

impl<T> IndexMut<SlotIndex> for PerSlot<T> {
    fn index_mut(&mut self, slot: SlotIndex) -> &mut T {
        // PANIC: as in `index`.
        &mut self.items[slot.get()]
    }
}

#[kunit_tests(neuron_ds_slot_index)]
mod tests {
    use super::*;

    #[test]
    fn only_existing_slots_have_an_index() {
        assert_eq!(SlotIndex::new(0).map(SlotIndex::get), Some(0));
        assert_eq!(
            SlotIndex::new(SLOT_COUNT - 1).map(SlotIndex::get),
            Some(SLOT_COUNT - 1)
        );
        assert_eq!(SlotIndex::new(SLOT_COUNT), None);
        assert_eq!(SlotIndex::new(usize::MAX), None);
    }

    #[test]
    fn per_slot_values_are_made_and_found_by_their_slot() -> Result {
        let mut values = PerSlot::from_fn(|slot| slot.get() * 10);
        assert_eq!(SlotIndex::all().count(), SLOT_COUNT);
        for (slot, value) in values.iter() {
            assert_eq!(*value, slot.get() * 10);
        }
        let last = SlotIndex::new(SLOT_COUNT - 1).ok_or(EINVAL)?;
        values[last] = 7;
        assert_eq!(values[last], 7);
        let boxed = KBox::init(PerSlot::try_init(|slot| Ok(slot.get() + 1)), GFP_KERNEL)?;
        assert_eq!(boxed[last], SLOT_COUNT);
        let failed = KBox::init(
            PerSlot::try_init(|slot| {
                if slot.get() == 3 {
                    Err(ENOSPC)
                } else {
                    Ok(0u8)
                }
            }),
            GFP_KERNEL,
        );
        assert_eq!(failed.err(), Some(ENOSPC));
        Ok(())
    }
}
