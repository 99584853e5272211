//! A neuron-ls for the Neuron DataStore: the datastore's part of `neuron-ls`.
//!
//! [`list`] walks the module's sysfs tree ([`Source::sysfs`]): every device with its
//! NeuronCores (`core_count`, numbered instance-wide as neuron-monitor numbers them) and every
//! process its slot table says holds a slab there. Each slab is read through the `nds` crate's
//! [`Reader`](nds::Reader) (the device node, or a slab file with
//! [`SlabSource::Files`](nds_slabs::SlabSource::Files)) the way nds-monitor reads it: runtime
//! and framework versions from process-info, the tag from process-info-ext or process-info,
//! else the pid. The command line comes from `/proc`. A process whose slab cannot be read is
//! still listed, with an `error` saying why.
//!
//! The result is neuron-ls's JSON shape ([`DeviceEntry`], [`ProcessEntry`]): every key of the
//! original with the original's type, what the datastore cannot know left empty, plus our own
//! keys. [`render_json`] prints it, [`render_table`] prints a neuron-ls-like table; neither
//! lets a control character from a slab or a command line reach the terminal
//! ([`nds_terminal`]).

#![warn(missing_docs)]

// Floor 0: errors, command lines, where nds-ls reads.
pub mod command;
pub mod error;
pub mod source;
// Floor 1: what is listed.
pub mod listing;
// Floor 2: the outputs.
pub mod json;
pub mod ledger;
pub mod table;
// Floor 3: the nds-ls tool's command line.
#[cfg(feature = "cli")]
pub mod cli;

pub use error::{Error, Result};
pub use json::render_json;
pub use listing::{list, DeviceEntry, ProcessEntry};
pub use source::Source;
pub use table::render_table;
