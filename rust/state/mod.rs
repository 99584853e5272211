// SPDX-License-Identifier: GPL-2.0

//! The middle layer: pure state machines, each with its KUnit suite. They hold the device's
//! bookkeeping and decide what happens; the top layer calls them under the device lock and does
//! the kernel-facing work (copies, mappings, zeroing) around them.

pub(crate) mod bounded_index;
pub(crate) mod core_index;
pub(crate) mod ledger;
pub(crate) mod metrics;
pub(crate) mod nc_index;
pub(crate) mod notify;
pub(crate) mod post_ring;
pub(crate) mod post_value;
pub(crate) mod seq_ring;
pub(crate) mod slab_values;
pub(crate) mod slot_index;
pub(crate) mod slots;
pub(crate) mod totals;
pub(crate) mod version_history;
pub(crate) mod view_mappings;
pub(crate) mod windows;
