//! The libnds-shaped handle: one type for both roles, chosen by pid at open, with libnds'
//! integer-index calls and run-time checks. The C API (`nds-capi`) is built on it.
//!
//! Rust callers that know their role use [`Producer`] or [`Reader`] directly: a reader has no
//! write methods to call, and a producer's pre-resolved counter handles skip every check.

use nds_abi::records::{ModelMemUsage, ModelNodeInfo};
use nds_abi::records::{ProcessInfo, ProcessInfoExt};

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::models::{Model, ModelEntry, ModelSlot};
use crate::producer::Producer;
use crate::reader::Reader;
use crate::records::Snapshot;

/// An open datastore slab, as libnds' `nds_instance_t`: the producer's read-write handle
/// (pid 0) or a reader's read-only one (any other pid).
///
/// Mutators on a reader fail with [`Error::ReadOnly`] (EPERM), before the address is checked,
/// as in libnds.
#[derive(Debug)]
pub enum Datastore {
    /// The caller's own slab, read-write.
    Producer(Producer),
    /// Another process's slab, read-only.
    Reader(Reader),
}

impl Datastore {
    /// Opens the datastore of `pid` through `backend`.
    ///
    /// `pid == 0` opens the caller's own slab read-write as its producer and commits the header
    /// ([`Producer::open`]). Any other pid opens that process's slab read-only
    /// ([`Reader::open`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPid`] for a negative pid; otherwise those of [`Producer::open`] and
    /// [`Reader::open`].
    pub fn open(backend: &Backend, pid: i32) -> Result<Self> {
        match pid {
            0 => Producer::open(backend).map(Self::Producer),
            _ => Reader::open(backend, pid).map(Self::Reader),
        }
    }

    /// Unmaps the slab and, for the device backend, releases it and closes the node.
    ///
    /// # Errors
    ///
    /// [`Error::Ioctl`] if the driver rejects RELEASE.
    pub fn close(self) -> Result<()> {
        match self {
            Self::Producer(producer) => producer.close(),
            Self::Reader(reader) => reader.close(),
        }
    }

    /// The read side, which both roles have.
    #[must_use]
    pub fn reader(&self) -> &Reader {
        match self {
            Self::Producer(producer) => producer.reader(),
            Self::Reader(reader) => reader,
        }
    }

    /// The producer, or [`Error::ReadOnly`] for a reader handle.
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle.
    pub fn producer(&self) -> Result<&Producer> {
        match self {
            Self::Producer(producer) => Ok(producer),
            Self::Reader(_) => Err(Error::ReadOnly),
        }
    }

    /// The pid this handle was opened with (0 for the producer).
    #[must_use]
    pub fn pid(&self) -> i32 {
        self.reader().pid()
    }

