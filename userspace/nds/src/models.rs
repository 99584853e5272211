//! Model slots and the model records read from them.

use nds_abi::layout::NDS_MAX_MODEL_COUNT;
use nds_abi::records::{ModelMemUsage, ModelNodeInfo};
use zerocopy::FromZeros;

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

    /// The slot's bit in the occupancy bitmap.
    pub(crate) fn bit(self) -> u64 {
        1u64 << self.0
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

impl Model {
    /// An all-zero record for `slot`: storage for [`Reader::read_model_into`](crate::Reader::read_model_into).
    #[must_use]
    pub fn zeroed(slot: ModelSlot) -> Self {
        Self {
            slot,
            node_info: ModelNodeInfo::new_zeroed(),
            mem_usage: ModelMemUsage::new_zeroed(),
        }
    }
}

/// One occupied slot as seen by [`Reader::read_all_models`](crate::Reader::read_all_models).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelEntry {
    /// The slot holds a consistent record.
    Valid(Box<Model>),
    /// The slot's record was torn on both attempts.
    Torn(ModelSlot),
}
