//! The JSON document printed every period, in neuron-monitor's shape (see
//! `Documentation/monitor.schema.json` and the output contract in
//! `Documentation/userspace.rst`).
//!
//! Every object and key of neuron-monitor's documented output is present, with the same JSON
//! types, even when a value is unknown (then an empty string or 0, and the group's `error`
//! says why). Conventions kept: object keys for indices are strings (`"0"`), NeuronCore keys
//! are instance-wide (device `d`, core `c` → `d * neuroncore_per_device_count + c`), units are
//! in key names (`_bytes`), every group carries `period` (the captured interval in seconds)
//! and `error` (empty when fine), and counts are per period. Additions sit only where
//! consumers ignore extra keys (never inside `usage_breakdown.host`, a
//! `neuroncore_memory_usage` entry, or another object consumers turn into a fixed record):
//! lifetime totals next to the deltas, an `nds_counters` group with every datastore counter, a
//! `process_info` group, and a `neuron_counters` system group with the kernel's aggregates.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::health::HealthGroup;

/// One report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MonitorDocument {
    /// Seconds since the Unix epoch when the report was made.
    pub timestamp: f64,
    /// One entry per monitored process (and per slab that stopped being one).
    pub neuron_runtime_data: Vec<RuntimeEntry>,
    /// Device-level groups.
    pub system_data: SystemData,
    /// The host.
    pub instance_info: InstanceInfo,
    /// The Neuron devices seen.
    pub neuron_hardware_info: HardwareInfo,
    /// Each device's health verdict (this monitor's extension; absent where nothing judges).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub neuron_health: Option<HealthGroup>,
}

/// One process.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RuntimeEntry {
    /// Process id (in the monitor's pid namespace).
    pub pid: i32,
    /// Where its slab is: `/dev/neuron0:slot3`, or the slab file.
    pub address: String,
    /// Device index.
    pub neuron_device_index: u32,
    /// Slot of the slab on its device (none for slab files).
    pub slot: Option<usize>,
    /// Slab generation when the monitor attached.
    pub generation: Option<u64>,
    /// The process tag (process-info-ext, else process-info, else the pid).
    pub neuron_runtime_tag: String,
    /// Why the entry has no report (slab released or reused, cannot attach); empty when fine.
    pub error: String,
    /// The groups due this period.
    pub report: RuntimeReport,
}

/// The runtime groups; a group not due this period is absent.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RuntimeReport {
    /// Utilization and FLOPs per core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub neuroncore_counters: Option<NeuroncoreCounters>,
    /// Execution outcomes, error classes and latencies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_stats: Option<ExecutionStats>,
    /// Memory and loaded models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_used: Option<MemoryUsed>,
    /// The process's share of the host's vCPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub neuron_runtime_vcpu_usage: Option<RuntimeVcpuUsage>,
    /// Every non-zero datastore counter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nds_counters: Option<NdsCounters>,
    /// Process records and versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_info: Option<ProcessInfoGroup>,
}

/// `neuroncore_counters`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NeuroncoreCounters {
    /// Captured interval, seconds.
    pub period: f64,
    /// Empty when fine.
    pub error: String,
    /// Cores with any non-zero counter, by instance-wide index.
    pub neuroncores_in_use: BTreeMap<String, CoreUsage>,
}

/// One core's activity.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CoreUsage {
    /// Busy time over the period, percent: the period's `NDS_NC_COUNTER_TIME_IN_USE`, read in
    /// the module's unit (its `time_in_use_unit_ps` parameter: picoseconds by default, as the
    /// original driver reads the counter) or the one the monitor was given.
    pub neuroncore_utilization: f64,
    /// Floating-point operations per second (two per MAC).
    pub flops: f64,
    /// Inferences this period.
    pub inferences: u64,
    /// Inferences since the process started.
    pub inferences_total: u64,
}

/// `execution_stats`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ExecutionStats {
    /// Captured interval, seconds.
    pub period: f64,
    /// Empty when fine.
    pub error: String,
    /// Error classes this period.
    pub error_summary: ErrorSummary,
    /// Outcomes this period.
    pub execution_summary: ExecutionSummary,
    /// Latency percentiles of executions sampled this period.
    pub latency_stats: LatencyStats,
    /// Since the process started.
    pub lifetime: ExecutionTotals,
}

