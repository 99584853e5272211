//! The FW-IO mailbox status byte (L4) and how the driver's request path folds it into a return
//! value and an error tally.
//!
//! Medium confidence, as in the seed. The rule modelled here (from the driver's
//! `fw_io_execute_request`): `FW_IO_SUCCESS` (0) returns 0; every other byte (`FW_IO_FAIL` = 1,
//! `FW_IO_UNKNOWN_COMMAND` = 2, and any unknown value) returns −1 **and** bumps the context's
//! error count (the tally later posted as the FW-IO error metric). `FW_IO_UNKNOWN_COMMAND` ends
//! the request at once; the other failures are eligible for another attempt.

use std::sync::atomic::{AtomicU64, Ordering};

/// The mailbox response's `error_code` byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FwIoStatus {
    /// `FW_IO_SUCCESS` (0).
    Success,
    /// `FW_IO_FAIL` (1).
    Fail,
    /// `FW_IO_UNKNOWN_COMMAND` (2): the firmware does not support the command.
    UnknownCommand,
    /// Any other byte.
    Unknown(u8),
}

impl FwIoStatus {
    /// Classifies a raw byte; unknown values are kept.
    pub const fn from_u8(code: u8) -> Self {
        match code {
            0 => Self::Success,
            1 => Self::Fail,
            2 => Self::UnknownCommand,
            other => Self::Unknown(other),
        }
    }

    /// The raw byte.
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::Fail => 1,
            Self::UnknownCommand => 2,
            Self::Unknown(other) => other,
        }
    }

    /// What the request path does with this byte.
    pub const fn outcome(self) -> FwIoOutcome {
        match self {
            Self::Success => FwIoOutcome {
                ret: 0,
                counts_as_error: false,
                retryable: false,
            },
            Self::UnknownCommand => FwIoOutcome {
                ret: -1,
                counts_as_error: true,
                retryable: false,
            },
            Self::Fail | Self::Unknown(_) => FwIoOutcome {
                ret: -1,
                counts_as_error: true,
                retryable: true,
            },
        }
    }
}

impl From<u8> for FwIoStatus {
    fn from(code: u8) -> Self {
        Self::from_u8(code)
    }
}

impl From<FwIoStatus> for u8 {
    fn from(status: FwIoStatus) -> Self {
        status.as_u8()
    }
}

/// The effect of one mailbox response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FwIoOutcome {
    /// The request's return value: 0 or −1.
    pub ret: i32,
    /// Whether the context's error count is bumped.
    pub counts_as_error: bool,
    /// Whether the request may be attempted again (all but success and unknown-command).
    pub retryable: bool,
}

/// The per-device FW-IO error tally (`fw_io_err_count`). Thread-safe.
#[derive(Debug, Default)]
pub struct FwIoErrorCount(AtomicU64);

impl FwIoErrorCount {
    /// A zeroed tally.
    pub const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Folds one response byte: bumps the tally when it is an error and returns the request's
    /// return value (0 or −1).
    pub fn record(&self, code: u8) -> i32 {
        let outcome = FwIoStatus::from_u8(code).outcome();
        if outcome.counts_as_error {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        outcome.ret
    }

    /// The errors recorded so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
