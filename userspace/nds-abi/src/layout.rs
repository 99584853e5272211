//! The slab and its 67,200-byte region map, written as the kernel header's offset algebra.
//!
//! ```text
//! 0x00000  header                   8 B
//! 0x00008  ND counters              31 x u64
//! 0x00100  NC counters              4 cores x 31 x u64          (cores 0..=3, counters 0..=30)
//! 0x004E0  process-info record      64 B
//! 0x00520  model occupancy bitmap   u64
//! 0x00528  model records            64 x 672 B
//! 0x0AD28  process-info-ext record  260 B
//! 0x0AE2C  hole left by the 2.18 EXT layout
//! 0x0DA80  EXT NC counters          4 cores x 64 x u64          (cores 0..=3, counters 31..=94)
//! 0x0E280  EXT per-core data        12 cores x 96 x u64         (cores 4..=15, counters 0..=94 + pad)
//! 0x10680  end of the map
//! 0x3F000  slab generation          u64, kernel-written (this implementation's extension)
//! 0x40000  end of the slab
//! ```

use core::mem::size_of;

use super::counters::{
    NDS_EXT_NC_COUNTER_COUNT,
    NDS_NC_COUNTER_COUNT,
    NDS_ND_COUNTER_COUNT,
    NDS_TOTAL_NC_COUNTER_COUNT, //
};
use super::records::{
    ModelRecord,
    NdsHeader,
    ProcessInfoExtRecord,
    ProcessInfoRecord, //
};

/// Bytes in one slab (`NEURON_DATASTORE_SIZE`).
pub const NEURON_DATASTORE_SIZE: usize = 256 * 1024;

/// Slabs pre-allocated per device (`NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE`).
pub const NEURON_MAX_DATASTORE_ENTRIES_PER_DEVICE: usize = 16;

/// Cores whose counters 0..=30 live in the original NC band (`NDS_MAX_NEURONCORE_COUNT`).
pub const NDS_MAX_NEURONCORE_COUNT: usize = 4;

/// Cores added by the EXT format (`NDS_EXT_MAX_NEURONCORE_COUNT`).
pub const NDS_EXT_MAX_NEURONCORE_COUNT: usize = 12;

/// Highest number of NeuronCores a slab describes.
pub const NDS_TOTAL_NEURONCORE_COUNT: usize =
    NDS_MAX_NEURONCORE_COUNT + NDS_EXT_MAX_NEURONCORE_COUNT;

/// Size of one counter word.
pub const NDS_COUNTER_SIZE: usize = size_of::<u64>();

/// Start of the header (`NDS_HEADER_START`).
pub const NDS_HEADER_START: usize = 0;
/// Size of the header (`NDS_HEADER_SIZE`).
pub const NDS_HEADER_SIZE: usize = size_of::<NdsHeader>();

/// Start of the ND counters (`NDS_ND_COUNTERS_START`).
pub const NDS_ND_COUNTERS_START: usize = NDS_HEADER_START + NDS_HEADER_SIZE;
/// Size of the ND counters (`NDS_ND_COUNTERS_SIZE`).
pub const NDS_ND_COUNTERS_SIZE: usize = NDS_ND_COUNTER_COUNT * NDS_COUNTER_SIZE;

/// Counters per core in the original NC band (`NDS_NEURONCORE_COUNTERS_COUNT`).
pub const NDS_NEURONCORE_COUNTERS_COUNT: usize = NDS_NC_COUNTER_COUNT;
/// Start of the original NC band (`NDS_NEURONCORE_COUNTERS_START`).
pub const NDS_NEURONCORE_COUNTERS_START: usize = NDS_ND_COUNTERS_START + NDS_ND_COUNTERS_SIZE;
/// Size of the original NC band (`NDS_NEURONCORE_COUNTERS_SIZE`).
pub const NDS_NEURONCORE_COUNTERS_SIZE: usize =
    NDS_NEURONCORE_COUNTERS_COUNT * NDS_MAX_NEURONCORE_COUNT * NDS_COUNTER_SIZE;

