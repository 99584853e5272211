//! The `NRT_STATUS` value space: the 32-bit return code of every `nrt_*` entry point.
//!
//! Values are exactly those of the public `nrt_status.h` (the runtime's DWARF enum is the
//! authority; the enum is `uint32_t`-sized). The space is sparse on purpose: the gaps (8, 12,
//! 16..=100, 102..=1001, 1007..=1099, 1101..=1199) partition it by subsystem and are never
//! missing codes. A value outside the 28 known codes is still a valid [`NrtStatus`]: it is kept,
//! round-trips unchanged, and names itself `"UNKNOWN"`.

use std::fmt;
use std::str::FromStr;

/// A Neuron Runtime status code (`NRT_STATUS`).
///
/// A transparent newtype over `u32` rather than a closed enum, so that any value a runtime
/// returns (including codes newer than this crate) is preserved exactly:
/// `NrtStatus::from_u32(v).as_u32() == v` for every `v`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct NrtStatus(u32);

impl NrtStatus {
    /// `NRT_SUCCESS` (0): the call succeeded.
    pub const SUCCESS: Self = Self(0);
    /// `NRT_FAILURE` (1): non-specific failure.
    pub const FAILURE: Self = Self(1);
    /// `NRT_INVALID` (2): invalid input (bad NEFF, instruction, DMA descriptor, tensor, …).
    pub const INVALID: Self = Self(2);
    /// `NRT_INVALID_HANDLE` (3): an invalid handle was passed.
    pub const INVALID_HANDLE: Self = Self(3);
    /// `NRT_RESOURCE` (4): failed to allocate a resource (device memory, …).
    pub const RESOURCE: Self = Self(4);
    /// `NRT_TIMEOUT` (5): the operation timed out.
    pub const TIMEOUT: Self = Self(5);
    /// `NRT_HW_ERROR` (6): hardware failure.
    pub const HW_ERROR: Self = Self(6);
    /// `NRT_QUEUE_FULL` (7): no space in the execution input queue.
    pub const QUEUE_FULL: Self = Self(7);
    /// `NRT_LOAD_NOT_ENOUGH_NC` (9): not enough NeuronCores to load a NEFF.
    pub const LOAD_NOT_ENOUGH_NC: Self = Self(9);
    /// `NRT_UNSUPPORTED_NEFF_VERSION` (10): the NEFF version is not supported.
    pub const UNSUPPORTED_NEFF_VERSION: Self = Self(10);
    /// `NRT_FAIL_HOST_MEM_ALLOC` (11): host memory allocation failed (kept for backward
    /// compatibility; the header says "DO NOT USE").
    pub const FAIL_HOST_MEM_ALLOC: Self = Self(11);
    /// `NRT_UNINITIALIZED` (13): an API was called before `nrt_init()`.
    pub const UNINITIALIZED: Self = Self(13);
    /// `NRT_CLOSED` (14): an API was called after `nrt_close()`.
    pub const CLOSED: Self = Self(14);
    /// `NRT_QUEUE_EMPTY` (15): a queue with no data was accessed.
    pub const QUEUE_EMPTY: Self = Self(15);
    /// `NRT_EXEC_UNIT_UNRECOVERABLE` (101, 2.31+): the execution unit hit a fatal error and
    /// cannot recover. (Older public headers spell this value `NRT_EXEC_UNIT_DISABLED`.)
    pub const EXEC_UNIT_UNRECOVERABLE: Self = Self(101);
    /// `NRT_EXEC_BAD_INPUT` (1002): invalid input was submitted to execute.
    pub const EXEC_BAD_INPUT: Self = Self(1002);
    /// `NRT_EXEC_COMPLETED_WITH_NUM_ERR` (1003): execution completed with numerical errors (NaN).
    pub const EXEC_COMPLETED_WITH_NUM_ERR: Self = Self(1003);
    /// `NRT_EXEC_COMPLETED_WITH_ERR` (1004): execution completed with other (logical or
    /// physical) errors.
    pub const EXEC_COMPLETED_WITH_ERR: Self = Self(1004);
    /// `NRT_EXEC_NC_BUSY` (1005): the NeuronCore is locked by another model or process.
    pub const EXEC_NC_BUSY: Self = Self(1005);
    /// `NRT_EXEC_OOB` (1006): an indirect copy or embedding update was out of bounds.
    pub const EXEC_OOB: Self = Self(1006);
    /// `NRT_COLL_PENDING` (1100): a collective operation is still pending (poll again).
    pub const COLL_PENDING: Self = Self(1100);
    /// `NRT_EXEC_HW_ERR_COLLECTIVES` (1200): stuck in a collectives operation.
    pub const EXEC_HW_ERR_COLLECTIVES: Self = Self(1200);
    /// `NRT_EXEC_HW_ERR_HBM_UE` (1201): unrepairable HBM uncorrectable error.
    pub const EXEC_HW_ERR_HBM_UE: Self = Self(1201);
    /// `NRT_EXEC_HW_ERR_NC_UE` (1202): NeuronCore on-chip SRAM parity error.
    pub const EXEC_HW_ERR_NC_UE: Self = Self(1202);
    /// `NRT_EXEC_HW_ERR_DMA_ABORT` (1203): a DMA engine hit an unrecoverable error.
    pub const EXEC_HW_ERR_DMA_ABORT: Self = Self(1203);
    /// `NRT_EXEC_SW_NQ_OVERFLOW` (1204): software notification-queue overflow.
    pub const EXEC_SW_NQ_OVERFLOW: Self = Self(1204);
    /// `NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE` (1205): repairable HBM uncorrectable error.
    pub const EXEC_HW_ERR_REPAIRABLE_HBM_UE: Self = Self(1205);
    /// `NRT_NETWORK_PROXY_FAILURE` (1206, 2.31+): an EFA network-proxy operation failed.
    pub const NETWORK_PROXY_FAILURE: Self = Self(1206);

