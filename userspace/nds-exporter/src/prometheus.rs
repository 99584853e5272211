//! The Prometheus text exposition format (version 0.0.4) of a report.
//!
//! Two sets of families:
//!
//! * the ecosystem's: the names and labels neuron-monitor's companion exporter
//!   (`neuron-monitor-prometheus.py`) produces, which the CloudWatch agent and the
//!   OpenTelemetry Container Insights receiver scrape: `neuroncore_utilization_ratio`,
//!   `execution_status_total{status_type}` (with `execution_status_created`, as its client
//!   library renders), `neuron_runtime_memory_used_bytes{memory_location}`,
//!   `hardware_ecc_events_total`, `system_*`, the `instance_info` and `neuron_hardware_info`
//!   info metrics, and the rest. Runtime series carry `runtime_tag` and, like every series,
//!   the instance labels; NeuronCore indexes are instance-wide. Gauges of processes sharing a
//!   tag are added up (latency percentiles: the larger).
//!
//! With pod attribution ([`crate::pods`]), every per-process series (those with `pid`) and
//! every per-core series of a process (`neuroncore_*`, `nds_runtime_*` with `neuroncore`)
//! also carries `pod`, `namespace` and `container` when a container holds its device or core;
//! the per-tag series (which add up processes of any pod) and the kernel's per-device totals
//! (which outlive every owner) carry none.
//! * this monitor's, prefixed `nds_`, named by the Prometheus naming guide: per-status and
//!   usage counters per process and core from its slab (`nds_runtime_*`, with `pid` so that
//!   processes sharing a tag stay apart), the kernel's aggregates per device and core from
//!   sysfs (`nds_device_*`), busy time in seconds, sampled latencies as a histogram, and the
//!   monitor's own `nds_monitor_*`.
//!
//! Gauges come from the latest report ([`LatestReport`]); every counter comes from the
//! exporter's [`Counters`], monotonic for the life of the monitor. Each family is one of
//! [`nds_metric_table`], whose name, type, help and labels it renders; gauges are gathered per
//! family and label set through maps, so a render takes time in proportion to its series.
//! Every line is written by the [`Encoder`].

use std::collections::HashMap;

use nds_document::document::{
    CpuShares, DeviceCounters, InstanceInfo, MonitorDocument, Percentiles, RuntimeEntry,
    RuntimeReport, SystemCounters, SystemData,
};
use nds_host::process_metrics::ProcessMetrics;
use nds_metric_table::{self as metrics, LabelSet, MetricFamily, MetricType};

use crate::counters::{Counters, Sample};
use crate::encoder::{render_labels, Encoder};
use crate::pods::SlabPods;

/// The containers of each live process's series, by the address of its slab.
pub type PodsByAddress<'a> = HashMap<&'a str, &'a SlabPods>;

/// How two samples of one series (same labels) combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Combine {
    Sum,
    Max,
}

/// One metric family being assembled.
struct Family {
    declared: &'static MetricFamily,
    /// Rendered label sets with their values, in first-seen order.
    samples: Vec<(String, f64)>,
    /// Where each label set is in `samples`.
    by_labels: HashMap<String, usize>,
}

/// Families in output order, each written once with all its samples.
#[derive(Default)]
struct Exposition {
    families: Vec<Family>,
    /// Where each family is in `families`, by name.
    by_name: HashMap<&'static str, usize>,
}

impl Exposition {
    fn put(
        &mut self,
        declared: &'static MetricFamily,
        labels: &LabelSet,
        value: f64,
        combine: Combine,
    ) {
        let index = *self.by_name.entry(declared.name).or_insert_with(|| {
            self.families.push(Family {
                declared,
                samples: Vec::new(),
                by_labels: HashMap::new(),
            });
            self.families.len() - 1
        });
        let Some(family) = self.families.get_mut(index) else {
            return;
        };
        let rendered = render_labels(labels);
        match family
            .by_labels
            .get(&rendered)
            .and_then(|&at| family.samples.get_mut(at))
        {
            Some((_, existing)) => {
                *existing = match combine {
                    Combine::Sum => *existing + value,
                    Combine::Max => existing.max(value),
                }
            }
            None => {
                family
                    .by_labels
                    .insert(rendered.clone(), family.samples.len());
                family.samples.push((rendered, value));
            }
        }
    }

