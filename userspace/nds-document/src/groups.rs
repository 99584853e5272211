//! Building the runtime groups from two readings of a slab (the period's start and end).
//!
//! A slab counts per core of its device; the groups key cores by their instance-wide index
//! ([`CoreIndexing`]), as neuron-monitor does.

use std::collections::BTreeMap;

use nds::{text_lossy, ModelEntry, Snapshot};
use nds_abi::counters::{ExtNcCounter, NcCounter, NdCounter};
use nds_abi::layout::NDS_TOTAL_NEURONCORE_COUNT;
use nds_abi::records::{MemUsageSlot, VersionInfo};
use nds_slabs::snapshot::SlabReading;
use nds_sysfs::TimeInUseUnit;

use crate::document::{
    CoreMemory, CoreUsage, CounterValue, ErrorSummary, ExecutionStats, ExecutionSummary,
    ExecutionTotals, HardwareInfo, HostBreakdown, LatencyStats, LoadedModel, MemoryUsed,
    NdsCounters, NeuroncoreCounters, ProcessInfoGroup, RuntimeUsedBytes, Subgraph,
    SubgraphBreakdown, SubgraphDeviceMemory, SubgraphMemory, UsageBreakdown,
};
use crate::latency::{percentiles, LatencySamples};

/// Row of a model's usage grid holding host memory.
const HOST_LOCATION: usize = 0;
/// Row of a model's usage grid holding device memory.
const DEVICE_LOCATION: usize = 1;

/// NeuronCores per device for instance-wide indexes: `neuroncore_per_device_count`, or the
/// slab's 16 core slots when no device tree says (slab files alone).
#[must_use]
pub fn cores_per_device(hardware: &HardwareInfo) -> usize {
    match hardware.neuroncore_per_device_count {
        0 => NDS_TOTAL_NEURONCORE_COUNT,
        count => count,
    }
}

/// How a device's cores map to instance-wide NeuronCore indexes: device `d`, core `c` →
/// `d * per_device + c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreIndexing {
    /// The slab's device.
    pub device: u32,
    /// NeuronCores per device (`neuroncore_per_device_count`).
    pub per_device: usize,
}

impl CoreIndexing {
    /// The instance-wide key of core `core`; `None` for a core the device does not have (a
    /// slab may count on any of its 16 core slots, but only the device's cores exist).
    #[must_use]
    pub fn key(&self, core: usize) -> Option<String> {
        (core < self.per_device).then(|| {
            let device = usize::try_from(self.device).unwrap_or(usize::MAX);
            device
                .saturating_mul(self.per_device)
                .saturating_add(core)
                .to_string()
        })
    }

    /// The instance-wide keys of `cores`, and the error naming those the device lacks (empty
    /// when there are none).
    fn keys(&self, cores: Vec<usize>) -> (Vec<(usize, String)>, String) {
        let (kept, beyond): (Vec<usize>, Vec<usize>) = cores
            .into_iter()
            .partition(|&core| self.key(core).is_some());
        let error = if beyond.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = beyond.iter().map(usize::to_string).collect();
            format!(
                "counters on core slot(s) {} ignored: device {} has {} NeuronCores",
                list.join(", "),
                self.device,
                self.per_device
            )
        };
        let kept = kept
            .into_iter()
            .filter_map(|core| Some((core, self.key(core)?)))
            .collect();
        (kept, error)
    }
}

/// A period: its end reading, its start reading and its length.
#[derive(Clone, Copy, Debug)]
pub struct Interval<'a> {
    /// Reading at the end of the period.
    pub now: &'a SlabReading,
    /// Reading at the start of the period.
    pub before: &'a SlabReading,
    /// Length in seconds.
    pub seconds: f64,
}