/// Start of the process-info record.
pub const NDS_PROCESS_INFO_START: usize =
    NDS_NEURONCORE_COUNTERS_START + NDS_NEURONCORE_COUNTERS_SIZE;
/// Size of the process-info record.
pub const NDS_PROCESS_INFO_SIZE: usize = size_of::<ProcessInfoRecord>();

/// Start of the 64-bit model-slot occupancy bitmap (bit `i` set: slot `i` in use).
pub const NDS_MODEL_BITMAP_START: usize = NDS_PROCESS_INFO_START + NDS_PROCESS_INFO_SIZE;
/// Size of the model-slot occupancy bitmap.
pub const NDS_MODEL_BITMAP_SIZE: usize = size_of::<u64>();

/// Model slots, one per bitmap bit.
pub const NDS_MAX_MODEL_COUNT: usize = 64;
/// Start of the model records.
pub const NDS_MODEL_RECORDS_START: usize = NDS_MODEL_BITMAP_START + NDS_MODEL_BITMAP_SIZE;
/// Stride of the model records.
pub const NDS_MODEL_RECORD_SIZE: usize = size_of::<ModelRecord>();
/// Size of all model records.
pub const NDS_MODEL_RECORDS_SIZE: usize = NDS_MAX_MODEL_COUNT * NDS_MODEL_RECORD_SIZE;

/// Start of the process-info-ext record (`NDS_PROCESS_EXT_INFO_START`).
pub const NDS_PROCESS_EXT_INFO_START: usize = NDS_MODEL_RECORDS_START + NDS_MODEL_RECORDS_SIZE;
/// Size of the process-info-ext record (`NDS_PROCESS_EXT_INFO_SIZE`).
pub const NDS_PROCESS_EXT_INFO_SIZE: usize = size_of::<ProcessInfoExtRecord>();

/// End of the process-info-ext record, hard-coded in the kernel header (`NDS_EXT_OFFSET_OLD`).
pub const NDS_EXT_OFFSET_OLD: usize = 44_588;
/// EXT counters per core in the 2.18 geometry (`NDS_EXT_NC_COUNTER_COUNT_OLD`).
pub const NDS_EXT_NC_COUNTER_COUNT_OLD: usize = 65;
/// Counters per core in the 2.18 geometry (`NDS_TOTAL_NC_COUNTER_COUNT_OLD`).
pub const NDS_TOTAL_NC_COUNTER_COUNT_OLD: usize =
    NDS_NC_COUNTER_COUNT + NDS_EXT_NC_COUNTER_COUNT_OLD;
/// Size of the 2.18 EXT counter band (`NDS_EXT_NEURONCORE_COUNTERS_SIZE_OLD`).
pub const NDS_EXT_NEURONCORE_COUNTERS_SIZE_OLD: usize =
    NDS_EXT_NC_COUNTER_COUNT_OLD * NDS_MAX_NEURONCORE_COUNT * NDS_COUNTER_SIZE;
/// Size of the 2.18 per-core data band (`NDS_EXT_NEURONCORE_NC_DATA_SIZE_OLD`).
pub const NDS_EXT_NEURONCORE_NC_DATA_SIZE_OLD: usize =
    NDS_TOTAL_NC_COUNTER_COUNT_OLD * NDS_EXT_MAX_NEURONCORE_COUNT * NDS_COUNTER_SIZE;
/// Size of the whole 2.18 EXT section (`NDS_EXT_SECTION_SIZE_OLD`).
pub const NDS_EXT_SECTION_SIZE_OLD: usize =
    NDS_EXT_NEURONCORE_COUNTERS_SIZE_OLD + NDS_EXT_NEURONCORE_NC_DATA_SIZE_OLD;

/// Alignment of the EXT sections (`NDS_EXT_ALIGNMENT`).
pub const NDS_EXT_ALIGNMENT: usize = 64;

