// SPDX-License-Identifier: GPL-2.0

//! A device's NeuronCores: an index that can only name one of the sixteen a device may have,
//! and one value per core.

use crate::{
    abi::layout::NDS_TOTAL_NEURONCORE_COUNT,
    state::bounded_index::{
        BoundedIndex,
        PerIndex, //
    },
};

/// The most NeuronCores a device has: every core the slab layout has counters for, and the
/// `cores_per_device` parameter's bound.
pub(crate) const MAX_CORES: usize = NDS_TOTAL_NEURONCORE_COUNT;

/// The kind of thing a [`CoreIndex`] names.
pub(crate) enum Cores {}

/// One of a device's NeuronCores.
pub(crate) type CoreIndex = BoundedIndex<MAX_CORES, Cores>;

/// One `T` per NeuronCore a device may have.
pub(crate) type PerCore<T> = PerIndex<T, MAX_CORES, Cores>;