/// Error classes (NC counters 7–12), summed over cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErrorSummary {
    /// `ERR_GENERIC`.
    pub generic: u64,
    /// `ERR_NUMERICAL`.
    pub numerical: u64,
    /// `ERR_TRANSIENT`.
    pub transient: u64,
    /// `ERR_MODEL`.
    pub model: u64,
    /// `ERR_RT`.
    pub runtime: u64,
    /// `ERR_HW`.
    pub hardware: u64,
}

/// Outcomes (NC counters 1–6), summed over cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExecutionSummary {
    /// `INFER_COMPLETED`.
    pub completed: u64,
    /// `INFER_COMPLETED_WITH_ERR`.
    pub completed_with_err: u64,
    /// `INFER_COMPLETED_WITH_NUM_ERR`.
    pub completed_with_num_err: u64,
    /// `INFER_TIMED_OUT`.
    pub timed_out: u64,
    /// `INFER_INCORRECT_INPUT`.
    pub incorrect_input: u64,
    /// `INFER_FAILED_TO_QUEUE`.
    pub failed_to_queue: u64,
}

/// Lifetime counterparts of the per-period summaries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExecutionTotals {
    /// Error classes.
    pub error_summary: ErrorSummary,
    /// Outcomes.
    pub execution_summary: ExecutionSummary,
}

/// Latency percentiles; `null` when no execution was sampled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyStats {
    /// End-to-end latency.
    pub total_latency: Option<Percentiles>,
    /// Device latency.
    pub device_latency: Option<Percentiles>,
}

/// Percentiles in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Minimum.
    pub p0: f64,
    /// 1st percentile.
    pub p1: f64,
    /// 25th percentile.
    pub p25: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub p100: f64,
}

/// `memory_used`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemoryUsed {
    /// Captured interval, seconds.
    pub period: f64,
    /// Empty when fine; names torn model records.
    pub error: String,
    /// Current usage.
    pub neuron_runtime_used_bytes: RuntimeUsedBytes,
    /// Models, one per model id.
    pub loaded_models: Vec<LoadedModel>,
}

/// Current memory usage of the process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RuntimeUsedBytes {
    /// Host bytes (ND counters 6–10).
    pub host: u64,
    /// Device bytes over all cores (NC counters 22–26).
    pub neuron_device: u64,
    /// Breakdown.
    pub usage_breakdown: UsageBreakdown,
}

/// Where the memory goes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UsageBreakdown {
    /// Host memory by kind.
    pub host: HostBreakdown,
    /// Device memory by instance-wide core index.
    pub neuroncore_memory_usage: BTreeMap<String, CoreMemory>,
}

/// Host memory by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostBreakdown {
    /// Code and miscellaneous host memory.
    pub application_memory: u64,
    /// Constants.
    pub constants: u64,
    /// Scratchpad (DMA) buffers.
    pub dma_buffers: u64,
    /// Tensors.
    pub tensors: u64,
}

/// One core's device memory by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CoreMemory {
    /// Constants.
    pub constants: u64,
    /// Model code.
    pub model_code: u64,
    /// Shared scratchpad.
    pub model_shared_scratchpad: u64,
    /// Runtime (miscellaneous) memory.
    pub runtime_memory: u64,
    /// Tensors.
    pub tensors: u64,
}

/// A loaded model.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LoadedModel {
    /// Model name.
    pub name: String,
    /// UUID, 32 lowercase hex digits (as neuron-monitor prints it).
    pub uuid: String,
    /// Model id.
    pub model_id: u32,
    /// Whether a core it is on ran inferences this period.
    pub is_running: bool,
    /// Subgraphs (model nodes) by `sg_NN`.
    pub subgraphs: BTreeMap<String, Subgraph>,
}

/// One model node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Subgraph {
    /// Memory of the node.
    pub memory_used_bytes: SubgraphMemory,
    /// Core it runs on, within its device (paired with `neuron_device_index`).
    pub neuroncore_index: u32,
    /// Device it runs on.
    pub neuron_device_index: u32,
}