    fn add(&mut self, declared: &'static MetricFamily, labels: &LabelSet, value: f64) {
        self.put(declared, labels, value, Combine::Sum);
    }

    fn encode(&self, encoder: &mut Encoder) {
        for family in &self.families {
            let MetricFamily {
                name,
                help,
                metric_type,
                ..
            } = family.declared;
            encoder.family(name, help, metric_type);
            for (labels, value) in &family.samples {
                encoder.sample(name, labels, None, *value);
            }
        }
    }
}

/// The instance labels every series carries, named as the companion exporter names them.
#[must_use]
pub fn instance_labels(info: &InstanceInfo) -> LabelSet {
    LabelSet::instance([
        &info.instance_name,
        &info.instance_id,
        &info.instance_type,
        &info.instance_availability_zone,
        &info.instance_region,
        &info.subnet_id,
    ])
}

/// Percentiles with the companion exporter's labels.
fn percentiles(p: &Percentiles) -> [(&'static str, f64); 7] {
    [
        ("p0", p.p0),
        ("p1", p.p1),
        ("p25", p.p25),
        ("p50", p.p50),
        ("p75", p.p75),
        ("p99", p.p99),
        ("p100", p.p100),
    ]
}

/// The ecosystem's runtime families of one live process, its cores held by the containers of
/// `pods`.
fn ecosystem_runtime(out: &mut Exposition, entry: &RuntimeEntry, pods: Option<&SlabPods>) {
    let tag = entry.neuron_runtime_tag.as_str();
    let core_pod = |core: &str| pods.and_then(|pods| pods.core_names(core));
    let report = &entry.report;
    if let Some(cores) = &report.neuroncore_counters {
        for (core, usage) in &cores.neuroncores_in_use {
            let family = &metrics::NEURONCORE_UTILIZATION_RATIO;
            let labels = family.label_set(&[tag, core]).with_pod(core_pod(core));
            out.add(family, &labels, usage.neuroncore_utilization / 100.0);
        }
    }
    if let Some(cpu) = &report.neuron_runtime_vcpu_usage {
        let usage = cpu.vcpu_usage;
        for (usage_type, percent) in [("user", usage.user), ("system", usage.system)] {
            let family = &metrics::NEURON_RUNTIME_VCPU_USAGE_RATIO;
            out.add(
                family,
                &family.label_set(&[tag, usage_type]),
                percent / 100.0,
            );
        }
    }
    if let Some(memory) = &report.memory_used {
        let used = &memory.neuron_runtime_used_bytes;
        for (location, bytes) in [("host", used.host), ("neuron_device", used.neuron_device)] {
            let family = &metrics::NEURON_RUNTIME_MEMORY_USED_BYTES;
            out.add(family, &family.label_set(&[tag, location]), bytes as f64);
        }
        for (core, kinds) in &used.usage_breakdown.neuroncore_memory_usage {
            for (family, bytes) in [
                (&metrics::NEURONCORE_MEMORY_USAGE_CONSTANTS, kinds.constants),
                (
                    &metrics::NEURONCORE_MEMORY_USAGE_MODEL_CODE,
                    kinds.model_code,
                ),
                (
                    &metrics::NEURONCORE_MEMORY_USAGE_MODEL_SHARED_SCRATCHPAD,
                    kinds.model_shared_scratchpad,
                ),
                (
                    &metrics::NEURONCORE_MEMORY_USAGE_RUNTIME_MEMORY,
                    kinds.runtime_memory,
                ),
                (&metrics::NEURONCORE_MEMORY_USAGE_TENSORS, kinds.tensors),
            ] {
                // The companion exporter leaves memory_location unset here, which prints "None".
                let labels = family
                    .label_set(&[tag, core, "None"])
                    .with_pod(core_pod(core));
                out.add(family, &labels, bytes as f64);
            }
        }
    }
    if let Some(stats) = &report.execution_stats {
        if let Some(total) = &stats.latency_stats.total_latency {
            for (percentile, seconds) in percentiles(total) {
                let family = &metrics::EXECUTION_LATENCY_SECONDS;
                let labels = family.label_set(&[tag, percentile]);
                out.put(family, &labels, seconds, Combine::Max);
            }
        }
    }
}

/// This monitor's gauges of one live process, held by the container of `pods`.
fn nds_runtime(out: &mut Exposition, entry: &RuntimeEntry, pods: Option<&SlabPods>) {
    let device = entry.neuron_device_index.to_string();
    let pid = entry.pid.to_string();
    let values = [entry.neuron_runtime_tag.as_str(), &pid, &device];
    let pod = pods.and_then(SlabPods::process_names);
    let family = &metrics::NDS_RUNTIME_INFO;
    out.add(family, &family.label_set(&values).with_pod(pod), 1.0);
    if let Some(memory) = &entry.report.memory_used {
        let family = &metrics::NDS_RUNTIME_LOADED_MODELS;
        let labels = family.label_set(&values).with_pod(pod);
        out.add(family, &labels, memory.loaded_models.len() as f64);
    }
}

/// The ecosystem's system families.
fn ecosystem_system(out: &mut Exposition, system: &SystemData) {
    if let Some(cpu) = &system.vcpu_usage {
        let family = &metrics::SYSTEM_VCPU_COUNT;
        out.add(family, &family.label_set(&[]), cpu.usage_data.len() as f64);
        // The companion exporter's two buckets of the average.
        let CpuShares {
            user,
            nice,
            system,
            io_wait,
            irq,
            soft_irq,
            ..
        } = cpu.average_usage;
        for (usage_type, percent) in [
            ("user", user + nice),
            ("system", system + io_wait + irq + soft_irq),
        ] {
            let family = &metrics::SYSTEM_VCPU_USAGE_RATIO;
            let labels = family.label_set(&[usage_type]);
            out.add(family, &labels, percent.min(100.0) / 100.0);
        }
    }
    if let Some(memory) = &system.memory_info {
        for (family, bytes) in [
            (
                &metrics::SYSTEM_MEMORY_TOTAL_BYTES,
                memory.memory_total_bytes,
            ),
            (&metrics::SYSTEM_MEMORY_USED_BYTES, memory.memory_used_bytes),
            (&metrics::SYSTEM_SWAP_TOTAL_BYTES, memory.swap_total_bytes),
            (&metrics::SYSTEM_SWAP_USED_BYTES, memory.swap_used_bytes),
        ] {
            out.add(family, &family.label_set(&[]), bytes as f64);
        }
    }
}

/// This monitor's device gauges.
fn nds_devices(out: &mut Exposition, system: &SystemData) {
    let Some(counters) = &system.neuron_counters else {
        return;
    };
    for device in &counters.neuron_devices {
        let index = device.neuron_device_index.to_string();
        let family = &metrics::NDS_DEVICE_SLOTS_OWNED;
        out.add(
            family,
            &family.label_set(&[&index]),
            device.slots_owned as f64,
        );
    }
}

/// Every series of `counters` the exposition shows; a family with a `_created` companion is
/// followed by it, as the companion exporter's client library renders it.
fn encode_counters(encoder: &mut Encoder, counters: &Counters) {
    let mut series = counters.exported().peekable();
    while let Some(family) = series.peek().map(|first| first.family.metric) {
        let MetricFamily {
            name: family_name,
            help,
            metric_type,
            ..
        } = family;
        encoder.family(family_name, help, metric_type);
        let created_name = family.created_name();
        let mut created = Vec::new();
        while let Some(one) = series.next_if(|next| next.family.metric.name == *family_name) {
            let (name, le) = match (one.sample, metric_type) {
                (Sample::Bucket(bound), MetricType::Histogram(bounds)) => (
                    format!("{family_name}_bucket"),
                    Some(bounds.get(bound).copied().unwrap_or(f64::INFINITY)),
                ),
                (Sample::Sum, _) => (format!("{family_name}_sum"), None),
                (Sample::Count, _) => (format!("{family_name}_count"), None),
                (Sample::Total | Sample::Bucket(_), _) => ((*family_name).to_owned(), None),
            };
            encoder.sample(&name, one.labels, le, one.value);
            if created_name.is_some() {
                created.push((one.labels, one.created));
            }
        }
        if let Some(created_name) = created_name {
            encoder.family(&created_name, help, "gauge");
            for (labels, at) in created {
                encoder.sample(&created_name, labels, None, at);
            }
        }
    }
}

/// The process collector's families, each one that `/proc` could say.
fn encode_process_metrics(encoder: &mut Encoder, process: &ProcessMetrics) {
    let families: [(&MetricFamily, Option<f64>); 6] = [
        (&metrics::PROCESS_CPU_SECONDS_TOTAL, process.cpu_seconds),
        (
            &metrics::PROCESS_RESIDENT_MEMORY_BYTES,
            process.resident_bytes.map(|v| v as f64),
        ),
        (
            &metrics::PROCESS_VIRTUAL_MEMORY_BYTES,
            process.virtual_bytes.map(|v| v as f64),
        ),
        (
            &metrics::PROCESS_START_TIME_SECONDS,
            process.start_time_seconds,
        ),
        (
            &metrics::PROCESS_OPEN_FDS,
            process.open_fds.map(|v| v as f64),
        ),
        (&metrics::PROCESS_MAX_FDS, process.max_fds.map(|v| v as f64)),
    ];
    for (family, value) in families {
        let Some(value) = value else {
            continue;
        };
        encoder.family(family.name, family.help, family.metric_type);
        encoder.sample(family.name, "", None, value);
    }
}

/// The exposition of `document`'s gauges (its live processes' series labelled with the
/// containers of `pods`), the series of `counters`, and `process`'s metrics.
fn encode(
    document: &MonitorDocument,
    counters: Option<&Counters>,
    pods: &PodsByAddress<'_>,
    process: Option<&ProcessMetrics>,
) -> String {
    let mut out = Exposition::default();
    let live = || {
        document
            .neuron_runtime_data
            .iter()
            .filter(|entry| entry.error.is_empty())
    };
    let pods_of = |entry: &RuntimeEntry| pods.get(entry.address.as_str()).copied();
    for entry in live() {
        ecosystem_runtime(&mut out, entry, pods_of(entry));
    }
    ecosystem_system(&mut out, &document.system_data);
    out.add(&metrics::INSTANCE_INFO, &LabelSet::default(), 1.0);
    let hardware = &document.neuron_hardware_info;
    let device_count = hardware.neuron_device_count.to_string();
    let per_device = hardware.neuroncore_per_device_count.to_string();
    let family = &metrics::NEURON_HARDWARE_INFO;
    let labels = family.label_set(&[
        &device_count,
        &per_device,
        &hardware.neuron_device_type,
        &hardware.neuroncore_version,
    ]);
    out.add(family, &labels, 1.0);
    for entry in live() {
        nds_runtime(&mut out, entry, pods_of(entry));
    }
    nds_devices(&mut out, &document.system_data);
    let mut encoder = Encoder::new(&instance_labels(&document.instance_info));
    out.encode(&mut encoder);
    if let Some(counters) = counters {
        encode_counters(&mut encoder, counters);
    }
    if let Some(process) = process {
        encode_process_metrics(&mut encoder, process);
    }
    encoder.finish()
}

/// Renders `document` (best the latest of every group, [`LatestReport`]), its live processes'
/// series labelled with the containers of `pods`, and the series of `counters`.
#[must_use]
pub fn render(
    document: &MonitorDocument,
    counters: Option<&Counters>,
    pods: &PodsByAddress<'_>,
) -> String {
    encode(document, counters, pods, None)
}

/// The latest value of every group the exposition draws gauges from: a report has only the
/// groups due, the exposition shows each group's latest period.
#[derive(Clone, Debug, Default)]
pub struct LatestReport {
    document: MonitorDocument,
}

/// What of `report` the gauges are drawn from: its live processes with their groups but
/// `nds_counters` and `process_info`, the host's groups, each device's owned slots, the
/// instance and the hardware (the counters come from the stream, not from the document).
fn gauges_of(report: &MonitorDocument) -> MonitorDocument {
    let processes = report
        .neuron_runtime_data
        .iter()
        .filter(|entry| entry.error.is_empty())
        .map(|entry| {
            let groups = &entry.report;
            RuntimeEntry {
                pid: entry.pid,
                address: entry.address.clone(),
                neuron_device_index: entry.neuron_device_index,
                slot: entry.slot,
                generation: entry.generation,
                neuron_runtime_tag: entry.neuron_runtime_tag.clone(),
                error: String::new(),
                report: RuntimeReport {
                    neuroncore_counters: groups.neuroncore_counters.clone(),
                    execution_stats: groups.execution_stats.clone(),
                    memory_used: groups.memory_used.clone(),
                    neuron_runtime_vcpu_usage: groups.neuron_runtime_vcpu_usage.clone(),
                    nds_counters: None,
                    process_info: None,
                },
            }
        })
        .collect();
    let system = &report.system_data;
    let slots_owned = system
        .neuron_counters
        .as_ref()
        .map(|counters| SystemCounters {
            neuron_devices: counters
                .neuron_devices
                .iter()
                .map(|device| DeviceCounters {
                    neuron_device_index: device.neuron_device_index,
                    slots_owned: device.slots_owned,
                    ..DeviceCounters::default()
                })
                .collect(),
            ..SystemCounters::default()
        });
    MonitorDocument {
        timestamp: report.timestamp,
        neuron_runtime_data: processes,
        system_data: SystemData {
            neuron_hw_counters: None,
            vcpu_usage: system.vcpu_usage.clone(),
            memory_info: system.memory_info.clone(),
            neuron_counters: slots_owned,
        },
        instance_info: report.instance_info.clone(),
        neuron_hardware_info: report.neuron_hardware_info.clone(),
        // The verdicts have families of their own (nds-health).
        neuron_health: None,
    }
}

impl LatestReport {
    /// The merged report.
    #[must_use]
    pub fn document(&self) -> &MonitorDocument {
        &self.document
    }

    /// Takes what the gauges are drawn from of `report` in: its processes are the live ones
    /// (each keeps the groups it had that are not in `report`), ended slabs leave, and every
    /// system group it has replaces the one before.
    pub fn update(&mut self, report: &MonitorDocument) {
        let mut previous = std::mem::take(&mut self.document.neuron_runtime_data);
        let mut merged = gauges_of(report);
        for entry in &mut merged.neuron_runtime_data {
            let same = previous.iter().position(|old| {
                (old.pid, &old.address, old.generation)
                    == (entry.pid, &entry.address, entry.generation)
            });
            let Some(old) = same.map(|index| previous.swap_remove(index)) else {
                continue;
            };
            let (now, old) = (&mut entry.report, old.report);
            now.neuroncore_counters = now.neuroncore_counters.take().or(old.neuroncore_counters);
            now.execution_stats = now.execution_stats.take().or(old.execution_stats);
            now.memory_used = now.memory_used.take().or(old.memory_used);
            now.neuron_runtime_vcpu_usage = now
                .neuron_runtime_vcpu_usage
                .take()
                .or(old.neuron_runtime_vcpu_usage);
        }
        let (now, old) = (
            &mut merged.system_data,
            std::mem::take(&mut self.document.system_data),
        );
        now.vcpu_usage = now.vcpu_usage.take().or(old.vcpu_usage);
        now.memory_info = now.memory_info.take().or(old.memory_info);
        now.neuron_counters = now.neuron_counters.take().or(old.neuron_counters);
        self.document = merged;
    }
}

/// The exposition an exporter serves: `latest`'s gauges, the series of `counters`, and the
/// monitor's own process metrics.
#[must_use]
pub fn exposition(
    latest: &LatestReport,
    counters: Option<&Counters>,
    pods: &PodsByAddress<'_>,
) -> String {
    encode(
        latest.document(),
        counters,
        pods,
        Some(&ProcessMetrics::current()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_collector_renders_only_what_proc_said() {
        let mut encoder = Encoder::new(&LabelSet::default());
        encode_process_metrics(&mut encoder, &ProcessMetrics::current());
        let text = encoder.finish();
        assert!(
            text.contains("\n# TYPE process_open_fds gauge\nprocess_open_fds{} "),
            "{text}"
        );
        assert!(
            text.contains("# TYPE process_cpu_seconds_total counter\n"),
            "{text}"
        );
        let mut empty = Encoder::new(&LabelSet::default());
        encode_process_metrics(&mut empty, &ProcessMetrics::default());
        assert!(empty.finish().is_empty());
    }
}
