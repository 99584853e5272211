//! Client library for the Neuron DataStore (NDS), the equivalent of libnds.
//!
//! A [`Datastore`] is one process's 256 KiB telemetry slab, opened through a [`Backend`]: the
//! kernel device (`/dev/neuronN`, ACQUIRE ioctl + `mmap`) or a plain file. Opening with pid 0
//! makes the caller the slab's producer (read-write); any other pid gives a read-only view of
//! that process's slab.
//!
//! * Counters ([`Datastore::increment_nc_counter`], [`Datastore::nd_counter`], ...) are single
//!   atomic words: LOCK-prefixed read-modify-writes for mutators, 8-byte loads for reads.
//! * Records (process info, process-info-ext, the 64 model slots) are guarded by an FNV-1a hash
//!   and published with release/acquire ordering on the hash word; readers get a [`Snapshot`]
//!   that is either consistent, [`Snapshot::Empty`] or [`Snapshot::Torn`]. See [`records`] for
//!   the protocol.
//! * A producer handle is an `nrt_status::CounterSink`: the status → counter bridge writes
//!   execution results, error flags and latencies straight into the slab.
//!
//! Slab contents are untrusted: no function panics or misbehaves whatever bytes the slab holds.
//! The numbers of the wire format live in [`nds_abi`], re-exported here as [`abi`].

mod backend;
mod datastore;
mod error;
mod models;
pub mod records;
mod slab;
mod status_sink;
#[cfg(test)]
mod test_support;

pub use nds_abi as abi;

pub use backend::Backend;
pub use datastore::Datastore;
pub use error::{Error, Result};
pub use models::{Model, ModelEntry, ModelSlot};
pub use records::{text_lossy, Snapshot};
