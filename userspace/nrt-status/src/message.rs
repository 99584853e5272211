//! Human-facing text for a status.
//!
//! The runtime itself only returns the bare identifier ([`NrtStatus::as_str`]); the one-line
//! messages here follow the comments of the public `nrt_status.h`, and the formatted user
//! message follows the `[Category]: [NRT_*] status_code=N …` layout of the framework layer. The
//! category labels are this crate's own (one per [`Band`](crate::Band)): the framework's exact
//! category strings are not in our sources.

use std::fmt;

use crate::NrtStatus;

/// Where the runtime's troubleshooting guide anchors its status-code section.
pub const TROUBLESHOOT_ANCHOR: &str = "nrt-troubleshoot.html#nrt-troubleshooting";

impl NrtStatus {
    /// The one-line human description, `"Unknown status"` for values that are not known codes.
    pub const fn message(self) -> &'static str {
        match self {
            Self::SUCCESS => "Success",
            Self::FAILURE => "Non-specific failure",
            Self::INVALID => {
                "Invalid input (e.g. invalid NEFF, bad instruction, bad DMA descriptor, or a \
                 tensor name/size that does not match the model)"
            }
            Self::INVALID_HANDLE => "Invalid handle",
            Self::RESOURCE => "Failed to allocate a resource for the requested operation",
            Self::TIMEOUT => "Operation timed out",
            Self::HW_ERROR => "Hardware failure",
            Self::QUEUE_FULL => "Not enough space in the execution input queue",
            Self::LOAD_NOT_ENOUGH_NC => "Failed to allocate enough NeuronCores to load the NEFF",
            Self::UNSUPPORTED_NEFF_VERSION => "Unsupported NEFF version",
            Self::FAIL_HOST_MEM_ALLOC => "Failed to allocate host memory",
            Self::UNINITIALIZED => "Runtime API called before nrt_init()",
            Self::CLOSED => "Runtime API called after nrt_close()",
            Self::QUEUE_EMPTY => "Accessed a queue with no data",
            Self::EXEC_UNIT_UNRECOVERABLE => {
                "Execution unit encountered a fatal error and cannot recover"
            }
            Self::EXEC_BAD_INPUT => "Invalid input was submitted for execution",
            Self::EXEC_COMPLETED_WITH_NUM_ERR => {
                "Execution completed with numerical errors (produced NaN)"
            }
            Self::EXEC_COMPLETED_WITH_ERR => {
                "Execution completed with other errors (logical, e.g. event double clear, or \
                 physical, e.g. parity error)"
            }
            Self::EXEC_NC_BUSY => "The NeuronCore is locked by another model or process",
            Self::EXEC_OOB => {
                "One or more indirect memory copies or embedding updates were out of bounds"
            }
            Self::COLL_PENDING => "Collective operation is still pending",
            Self::EXEC_HW_ERR_COLLECTIVES => {
                "Stuck in a collectives operation (missing notifications), possibly caused by a \
                 hardware error on another worker"
            }
            Self::EXEC_HW_ERR_HBM_UE => {
                "HBM encountered an unrepairable uncorrectable error and produced incorrect results"
            }
            Self::EXEC_HW_ERR_NC_UE => {
                "NeuronCore on-chip memory encountered a parity error and produced incorrect results"
            }
            Self::EXEC_HW_ERR_DMA_ABORT => "A DMA engine encountered an unrecoverable error",
            Self::EXEC_SW_NQ_OVERFLOW => "Software notification queue overflow",
            Self::EXEC_HW_ERR_REPAIRABLE_HBM_UE => {
                "HBM encountered a repairable uncorrectable error and produced incorrect results"
            }
            Self::NETWORK_PROXY_FAILURE => "EFA network proxy operation failed",
            _ => "Unknown status",
        }
    }

    /// The formatted message for display to a user, e.g.
    /// `[Runtime]: [NRT_TIMEOUT] status_code=5 Operation timed out (see nrt-troubleshoot.html#…)`.
    pub const fn user_message(self) -> UserMessage {
        UserMessage(self)
    }
}

/// A status rendered as a user message; see [`NrtStatus::user_message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserMessage(NrtStatus);

impl fmt::Display for UserMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.0;
        write!(
            f,
            "[{}]: [{}] status_code={} {} (see {})",
            status.band().category(),
            status.as_str(),
            status.as_u32(),
            status.message(),
            TROUBLESHOOT_ANCHOR,
        )
    }
}
