//! Models the producer loads and unloads: their records and the memory they account for.

use nds::{ModelSlot, Producer};
use nds_abi::records::{
    MemUsageSlot, ModelMemUsage, ModelNodeInfo, MODEL_MEM_USAGE_LOCATION_COUNT,
};
use serde::{Deserialize, Serialize};
use zerocopy::FromZeros;

use crate::rng::Rng;

/// Row of the memory grid used for host memory.
pub const HOST_LOCATION: usize = 0;
/// Row of the memory grid used for device memory.
pub const DEVICE_LOCATION: usize = 1;
const _: () = assert!(DEVICE_LOCATION < MODEL_MEM_USAGE_LOCATION_COUNT);

/// A model the generator knows how to "load".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CatalogModel {
    /// Name in the record.
    pub name: &'static str,
    /// Multiply-accumulates per inference.
    pub macs: u64,
    /// Device bytes: code, tensors, constants, scratchpad, misc.
    pub device_bytes: [u64; 5],
    /// Host bytes: code, tensors, constants, scratchpad, misc.
    pub host_bytes: [u64; 5],
}

const MIB: u64 = 1 << 20;

/// The models loaded at random.
pub const CATALOG: [CatalogModel; 4] = [
    CatalogModel {
        name: "resnet50-v1.5",
        macs: 4_100_000_000,
        device_bytes: [12 * MIB, 48 * MIB, 98 * MIB, 16 * MIB, 2 * MIB],
        host_bytes: [MIB, 8 * MIB, 4 * MIB, 2 * MIB, MIB],
    },
    CatalogModel {
        name: "bert-base-uncased",
        macs: 11_200_000_000,
        device_bytes: [20 * MIB, 64 * MIB, 420 * MIB, 32 * MIB, 4 * MIB],
        host_bytes: [2 * MIB, 16 * MIB, 8 * MIB, 4 * MIB, MIB],
    },
    CatalogModel {
        name: "yolov5s",
        macs: 8_200_000_000,
        device_bytes: [9 * MIB, 40 * MIB, 28 * MIB, 12 * MIB, MIB],
        host_bytes: [MIB, 6 * MIB, 2 * MIB, MIB, MIB],
    },
    CatalogModel {
        name: "vit-base-patch16",
        macs: 17_500_000_000,
        device_bytes: [16 * MIB, 72 * MIB, 330 * MIB, 24 * MIB, 3 * MIB],
        host_bytes: [2 * MIB, 12 * MIB, 6 * MIB, 3 * MIB, MIB],
    },
];

/// The five named grid columns, in the order of [`CatalogModel::device_bytes`].
pub const MEM_SLOTS: [MemUsageSlot; 5] = [
    MemUsageSlot::Code,
    MemUsageSlot::Tensors,
    MemUsageSlot::Constants,
    MemUsageSlot::Scratchpad,
    MemUsageSlot::Misc,
];

/// A model that is loaded: its slab slot and what it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadedModel {
    /// Model slot in the slab.
    pub slot: usize,
    /// Model id (unique within the producer).
    pub model_id: u32,
    /// Name.
    pub name: String,
    /// NeuronCore it runs on.
    pub nc_index: usize,
    /// Subgraph index.
    pub sg_index: usize,
    /// Index into [`CATALOG`].
    #[serde(skip)]
    pub catalog: usize,
}

impl LoadedModel {
    /// Its catalog entry.
    #[must_use]
    pub fn spec(&self) -> &'static CatalogModel {
        CATALOG.get(self.catalog).unwrap_or(&CATALOG[0])
    }
}

/// Builds and publishes the record of `model` in `slot`.
///
/// # Errors
///
/// The datastore's error.
pub fn commit(
    store: &Producer,
    slot: ModelSlot,
    model: &LoadedModel,
    rng: &mut Rng,
) -> nds::Result<()> {
    let mut info = ModelNodeInfo::new_zeroed();
    info.model_id = model.model_id;
    info.model_node_id = model.model_id * 100 + u32::try_from(model.sg_index).unwrap_or(0);
    // Catalog names are short ASCII; `set_name` cannot fail for them.
    let _ = info.set_name(model.name.as_bytes());
    for byte in &mut info.uuid {
        *byte = rng.next_u64().to_le_bytes()[0];
    }
    info.nc_index = u8::try_from(model.nc_index).unwrap_or(u8::MAX);
    info.sg_index = u8::try_from(model.sg_index).unwrap_or(u8::MAX);
    let mut usage = ModelMemUsage::new_zeroed();
    let spec = model.spec();
    for (index, slot_kind) in MEM_SLOTS.iter().enumerate() {
        for (location, bytes) in [
            (HOST_LOCATION, spec.host_bytes[index]),
            (DEVICE_LOCATION, spec.device_bytes[index]),
        ] {
            if let Some(cell) = usage.get_mut(location, slot_kind.index()) {
                cell.total_size = bytes;
                cell.chunk_count = 1 + u32::try_from(bytes / (4 * MIB)).unwrap_or(0);
            }
        }
    }
    store.commit_model(slot, &info, &usage)
}
