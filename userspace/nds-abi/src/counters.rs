//! Counter indices: the ND (per-device) and NC (per-NeuronCore) enums of the kernel's shared
//! header, with their original C names and values.
//!
//! Counter words carry no hash: they are updated with atomic read-modify-write instructions and
//! read with single 8-byte loads. New counters are only ever appended into reserved slots, so the
//! values below never change meaning.

/// Declares a `#[repr(u32)]` counter enum together with its index, name and lookup helpers.
macro_rules! nds_counter_enum {
    (
        $(#[$enum_meta:meta])*
        pub enum $enum_name:ident {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident = $value:literal => $c_name:literal,
            )+
        }
    ) => {
        $(#[$enum_meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum $enum_name {
            $(
                $(#[$variant_meta])*
                $variant = $value,
            )+
        }

        impl $enum_name {
            /// Every named counter, in index order.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)+];

            /// The counter's index (its C enumerator value).
            #[must_use]
            pub const fn index(self) -> usize {
                match self {
                    $(Self::$variant => $value,)+
                }
            }

            /// The named counter at `index`; `None` for reserved or out-of-range indices.
            #[must_use]
            pub const fn from_index(index: usize) -> Option<Self> {
                match index {
                    $($value => Some(Self::$variant),)+
                    _ => None,
                }
            }

            /// The C enumerator's identifier, e.g. for logs and monitors.
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $c_name,)+
                }
            }
        }
    };
}

nds_counter_enum! {
    /// Per-device (ND) counters, `NDS_ND_COUNTER_*`.
    pub enum NdCounter {
        /// Runtime version, encoded as `nmetric_version_t`.
        RuntimeVersion = 0 => "NDS_ND_COUNTER_RUNTIME_VERSION",
        /// Framework version; bits 48..63 carry the framework type.
        FrameworkVersion = 1 => "NDS_ND_COUNTER_FRAMEWORK_VERSION",
        /// Framework abstraction layer version.
        FalVersion = 2 => "NDS_ND_COUNTER_FAL_VERSION",
        /// Feature bitmap, written with OR.
        FeatureBitmap = 3 => "NDS_ND_COUNTER_FEATURE_BITMAP",
        /// Oldest NEFF version loaded.
        MinNeffVersion = 4 => "NDS_ND_COUNTER_MIN_NEFF_VERSION",
        /// Newest NEFF version loaded.
        MaxNeffVersion = 5 => "NDS_ND_COUNTER_MAX_NEFF_VERSION",
        /// Host memory used by model code.
        MemUsageCodeHost = 6 => "NDS_ND_COUNTER_MEM_USAGE_CODE_HOST",
        /// Host memory used by tensors.
        MemUsageTensorsHost = 7 => "NDS_ND_COUNTER_MEM_USAGE_TENSORS_HOST",
        /// Host memory used by constants.
        MemUsageConstantsHost = 8 => "NDS_ND_COUNTER_MEM_USAGE_CONSTANTS_HOST",
        /// Host memory used by scratchpads.
        MemUsageScratchpadHost = 9 => "NDS_ND_COUNTER_MEM_USAGE_SCRATCHPAD_HOST",
        /// Other host memory.
        MemUsageMiscHost = 10 => "NDS_ND_COUNTER_MEM_USAGE_MISC_HOST",
        /// Dynamic sysfs metric bitmap.
        DynamicSysfsMetricBitmap = 11 => "NDS_ND_COUNTER_DYNAMIC_SYSFS_METRIC_BITMAP",
        /// Global communication identifier set by collectives.
        DeviceClusterId = 12 => "NDS_ND_COUNTER_DEVICE_CLUSTER_ID",
        /// Aggregated NEFF id (driver 2.27 and later; reserved before).
        AggNeffId = 13 => "NDS_ND_COUNTER_AGG_NEFF_ID",
    }
}

/// One past the last named ND counter (`NDS_ND_COUNTER_LAST`).
pub const NDS_ND_COUNTER_LAST: usize = NdCounter::AggNeffId.index() + 1;

/// Reserved ND slots after the named ones (`NDS_ND_COUNTER_RESERVED`).
pub const NDS_ND_COUNTER_RESERVED: usize = 17;

/// Number of ND counter words (`NDS_ND_COUNTER_COUNT`).
pub const NDS_ND_COUNTER_COUNT: usize = NDS_ND_COUNTER_LAST + NDS_ND_COUNTER_RESERVED;