/// Rounds `value` up to [`NDS_EXT_ALIGNMENT`] (`NDS_ALIGN`); `None` if that overflows.
#[must_use]
pub const fn nds_align(value: usize) -> Option<usize> {
    value.checked_add(value.wrapping_neg() & (NDS_EXT_ALIGNMENT - 1))
}

/// [`nds_align`] for layout constants, where overflow is a build error.
const fn nds_align_const(value: usize) -> usize {
    match nds_align(value) {
        Some(aligned) => aligned,
        None => panic!("NDS layout constant overflows"),
    }
}

/// Whether `offset` is a multiple of the power of two `alignment`.
const fn is_aligned(offset: usize, alignment: usize) -> bool {
    offset & (alignment - 1) == 0
}

/// Start of the current EXT sections, past the 2.18 ones (`NDS_EXT_OFFSET`).
pub const NDS_EXT_OFFSET: usize = nds_align_const(NDS_EXT_OFFSET_OLD + NDS_EXT_SECTION_SIZE_OLD);

/// EXT counters per core for cores 0..=3 (`NDS_EXT_NEURONCORE_COUNTERS_COUNT`).
pub const NDS_EXT_NEURONCORE_COUNTERS_COUNT: usize = NDS_EXT_NC_COUNTER_COUNT;
/// Start of the EXT counter band (`NDS_EXT_NEURONCORE_COUNTERS_START`).
pub const NDS_EXT_NEURONCORE_COUNTERS_START: usize = NDS_EXT_OFFSET;
/// Size of the EXT counter band (`NDS_EXT_NEURONCORE_COUNTERS_SIZE`).
pub const NDS_EXT_NEURONCORE_COUNTERS_SIZE: usize =
    NDS_EXT_NEURONCORE_COUNTERS_COUNT * NDS_MAX_NEURONCORE_COUNT * NDS_COUNTER_SIZE;

/// Padding words after each extra core's counters (`NDS_EXT_NEURONCORE_NC_DATA_PADDING`).
pub const NDS_EXT_NEURONCORE_NC_DATA_PADDING: usize = 1;
/// Per-core stride of the EXT data band, in words (`NDS_EXT_NEURONCORE_NC_DATA_COUNT`).
pub const NDS_EXT_NEURONCORE_NC_DATA_COUNT: usize =
    NDS_TOTAL_NC_COUNTER_COUNT + NDS_EXT_NEURONCORE_NC_DATA_PADDING;
/// Start of the EXT per-core data band (`NDS_EXT_NEURONCORE_NC_DATA_START`).
pub const NDS_EXT_NEURONCORE_NC_DATA_START: usize =
    nds_align_const(NDS_EXT_NEURONCORE_COUNTERS_START + NDS_EXT_NEURONCORE_COUNTERS_SIZE);
/// Size of the EXT per-core data band (`NDS_EXT_NEURONCORE_NC_DATA_SIZE`).
pub const NDS_EXT_NEURONCORE_NC_DATA_SIZE: usize =
    NDS_EXT_MAX_NEURONCORE_COUNT * NDS_EXT_NEURONCORE_NC_DATA_COUNT * NDS_COUNTER_SIZE;

/// Bytes the region map needs (`NDS_REQUIRED_SIZE`); slabs smaller than this are rejected.
pub const NDS_REQUIRED_SIZE: usize =
    NDS_EXT_NEURONCORE_NC_DATA_START + NDS_EXT_NEURONCORE_NC_DATA_SIZE;

/// Offset of the slab generation, a `u64` at the start of the slab's last 4 KiB page.
///
/// This is an extension of this implementation, far outside the original map, so original
/// producers and readers never touch it. Only the kernel writes it: it adds one on every slot
/// assignment and one on every clear, so the value is odd while a process owns the slab and even
/// while it is free. A reader that saw generation `g` can tell, without a syscall, that the slab
/// was released (and perhaps handed to another process) as soon as the value differs from `g`.
pub const SLAB_GENERATION_OFFSET: usize = NEURON_DATASTORE_SIZE - 4096;

