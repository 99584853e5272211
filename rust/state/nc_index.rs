// SPDX-License-Identifier: GPL-2.0

//! A NeuronCore counter's index: one of the counters every core has in the slab layout.

use crate::{
    abi::{
        counters::NDS_TOTAL_NC_COUNTER_COUNT,
        sysfs::CounterSource, //
    },
    state::bounded_index::BoundedIndex,
};

/// The kind of thing an [`NcIndex`] names.
pub(crate) enum NcCounters {}

/// One of a core's counters.
pub(crate) type NcIndex = BoundedIndex<NDS_TOTAL_NC_COUNTER_COUNT, NcCounters>;

/// The index of `source`, for the module's constant tables, where a source outside a core's
/// counters fails the build.
pub(crate) const fn nc_index(source: CounterSource) -> NcIndex {
    match NcIndex::new(source.index()) {
        Some(index) => index,
        // PANIC: evaluated at compile time; every counter the ABI names is a core's counter.
        None => panic!("a counter source outside a core's counters"),
    }
}