    /// Every known code, in ascending numeric order.
    pub const ALL: [Self; 28] = [
        Self::SUCCESS,
        Self::FAILURE,
        Self::INVALID,
        Self::INVALID_HANDLE,
        Self::RESOURCE,
        Self::TIMEOUT,
        Self::HW_ERROR,
        Self::QUEUE_FULL,
        Self::LOAD_NOT_ENOUGH_NC,
        Self::UNSUPPORTED_NEFF_VERSION,
        Self::FAIL_HOST_MEM_ALLOC,
        Self::UNINITIALIZED,
        Self::CLOSED,
        Self::QUEUE_EMPTY,
        Self::EXEC_UNIT_UNRECOVERABLE,
        Self::EXEC_BAD_INPUT,
        Self::EXEC_COMPLETED_WITH_NUM_ERR,
        Self::EXEC_COMPLETED_WITH_ERR,
        Self::EXEC_NC_BUSY,
        Self::EXEC_OOB,
        Self::COLL_PENDING,
        Self::EXEC_HW_ERR_COLLECTIVES,
        Self::EXEC_HW_ERR_HBM_UE,
        Self::EXEC_HW_ERR_NC_UE,
        Self::EXEC_HW_ERR_DMA_ABORT,
        Self::EXEC_SW_NQ_OVERFLOW,
        Self::EXEC_HW_ERR_REPAIRABLE_HBM_UE,
        Self::NETWORK_PROXY_FAILURE,
    ];

    /// The string [`as_str`](Self::as_str) returns for any value that is not a known code.
    pub const UNKNOWN_STR: &'static str = "UNKNOWN";

    /// Wraps any raw value. Unknown values are kept, never rejected or clamped.
    pub const fn from_u32(value: u32) -> Self {
        Self(value)
    }

    /// The raw 32-bit value.
    pub const fn as_u32(self) -> u32 {
        self.0
    }

    /// Whether this is one of the 28 codes of the public header.
    pub const fn is_known(self) -> bool {
        self.identifier().is_some()
    }

