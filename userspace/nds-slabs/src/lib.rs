//! Where the Neuron DataStore's slabs are and reading one, for every tool that reads them
//! (nds-monitor, nds-top, nds-ls) and the load generator that writes slab files: the
//! [`SlabSource`] (the kernel's device nodes and slot tables, or a directory of slab files),
//! the one rule naming a slab file (`neuron<device>-<pid>.slab`: [`slab_file_name`],
//! [`parse_slab_file_name`]), what one look at the slabs finds ([`Discovery`]), and one
//! consistent reading of an attached slab ([`observe`]). It imports only the datastore's own
//! crates (`nds`, `nds-abi`, `nds-sysfs`), so that a producer can use the naming rule without
//! taking in anything of the monitor.

#![warn(missing_docs)]

// Floor 0: the naming rule, what discovery finds, one reading of a slab.
pub mod discovery;
pub mod naming;
pub mod snapshot;
// Floor 1: where the slabs are, and looking at them.
pub mod source;

pub use discovery::{Candidate, Discovery, FileState, Owner, SlabKey};
pub use naming::{parse_slab_file_name, slab_file_name};
pub use snapshot::{observe, Observation, SlabReading};
pub use source::SlabSource;
