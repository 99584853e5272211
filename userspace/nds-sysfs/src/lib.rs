//! Reader of the sysfs tree the `neuron_ds` kernel module publishes where the original Neuron
//! driver has it, `/sys/class/neuron_device/neuron<N>/` (that is,
//! `/sys/devices/virtual/neuron_device/neuron<N>/`):
//!
//! * `core_count`: the NeuronCores per device;
//!
//! * `datastore/slots`: the slot table, one [`SlotRow`] per slab (owner pid in the reader's pid
//!   namespace, LRU clear tick, generation);
//! * `neuron_core<C>/stats/{status,other_info}/<name>/{total,present}`: the counters the kernel
//!   aggregates, named by [`nds_abi::sysfs::SYSFS_COUNTERS`]; `total` is live (released owners
//!   plus what current owners have counted so far), `present` is the last release's delta.
//!
//! Next to the device tree, the module's own directory `/sys/module/neuron_ds/` holds its
//! parameters; [`TimeInUseUnit`] reads the unit of `NDS_NC_COUNTER_TIME_IN_USE` there.
//!
//! Everything is read through a [`SysfsRoot`], so tests can point it at a directory of their
//! own. The files are parsed strictly: a malformed line is an error, never a guess.

#![warn(missing_docs)]

// Floor 0: errors, one core's totals.
mod error;
mod totals;
// Floor 1: the slot table, the unit of busy time.
mod slots;
mod time_unit;
// Floor 2: the tree's paths and the reads that walk it.
mod root;

pub use error::{Error, Result};
pub use root::{SysfsFile, SysfsRoot, DEFAULT_SYSFS_ROOT};
pub use slots::{parse_slot_table, SlotRow};
pub use time_unit::{TimeInUseUnit, DEFAULT_MODULE_DIR};
pub use totals::CoreTotals;