impl Interval<'_> {
    fn delta(&self, core: usize, counter: NcCounter) -> u64 {
        self.now
            .nc(core, counter)
            .wrapping_sub(self.before.nc(core, counter))
    }

    fn cores(&self) -> Vec<usize> {
        self.now.cores_in_use()
    }

    /// Whether core `core` ran an inference during the period.
    fn core_ran(&self, core: usize) -> bool {
        self.delta(core, NcCounter::InferenceCount) != 0
    }
}

/// The process tag: process-info-ext, else process-info, else the pid.
#[must_use]
pub fn tag_of(reading: &SlabReading, pid: i32) -> String {
    let ext = match &reading.ext {
        Snapshot::Valid(ext) => text_lossy(&ext.tag).into_owned(),
        Snapshot::Empty | Snapshot::Torn => String::new(),
    };
    if !ext.is_empty() {
        return ext;
    }
    match &reading.info {
        Snapshot::Valid(info) if !info.tag().is_empty() => text_lossy(&info.tag).into_owned(),
        _ => pid.to_string(),
    }
}

/// `neuroncore_counters`, with `NDS_NC_COUNTER_TIME_IN_USE` counted in `time_unit`; when the
/// unit is unknown (`Err` says why), utilization is withheld (0) and the group's error says so.
#[must_use]
pub fn neuroncore_counters(
    interval: &Interval<'_>,
    indexing: CoreIndexing,
    time_unit: Result<TimeInUseUnit, &str>,
) -> NeuroncoreCounters {
    let per_second = |value: f64| {
        if interval.seconds > 0.0 {
            value / interval.seconds
        } else {
            0.0
        }
    };
    let (cores, mut error) = indexing.keys(interval.cores());
    let neuroncores_in_use = cores
        .into_iter()
        .map(|(core, key)| {
            let busy = interval.delta(core, NcCounter::TimeInUse);
            let busy_seconds = time_unit.map_or(0.0, |unit| unit.seconds(busy));
            let usage = CoreUsage {
                // Seconds busy per second of period, as a percentage.
                neuroncore_utilization: (per_second(busy_seconds) * 100.0).min(100.0),
                flops: per_second(interval.delta(core, NcCounter::MacCount) as f64) * 2.0,
                inferences: interval.delta(core, NcCounter::InferenceCount),
                inferences_total: interval.now.nc(core, NcCounter::InferenceCount),
            };
            (key, usage)
        })
        .collect();
    if let Err(reason) = time_unit {
        let withheld =
            format!("utilization withheld, the unit of TIME_IN_USE is unknown: {reason}");
        error = if error.is_empty() {
            withheld
        } else {
            format!("{error}; {withheld}")
        };
    }
    NeuroncoreCounters {
        period: interval.seconds,
        error,
        neuroncores_in_use,
    }
}

/// `counter` summed over every NeuronCore of the slab, wrapping as the counters do.
fn all_cores(reading: &SlabReading, counter: NcCounter) -> u64 {
    (0..NDS_TOTAL_NEURONCORE_COUNT)
        .map(|core| reading.nc(core, counter))
        .fold(0u64, u64::wrapping_add)
}

fn error_summary(reading: &SlabReading) -> ErrorSummary {
    let sum = |counter| all_cores(reading, counter);
    ErrorSummary {
        generic: sum(NcCounter::ErrGeneric),
        numerical: sum(NcCounter::ErrNumerical),
        transient: sum(NcCounter::ErrTransient),
        model: sum(NcCounter::ErrModel),
        runtime: sum(NcCounter::ErrRt),
        hardware: sum(NcCounter::ErrHw),
    }
}

fn execution_summary(reading: &SlabReading) -> ExecutionSummary {
    let sum = |counter| all_cores(reading, counter);
    ExecutionSummary {
        completed: sum(NcCounter::InferCompleted),
        completed_with_err: sum(NcCounter::InferCompletedWithErr),
        completed_with_num_err: sum(NcCounter::InferCompletedWithNumErr),
        timed_out: sum(NcCounter::InferTimedOut),
        incorrect_input: sum(NcCounter::InferIncorrectInput),
        failed_to_queue: sum(NcCounter::InferFailedToQueue),
    }
}

