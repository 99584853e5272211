// SPDX-License-Identifier: GPL-2.0

//! A device's slots: an index that can only name one of them, and one value per slot.

use crate::{
    abi::layout::NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE,
    state::bounded_index::{
        BoundedIndex,
        PerIndex, //
    },
};

/// Number of slots (slabs) per device.
pub(crate) const SLOT_COUNT: usize = NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE;

/// The kind of thing a [`SlotIndex`] names.
pub(crate) enum Slots {}

/// One of a device's slots.
pub(crate) type SlotIndex = BoundedIndex<SLOT_COUNT, Slots>;

/// One `T` per slot.
pub(crate) type PerSlot<T> = PerIndex<T, SLOT_COUNT, Slots>;
