//! Kernel errno (the transport on the ioctl boundary) → `NRT_STATUS`.
//!
//! Medium confidence, as in the seed: the runtime translates errno per call site rather than
//! through one table, and the conventions observed are `-ENOMEM` → `NRT_RESOURCE`, `-EINVAL` →
//! `NRT_INVALID`, `-EBUSY` → `NRT_EXEC_NC_BUSY`. Everything else that is not success maps to
//! `NRT_FAILURE` (the non-specific failure). A positive ioctl return is also a failure: the
//! driver returns the count of bytes it could not copy for a bad user pointer.

use crate::NrtStatus;

/// Linux `ENOMEM`.
pub const ENOMEM: i32 = 12;
/// Linux `EBUSY`.
pub const EBUSY: i32 = 16;
/// Linux `EINVAL`.
pub const EINVAL: i32 = 22;

/// The observed errno conventions, as (positive errno, status).
pub const ERRNO_STATUS: [(i32, NrtStatus); 3] = [
    (ENOMEM, NrtStatus::RESOURCE),
    (EINVAL, NrtStatus::INVALID),
    (EBUSY, NrtStatus::EXEC_NC_BUSY),
];

/// The status for an ioctl return value: 0 is success, `-errno` follows [`ERRNO_STATUS`], and
/// any other value is `NRT_FAILURE`.
pub fn status_from_ioctl_return(ret: i32) -> NrtStatus {
    if ret == 0 {
        return NrtStatus::SUCCESS;
    }
    ERRNO_STATUS
        .iter()
        .find(|(errno, _)| ret.checked_neg() == Some(*errno))
        .map_or(NrtStatus::FAILURE, |(_, status)| *status)
}