/// `execution_stats`, with the latency samples of the period.
#[must_use]
pub fn execution_stats(interval: &Interval<'_>, samples: &LatencySamples) -> ExecutionStats {
    let (now_errors, before_errors) = (error_summary(interval.now), error_summary(interval.before));
    let (now_runs, before_runs) = (
        execution_summary(interval.now),
        execution_summary(interval.before),
    );
    ExecutionStats {
        period: interval.seconds,
        error: String::new(),
        error_summary: ErrorSummary {
            generic: now_errors.generic.wrapping_sub(before_errors.generic),
            numerical: now_errors.numerical.wrapping_sub(before_errors.numerical),
            transient: now_errors.transient.wrapping_sub(before_errors.transient),
            model: now_errors.model.wrapping_sub(before_errors.model),
            runtime: now_errors.runtime.wrapping_sub(before_errors.runtime),
            hardware: now_errors.hardware.wrapping_sub(before_errors.hardware),
        },
        execution_summary: ExecutionSummary {
            completed: now_runs.completed.wrapping_sub(before_runs.completed),
            completed_with_err: now_runs
                .completed_with_err
                .wrapping_sub(before_runs.completed_with_err),
            completed_with_num_err: now_runs
                .completed_with_num_err
                .wrapping_sub(before_runs.completed_with_num_err),
            timed_out: now_runs.timed_out.wrapping_sub(before_runs.timed_out),
            incorrect_input: now_runs
                .incorrect_input
                .wrapping_sub(before_runs.incorrect_input),
            failed_to_queue: now_runs
                .failed_to_queue
                .wrapping_sub(before_runs.failed_to_queue),
        },
        latency_stats: LatencyStats {
            total_latency: percentiles(&samples.total),
            device_latency: percentiles(&samples.device),
        },
        lifetime: ExecutionTotals {
            error_summary: now_errors,
            execution_summary: now_runs,
        },
    }
}