nds_counter_enum! {
    /// Per-NeuronCore counters 0..=30, `NDS_NC_COUNTER_*`.
    pub enum NcCounter {
        /// Time the core was in use.
        TimeInUse = 0 => "NDS_NC_COUNTER_TIME_IN_USE",
        /// Inferences completed successfully.
        InferCompleted = 1 => "NDS_NC_COUNTER_INFER_COMPLETED",
        /// Inferences completed with an error.
        InferCompletedWithErr = 2 => "NDS_NC_COUNTER_INFER_COMPLETED_WITH_ERR",
        /// Inferences completed with a numerical error.
        InferCompletedWithNumErr = 3 => "NDS_NC_COUNTER_INFER_COMPLETED_WITH_NUM_ERR",
        /// Inferences that timed out.
        InferTimedOut = 4 => "NDS_NC_COUNTER_INFER_TIMED_OUT",
        /// Inferences rejected for bad input.
        InferIncorrectInput = 5 => "NDS_NC_COUNTER_INFER_INCORRECT_INPUT",
        /// Inferences that could not be queued.
        InferFailedToQueue = 6 => "NDS_NC_COUNTER_INFER_FAILED_TO_QUEUE",
        /// Generic errors (7..=12 are ordered by error code).
        ErrGeneric = 7 => "NDS_NC_COUNTER_ERR_GENERIC",
        /// Numerical errors.
        ErrNumerical = 8 => "NDS_NC_COUNTER_ERR_NUMERICAL",
        /// Model errors.
        ErrModel = 9 => "NDS_NC_COUNTER_ERR_MODEL",
        /// Transient errors.
        ErrTransient = 10 => "NDS_NC_COUNTER_ERR_TRANSIENT",
        /// Hardware errors.
        ErrHw = 11 => "NDS_NC_COUNTER_ERR_HW",
        /// Runtime errors.
        ErrRt = 12 => "NDS_NC_COUNTER_ERR_RT",
        /// Device latency (set, not added).
        LatencyDevice = 13 => "NDS_NC_COUNTER_LATENCY_DEVICE",
        /// Total latency (set, not added).
        LatencyTotal = 14 => "NDS_NC_COUNTER_LATENCY_TOTAL",
        /// NeuronCore time (set, not added).
        NcTime = 15 => "NDS_NC_COUNTER_NC_TIME",
        /// Generic failures.
        GenericFail = 16 => "NDS_NC_COUNTER_GENERIC_FAIL",
        /// Resource errors.
        ErrResource = 17 => "NDS_NC_COUNTER_ERR_RESOURCE",
        /// Not enough NeuronCores.
        ErrResourceNc = 18 => "NDS_NC_COUNTER_ERR_RESOURCE_NC",
        /// Invalid requests.
        ErrInvalid = 19 => "NDS_NC_COUNTER_ERR_INVALID",
        /// Unsupported NEFF version.
        ErrUnsupportedNeffVersion = 20 => "NDS_NC_COUNTER_ERR_UNSUPPORTED_NEFF_VERSION",
        /// Collective-communication time (set, not added).
        CcTime = 21 => "NDS_NC_COUNTER_CC_TIME",
        /// Device memory used by model code.
        MemUsageCodeDevice = 22 => "NDS_NC_COUNTER_MEM_USAGE_CODE_DEVICE",
        /// Device memory used by tensors.
        MemUsageTensorsDevice = 23 => "NDS_NC_COUNTER_MEM_USAGE_TENSORS_DEVICE",
        /// Device memory used by constants.
        MemUsageConstantsDevice = 24 => "NDS_NC_COUNTER_MEM_USAGE_CONSTANTS_DEVICE",
        /// Device memory used by scratchpads.
        MemUsageScratchpadDevice = 25 => "NDS_NC_COUNTER_MEM_USAGE_SCRATCHPAD_DEVICE",
        /// Other device memory.
        MemUsageMiscDevice = 26 => "NDS_NC_COUNTER_MEM_USAGE_MISC_DEVICE",
        /// Models loaded.
        ModelLoadCount = 27 => "NDS_NC_COUNTER_MODEL_LOAD_COUNT",
        /// Inferences run.
        InferenceCount = 28 => "NDS_NC_COUNTER_INFERENCE_COUNT",
        /// Multiply-accumulate operations (one MAC is two FLOPs).
        MacCount = 29 => "NDS_NC_COUNTER_MAC_COUNT",
        /// Out-of-bounds errors.
        Oob = 30 => "NDS_NC_COUNTER_OOB",
    }
}

