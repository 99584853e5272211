//! The metrics path: what the kernel posts per period, keyed by CloudWatch metric id, and the
//! record each post is read back as.
//!
//! The original driver posts these to firmware. There is no firmware here, so the module
//! appends each post to a bounded ring per device that `read()` on `/dev/neuronN` returns as
//! [`MetricPost`] records.

use super::{
    counters::{
        ExtNcCounter,
        NcCounter,
        NdCounter, //
    },
    sysfs::CounterSource,
};
use zerocopy_derive::{
    FromBytes,
    Immutable,
    IntoBytes,
    KnownLayout, //
};

/// Which of the two most used versions a version metric reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionRank {
    /// The most used version of the period.
    First,
    /// The second most used version of the period.
    Second,
}

/// What part of a version word a version metric posts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionField {
    /// `major.minor.build`.
    Version,
    /// The framework type: bits 48–63 of the word, modulo 10.
    FrameworkType,
}

/// How a metric's value is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// A NeuronCore counter summed over the device's cores; posts the period's increase.
    Counter(CounterSource),
    /// NeuronCore busy time as a percentage of the period, over the device's cores.
    Utilization,
    /// One of the two most used versions found in an ND counter during the period.
    Version(NdCounter, VersionRank, VersionField),
    /// An ND bitmap ORed over every slab of the period.
    Bitmap(NdCounter),
    /// The last value of an ND counter seen in the period; `skip_zero` leaves 0 unposted.
    Constant(NdCounter, bool),
}

/// One posted metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricDef {
    /// The CloudWatch metric id (`NMETRIC_CW_ID_*`).
    pub cw_id: u8,
    /// The id's name without the `NMETRIC_CW_ID_` prefix.
    pub name: &'static str,
    /// How its value is computed.
    pub kind: MetricKind,
}

const fn counter(cw_id: u8, name: &'static str, source: CounterSource) -> MetricDef {
    MetricDef {
        cw_id,
        name,
        kind: MetricKind::Counter(source),
    }
}

const fn version(
    cw_id: u8,
    name: &'static str,
    source: NdCounter,
    rank: VersionRank,
    field: VersionField,
) -> MetricDef {
    MetricDef {
        cw_id,
        name,
        kind: MetricKind::Version(source, rank, field),
    }
}

/// Number of metric definitions.
pub const METRIC_COUNT: usize = 40;

/// Every metric the kernel posts, derived from datastore contents. Metrics the original
/// driver computes from hardware or its own state (reset times, ECC counts, instance id,
/// driver version) have no datastore source and are not posted here.
pub const METRIC_DEFS: [MetricDef; METRIC_COUNT] = {
    use CounterSource::{
        Ext,
        Nc, //
    };
    use VersionField::{
        FrameworkType,
        Version, //
    };
    use VersionRank::{
        First,
        Second, //
    };
    [
        counter(200, "NERR_OK", Nc(NcCounter::InferCompleted)),
        counter(201, "NERR_FAIL", Nc(NcCounter::GenericFail)),
        counter(202, "NERR_INVALID", Nc(NcCounter::ErrInvalid)),
        counter(204, "NERR_RESOURCE", Nc(NcCounter::ErrResource)),
        counter(205, "NERR_TIMEOUT", Nc(NcCounter::InferTimedOut)),
        counter(206, "NERR_HW_ERROR", Nc(NcCounter::ErrHw)),
        counter(207, "NERR_QUEUE_FULL", Nc(NcCounter::InferFailedToQueue)),
        counter(208, "NERR_RESOURCE_NC", Nc(NcCounter::ErrResourceNc)),
        counter(
            209,
            "NERR_UNSUPPORTED_VERSION",
            Nc(NcCounter::ErrUnsupportedNeffVersion),
        ),
        counter(
            212,
            "NERR_INFER_BAD_INPUT",
            Nc(NcCounter::InferIncorrectInput),
        ),
        counter(
            213,
            "NERR_INFER_COMPLETED_WITH_NUM_ERR",
            Nc(NcCounter::InferCompletedWithNumErr),
        ),
        counter(
            214,
            "NERR_INFER_COMPLETED_WITH_ERR",
            Nc(NcCounter::InferCompletedWithErr),
        ),
        counter(215, "NERR_NUMERICAL_ERR", Nc(NcCounter::ErrNumerical)),
        counter(216, "NERR_MODEL_ERR", Nc(NcCounter::ErrModel)),
        counter(217, "NERR_TRANSIENT_ERR", Nc(NcCounter::ErrTransient)),
        counter(218, "NERR_RT_ERR", Nc(NcCounter::ErrRt)),
        counter(219, "NERR_GENERIC_TPB_ERR", Nc(NcCounter::ErrGeneric)),
        counter(220, "NERR_OOB", Nc(NcCounter::Oob)),
        counter(
            221,
            "NERR_HW_ERR_COLLECTIVES",
            Ext(ExtNcCounter::HwErrCollectives),
        ),
        counter(222, "NERR_HW_ERR_HBM_UE", Ext(ExtNcCounter::HwErrHbmUe)),
        counter(223, "NERR_HW_ERR_NC_UE", Ext(ExtNcCounter::HwErrNcUe)),
        counter(
            224,
            "NERR_HW_ERR_DMA_ABORT",
            Ext(ExtNcCounter::HwErrDmaAbort),
        ),
        counter(
            225,
            "NERR_SW_SEMAPHORE_ERROR",
            Ext(ExtNcCounter::ErrSwSemaphoreError),
        ),
        counter(
            226,
            "NERR_SW_EVENT_ERROR",
            Ext(ExtNcCounter::ErrSwEventError),
        ),
        counter(
            227,
            "NERR_SW_PSUM_COLLISION",
            Ext(ExtNcCounter::ErrSwPsumCollision),
        ),
        counter(
            228,
            "NERR_SW_SEQUENCER_FATAL",
            Ext(ExtNcCounter::ErrSwSequencerFatal),
        ),
        counter(
            229,
            "NERR_HW_ERR_REPAIRABLE_HBM_UE",
            Ext(ExtNcCounter::HwErrRepairableHbmUe),
        ),
        counter(
            253,
            "NERR_SW_NQ_OVERFLOW",
            Ext(ExtNcCounter::ErrSwNqOverflow),
        ),
        MetricDef {
            cw_id: 90,
            name: "NC_UTILIZATION",
            kind: MetricKind::Utilization,
        },
        version(
            180,
            "RT_VERSION_0",
            NdCounter::RuntimeVersion,
            First,
            Version,
        ),
        version(
            181,
            "RT_VERSION_1",
            NdCounter::RuntimeVersion,
            Second,
            Version,
        ),
        version(
            190,
            "FW_VERSION_0",
            NdCounter::FrameworkVersion,
            First,
            Version,
        ),
        version(
            191,
            "FW_TYPE_0",
            NdCounter::FrameworkVersion,
            First,
            FrameworkType,
        ),
        version(
            192,
            "FW_VERSION_1",
            NdCounter::FrameworkVersion,
            Second,
            Version,
        ),
        version(
            193,
            "FW_TYPE_1",
            NdCounter::FrameworkVersion,
            Second,
            FrameworkType,
        ),
        version(195, "FAL_VERSION_0", NdCounter::FalVersion, First, Version),
        version(196, "FAL_VERSION_1", NdCounter::FalVersion, Second, Version),
        MetricDef {
            cw_id: 250,
            name: "FEATURE_BITMAP",
            kind: MetricKind::Bitmap(NdCounter::FeatureBitmap),
        },
        MetricDef {
            cw_id: 252,
            name: "DEVICE_CLUSTER_ID",
            kind: MetricKind::Constant(NdCounter::DeviceClusterId, true),
        },
        MetricDef {
            cw_id: 80,
            name: "AGG_NEFF_ID",
            kind: MetricKind::Constant(NdCounter::AggNeffId, false),
        },
    ]
};