/// A model node's memory, from its record's usage grid.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SubgraphMemory {
    /// Host bytes.
    pub host: u64,
    /// Device bytes.
    pub neuron_device: u64,
    /// By location and kind.
    pub usage_breakdown: SubgraphBreakdown,
}

/// A model node's memory by location, in neuron-monitor's categories.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SubgraphBreakdown {
    /// Host memory (grid row 0).
    pub host: HostBreakdown,
    /// Device memory (grid row 1).
    pub neuron_device: SubgraphDeviceMemory,
}

/// A model node's device memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SubgraphDeviceMemory {
    /// Constants.
    pub constants: u64,
    /// Code.
    pub model_code: u64,
    /// Everything else, scratchpad included (neuron-monitor has no scratchpad key here).
    pub runtime_memory: u64,
    /// Tensors.
    pub tensors: u64,
}

/// `nds_counters`: raw datastore counters by C name, non-zero ones only.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NdsCounters {
    /// Captured interval, seconds.
    pub period: f64,
    /// Empty when fine.
    pub error: String,
    /// ND counters.
    pub neuron_device: BTreeMap<String, CounterValue>,
    /// Per-core counters by core.
    pub neuroncores: BTreeMap<String, BTreeMap<String, CounterValue>>,
}

/// A counter's value now and its change over the period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CounterValue {
    /// Current value (for the process: since it started).
    pub total: u64,
    /// Change over the period (negative for gauges that went down, or a reset).
    pub delta: i64,
}

impl CounterValue {
    /// `now` with its change since `before`.
    #[must_use]
    pub fn new(now: u64, before: u64) -> Self {
        let delta = i128::from(now) - i128::from(before);
        Self {
            total: now,
            delta: i64::try_from(delta).unwrap_or(if delta < 0 { i64::MIN } else { i64::MAX }),
        }
    }
}

/// `process_info`: what the process published about itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessInfoGroup {
    /// Captured interval, seconds.
    pub period: f64,
    /// Empty when fine; says which record is missing or torn.
    pub error: String,
    /// Tag of the process-info record.
    pub tag: String,
    /// Tag of the process-info-ext record.
    pub ext_tag: String,
    /// Framework type.
    pub framework_type: i32,
    /// `major.minor.build` of the runtime.
    pub runtime_version: String,
    /// `major.minor.build` of the framework.
    pub framework_version: String,
    /// `major.minor.build` of the framework abstraction layer.
    pub fal_version: String,
}

/// `neuron_runtime_vcpu_usage`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RuntimeVcpuUsage {
    /// Captured interval, seconds.
    pub period: f64,
    /// Empty when fine; says why `/proc/<pid>/stat` could not be read.
    pub error: String,
    /// Percent of all online vCPUs over the period.
    pub vcpu_usage: ProcessCpuShare,
}

/// A process's CPU time over a period, percent of all online vCPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ProcessCpuShare {
    /// User mode.
    pub user: f64,
    /// Kernel mode.
    pub system: f64,
}

/// The system groups; a group not due this period is absent.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SystemData {
    /// ECC events per device, from the Neuron driver's sysfs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub neuron_hw_counters: Option<HwCounters>,
    /// Host vCPU usage, from `/proc/stat`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vcpu_usage: Option<VcpuUsage>,
    /// Host memory, from `/proc/meminfo`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_info: Option<MemoryInfo>,
    /// The kernel's aggregated counters (this monitor's extension).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub neuron_counters: Option<SystemCounters>,
}

/// `neuron_hw_counters`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HwCounters {
    /// Captured interval, seconds.
    pub period: f64,
    /// Empty when fine; says which counters the driver does not publish.
    pub error: String,
    /// Events per device over the period.
    pub neuron_devices: Vec<DeviceEcc>,
    /// The driver's totals (this monitor's extension, for Prometheus counters).
    pub lifetime: Vec<DeviceEcc>,
}

