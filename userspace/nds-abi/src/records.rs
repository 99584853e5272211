//! Layouts of the slab header and of the hashed records.
//!
//! Every record starts with a `u32` FNV-1a-32 hash computed over the whole record with the hash
//! field read as zero (see [`record_hash`]). A hash of zero means "not published". The kernel never
//! interprets these records; only the producer and readers do.

use core::mem::{
    align_of,
    size_of, //
};

use zerocopy_derive::{
    FromBytes,
    Immutable,
    IntoBytes,
    KnownLayout, //
};

use super::fnv::{
    fnv1a_32_update,
    FNV1A_32_OFFSET_BASIS, //
};
use super::text::{
    c_text,
    set_c_text,
    TextTooLong, //
};

/// Header signature, `"nds\0"`.
pub const NDS_HEADER_SIGNATURE: [u8; 4] = *b"nds\0";

/// Header version written by the producer.
pub const NDS_HEADER_VERSION: i32 = 100_000;

/// The whole header as one little-endian word: the producer stores it with a single 8-byte
/// store, and readers compare it with a single 8-byte load.
pub const NDS_HEADER_WORD: u64 = {
    let [s0, s1, s2, s3] = NDS_HEADER_SIGNATURE;
    let [v0, v1, v2, v3] = NDS_HEADER_VERSION.to_le_bytes();
    u64::from_le_bytes([s0, s1, s2, s3, v0, v1, v2, v3])
};

/// Slab header, `nds_header_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct NdsHeader {
    /// `"nds\0"` once the producer has committed the header.
    pub signature: [u8; 4],
    /// Layout version, [`NDS_HEADER_VERSION`].
    pub version: i32,
}

/// Type tag of an NDS object handle (`OBJECT_TYPE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ObjectType {
    /// A model record (`OBJECT_TYPE_MODEL_NODE_INFO`).
    ModelNodeInfo = 0,
    /// The process-info record (`OBJECT_TYPE_PROCESS_INFO`).
    ProcessInfo = 1,
    /// The process-info-ext record (`OBJECT_TYPE_PROCESS_INFO_EXT`).
    ProcessInfoExt = 2,
}

impl ObjectType {
    /// The type for a C `OBJECT_TYPE_*` value.
    #[must_use]
    pub const fn from_raw(raw: i32) -> Option<Self> {
        match raw {
            0 => Some(Self::ModelNodeInfo),
            1 => Some(Self::ProcessInfo),
            2 => Some(Self::ProcessInfoExt),
            _ => None,
        }
    }
}

/// FNV-1a-32 of a record's bytes with its leading `u32` hash field read as zero.
///
/// `record` is the complete record, hash field included; whatever the hash field holds is ignored.
#[must_use]
pub fn record_hash(record: &[u8]) -> u32 {
    let payload = record.get(size_of::<u32>()..).unwrap_or(&[]);
    let zeroed_hash_state = fnv1a_32_update(FNV1A_32_OFFSET_BASIS, &[0; size_of::<u32>()]);
    fnv1a_32_update(zeroed_hash_state, payload)
}

/// A version triple, `nds_version_info_t`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct VersionInfo {
    /// Major version.
    pub major: u8,
    /// Minor version.
    pub minor: u8,
    /// C alignment padding; zero.
    pub reserved: [u8; 2],
    /// Build number.
    pub build: u32,
}

/// Size of [`ProcessInfo::tag`].
pub const NDS_PROCESS_INFO_TAG_SIZE: usize = 32;

/// Process description, `nds_process_info_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ProcessInfo {
    /// Framework type.
    pub framework_type: i8,
    /// NUL-terminated process tag; use [`ProcessInfo::tag`] and [`ProcessInfo::set_tag`].
    pub tag: [u8; NDS_PROCESS_INFO_TAG_SIZE],
    /// C alignment padding; zero.
    pub reserved: [u8; 3],
    /// Framework version.
    pub framework_version: VersionInfo,
    /// Framework abstraction layer version.
    pub fal_version: VersionInfo,
    /// Runtime version.
    pub runtime_version: VersionInfo,
}

