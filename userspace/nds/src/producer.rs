//! The producer's handle: the read-write owner of the caller's own slab.

use std::mem::size_of;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};

use nds_abi::counters::NdCounter;
use nds_abi::layout::{
    model_record_offset, NDS_HEADER_START, NDS_MAX_MODEL_COUNT, NDS_MODEL_BITMAP_START,
    NDS_PROCESS_EXT_INFO_START, NDS_PROCESS_INFO_START,
};
use nds_abi::records::{
    ModelMemUsage, ModelNodeInfo, ModelRecord, ProcessInfo, ProcessInfoExt, ProcessInfoExtRecord,
    ProcessInfoRecord, NDS_HEADER_WORD,
};
use zerocopy::IntoBytes;

use crate::backend::{Backend, Mapping};
use crate::error::{Error, Result};
use crate::handles::{nc_word, nd_word, CoreCounter, CounterWord, NeuronCore};
use crate::models::ModelSlot;
use crate::reader::{nc_offset, nd_offset, Reader};
use crate::records::{erase, publish};
use crate::slab::SlabView;

/// The read-write handle on the caller's own slab: counters, records and model slots.
///
/// For the hot path, resolve [`CounterWord`]s once with [`Producer::nd`] and [`Producer::nc`]:
/// each update is then one atomic instruction. The integer-index methods
/// (`increment_nc_counter`, …) are libnds' calls, checking their arguments every time.
///
/// All methods take `&self`; the handle can be shared between threads.
#[derive(Debug)]
pub struct Producer {
    reader: Reader,
    /// Serializes this process's model-slot allocations (other processes never allocate).
    model_slot_lock: Mutex<()>,
}

impl Producer {
    /// Opens the caller's own slab through `backend` read-write as its producer, and commits
    /// the header.
    ///
    /// # Errors
    ///
    /// [`Error::Ioctl`] / [`Error::Io`] when the slab cannot be acquired or mapped,
    /// [`Error::UnexpectedSlabSize`] when the kernel reports another slab size.
    pub fn open(backend: &Backend) -> Result<Self> {
        let mapping = Mapping::open(backend, 0)?;
        mapping
            .view()
            .writable_u64(NDS_HEADER_START)?
            .store(NDS_HEADER_WORD, Ordering::Release);
        Ok(Self {
            reader: Reader::attach(mapping, 0),
            model_slot_lock: Mutex::new(()),
        })
    }

    /// Unmaps the slab and, for the device backend, releases it and closes the node.
    ///
    /// Dropping the handle does the same but cannot report errors.
    ///
    /// # Errors
    ///
    /// [`Error::Ioctl`] if the driver rejects RELEASE.
    pub fn close(self) -> Result<()> {
        self.reader.close()
    }

    /// The read side of the own slab: snapshots, counter reads and records, as any reader
    /// sees them.
    #[must_use]
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    fn slab(&self) -> &SlabView {
        self.reader.slab()
    }