/// The definition of CloudWatch id `cw_id`, if this module posts it.
#[must_use]
pub fn metric_def(cw_id: u8) -> Option<&'static MetricDef> {
    METRIC_DEFS.iter().find(|def| def.cw_id == cw_id)
}

/// Bytes of a post's value: a decimal `u64` or a `major.minor.build` version fits.
pub const METRIC_VALUE_SIZE: usize = 24;

/// One post as `read()` on the device returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct MetricPost {
    /// Sequence number of the post on its device, from 1; a gap means the reader was too slow
    /// and the ring dropped posts.
    pub seq: u64,
    /// The posting period, from 1.
    pub period: u64,
    /// When the period's values were taken: `CLOCK_MONOTONIC` in nanoseconds, the clock of
    /// `clock_gettime(CLOCK_MONOTONIC)`, so that a reader can tell how old a post is.
    pub posted_ns: u64,
    /// The device index.
    pub device: u32,
    /// The CloudWatch metric id.
    pub cw_id: u8,
    /// Bytes used in `value`, as in the firmware record `{cw_id, len, data}`.
    pub len: u8,
    /// Zero.
    pub reserved: [u8; 2],
    /// The value as ASCII text (decimal, or `major.minor.build`), not NUL-terminated.
    pub value: [u8; METRIC_VALUE_SIZE],
}

/// Size of one [`MetricPost`].
pub const METRIC_POST_SIZE: usize = core::mem::size_of::<MetricPost>();

impl MetricPost {
    /// The value bytes, `len` of them (bounded by the field).
    #[must_use]
    pub fn value_bytes(&self) -> &[u8] {
        let len = usize::from(self.len).min(METRIC_VALUE_SIZE);
        self.value.get(..len).unwrap_or(&[])
    }
}

/// The fields of an `nmetric_version_t` word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VersionWord {
    /// Bits 40–47.
    pub major: u8,
    /// Bits 32–39.
    pub minor: u8,
    /// Bits 0–31.
    pub build: u32,
    /// Bits 48–63; for frameworks, the type (modulo 10).
    pub reserved: u16,
}

impl VersionWord {
    /// Splits a version counter value into its fields.
    #[must_use]
    pub const fn from_word(word: u64) -> Self {
        Self {
            major: (word >> 40) as u8,
            minor: (word >> 32) as u8,
            build: word as u32,
            reserved: (word >> 48) as u16,
        }
    }
}

const _: () = assert!(METRIC_POST_SIZE == 56);
const _: () = assert!(core::mem::offset_of!(MetricPost, value) == 32);