impl ProcessInfo {
    /// The tag text, up to its first NUL.
    #[must_use]
    pub fn tag(&self) -> &[u8] {
        c_text(&self.tag)
    }

    /// Replaces the tag.
    ///
    /// # Errors
    ///
    /// [`TextTooLong`] if `tag` has more than 31 bytes.
    pub fn set_tag(&mut self, tag: &[u8]) -> Result<(), TextTooLong> {
        set_c_text(&mut self.tag, tag)
    }
}

/// The process-info record: hash + [`ProcessInfo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ProcessInfoRecord {
    /// FNV-1a-32 of the record with this field zero; zero when unpublished.
    pub hash: u32,
    /// Payload.
    pub info: ProcessInfo,
}

/// Size of [`ProcessInfoExt::tag`].
pub const NDS_PROCESS_INFO_EXT_TAG_SIZE: usize = 256;

/// Extended process description, `nds_process_info_ext_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ProcessInfoExt {
    /// NUL-terminated long tag; use [`ProcessInfoExt::tag`] and [`ProcessInfoExt::set_tag`].
    pub tag: [u8; NDS_PROCESS_INFO_EXT_TAG_SIZE],
}

impl ProcessInfoExt {
    /// The tag text, up to its first NUL.
    #[must_use]
    pub fn tag(&self) -> &[u8] {
        c_text(&self.tag)
    }

    /// Replaces the tag.
    ///
    /// # Errors
    ///
    /// [`TextTooLong`] if `tag` has more than 255 bytes.
    pub fn set_tag(&mut self, tag: &[u8]) -> Result<(), TextTooLong> {
        set_c_text(&mut self.tag, tag)
    }
}

/// The process-info-ext record: hash + [`ProcessInfoExt`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ProcessInfoExtRecord {
    /// FNV-1a-32 of the record with this field zero; zero when unpublished.
    pub hash: u32,
    /// Payload.
    pub info: ProcessInfoExt,
}

/// Size of [`ModelNodeInfo::name`].
pub const NDS_MODEL_NAME_SIZE: usize = 256;

/// Size of [`ModelNodeInfo::uuid`].
pub const NDS_MODEL_UUID_SIZE: usize = 16;

/// A loaded model node, `nds_model_node_info_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ModelNodeInfo {
    /// Model id.
    pub model_id: u32,
    /// Node id within the model.
    pub model_node_id: u32,
    /// NUL-terminated model name; use [`ModelNodeInfo::name`] and [`ModelNodeInfo::set_name`].
    pub name: [u8; NDS_MODEL_NAME_SIZE],
    /// Model UUID bytes.
    pub uuid: [u8; NDS_MODEL_UUID_SIZE],
    /// NeuronCore the node runs on.
    pub nc_index: u8,
    /// Subgraph index.
    pub sg_index: u8,
    /// C alignment padding; zero.
    pub reserved: [u8; 2],
}

impl ModelNodeInfo {
    /// The model name, up to its first NUL.
    #[must_use]
    pub fn name(&self) -> &[u8] {
        c_text(&self.name)
    }

    /// Replaces the model name.
    ///
    /// # Errors
    ///
    /// [`TextTooLong`] if `name` has more than 255 bytes.
    pub fn set_name(&mut self, name: &[u8]) -> Result<(), TextTooLong> {
        set_c_text(&mut self.name, name)
    }
}

/// Memory used in one (location, slot) cell, `nds_mem_usage_info_t`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct MemUsageInfo {
    /// Bytes in use.
    pub total_size: u64,
    /// Allocations making up `total_size`.
    pub chunk_count: u32,
    /// C tail padding; zero.
    pub reserved: u32,
}

/// Rows of the memory-usage grid (`MODEL_MEM_USAGE_LOCATION_COUNT`).
pub const MODEL_MEM_USAGE_LOCATION_COUNT: usize = 2;

