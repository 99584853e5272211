//! The per-inference error decode chain: hardware notification (L3) → infer-error subtype (L2)
//! → flags array → public status (L1).
//!
//! 1. A `NQ_TYPE_ERROR` notification carries a raw [`TpbErrorType`] (0..=10).
//! 2. The runtime remaps the notification index through a 12-entry table
//!    ([`SUBTYPE_REMAP`], `{0,1,0,0,3,4,5,6,7,2,8,0}`) into an [`InferErrorSubtype`] (0..=8;
//!    9 is the `MAX` sentinel). The floating-point underflow / infinity / overflow types land on
//!    `NONE`: only NaN is a numerical error.
//! 3. Each subtype sets one byte of a 9-byte flags array ([`InferErrorFlags`]).
//! 4. The execute path collapses the flags into one status ([`collapse`]).
//!
//! Steps 1–3 are table lookups read from the runtime binary (high confidence). Step 4's exact
//! emitter is **not** pinned in our sources (medium confidence); the rule implemented here is:
//!
//! * each subtype has a status it collapses to ([`InferErrorSubtype::collapses_to`]):
//!   `NUMERICAL` → `NRT_EXEC_COMPLETED_WITH_NUM_ERR` (1003); `MEMORY_ERROR`, `SW_FAKE_ERROR`,
//!   `SW_SEMAPHORE_ERROR`, `SW_EVENT_ERROR`, `SW_PSUM_COLLISION_ERROR`, `SW_SEQUENCER_ERROR` →
//!   `NRT_EXEC_COMPLETED_WITH_ERR` (1004); `NONE` and `TRANSIENT` (the non-fatal sequencer
//!   notification, which has had no status of its own since its legacy counter was retired) →
//!   `NRT_SUCCESS`;
//! * when several flags are set, the [most severe](crate::most_severe) of their statuses wins,
//!   so 1004 (rank 3) beats 1003 (rank 1);
//! * a specific hardware fault determined by the execute path ([`HwFault`]: HBM / SRAM UE, DMA
//!   abort, stuck collectives, NQ overflow) is the precise diagnosis and overrides the generic
//!   flag-derived status, yielding its 1200-series code.
//!
//! Whatever the input, the decode never panics: indices beyond the remap table decode to
//! `NONE`, and flag bytes are "set" when non-zero.

use crate::{most_severe, NrtStatus};

/// A raw hardware TPB error type (`NEURON_ISA_TPB_ERROR_TYPE`), carried by an `NQ_TYPE_ERROR`
/// notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum TpbErrorType {
    /// 0: floating-point underflow.
    FpUnderflow = 0,
    /// 1: floating-point NaN.
    FpNan = 1,
    /// 2: floating-point infinity.
    FpInf = 2,
    /// 3: floating-point overflow.
    FpOverflow = 3,
    /// 4: memory error.
    MemoryError = 4,
    /// 5: injected (fake) error.
    FakeError = 5,
    /// 6: semaphore error.
    SemaphoreError = 6,
    /// 7: event error.
    EventError = 7,
    /// 8: PSUM collision.
    PsumCollision = 8,
    /// 9: non-fatal sequencer error.
    SequencerNonfatal = 9,
    /// 10: fatal sequencer error.
    SequencerFatal = 10,
}

/// A value that is not a [`TpbErrorType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown TPB error type {0} (known types are 0..=10)")]
pub struct UnknownTpbErrorType(pub u32);

impl TpbErrorType {
    /// Every type, in numeric order.
    pub const ALL: [Self; 11] = [
        Self::FpUnderflow,
        Self::FpNan,
        Self::FpInf,
        Self::FpOverflow,
        Self::MemoryError,
        Self::FakeError,
        Self::SemaphoreError,
        Self::EventError,
        Self::PsumCollision,
        Self::SequencerNonfatal,
        Self::SequencerFatal,
    ];

    /// The type with this raw value, if any.
    pub fn from_u32(value: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_u32() == value)
    }

    /// The raw value.
    pub const fn as_u32(self) -> u32 {
        self as u32
    }

    /// The infer-error subtype this notification remaps to.
    pub fn subtype(self) -> InferErrorSubtype {
        subtype_for_notification(self.as_u32())
    }
}

impl TryFrom<u32> for TpbErrorType {
    type Error = UnknownTpbErrorType;

    fn try_from(value: u32) -> Result<Self, Self::Error> {
        Self::from_u32(value).ok_or(UnknownTpbErrorType(value))
    }
}