    /// Whether this is a reader handle, on which every mutator fails with [`Error::ReadOnly`].
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        matches!(self, Self::Reader(_))
    }

    /// Bytes mapped.
    #[must_use]
    pub fn mapped_len(&self) -> usize {
        self.reader().mapped_len()
    }

    /// See [`Reader::slab_generation`].
    #[must_use]
    pub fn slab_generation(&self) -> Option<u64> {
        self.reader().slab_generation()
    }

    /// See [`Reader::slab_reused`].
    #[must_use]
    pub fn slab_reused(&self) -> bool {
        self.reader().slab_reused()
    }

    /// Reads ND counter `index`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidNdCounter`] for `index >= 31`.
    pub fn nd_counter(&self, index: usize) -> Result<u64> {
        self.reader().nd_counter(index)
    }

    /// Atomically adds `delta` to ND counter `index` (wrapping).
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle, [`Error::InvalidNdCounter`] for `index >= 31`.
    pub fn increment_nd_counter(&self, index: usize, delta: u64) -> Result<()> {
        self.producer()?.increment_nd_counter(index, delta)
    }

    /// Atomically subtracts `delta` from ND counter `index` (wrapping).
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nd_counter`].
    pub fn decrement_nd_counter(&self, index: usize, delta: u64) -> Result<()> {
        self.producer()?.decrement_nd_counter(index, delta)
    }

    /// Atomically stores `value` in ND counter `index`.
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nd_counter`].
    pub fn set_nd_counter(&self, index: usize, value: u64) -> Result<()> {
        self.producer()?.set_nd_counter(index, value)
    }

    /// Atomically sets bit `bit` of ND counter `index`.
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nd_counter`], and [`Error::InvalidBit`] for `bit >= 64`.
    pub fn or_nd_counter(&self, index: usize, bit: u64) -> Result<()> {
        self.producer()?.or_nd_counter(index, bit)
    }

    /// Reads counter `index` of NeuronCore `core`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidCore`] for `core >= 16`, [`Error::InvalidNcCounter`] for `index >= 95`.
    pub fn nc_counter(&self, core: usize, index: usize) -> Result<u64> {
        self.reader().nc_counter(core, index)
    }

    /// Atomically adds `delta` to counter `index` of NeuronCore `core` (wrapping).
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle, otherwise as [`Datastore::nc_counter`].
    pub fn increment_nc_counter(&self, core: usize, index: usize, delta: u64) -> Result<()> {
        self.producer()?.increment_nc_counter(core, index, delta)
    }

    /// Atomically subtracts `delta` from counter `index` of NeuronCore `core` (wrapping).
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nc_counter`].
    pub fn decrement_nc_counter(&self, core: usize, index: usize, delta: u64) -> Result<()> {
        self.producer()?.decrement_nc_counter(core, index, delta)
    }

    /// Atomically stores `value` in counter `index` of NeuronCore `core`.
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nc_counter`].
    pub fn set_nc_counter(&self, core: usize, index: usize, value: u64) -> Result<()> {
        self.producer()?.set_nc_counter(core, index, value)
    }

    /// Atomically sets bit `bit` of counter `index` of NeuronCore `core`.
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nc_counter`], and [`Error::InvalidBit`] for `bit >= 64`.
    pub fn or_nc_counter(&self, core: usize, index: usize, bit: u64) -> Result<()> {
        self.producer()?.or_nc_counter(core, index, bit)
    }

    /// Publishes the process-info record.
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle.
    pub fn commit_process_info(&self, info: &ProcessInfo) -> Result<()> {
        self.producer()?.commit_process_info(info)
    }

    /// Reads the process-info record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the record.
    pub fn read_process_info(&self) -> Result<Snapshot<ProcessInfo>> {
        self.reader().read_process_info()
    }

    /// Publishes the process-info-ext record.
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle.
    pub fn commit_process_info_ext(&self, info: &ProcessInfoExt) -> Result<()> {
        self.producer()?.commit_process_info_ext(info)
    }

    /// Reads the process-info-ext record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the record.
    pub fn read_process_info_ext(&self) -> Result<Snapshot<ProcessInfoExt>> {
        self.reader().read_process_info_ext()
    }

    /// The model occupancy bitmap (bit `i` set: slot `i` in use).
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the bitmap.
    pub fn model_bitmap(&self) -> Result<u64> {
        self.reader().model_bitmap()
    }

    /// Claims the first free model slot.
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle, [`Error::NoFreeModelSlot`] when all 64 are used.
    pub fn allocate_model_slot(&self) -> Result<ModelSlot> {
        self.producer()?.allocate_model_slot()
    }

    /// Publishes the record of an allocated model slot.
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle, [`Error::ModelSlotNotAllocated`] if the slot's
    /// bitmap bit is clear.
    pub fn commit_model(
        &self,
        slot: ModelSlot,
        node_info: &ModelNodeInfo,
        mem_usage: &ModelMemUsage,
    ) -> Result<()> {
        self.producer()?.commit_model(slot, node_info, mem_usage)
    }

    /// Zeroes a slot's record, then frees the slot.
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle.
    pub fn delete_model(&self, slot: ModelSlot) -> Result<()> {
        self.producer()?.delete_model(slot)
    }

    /// Reads one slot's record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the records.
    pub fn read_model(&self, slot: ModelSlot) -> Result<Snapshot<Model>> {
        self.reader().read_model(slot)
    }

    /// Reads every occupied slot, in slot order (see [`Reader::read_all_models`]).
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the records.
    pub fn read_all_models(&self) -> Result<Vec<ModelEntry>> {
        self.reader().read_all_models()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use nds_abi::records::NDS_HEADER_WORD;

    use super::*;
    use crate::producer::bit_mask;
    use crate::test_support::ScratchDir;

    fn blank_slab(dir: &ScratchDir) -> std::path::PathBuf {
        let path = dir.path().join("slab");
        std::fs::write(&path, vec![0u8; nds_abi::layout::NEURON_DATASTORE_SIZE]).unwrap();
        path
    }

    #[test]
    fn reader_accepts_a_header_committed_during_the_retry_pause() {
        let dir = ScratchDir::new();
        let path = blank_slab(&dir);
        let mut paused = false;
        let reader = Reader::open_with_header_retry(&Backend::file(&path), 1, || {
            paused = true;
            let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.write_all_at(&NDS_HEADER_WORD.to_le_bytes(), 0)
                .unwrap();
        })
        .expect("header appeared before the second check");
        assert!(paused, "the first check must have failed");
        assert_eq!(reader.pid(), 1);
    }

    #[test]
    fn reader_rejects_a_header_still_missing_after_the_pause() {
        let dir = ScratchDir::new();
        let path = blank_slab(&dir);
        let mut pauses = 0;
        let error = Reader::open_with_header_retry(&Backend::file(&path), 1, || pauses += 1)
            .expect_err("no header");
        assert_eq!(pauses, 1, "exactly one retry");
        assert!(matches!(error, Error::BadHeader { found: 0 }));
        assert_eq!(error.errno(), libc::EINVAL);
    }

    #[test]
    fn reader_does_not_pause_when_the_header_is_present() {
        let dir = ScratchDir::new();
        let path = blank_slab(&dir);
        Datastore::open(&Backend::file(&path), 0)
            .unwrap()
            .close()
            .unwrap();
        let reader = Reader::open_with_header_retry(&Backend::file(&path), 7, || panic!("paused"));
        assert!(reader.is_ok());
    }

    #[test]
    fn negative_pids_are_refused_and_pid_zero_is_the_producer() {
        let dir = ScratchDir::new();
        let backend = Backend::file(dir.path().join("slab"));
        assert!(matches!(
            Datastore::open(&backend, -3),
            Err(Error::InvalidPid(-3))
        ));
        assert!(matches!(
            Reader::open(&backend, 0),
            Err(Error::InvalidPid(0))
        ));
        let producer = Datastore::open(&backend, 0).unwrap();
        assert!(!producer.is_read_only());
        assert_eq!(producer.pid(), 0);
    }

    #[test]
    fn bit_masks() {
        assert_eq!(bit_mask(0).unwrap(), 1);
        assert_eq!(bit_mask(63).unwrap(), 1 << 63);
        assert!(matches!(bit_mask(64), Err(Error::InvalidBit { bit: 64 })));
        assert!(bit_mask(u64::MAX).is_err());
    }
}