/// Columns of the memory-usage grid (`NDS_DMA_MEM_USAGE_SLOT_COUNT`, fixed by the format).
pub const NDS_DMA_MEM_USAGE_SLOT_COUNT: usize = 12;

/// Named columns of the memory-usage grid; the remaining columns are reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MemUsageSlot {
    /// Model code.
    Code = 0,
    /// Tensors.
    Tensors = 1,
    /// Constants.
    Constants = 2,
    /// Scratchpad.
    Scratchpad = 3,
    /// Everything else.
    Misc = 4,
}

impl MemUsageSlot {
    /// Column index in the grid.
    #[must_use]
    pub const fn index(self) -> usize {
        match self {
            Self::Code => 0,
            Self::Tensors => 1,
            Self::Constants => 2,
            Self::Scratchpad => 3,
            Self::Misc => 4,
        }
    }
}

/// Per-model memory usage, `nds_model_node_mem_usage_info_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ModelMemUsage {
    /// `[location][slot]` grid.
    pub model_mem_usage:
        [[MemUsageInfo; NDS_DMA_MEM_USAGE_SLOT_COUNT]; MODEL_MEM_USAGE_LOCATION_COUNT],
}

impl ModelMemUsage {
    /// The cell at (`location`, `slot`), if both are in range.
    #[must_use]
    pub fn get(&self, location: usize, slot: usize) -> Option<&MemUsageInfo> {
        self.model_mem_usage.get(location)?.get(slot)
    }

    /// Mutable access to the cell at (`location`, `slot`), if both are in range.
    #[must_use]
    pub fn get_mut(&mut self, location: usize, slot: usize) -> Option<&mut MemUsageInfo> {
        self.model_mem_usage.get_mut(location)?.get_mut(slot)
    }
}

/// A model slot's record: hash + [`ModelNodeInfo`] + [`ModelMemUsage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ModelRecord {
    /// FNV-1a-32 of the record with this field zero; zero when the slot is empty.
    pub hash: u32,
    /// Node description.
    pub node_info: ModelNodeInfo,
    /// Memory usage grid.
    pub mem_usage: ModelMemUsage,
}

const _: () = assert!(size_of::<NdsHeader>() == 8);
// Bytes 6e 64 73 00 a0 86 01 00, read as one little-endian word.
const _: () = assert!(NDS_HEADER_WORD == 0x0001_86A0_0073_646E);
const _: () = assert!(size_of::<VersionInfo>() == 8);
const _: () = assert!(size_of::<ProcessInfo>() == 60);
const _: () = assert!(align_of::<ProcessInfo>() == 4);
const _: () = assert!(size_of::<ProcessInfoRecord>() == 64);
const _: () = assert!(size_of::<ProcessInfoExt>() == 256);
const _: () = assert!(size_of::<ProcessInfoExtRecord>() == 260);
const _: () = assert!(size_of::<ModelNodeInfo>() == 284);
const _: () = assert!(align_of::<ModelNodeInfo>() == 4);
const _: () = assert!(size_of::<MemUsageInfo>() == 16);
const _: () = assert!(size_of::<ModelMemUsage>() == 384);
const _: () = assert!(size_of::<ModelRecord>() == 672);
// The grid sits at +288, which keeps its 8-byte alignment inside 8-aligned model slots.
const _: () = assert!(core::mem::offset_of!(ModelRecord, mem_usage) == 288);
const _: () = assert!(core::mem::offset_of!(ModelRecord, node_info) == 4);
const _: () = assert!(core::mem::offset_of!(ProcessInfo, framework_version) == 36);
const _: () = assert!(core::mem::offset_of!(ProcessInfo, fal_version) == 44);
const _: () = assert!(core::mem::offset_of!(ProcessInfo, runtime_version) == 52);
const _: () = assert!(core::mem::offset_of!(ModelNodeInfo, uuid) == 264);
const _: () = assert!(core::mem::offset_of!(ModelNodeInfo, nc_index) == 280);