/// The runtime's classification of an error notification (`INFER_ERROR_SUBTYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum InferErrorSubtype {
    /// 0: no error.
    None = 0,
    /// 1: numerical error (NaN).
    Numerical = 1,
    /// 2: transient (non-fatal sequencer) error.
    Transient = 2,
    /// 3: memory error.
    MemoryError = 3,
    /// 4: software-injected (fake) error.
    SwFakeError = 4,
    /// 5: semaphore error.
    SwSemaphoreError = 5,
    /// 6: event error.
    SwEventError = 6,
    /// 7: PSUM collision.
    SwPsumCollisionError = 7,
    /// 8: fatal sequencer error.
    SwSequencerError = 8,
}

impl InferErrorSubtype {
    /// `INFER_ERROR_SUBTYPE_MAX`: the number of subtypes, and the length of the flags array.
    pub const COUNT: usize = 9;

    /// Every subtype, in numeric order (index = value).
    pub const ALL: [Self; Self::COUNT] = [
        Self::None,
        Self::Numerical,
        Self::Transient,
        Self::MemoryError,
        Self::SwFakeError,
        Self::SwSemaphoreError,
        Self::SwEventError,
        Self::SwPsumCollisionError,
        Self::SwSequencerError,
    ];

    /// The subtype with this raw value, if any (`MAX` = 9 and above are not subtypes).
    pub fn from_u32(value: u32) -> Option<Self> {
        usize::try_from(value)
            .ok()
            .and_then(|index| Self::ALL.get(index).copied())
    }

    /// The raw value, also this subtype's index in the flags array.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The `INFER_ERROR_SUBTYPE_*` identifier.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "INFER_ERROR_SUBTYPE_NONE",
            Self::Numerical => "INFER_ERROR_SUBTYPE_NUMERICAL",
            Self::Transient => "INFER_ERROR_SUBTYPE_TRANSIENT",
            Self::MemoryError => "INFER_ERROR_SUBTYPE_MEMORY_ERROR",
            Self::SwFakeError => "INFER_ERROR_SUBTYPE_SW_FAKE_ERROR",
            Self::SwSemaphoreError => "INFER_ERROR_SUBTYPE_SW_SEMAPHORE_ERROR",
            Self::SwEventError => "INFER_ERROR_SUBTYPE_SW_EVENT_ERROR",
            Self::SwPsumCollisionError => "INFER_ERROR_SUBTYPE_SW_PSUM_COLLISION_ERROR",
            Self::SwSequencerError => "INFER_ERROR_SUBTYPE_SW_SEQUENCER_ERROR",
        }
    }

    /// The public status this subtype alone collapses to (see the module docs; medium
    /// confidence).
    pub const fn collapses_to(self) -> NrtStatus {
        SUBTYPE_STATUS[self.index()]
    }
}

/// The notification-index → subtype remap table (`sunda_error_subtypes`, 12 entries).
pub const SUBTYPE_REMAP: [InferErrorSubtype; 12] = [
    InferErrorSubtype::None,
    InferErrorSubtype::Numerical,
    InferErrorSubtype::None,
    InferErrorSubtype::None,
    InferErrorSubtype::MemoryError,
    InferErrorSubtype::SwFakeError,
    InferErrorSubtype::SwSemaphoreError,
    InferErrorSubtype::SwEventError,
    InferErrorSubtype::SwPsumCollisionError,
    InferErrorSubtype::Transient,
    InferErrorSubtype::SwSequencerError,
    InferErrorSubtype::None,
];

/// The status each subtype collapses to, indexed by subtype value.
const SUBTYPE_STATUS: [NrtStatus; InferErrorSubtype::COUNT] = [
    NrtStatus::SUCCESS,
    NrtStatus::EXEC_COMPLETED_WITH_NUM_ERR,
    NrtStatus::SUCCESS,
    NrtStatus::EXEC_COMPLETED_WITH_ERR,
    NrtStatus::EXEC_COMPLETED_WITH_ERR,
    NrtStatus::EXEC_COMPLETED_WITH_ERR,
    NrtStatus::EXEC_COMPLETED_WITH_ERR,
    NrtStatus::EXEC_COMPLETED_WITH_ERR,
    NrtStatus::EXEC_COMPLETED_WITH_ERR,
];

