//! The severity classifier (`nrt_get_status_priority`) and the "most severe wins" rule used
//! when several statuses race (e.g. one per NeuronCore of a multi-core execution).
//!
//! The rank is deliberately **not** monotonic in the numeric value: `NRT_EXEC_COMPLETED_WITH_ERR`
//! (1004) outranks `NRT_NETWORK_PROXY_FAILURE` (1206). It reproduces the value gates decoded from
//! the runtime binary:
//!
//! | rank | statuses |
//! |---|---|
//! | 0 | `NRT_SUCCESS` |
//! | 3 | 1004, 1200, 1201, 1202, 1203, 1205 |
//! | 2 | 5 (`TIMEOUT`), 6 (`HW_ERROR`), 1204 (`NQ_OVERFLOW`), 1206 (`NETWORK_PROXY_FAILURE`) |
//! | 1 | everything else, unknown values and `NRT_COLL_PENDING` included |

use std::fmt;

use crate::NrtStatus;

/// A severity rank, 0..=3; a higher rank wins when statuses race.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// 0: no error (`NRT_SUCCESS` only).
    None = 0,
    /// 1: any other status, including unknown values.
    Generic = 1,
    /// 2: timeouts, hardware failure, NQ overflow, network-proxy failure.
    Elevated = 2,
    /// 3: terminal execution errors (1004, and the 1200..=1203 / 1205 silicon faults).
    Terminal = 3,
}

impl Priority {
    /// The numeric rank the runtime returns (0..=3).
    pub const fn rank(self) -> u8 {
        self as u8
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.rank())
    }
}

impl NrtStatus {
    /// The severity rank `nrt_get_status_priority` assigns to this value.
    pub const fn priority(self) -> Priority {
        match self {
            Self::SUCCESS => Priority::None,
            Self::EXEC_COMPLETED_WITH_ERR
            | Self::EXEC_HW_ERR_COLLECTIVES
            | Self::EXEC_HW_ERR_HBM_UE
            | Self::EXEC_HW_ERR_NC_UE
            | Self::EXEC_HW_ERR_DMA_ABORT
            | Self::EXEC_HW_ERR_REPAIRABLE_HBM_UE => Priority::Terminal,
            Self::TIMEOUT
            | Self::HW_ERROR
            | Self::EXEC_SW_NQ_OVERFLOW
            | Self::NETWORK_PROXY_FAILURE => Priority::Elevated,
            _ => Priority::Generic,
        }
    }
}

/// The status to surface when several race: the one with the highest
/// [`priority`](NrtStatus::priority). Among equally severe statuses the **first** one wins.
/// Returns `None` for an empty input.
pub fn most_severe<I>(statuses: I) -> Option<NrtStatus>
where
    I: IntoIterator<Item = NrtStatus>,
{
    statuses.into_iter().reduce(|best, next| {
        if next.priority() > best.priority() {
            next
        } else {
            best
        }
    })
}