    /// The handle on ND `counter`.
    #[must_use]
    pub fn nd(&self, counter: NdCounter) -> CounterWord<'_> {
        CounterWord::new(nd_word(self.reader.region_map(), counter))
    }

    /// The handle on per-core `counter` of `core`.
    #[must_use]
    pub fn nc(&self, core: NeuronCore, counter: impl CoreCounter) -> CounterWord<'_> {
        CounterWord::new(nc_word(self.reader.region_map(), core, counter))
    }

    /// The handle on the counter word at `offset`, from the layout's address functions.
    #[inline]
    fn word(&self, offset: usize) -> Result<CounterWord<'_>> {
        self.reader
            .region_map()
            .word(offset)
            .map(CounterWord::new)
            .ok_or_else(|| self.reader.too_small())
    }

    /// The handle on ND counter `index`, reserved indices included.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidNdCounter`] for `index >= 31`.
    #[inline]
    pub fn nd_index(&self, index: usize) -> Result<CounterWord<'_>> {
        self.word(nd_offset(index)?)
    }

    /// The handle on counter `index` of NeuronCore `core`, reserved indices included.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidCore`] for `core >= 16`, [`Error::InvalidNcCounter`] for `index >= 95`.
    #[inline]
    pub fn nc_index(&self, core: usize, index: usize) -> Result<CounterWord<'_>> {
        self.word(nc_offset(core, index)?)
    }

    /// Reads ND counter `index`.
    ///
    /// # Errors
    ///
    /// As [`Producer::nd_index`].
    #[inline]
    pub fn nd_counter(&self, index: usize) -> Result<u64> {
        Ok(self.nd_index(index)?.get())
    }

    /// Atomically adds `delta` to ND counter `index` (wrapping).
    ///
    /// # Errors
    ///
    /// As [`Producer::nd_index`].
    #[inline]
    pub fn increment_nd_counter(&self, index: usize, delta: u64) -> Result<()> {
        self.nd_index(index)?.add(delta);
        Ok(())
    }

    /// Atomically subtracts `delta` from ND counter `index` (wrapping).
    ///
    /// # Errors
    ///
    /// As [`Producer::nd_index`].
    #[inline]
    pub fn decrement_nd_counter(&self, index: usize, delta: u64) -> Result<()> {
        self.nd_index(index)?.sub(delta);
        Ok(())
    }

    /// Atomically stores `value` in ND counter `index`.
    ///
    /// # Errors
    ///
    /// As [`Producer::nd_index`].
    #[inline]
    pub fn set_nd_counter(&self, index: usize, value: u64) -> Result<()> {
        self.nd_index(index)?.set(value);
        Ok(())
    }

    /// Atomically sets bit `bit` of ND counter `index` (e.g. the feature bitmap).
    ///
    /// # Errors
    ///
    /// As [`Producer::nd_index`], and [`Error::InvalidBit`] for `bit >= 64`.
    #[inline]
    pub fn or_nd_counter(&self, index: usize, bit: u64) -> Result<()> {
        let mask = bit_mask(bit)?;
        self.nd_index(index)?.or(mask);
        Ok(())
    }

    /// Reads counter `index` of NeuronCore `core`.
    ///
    /// # Errors
    ///
    /// As [`Producer::nc_index`].
    #[inline]
    pub fn nc_counter(&self, core: usize, index: usize) -> Result<u64> {
        Ok(self.nc_index(core, index)?.get())
    }

    /// Atomically adds `delta` to counter `index` of NeuronCore `core` (wrapping).
    ///
    /// # Errors
    ///
    /// As [`Producer::nc_index`].
    #[inline]
    pub fn increment_nc_counter(&self, core: usize, index: usize, delta: u64) -> Result<()> {
        self.nc_index(core, index)?.add(delta);
        Ok(())
    }

    /// Atomically subtracts `delta` from counter `index` of NeuronCore `core` (wrapping).
    ///
    /// # Errors
    ///
    /// As [`Producer::nc_index`].
    #[inline]
    pub fn decrement_nc_counter(&self, core: usize, index: usize, delta: u64) -> Result<()> {
        self.nc_index(core, index)?.sub(delta);
        Ok(())
    }

    /// Atomically stores `value` in counter `index` of NeuronCore `core`.
    ///
    /// # Errors
    ///
    /// As [`Producer::nc_index`].
    #[inline]
    pub fn set_nc_counter(&self, core: usize, index: usize, value: u64) -> Result<()> {
        self.nc_index(core, index)?.set(value);
        Ok(())
    }

    /// Atomically sets bit `bit` of counter `index` of NeuronCore `core`.
    ///
    /// # Errors
    ///
    /// As [`Producer::nc_index`], and [`Error::InvalidBit`] for `bit >= 64`.
    #[inline]
    pub fn or_nc_counter(&self, core: usize, index: usize, bit: u64) -> Result<()> {
        let mask = bit_mask(bit)?;
        self.nc_index(core, index)?.or(mask);
        Ok(())
    }

    /// Publishes the process-info record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the record.
    pub fn commit_process_info(&self, info: &ProcessInfo) -> Result<()> {
        publish(
            self.slab(),
            NDS_PROCESS_INFO_START,
            size_of::<ProcessInfoRecord>(),
            &[info.as_bytes()],
        )
    }

    /// Publishes the process-info-ext record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the record.
    pub fn commit_process_info_ext(&self, info: &ProcessInfoExt) -> Result<()> {
        publish(
            self.slab(),
            NDS_PROCESS_EXT_INFO_START,
            size_of::<ProcessInfoExtRecord>(),
            &[info.as_bytes()],
        )
    }

    /// Claims the first free model slot.
    ///
    /// Allocation is serialized inside this process by a mutex and claimed in shared memory with
    /// an atomic OR, so a slot is never handed out twice.
    ///
    /// # Errors
    ///
    /// [`Error::NoFreeModelSlot`] when all 64 are used.
    pub fn allocate_model_slot(&self) -> Result<ModelSlot> {
        let _serialized = self
            .model_slot_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let bitmap = self.slab().writable_u64(NDS_MODEL_BITMAP_START)?;
        // Each failed claim means another writer set a bit, so 64 rounds always suffice.
        for _ in 0..NDS_MAX_MODEL_COUNT {
            let used = bitmap.load(Ordering::Relaxed);
            let free = usize::try_from((!used).trailing_zeros()).unwrap_or(NDS_MAX_MODEL_COUNT);
            let slot = ModelSlot::new(free).ok_or(Error::NoFreeModelSlot)?;
            if bitmap.fetch_or(slot.bit(), Ordering::AcqRel) & slot.bit() == 0 {
                return Ok(slot);
            }
        }
        Err(Error::NoFreeModelSlot)
    }

    /// Publishes the record of an allocated model slot, hashing it while it is stored.
    ///
    /// # Errors
    ///
    /// [`Error::ModelSlotNotAllocated`] if the slot's bitmap bit is clear.
    pub fn commit_model(
        &self,
        slot: ModelSlot,
        node_info: &ModelNodeInfo,
        mem_usage: &ModelMemUsage,
    ) -> Result<()> {
        if self.reader.model_bitmap()? & slot.bit() == 0 {
            return Err(Error::ModelSlotNotAllocated { slot: slot.index() });
        }
        publish(
            self.slab(),
            record_offset(slot)?,
            size_of::<ModelRecord>(),
            &[node_info.as_bytes(), mem_usage.as_bytes()],
        )
    }

    /// Zeroes a slot's record, then frees the slot.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the records.
    pub fn delete_model(&self, slot: ModelSlot) -> Result<()> {
        erase(self.slab(), record_offset(slot)?, size_of::<ModelRecord>())?;
        self.slab()
            .writable_u64(NDS_MODEL_BITMAP_START)?
            .fetch_and(!slot.bit(), Ordering::Release);
        Ok(())
    }
}

fn record_offset(slot: ModelSlot) -> Result<usize> {
    model_record_offset(slot.index()).ok_or(Error::InvalidModelSlot { slot: slot.index() })
}

/// The mask of bit `bit`, which must be below 64.
pub(crate) fn bit_mask(bit: u64) -> Result<u64> {
    u32::try_from(bit)
        .ok()
        .and_then(|shift| 1u64.checked_shl(shift))
        .ok_or(Error::InvalidBit { bit })
}
