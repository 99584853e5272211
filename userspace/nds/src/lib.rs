//! Client library for the Neuron DataStore (NDS), the equivalent of libnds.
//!
//! A slab is one process's 256 KiB telemetry area, opened through a [`Backend`]: the kernel
//! device (`/dev/neuronN`, ACQUIRE ioctl + `mmap`) or a plain file. Two handles, one per role:
//!
//! * [`Producer`]: the caller's own slab, read-write. Counters are single atomic words; for the
//!   hot path resolve a [`CounterWord`] once from the counter enums of [`abi::counters`]
//!   (`producer.nc(core, NcCounter::InferCompleted)`), after which every `add` is one
//!   LOCK-prefixed instruction with nothing checked. Records (process info, process-info-ext,
//!   the 64 model slots) are published under their FNV-1a hash, computed while they are
//!   stored (see [`records`]).
//! * [`Reader`]: another process's slab, read-only, with no write methods at all.
//!   [`Reader::snapshot`] copies every counter under the slab-generation protocol and says
//!   whether the slab stayed with the owner attached to ([`SlabRead`]); records come back as a
//!   [`Snapshot`] that is consistent, [`Snapshot::Empty`] or [`Snapshot::Torn`], verified in
//!   the same pass that copies them into the caller's storage.
//!
//! [`Datastore`] is libnds' shape, one handle for both roles chosen by pid, with integer-index
//! calls checked at run time; the C API is built on it.
//!
//! With the `status-sink` feature a [`Producer`] is an `nrt_status::CounterSink`: the status →
//! counter bridge writes execution results, error flags and latencies straight into the slab.
//!
//! Slab contents are untrusted: no function panics or misbehaves whatever bytes the slab holds.
//! The numbers of the wire format live in [`nds_abi`], re-exported here as [`abi`].

// Floor 0: errors, model slots, the seqlock, truncated files (and the tests' scratch).
mod error;
mod models;
mod seqlock;
#[cfg(test)]
mod test_support;
mod truncation;
// Floor 1: word-level access to the slab; the device's tenure ledger.
pub mod ledger;
mod slab;
// Floor 2: where a slab comes from, counter handles, records.
mod backend;
mod handles;
pub mod records;
// Floor 3: every counter at once.
mod snapshot;
// Floor 4: the reader's handle.
mod reader;
// Floor 5: the producer's handle (a producer reads its own slab too).
mod producer;
// Floor 6: libnds' handle over both roles.
mod datastore;
// Floor 7: the status bridge writing into a producer's slab.
#[cfg(feature = "status-sink")]
mod status_sink;

pub use nds_abi as abi;

pub use backend::Backend;
pub use datastore::Datastore;
pub use error::{Error, Result};
pub use handles::{CoreCounter, CounterView, CounterWord, NeuronCore};
pub use ledger::{LedgerEvent, LedgerFollower};
pub use models::{Model, ModelEntry, ModelSlot};
pub use producer::Producer;
pub use reader::Reader;
pub use records::{text_lossy, Snapshot};
pub use seqlock::{SlabRead, ATTEMPTS as SLAB_READ_ATTEMPTS};
pub use snapshot::CounterSnapshot;
