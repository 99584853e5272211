//! The subsystem bands the `NRT_STATUS` space is partitioned into.
//!
//! Each band is a contiguous range that one subsystem returns into. The reserved holes 8 and 12
//! lie inside the general band; every other value outside the ranges below is unbanded.

use std::fmt;

use crate::NrtStatus;

/// The subsystem band a status value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Band {
    /// 0..=15: the general / lifecycle core every `nrt_*` API can return.
    General,
    /// 101: the execution-unit band (`NRT_EXEC_UNIT_UNRECOVERABLE`).
    ExecUnit,
    /// 1002..=1006: per-inference execution results.
    PerInference,
    /// 1100: the collectives band (`NRT_COLL_PENDING`, a retry signal).
    Collectives,
    /// 1200..=1206: hardware-execution subcategories (silicon faults, NQ overflow, network
    /// proxy).
    Hardware,
    /// Any value outside every band above.
    Unbanded,
}

/// The bands as inclusive value ranges: a lookup table, scanned in order.
const BAND_RANGES: [(u32, u32, Band); 5] = [
    (
        NrtStatus::SUCCESS.as_u32(),
        NrtStatus::QUEUE_EMPTY.as_u32(),
        Band::General,
    ),
    (
        NrtStatus::EXEC_UNIT_UNRECOVERABLE.as_u32(),
        NrtStatus::EXEC_UNIT_UNRECOVERABLE.as_u32(),
        Band::ExecUnit,
    ),
    (
        NrtStatus::EXEC_BAD_INPUT.as_u32(),
        NrtStatus::EXEC_OOB.as_u32(),
        Band::PerInference,
    ),
    (
        NrtStatus::COLL_PENDING.as_u32(),
        NrtStatus::COLL_PENDING.as_u32(),
        Band::Collectives,
    ),
    (
        NrtStatus::EXEC_HW_ERR_COLLECTIVES.as_u32(),
        NrtStatus::NETWORK_PROXY_FAILURE.as_u32(),
        Band::Hardware,
    ),
];

impl Band {
    /// Every band, `Unbanded` last.
    pub const ALL: [Self; 6] = [
        Self::General,
        Self::ExecUnit,
        Self::PerInference,
        Self::Collectives,
        Self::Hardware,
        Self::Unbanded,
    ];

    /// The band of a status value.
    pub fn of(status: NrtStatus) -> Self {
        let value = status.as_u32();
        BAND_RANGES
            .iter()
            .find(|(low, high, _)| (*low..=*high).contains(&value))
            .map_or(Self::Unbanded, |(_, _, band)| *band)
    }

    /// A stable snake_case name (`"general"`, `"per_inference"`, …) for machine output.
    pub const fn name(self) -> &'static str {
        match self {
            Self::General => "general",
            Self::ExecUnit => "exec_unit",
            Self::PerInference => "per_inference",
            Self::Collectives => "collectives",
            Self::Hardware => "hardware",
            Self::Unbanded => "unbanded",
        }
    }

    /// The category label used in the formatted user message (`[Runtime]`, `[Hardware]`, …).
    pub const fn category(self) -> &'static str {
        match self {
            Self::General => "Runtime",
            Self::ExecUnit => "Execution Unit",
            Self::PerInference => "Execution",
            Self::Collectives => "Collectives",
            Self::Hardware => "Hardware",
            Self::Unbanded => "Unknown",
        }
    }
}

impl fmt::Display for Band {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl NrtStatus {
    /// The subsystem band this value falls in.
    pub fn band(self) -> Band {
        Band::of(self)
    }
}