/// Lowercase hex of a 16-byte UUID, without hyphens (neuron-monitor's spelling).
fn uuid_text(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// `memory_used`.
#[must_use]
pub fn memory_used(interval: &Interval<'_>, indexing: CoreIndexing) -> MemoryUsed {
    let now = interval.now;
    let host = HostBreakdown {
        application_memory: now
            .nd(NdCounter::MemUsageCodeHost)
            .wrapping_add(now.nd(NdCounter::MemUsageMiscHost)),
        constants: now.nd(NdCounter::MemUsageConstantsHost),
        dma_buffers: now.nd(NdCounter::MemUsageScratchpadHost),
        tensors: now.nd(NdCounter::MemUsageTensorsHost),
    };
    let (cores, beyond) = indexing.keys(interval.cores());
    let neuroncore_memory_usage: BTreeMap<String, CoreMemory> = cores
        .into_iter()
        .map(|(core, key)| {
            let memory = CoreMemory {
                constants: now.nc(core, NcCounter::MemUsageConstantsDevice),
                model_code: now.nc(core, NcCounter::MemUsageCodeDevice),
                model_shared_scratchpad: now.nc(core, NcCounter::MemUsageScratchpadDevice),
                runtime_memory: now.nc(core, NcCounter::MemUsageMiscDevice),
                tensors: now.nc(core, NcCounter::MemUsageTensorsDevice),
            };
            (key, memory)
        })
        .collect();
    let neuron_device = neuroncore_memory_usage
        .values()
        .flat_map(|m| {
            [
                m.constants,
                m.model_code,
                m.model_shared_scratchpad,
                m.runtime_memory,
                m.tensors,
            ]
        })
        .fold(0u64, u64::wrapping_add);
    let mut models: BTreeMap<u32, LoadedModel> = BTreeMap::new();
    let mut torn = Vec::new();
    for entry in &now.models {
        let model = match entry {
            ModelEntry::Valid(model) => model,
            ModelEntry::Torn(slot) => {
                torn.push(slot.index().to_string());
                continue;
            }
        };
        let info = &model.node_info;
        let cell = |location: usize, slot: MemUsageSlot| {
            model
                .mem_usage
                .get(location, slot.index())
                .map_or(0, |cell| cell.total_size)
        };
        let host = |slot| cell(HOST_LOCATION, slot);
        let device = |slot| cell(DEVICE_LOCATION, slot);
        // The grid's columns in neuron-monitor's categories: host code and misc are
        // application memory, host scratchpad the DMA buffers; device scratchpad and misc
        // are runtime memory.
        let breakdown = SubgraphBreakdown {
            host: HostBreakdown {
                application_memory: host(MemUsageSlot::Code).wrapping_add(host(MemUsageSlot::Misc)),
                constants: host(MemUsageSlot::Constants),
                dma_buffers: host(MemUsageSlot::Scratchpad),
                tensors: host(MemUsageSlot::Tensors),
            },
            neuron_device: SubgraphDeviceMemory {
                constants: device(MemUsageSlot::Constants),
                model_code: device(MemUsageSlot::Code),
                runtime_memory: device(MemUsageSlot::Scratchpad)
                    .wrapping_add(device(MemUsageSlot::Misc)),
                tensors: device(MemUsageSlot::Tensors),
            },
        };
        let sum = |location: usize| {
            (0..nds_abi::records::NDS_DMA_MEM_USAGE_SLOT_COUNT)
                .filter_map(|slot| model.mem_usage.get(location, slot))
                .map(|cell| cell.total_size)
                .fold(0u64, u64::wrapping_add)
        };
        let core = usize::from(info.nc_index);
        let entry = models.entry(info.model_id).or_insert_with(|| LoadedModel {
            name: text_lossy(&info.name).into_owned(),
            uuid: uuid_text(&info.uuid),
            model_id: info.model_id,
            ..LoadedModel::default()
        });
        entry.is_running |= interval.core_ran(core);
        entry.subgraphs.insert(
            format!("sg_{:02}", info.sg_index),
            Subgraph {
                memory_used_bytes: SubgraphMemory {
                    host: sum(HOST_LOCATION),
                    neuron_device: sum(DEVICE_LOCATION),
                    usage_breakdown: breakdown,
                },
                neuroncore_index: u32::from(info.nc_index),
                neuron_device_index: indexing.device,
            },
        );
    }
    let mut problems = Vec::new();
    if !torn.is_empty() {
        problems.push(format!(
            "model slots {} were torn on both reads",
            torn.join(", ")
        ));
    }
    if !beyond.is_empty() {
        problems.push(beyond);
    }
    MemoryUsed {
        period: interval.seconds,
        error: problems.join("; "),
        neuron_runtime_used_bytes: RuntimeUsedBytes {
            host: host
                .application_memory
                .wrapping_add(host.constants)
                .wrapping_add(host.dma_buffers)
                .wrapping_add(host.tensors),
            neuron_device,
            usage_breakdown: UsageBreakdown {
                host,
                neuroncore_memory_usage,
            },
        },
        loaded_models: models.into_values().collect(),
    }
}

/// `nds_counters`: every named counter that is non-zero now.
#[must_use]
pub fn nds_counters(interval: &Interval<'_>, indexing: CoreIndexing) -> NdsCounters {
    let neuron_device = NdCounter::ALL
        .iter()
        .filter(|&&counter| interval.now.nd(counter) != 0)
        .map(|&counter| {
            let value = CounterValue::new(interval.now.nd(counter), interval.before.nd(counter));
            (counter.name().to_owned(), value)
        })
        .collect();
    let named = NcCounter::ALL
        .iter()
        .map(|c| (c.index(), c.name()))
        .chain(ExtNcCounter::ALL.iter().map(|c| (c.index(), c.name())));
    let named: Vec<(usize, &str)> = named.collect();
    let (cores, error) = indexing.keys(interval.cores());
    let neuroncores = cores
        .into_iter()
        .map(|(core, key)| {
            let counters = named
                .iter()
                .filter(|(index, _)| interval.now.nc_index(core, *index) != 0)
                .map(|&(index, name)| {
                    let value = CounterValue::new(
                        interval.now.nc_index(core, index),
                        interval.before.nc_index(core, index),
                    );
                    (name.to_owned(), value)
                })
                .collect();
            (key, counters)
        })
        .collect();
    NdsCounters {
        period: interval.seconds,
        error,
        neuron_device,
        neuroncores,
    }
}

fn version_text(version: &VersionInfo) -> String {
    format!("{}.{}.{}", version.major, version.minor, version.build)
}

/// `process_info`.
#[must_use]
pub fn process_info(interval: &Interval<'_>) -> ProcessInfoGroup {
    let mut group = ProcessInfoGroup {
        period: interval.seconds,
        ..ProcessInfoGroup::default()
    };
    let mut problems = Vec::new();
    match &interval.now.info {
        Snapshot::Valid(info) => {
            group.tag = text_lossy(&info.tag).into_owned();
            group.framework_type = i32::from(info.framework_type);
            group.runtime_version = version_text(&info.runtime_version);
            group.framework_version = version_text(&info.framework_version);
            group.fal_version = version_text(&info.fal_version);
        }
        Snapshot::Empty => problems.push("no process-info record"),
        Snapshot::Torn => problems.push("process-info record torn"),
    }
    match &interval.now.ext {
        Snapshot::Valid(ext) => group.ext_tag = text_lossy(&ext.tag).into_owned(),
        Snapshot::Empty => problems.push("no process-info-ext record"),
        Snapshot::Torn => problems.push("process-info-ext record torn"),
    }
    group.error = problems.join("; ");
    group
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_plain_hex() {
        let bytes: Vec<u8> = (0..16).collect();
        assert_eq!(uuid_text(&bytes), "000102030405060708090a0b0c0d0e0f");
    }

    #[test]
    fn cores_are_keyed_instance_wide() {
        let indexing = CoreIndexing {
            device: 1,
            per_device: 2,
        };
        assert_eq!(indexing.key(0).as_deref(), Some("2"));
        assert_eq!(indexing.key(1).as_deref(), Some("3"));
        assert_eq!(indexing.key(2), None);
        let mut now = SlabReading::zeroed();
        now.nc[1][NcCounter::InferenceCount.index()] = 3;
        now.nc[5][NcCounter::InferenceCount.index()] = 9;
        let interval = Interval {
            now: &now,
            before: &SlabReading::zeroed(),
            seconds: 1.0,
        };
        let cores = neuroncore_counters(&interval, indexing, Ok(TimeInUseUnit::PICOSECOND));
        assert_eq!(cores.neuroncores_in_use.keys().collect::<Vec<_>>(), ["3"]);
        assert!(
            cores.error.contains("core slot(s) 5 ignored"),
            "{}",
            cores.error
        );
        let counters = nds_counters(&interval, indexing);
        assert_eq!(counters.neuroncores.keys().collect::<Vec<_>>(), ["3"]);
    }

    #[test]
    fn utilization_flops_and_deltas() {
        let mut before = SlabReading::zeroed();
        let mut now = SlabReading::zeroed();
        before.nc[1][NcCounter::InferCompleted.index()] = 10;
        now.nc[1][NcCounter::InferCompleted.index()] = 25;
        now.nc[1][NcCounter::TimeInUse.index()] = 500_000;
        now.nc[1][NcCounter::MacCount.index()] = 1_000;
        now.nc[1][NcCounter::InferenceCount.index()] = 4;
        let interval = Interval {
            now: &now,
            before: &before,
            seconds: 2.0,
        };
        let indexing = CoreIndexing {
            device: 0,
            per_device: 2,
        };
        // 500 000 µs busy in 2 s.
        let cores = neuroncore_counters(&interval, indexing, Ok(TimeInUseUnit::MICROSECOND));
        let core = &cores.neuroncores_in_use["1"];
        assert_eq!(core.neuroncore_utilization, 25.0);
        assert_eq!(core.flops, 1_000.0);
        assert_eq!(core.inferences, 4);
        assert_eq!(cores.error, "");
        let stats = execution_stats(&interval, &LatencySamples::default());
        assert_eq!(stats.execution_summary.completed, 15);
        assert_eq!(stats.lifetime.execution_summary.completed, 25);
        assert_eq!(stats.latency_stats.total_latency, None);
        let counters = nds_counters(&interval, indexing);
        let completed = counters.neuroncores["1"]["NDS_NC_COUNTER_INFER_COMPLETED"];
        assert_eq!((completed.total, completed.delta), (25, 15));
        assert!(!counters.neuroncores.contains_key("0"));
    }

    /// Utilization of `busy` units of TIME_IN_USE on core 0 over `seconds`.
    fn utilization(busy: u64, seconds: f64, unit: TimeInUseUnit) -> f64 {
        let mut now = SlabReading::zeroed();
        now.nc[0][NcCounter::TimeInUse.index()] = busy;
        now.nc[0][NcCounter::InferenceCount.index()] = 1;
        let interval = Interval {
            now: &now,
            before: &SlabReading::zeroed(),
            seconds,
        };
        let indexing = CoreIndexing {
            device: 0,
            per_device: 1,
        };
        neuroncore_counters(&interval, indexing, Ok(unit)).neuroncores_in_use["0"]
            .neuroncore_utilization
    }

    #[test]
    fn utilization_reads_time_in_use_in_the_unit_given() {
        // 0.3 s busy in 1 s, in each unit.
        assert_eq!(
            utilization(300_000_000_000, 1.0, TimeInUseUnit::PICOSECOND),
            30.0
        );
        assert_eq!(utilization(300_000, 1.0, TimeInUseUnit::MICROSECOND), 30.0);
        // The same count read in the other unit is 10⁶ times off: capped, or next to nothing.
        assert_eq!(
            utilization(300_000_000_000, 1.0, TimeInUseUnit::MICROSECOND),
            100.0
        );
        assert!(utilization(300_000, 1.0, TimeInUseUnit::PICOSECOND) < 1e-4);
        // Nanoseconds, say: 0.5 s busy in 2 s.
        let nanoseconds = TimeInUseUnit::new(std::num::NonZeroU64::new(1000).unwrap());
        assert_eq!(utilization(500_000_000, 2.0, nanoseconds), 25.0);
    }

    #[test]
    fn an_unknown_unit_withholds_utilization_and_says_why() {
        let mut now = SlabReading::zeroed();
        now.nc[0][NcCounter::TimeInUse.index()] = 300_000;
        now.nc[0][NcCounter::MacCount.index()] = 10;
        let interval = Interval {
            now: &now,
            before: &SlabReading::zeroed(),
            seconds: 1.0,
        };
        let indexing = CoreIndexing {
            device: 0,
            per_device: 1,
        };
        let cores = neuroncore_counters(&interval, indexing, Err("bad parameter file"));
        let core = &cores.neuroncores_in_use["0"];
        assert_eq!(core.neuroncore_utilization, 0.0);
        assert_eq!(core.flops, 20.0, "the rest of the group is still reported");
        assert!(
            cores.error.contains("utilization withheld"),
            "{}",
            cores.error
        );
        assert!(
            cores.error.contains("bad parameter file"),
            "{}",
            cores.error
        );
    }
}