/// One past the last named NC counter (`NDS_NC_COUNTER_LAST`).
pub const NDS_NC_COUNTER_LAST: usize = NcCounter::Oob.index() + 1;

/// Reserved NC slots (`NDS_NC_COUNTER_RESERVED`).
pub const NDS_NC_COUNTER_RESERVED: usize = 0;

/// Number of original NC counters per core (`NDS_NC_COUNTER_COUNT`).
pub const NDS_NC_COUNTER_COUNT: usize = NDS_NC_COUNTER_LAST + NDS_NC_COUNTER_RESERVED;

nds_counter_enum! {
    /// Extended per-NeuronCore counters, `NDS_EXT_NC_COUNTER_*`; indices continue after
    /// [`NDS_NC_COUNTER_COUNT`].
    pub enum ExtNcCounter {
        /// Collectives hardware errors.
        HwErrCollectives = 31 => "NDS_EXT_NC_COUNTER_HW_ERR_COLLECTIVES",
        /// Unrepairable HBM uncorrectable errors.
        HwErrHbmUe = 32 => "NDS_EXT_NC_COUNTER_HW_ERR_HBM_UE",
        /// NeuronCore uncorrectable errors.
        HwErrNcUe = 33 => "NDS_EXT_NC_COUNTER_HW_ERR_NC_UE",
        /// DMA aborts.
        HwErrDmaAbort = 34 => "NDS_EXT_NC_COUNTER_HW_ERR_DMA_ABORT",
        /// Software notification queue overflows.
        ErrSwNqOverflow = 35 => "NDS_EXT_NC_COUNTER_ERR_SW_NQ_OVERFLOW",
        /// Software semaphore errors.
        ErrSwSemaphoreError = 36 => "NDS_EXT_NC_COUNTER_ERR_SW_SEMAPHORE_ERROR",
        /// Software event errors.
        ErrSwEventError = 37 => "NDS_EXT_NC_COUNTER_ERR_SW_EVENT_ERROR",
        /// PSUM collisions.
        ErrSwPsumCollision = 38 => "NDS_EXT_NC_COUNTER_ERR_SW_PSUM_COLLISION",
        /// Fatal sequencer errors.
        ErrSwSequencerFatal = 39 => "NDS_EXT_NC_COUNTER_ERR_SW_SEQUENCER_FATAL",
        /// Repairable HBM uncorrectable errors.
        HwErrRepairableHbmUe = 40 => "NDS_EXT_NC_COUNTER_HW_ERR_REPAIRABLE_HBM_UE",
    }
}

/// One past the last named EXT counter (`NDS_EXT_NC_COUNTER_LAST`).
pub const NDS_EXT_NC_COUNTER_LAST: usize = ExtNcCounter::HwErrRepairableHbmUe.index() + 1;

/// Reserved EXT slots (`NDS_EXT_NC_COUNTER_ADDED_RESERVED`).
pub const NDS_EXT_NC_COUNTER_ADDED_RESERVED: usize = 54;

/// Number of extended counters per core (`NDS_EXT_NC_COUNTER_COUNT`).
pub const NDS_EXT_NC_COUNTER_COUNT: usize =
    NDS_EXT_NC_COUNTER_LAST - NDS_NC_COUNTER_COUNT + NDS_EXT_NC_COUNTER_ADDED_RESERVED;

/// Counters per NeuronCore, original plus extended (`NDS_TOTAL_NC_COUNTER_COUNT`).
pub const NDS_TOTAL_NC_COUNTER_COUNT: usize = NDS_NC_COUNTER_COUNT + NDS_EXT_NC_COUNTER_COUNT;

const _: () = assert!(NDS_ND_COUNTER_COUNT == 31);
const _: () = assert!(NDS_NC_COUNTER_COUNT == 31);
const _: () = assert!(NDS_EXT_NC_COUNTER_LAST == 41);
const _: () = assert!(NDS_EXT_NC_COUNTER_COUNT == 64);
const _: () = assert!(NDS_TOTAL_NC_COUNTER_COUNT == 95);
// The first EXT counter continues the NC numbering.
const _: () = assert!(ExtNcCounter::HwErrCollectives.index() == NDS_NC_COUNTER_COUNT);
