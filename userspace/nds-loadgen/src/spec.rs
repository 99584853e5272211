//! What one producer process is asked to do; the orchestrator passes it as JSON.

use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// When a producer's stream ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamLength {
    /// After this many executions.
    Count(u64),
    /// After this long.
    Duration(Duration),
}

/// Where a producer's slab comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlabSource {
    /// A device node, e.g. `/dev/neuron0`.
    Device(PathBuf),
    /// A directory of slab files: the producer writes `neuron<device>-<pid>.slab` there.
    Directory(PathBuf),
}

/// One producer's assignment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerSpec {
    /// The process tag (process-info-ext keeps it whole; process-info keeps 31 bytes).
    pub tag: String,
    /// Device index.
    pub device: u32,
    /// Where the slab comes from.
    pub source: SlabSource,
    /// NeuronCores written, `0..cores`.
    pub cores: usize,
    /// Stream length.
    pub length: StreamLength,
    /// Executions per second; 0 runs flat out.
    pub rate: u64,
    /// The status mix, in `StatusMix` syntax.
    pub mix: String,
    /// Picoseconds per unit of the `NDS_NC_COUNTER_TIME_IN_USE` it writes (the module's
    /// `time_in_use_unit_ps`).
    pub time_in_use_unit_ps: NonZeroU64,
    /// Seed of the producer's random stream.
    pub seed: u64,
    /// Crash (report, then SIGKILL itself) at this point of the stream instead of finishing.
    pub crash: bool,
    /// After the stream, keep the slab until standard input closes.
    pub hold: bool,
    /// Release the slab explicitly (RELEASE ioctl) rather than leaving it to process exit.
    pub explicit_release: bool,
    /// Where to write the report.
    pub report: PathBuf,
}