/// Remaps a raw notification index through [`SUBTYPE_REMAP`]; an index past the table decodes
/// to [`InferErrorSubtype::None`].
pub fn subtype_for_notification(index: u32) -> InferErrorSubtype {
    usize::try_from(index)
        .ok()
        .and_then(|i| SUBTYPE_REMAP.get(i).copied())
        .unwrap_or(InferErrorSubtype::None)
}

/// The 9-byte infer-error flags array (`kbl_infer_errors.infer_error_flags`), one byte per
/// subtype; a non-zero byte means "this subtype fired".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct InferErrorFlags([u8; InferErrorSubtype::COUNT]);

impl InferErrorFlags {
    /// No flag set.
    pub const fn new() -> Self {
        Self([0; InferErrorSubtype::COUNT])
    }

    /// Wraps a raw flags array as the runtime lays it out.
    pub const fn from_bytes(bytes: [u8; InferErrorSubtype::COUNT]) -> Self {
        Self(bytes)
    }

    /// The raw flags array.
    pub const fn as_bytes(&self) -> &[u8; InferErrorSubtype::COUNT] {
        &self.0
    }

    /// The flags produced by a batch of raw notification indices.
    pub fn from_notifications<I>(indices: I) -> Self
    where
        I: IntoIterator<Item = u32>,
    {
        let mut flags = Self::new();
        for index in indices {
            flags.set(subtype_for_notification(index));
        }
        flags
    }

    /// Marks a subtype as fired.
    pub fn set(&mut self, subtype: InferErrorSubtype) {
        self.0[subtype.index()] = 1;
    }

    /// Whether a subtype fired.
    pub const fn is_set(&self, subtype: InferErrorSubtype) -> bool {
        self.0[subtype.index()] != 0
    }

    /// The subtypes that fired, in numeric order.
    pub fn iter_set(&self) -> impl Iterator<Item = InferErrorSubtype> + '_ {
        InferErrorSubtype::ALL
            .into_iter()
            .filter(|subtype| self.is_set(*subtype))
    }
}

/// A specific hardware-execution fault the execute path can determine on its own (not via the
/// flags), each with its 1200-series status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HwFault {
    /// Stuck in a collectives operation → `NRT_EXEC_HW_ERR_COLLECTIVES` (1200).
    Collectives,
    /// Unrepairable HBM UE → `NRT_EXEC_HW_ERR_HBM_UE` (1201).
    HbmUe,
    /// On-chip SRAM parity → `NRT_EXEC_HW_ERR_NC_UE` (1202).
    NcUe,
    /// DMA abort → `NRT_EXEC_HW_ERR_DMA_ABORT` (1203).
    DmaAbort,
    /// Notification-queue overflow → `NRT_EXEC_SW_NQ_OVERFLOW` (1204).
    NqOverflow,
    /// Repairable HBM UE → `NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE` (1205).
    RepairableHbmUe,
}

impl HwFault {
    /// Every fault, in status order.
    pub const ALL: [Self; 6] = [
        Self::Collectives,
        Self::HbmUe,
        Self::NcUe,
        Self::DmaAbort,
        Self::NqOverflow,
        Self::RepairableHbmUe,
    ];

    /// The status this fault is reported as.
    pub const fn status(self) -> NrtStatus {
        match self {
            Self::Collectives => NrtStatus::EXEC_HW_ERR_COLLECTIVES,
            Self::HbmUe => NrtStatus::EXEC_HW_ERR_HBM_UE,
            Self::NcUe => NrtStatus::EXEC_HW_ERR_NC_UE,
            Self::DmaAbort => NrtStatus::EXEC_HW_ERR_DMA_ABORT,
            Self::NqOverflow => NrtStatus::EXEC_SW_NQ_OVERFLOW,
            Self::RepairableHbmUe => NrtStatus::EXEC_HW_ERR_REPAIRABLE_HBM_UE,
        }
    }
}

/// Collapses an execution's flags (and any specific hardware fault) into the public status,
/// by the rule in the module docs: a hardware fault wins outright; otherwise the most severe of
/// the set flags' statuses; `NRT_SUCCESS` when nothing fatal fired.
pub fn collapse(flags: &InferErrorFlags, fault: Option<HwFault>) -> NrtStatus {
    match fault {
        Some(fault) => fault.status(),
        None => most_severe(flags.iter_set().map(InferErrorSubtype::collapses_to))
            .unwrap_or(NrtStatus::SUCCESS),
    }
}