/// Whether a slab generation value means "owned by a process".
#[must_use]
pub const fn slab_generation_is_owned(generation: u64) -> bool {
    generation % 2 == 1
}

/// Why a counter address could not be computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterAddressError {
    /// The core is not below [`NDS_TOTAL_NEURONCORE_COUNT`].
    InvalidCore,
    /// The counter index is beyond its band.
    InvalidCounter,
}

/// Byte offset of ND counter `index`, or `None` if it is not below `NDS_ND_COUNTER_COUNT`.
#[must_use]
pub const fn nd_counter_offset(index: usize) -> Option<usize> {
    if index < NDS_ND_COUNTER_COUNT {
        Some(NDS_ND_COUNTERS_START + index * NDS_COUNTER_SIZE)
    } else {
        None
    }
}

/// Byte offset of counter `index` of NeuronCore `core`, following the kernel's three bands.
///
/// * cores 0..=3, counters 0..=30: the original NC band at [`NDS_NEURONCORE_COUNTERS_START`];
/// * cores 0..=3, counters 31..=94: the EXT counter band at [`NDS_EXT_NEURONCORE_COUNTERS_START`];
/// * cores 4..=15, counters 0..=94: the EXT data band at [`NDS_EXT_NEURONCORE_NC_DATA_START`].
///
/// # Errors
///
/// [`CounterAddressError::InvalidCore`] for `core >= 16`, otherwise
/// [`CounterAddressError::InvalidCounter`] for `index >= 95`.
pub const fn nc_counter_offset(core: usize, index: usize) -> Result<usize, CounterAddressError> {
    if core >= NDS_TOTAL_NEURONCORE_COUNT {
        return Err(CounterAddressError::InvalidCore);
    }
    if index >= NDS_TOTAL_NC_COUNTER_COUNT {
        return Err(CounterAddressError::InvalidCounter);
    }
    let word = if core < NDS_MAX_NEURONCORE_COUNT {
        if index < NDS_NC_COUNTER_COUNT {
            let base = NDS_NEURONCORE_COUNTERS_START / NDS_COUNTER_SIZE;
            base + core * NDS_NEURONCORE_COUNTERS_COUNT + index
        } else {
            let base = NDS_EXT_NEURONCORE_COUNTERS_START / NDS_COUNTER_SIZE;
            base + core * NDS_EXT_NEURONCORE_COUNTERS_COUNT + (index - NDS_NC_COUNTER_COUNT)
        }
    } else {
        let base = NDS_EXT_NEURONCORE_NC_DATA_START / NDS_COUNTER_SIZE;
        base + (core - NDS_MAX_NEURONCORE_COUNT) * NDS_EXT_NEURONCORE_NC_DATA_COUNT + index
    };
    Ok(word * NDS_COUNTER_SIZE)
}

/// Byte offset of model slot `slot`'s record, or `None` if it is not below 64.
#[must_use]
pub const fn model_record_offset(slot: usize) -> Option<usize> {
    if slot < NDS_MAX_MODEL_COUNT {
        Some(NDS_MODEL_RECORDS_START + slot * NDS_MODEL_RECORD_SIZE)
    } else {
        None
    }
}

const _: () = assert!(NEURON_DATASTORE_SIZE == 262_144);
const _: () = assert!(NDS_TOTAL_NEURONCORE_COUNT == 16);
const _: () = assert!(NDS_HEADER_SIZE == 8);
const _: () = assert!(NDS_ND_COUNTERS_START == 8);
const _: () = assert!(NDS_ND_COUNTERS_SIZE == 248);
const _: () = assert!(NDS_NEURONCORE_COUNTERS_START == 0x100);
const _: () = assert!(NDS_NEURONCORE_COUNTERS_SIZE == 992);
const _: () = assert!(NDS_PROCESS_INFO_START == 0x4E0);
const _: () = assert!(NDS_MODEL_BITMAP_START == 0x520);
// One bitmap word covers every slot.
const _: () =
    assert!(NDS_MAX_MODEL_COUNT == 64 && NDS_MODEL_BITMAP_SIZE * 8 == NDS_MAX_MODEL_COUNT);