/// One device's ECC event counts. Consumers turn every key but the index into an event type,
/// so it holds exactly neuron-monitor's keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceEcc {
    /// Device index.
    pub neuron_device_index: u32,
    /// Corrected DRAM ECC events.
    pub mem_ecc_corrected: u64,
    /// Uncorrected DRAM ECC events.
    pub mem_ecc_uncorrected: u64,
    /// Uncorrected SRAM ECC events.
    pub sram_ecc_uncorrected: u64,
    /// Corrected SRAM ECC events.
    pub sram_ecc_corrected: u64,
}

/// `vcpu_usage`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VcpuUsage {
    /// Captured interval, seconds.
    pub period: f64,
    /// Empty when fine.
    pub error: String,
    /// Over all vCPUs.
    pub average_usage: CpuShares,
    /// Per vCPU, by its number.
    pub usage_data: BTreeMap<String, CpuShares>,
    /// Context switches during the period.
    pub context_switch_count: u64,
}

/// Where vCPU time went over a period, percent (two decimals).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuShares {
    /// User mode.
    pub user: f64,
    /// Niced user mode.
    pub nice: f64,
    /// Kernel mode.
    pub system: f64,
    /// Idle.
    pub idle: f64,
    /// Waiting for I/O.
    pub io_wait: f64,
    /// Hardware interrupts.
    pub irq: f64,
    /// Software interrupts.
    pub soft_irq: f64,
}

/// `memory_info`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemoryInfo {
    /// Captured interval, seconds.
    pub period: f64,
    /// Empty when fine.
    pub error: String,
    /// `MemTotal`.
    pub memory_total_bytes: u64,
    /// `MemTotal - MemAvailable`.
    pub memory_used_bytes: u64,
    /// `SwapTotal`.
    pub swap_total_bytes: u64,
    /// `SwapTotal - SwapFree`.
    pub swap_used_bytes: u64,
}

/// `neuron_counters`: sysfs totals of every core of every device.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SystemCounters {
    /// Captured interval, seconds.
    pub period: f64,
    /// Empty when fine.
    pub error: String,
    /// One entry per device.
    pub neuron_devices: Vec<DeviceCounters>,
}

/// One device's aggregates.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DeviceCounters {
    /// Device index.
    pub neuron_device_index: u32,
    /// Slabs currently owned by a process.
    pub slots_owned: usize,
    /// Per core, by instance-wide index: the `status` and `other_info` nodes.
    pub neuroncores: BTreeMap<String, CoreCounters>,
}

/// One core's sysfs nodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CoreCounters {
    /// `stats/status/*/total`.
    pub status: BTreeMap<String, CounterValue>,
    /// `stats/other_info/*/total`.
    pub other_info: BTreeMap<String, CounterValue>,
}

/// The EC2 instance, from its instance metadata; exactly neuron-monitor's keys, every one
/// present (empty when unknown).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InstanceInfo {
    /// The `Name` tag (needs instance tags in the metadata).
    pub instance_name: String,
    /// `i-...`.
    pub instance_id: String,
    /// E.g. `trn2.48xlarge`.
    pub instance_type: String,
    /// E.g. `us-west-2b`.
    pub instance_availability_zone: String,
    /// E.g. `usw2-az2`.
    pub instance_availability_zone_id: String,
    /// E.g. `us-west-2`.
    pub instance_region: String,
    /// `ami-...`.
    pub ami_id: String,
    /// `subnet-...` of the primary network interface.
    pub subnet_id: String,
    /// Empty when fine; why the required fields are missing otherwise.
    pub error: String,
}

/// The Neuron devices; exactly neuron-monitor's keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HardwareInfo {
    /// E.g. `trainium2`; empty when the driver does not say.
    pub neuron_device_type: String,
    /// E.g. `v4`; empty when the driver does not say.
    pub neuron_device_version: String,
    /// E.g. `v3d`; empty when the driver does not say.
    pub neuroncore_version: String,
    /// Devices seen.
    pub neuron_device_count: usize,
    /// Memory of each device, bytes; 0 when unknown.
    pub neuron_device_memory_size: u64,
    /// NeuronCores per device (of the first device).
    pub neuroncore_per_device_count: usize,
    /// Physical cores per logical NeuronCore; 0 when unknown.
    pub logical_neuroncore_config: u32,
    /// Empty when fine; says which values are unknown and why.
    pub error: String,
}