    /// The bare identifier (`"NRT_SUCCESS"`, `"NRT_EXEC_OOB"`, …), or `"UNKNOWN"` for any
    /// value that is not a known code.
    ///
    /// This is what `nrt_get_status_as_str` returns: a symbol, never the human message (see
    /// [`message`](Self::message) and [`user_message`](Self::user_message) for those).
    pub const fn as_str(self) -> &'static str {
        match self.identifier() {
            Some(name) => name,
            None => Self::UNKNOWN_STR,
        }
    }

    /// Whether this is `NRT_SUCCESS`.
    pub const fn is_success(self) -> bool {
        self.0 == Self::SUCCESS.0
    }

    /// Whether the caller should poll again rather than treat this as a result.
    ///
    /// Only `NRT_COLL_PENDING` (1100) is a retry signal; it is not an error.
    pub const fn is_retry(self) -> bool {
        self.0 == Self::COLL_PENDING.0
    }

    /// Whether this status reports a failure: anything but success and the retry sentinel,
    /// unknown values included.
    pub const fn is_error(self) -> bool {
        !self.is_success() && !self.is_retry()
    }

    /// The identifier of a known code, `None` otherwise.
    const fn identifier(self) -> Option<&'static str> {
        Some(match self {
            Self::SUCCESS => "NRT_SUCCESS",
            Self::FAILURE => "NRT_FAILURE",
            Self::INVALID => "NRT_INVALID",
            Self::INVALID_HANDLE => "NRT_INVALID_HANDLE",
            Self::RESOURCE => "NRT_RESOURCE",
            Self::TIMEOUT => "NRT_TIMEOUT",
            Self::HW_ERROR => "NRT_HW_ERROR",
            Self::QUEUE_FULL => "NRT_QUEUE_FULL",
            Self::LOAD_NOT_ENOUGH_NC => "NRT_LOAD_NOT_ENOUGH_NC",
            Self::UNSUPPORTED_NEFF_VERSION => "NRT_UNSUPPORTED_NEFF_VERSION",
            Self::FAIL_HOST_MEM_ALLOC => "NRT_FAIL_HOST_MEM_ALLOC",
            Self::UNINITIALIZED => "NRT_UNINITIALIZED",
            Self::CLOSED => "NRT_CLOSED",
            Self::QUEUE_EMPTY => "NRT_QUEUE_EMPTY",
            Self::EXEC_UNIT_UNRECOVERABLE => "NRT_EXEC_UNIT_UNRECOVERABLE",
            Self::EXEC_BAD_INPUT => "NRT_EXEC_BAD_INPUT",
            Self::EXEC_COMPLETED_WITH_NUM_ERR => "NRT_EXEC_COMPLETED_WITH_NUM_ERR",
            Self::EXEC_COMPLETED_WITH_ERR => "NRT_EXEC_COMPLETED_WITH_ERR",
            Self::EXEC_NC_BUSY => "NRT_EXEC_NC_BUSY",
            Self::EXEC_OOB => "NRT_EXEC_OOB",
            Self::COLL_PENDING => "NRT_COLL_PENDING",
            Self::EXEC_HW_ERR_COLLECTIVES => "NRT_EXEC_HW_ERR_COLLECTIVES",
            Self::EXEC_HW_ERR_HBM_UE => "NRT_EXEC_HW_ERR_HBM_UE",
            Self::EXEC_HW_ERR_NC_UE => "NRT_EXEC_HW_ERR_NC_UE",
            Self::EXEC_HW_ERR_DMA_ABORT => "NRT_EXEC_HW_ERR_DMA_ABORT",
            Self::EXEC_SW_NQ_OVERFLOW => "NRT_EXEC_SW_NQ_OVERFLOW",
            Self::EXEC_HW_ERR_REPAIRABLE_HBM_UE => "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE",
            Self::NETWORK_PROXY_FAILURE => "NRT_NETWORK_PROXY_FAILURE",
            _ => return None,
        })
    }
}

impl From<u32> for NrtStatus {
    fn from(value: u32) -> Self {
        Self::from_u32(value)
    }
}

impl From<NrtStatus> for u32 {
    fn from(status: NrtStatus) -> Self {
        status.as_u32()
    }
}

impl fmt::Debug for NrtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.as_str(), self.0)
    }
}

/// Known codes display as their identifier; unknown ones as `UNKNOWN(<value>)`, so that two
/// different unknown values never print alike.
impl fmt::Display for NrtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.identifier() {
            Some(name) => f.write_str(name),
            None => write!(f, "{}({})", Self::UNKNOWN_STR, self.0),
        }
    }
}

/// Why a string did not name a status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an NRT status: {input:?} (expected a number or an identifier such as NRT_TIMEOUT)")]
pub struct ParseStatusError {
    /// The rejected input.
    pub input: String,
}

/// Parses a decimal or `0x` hexadecimal value (any `u32`, unknown values included) or a known
/// identifier, with or without the `NRT_` prefix, in any letter case.
impl FromStr for NrtStatus {
    type Err = ParseStatusError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let number = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => text.parse::<u32>().ok(),
        };
        if let Some(value) = number {
            return Ok(Self::from_u32(value));
        }
        let upper = text.to_ascii_uppercase();
        let wanted = upper.strip_prefix("NRT_").unwrap_or(&upper);
        Self::ALL
            .into_iter()
            .find(|status| status.as_str().strip_prefix("NRT_") == Some(wanted))
            .ok_or_else(|| ParseStatusError {
                input: s.to_owned(),
            })
    }
}
