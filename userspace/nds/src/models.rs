//! Model slots: the 64-bit occupancy bitmap and the 64 model records.

use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use nds_abi::layout::{
    model_record_offset, NDS_MAX_MODEL_COUNT, NDS_MODEL_BITMAP_START, NDS_MODEL_RECORD_SIZE,
};
use nds_abi::records::{ModelMemUsage, ModelNodeInfo, ModelRecord};
use zerocopy::IntoBytes;

use crate::datastore::Datastore;
use crate::error::{Error, Result};
use crate::records::{erase, publish, read_with_retry, Snapshot};

/// Index of one of the 64 model slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModelSlot(u8);

impl ModelSlot {
    /// The slot with index `index`, if it is below 64.
    #[must_use]
    pub fn new(index: usize) -> Option<Self> {
        if index < NDS_MAX_MODEL_COUNT {
            u8::try_from(index).ok().map(Self)
        } else {
            None
        }
    }

    /// The slot's index, 0..64.
    #[must_use]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    fn bit(self) -> u64 {
        1u64 << self.0
    }

    fn record_offset(self) -> Result<usize> {
        model_record_offset(self.index()).ok_or(Error::InvalidModelSlot { slot: self.index() })
    }
}

/// A consistent model record read from a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    /// The slot it was read from.
    pub slot: ModelSlot,
    /// Node description.
    pub node_info: ModelNodeInfo,
    /// Memory usage grid.
    pub mem_usage: ModelMemUsage,
}

/// One occupied slot as seen by [`Datastore::read_all_models`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelEntry {
    /// The slot holds a consistent record.
    Valid(Box<Model>),
    /// The slot's record was torn on both attempts.
    Torn(ModelSlot),
}

/// The bytes a deleted record is overwritten with.
const EMPTY_MODEL_RECORD: [u8; NDS_MODEL_RECORD_SIZE] = [0; NDS_MODEL_RECORD_SIZE];

impl Datastore {
    /// The model occupancy bitmap (bit `i` set: slot `i` in use).
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the bitmap.
    pub fn model_bitmap(&self) -> Result<u64> {
        self.slab().load_u64(NDS_MODEL_BITMAP_START)
    }

    /// Claims the first free model slot.
    ///
    /// Allocation is serialized inside this process by a mutex and claimed in shared memory with
    /// an atomic OR, so a slot is never handed out twice.
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle, [`Error::NoFreeModelSlot`] when all 64 are used.
    pub fn allocate_model_slot(&self) -> Result<ModelSlot> {
        self.require_writable()?;
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
        self.require_writable()?;
        if self.model_bitmap()? & slot.bit() == 0 {
            return Err(Error::ModelSlotNotAllocated { slot: slot.index() });
        }
        let record = ModelRecord {
            hash: 0,
            node_info: *node_info,
            mem_usage: *mem_usage,
        };
        publish(self.slab(), slot.record_offset()?, record.as_bytes())
    }

    /// Zeroes a slot's record, then frees the slot.
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle.
    pub fn delete_model(&self, slot: ModelSlot) -> Result<()> {
        self.require_writable()?;
        erase(self.slab(), slot.record_offset()?, &EMPTY_MODEL_RECORD)?;
        self.slab()
            .writable_u64(NDS_MODEL_BITMAP_START)?
            .fetch_and(!slot.bit(), Ordering::Release);
        Ok(())
    }

    /// Reads one slot's record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the records.
    pub fn read_model(&self, slot: ModelSlot) -> Result<Snapshot<Model>> {
        Ok(
            read_with_retry::<ModelRecord>(self.slab(), slot.record_offset()?)?.map(|record| {
                Model {
                    slot,
                    node_info: record.node_info,
                    mem_usage: record.mem_usage,
                }
            }),
        )
    }

    /// Reads every occupied slot, in slot order; slots whose record is empty (allocated but not
    /// yet committed, or being deleted) are skipped, torn ones reported as such.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the records.
    pub fn read_all_models(&self) -> Result<Vec<ModelEntry>> {
        let used = self.model_bitmap()?;
        let mut models = Vec::new();
        for slot in (0..NDS_MAX_MODEL_COUNT).filter_map(ModelSlot::new) {
            if used & slot.bit() == 0 {
                continue;
            }
            match self.read_model(slot)? {
                Snapshot::Valid(model) => models.push(ModelEntry::Valid(Box::new(model))),
                Snapshot::Torn => models.push(ModelEntry::Torn(slot)),
                Snapshot::Empty => {}
            }
        }
        Ok(models)
    }
}