const _: () = assert!(NDS_MODEL_RECORDS_START == 0x528);
const _: () = assert!(NDS_MODEL_RECORD_SIZE == 672);
const _: () = assert!(NDS_MODEL_RECORDS_SIZE == 43_008);
const _: () = assert!(NDS_PROCESS_EXT_INFO_START == 0xAD28);
const _: () = assert!(NDS_PROCESS_EXT_INFO_SIZE == 260);
// The kernel hard-codes the end of the userspace records; the two must agree.
const _: () = assert!(NDS_PROCESS_EXT_INFO_START + NDS_PROCESS_EXT_INFO_SIZE == NDS_EXT_OFFSET_OLD);
const _: () = assert!(NDS_EXT_NEURONCORE_COUNTERS_SIZE_OLD == 2080);
const _: () = assert!(NDS_EXT_NEURONCORE_NC_DATA_SIZE_OLD == 9216);
const _: () = assert!(NDS_EXT_SECTION_SIZE_OLD == 11_296);
const _: () = assert!(NDS_EXT_OFFSET == 55_936);
const _: () = assert!(NDS_EXT_NEURONCORE_COUNTERS_START == 0xDA80);
const _: () = assert!(NDS_EXT_NEURONCORE_COUNTERS_SIZE == 2048);
const _: () = assert!(NDS_EXT_NEURONCORE_NC_DATA_COUNT == 96);
const _: () = assert!(NDS_EXT_NEURONCORE_NC_DATA_START == 0xE280);
const _: () = assert!(NDS_EXT_NEURONCORE_NC_DATA_SIZE == 9216);
const _: () = assert!(NDS_REQUIRED_SIZE == 0x10680);
const _: () = assert!(NDS_REQUIRED_SIZE <= NEURON_DATASTORE_SIZE);
// Every word the library touches atomically must be naturally aligned.
const _: () = assert!(is_aligned(NDS_ND_COUNTERS_START, NDS_COUNTER_SIZE));
const _: () = assert!(is_aligned(NDS_NEURONCORE_COUNTERS_START, NDS_COUNTER_SIZE));
const _: () = assert!(is_aligned(NDS_PROCESS_INFO_START, NDS_COUNTER_SIZE));
const _: () = assert!(is_aligned(NDS_MODEL_BITMAP_START, NDS_COUNTER_SIZE));
const _: () = assert!(is_aligned(NDS_MODEL_RECORDS_START, NDS_COUNTER_SIZE));
const _: () = assert!(is_aligned(NDS_MODEL_RECORD_SIZE, NDS_COUNTER_SIZE));
const _: () = assert!(is_aligned(NDS_PROCESS_EXT_INFO_START, NDS_COUNTER_SIZE));
const _: () = assert!(is_aligned(
    NDS_EXT_NEURONCORE_COUNTERS_START,
    NDS_EXT_ALIGNMENT
));
const _: () = assert!(is_aligned(
    NDS_EXT_NEURONCORE_NC_DATA_START,
    NDS_EXT_ALIGNMENT
));
const _: () = assert!(SLAB_GENERATION_OFFSET == 0x3F000);
const _: () = assert!(SLAB_GENERATION_OFFSET >= NDS_REQUIRED_SIZE);
const _: () = assert!(is_aligned(SLAB_GENERATION_OFFSET, NDS_COUNTER_SIZE));
const _: () = assert!(SLAB_GENERATION_OFFSET + size_of::<u64>() <= NEURON_DATASTORE_SIZE);
