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
//! monitor's [`Counters`], monotonic for the life of the monitor. Each family is one of
//! [`nds_metric_table`], whose name, type and help it renders; gauges are gathered per family
//! and label set through maps, so a render takes time in proportion to its series.

use std::collections::HashMap;
use std::fmt::Write;

use nds_document::document::{
    CpuShares, InstanceInfo, MonitorDocument, Percentiles, RuntimeEntry, SystemData,
};
use nds_host::process_metrics::ProcessMetrics;

use crate::counters::{Counters, Sample};
use crate::labels::{self, with, Labels};
use crate::pods::PodLabels;
use nds_metric_table::{self as metrics, MetricFamily, MetricType, INSTANCE_LABELS};

/// The media type of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

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
        labels: &Labels<'_>,
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
        let rendered = labels::render(labels);
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

    fn add(&mut self, declared: &'static MetricFamily, labels: &Labels<'_>, value: f64) {
        self.put(declared, labels, value, Combine::Sum);
    }

    fn render_into(&self, text: &mut String) {
        for family in &self.families {
            let MetricFamily {
                name,
                help,
                metric_type,
                ..
            } = family.declared;
            let _ = writeln!(text, "# HELP {name} {help}");
            let _ = writeln!(text, "# TYPE {name} {metric_type}");
            for (labels, value) in &family.samples {
                let _ = writeln!(text, "{name}{{{labels}}} {}", number(*value));
            }
        }
    }
}

fn number(value: f64) -> String {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

/// The instance labels every series carries, named as the companion exporter names them.
fn instance_labels(info: &InstanceInfo) -> Labels<'static> {
    let [name, id, kind, zone, region, subnet] = INSTANCE_LABELS;
    vec![
        (name, info.instance_name.clone()),
        (id, info.instance_id.clone()),
        (kind, info.instance_type.clone()),
        (zone, info.instance_availability_zone.clone()),
        (region, info.instance_region.clone()),
        (subnet, info.subnet_id.clone()),
    ]
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

/// The ecosystem's runtime families of one live process.
fn ecosystem_runtime(out: &mut Exposition, entry: &RuntimeEntry, instance: &Labels<'static>) {
    let tag = with(instance, &[("runtime_tag", &entry.neuron_runtime_tag)]);
    let report = &entry.report;
    if let Some(cores) = &report.neuroncore_counters {
        for (core, usage) in &cores.neuroncores_in_use {
            let mut labels = with(&tag, &[("neuroncore", core)]);
            labels.extend(entry.pods.core_labels(core));
            out.add(
                &metrics::NEURONCORE_UTILIZATION_RATIO,
                &labels,
                usage.neuroncore_utilization / 100.0,
            );
        }
    }
    if let Some(cpu) = &report.neuron_runtime_vcpu_usage {
        let usage = cpu.vcpu_usage;
        for (usage_type, percent) in [("user", usage.user), ("system", usage.system)] {
            out.add(
                &metrics::NEURON_RUNTIME_VCPU_USAGE_RATIO,
                &with(&tag, &[("usage_type", usage_type)]),
                percent / 100.0,
            );
        }
    }
    if let Some(memory) = &report.memory_used {
        let used = &memory.neuron_runtime_used_bytes;
        for (location, bytes) in [("host", used.host), ("neuron_device", used.neuron_device)] {
            out.add(
                &metrics::NEURON_RUNTIME_MEMORY_USED_BYTES,
                &with(&tag, &[("memory_location", location)]),
                bytes as f64,
            );
        }
        for (core, kinds) in &used.usage_breakdown.neuroncore_memory_usage {
            // The companion exporter leaves memory_location unset here, which prints "None".
            let mut labels = with(&tag, &[("neuroncore", core), ("memory_location", "None")]);
            labels.extend(entry.pods.core_labels(core));
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
                out.add(family, &labels, bytes as f64);
            }
        }
    }
    if let Some(stats) = &report.execution_stats {
        if let Some(total) = &stats.latency_stats.total_latency {
            for (percentile, seconds) in percentiles(total) {
                out.put(
                    &metrics::EXECUTION_LATENCY_SECONDS,
                    &with(&tag, &[("percentile", percentile)]),
                    seconds,
                    Combine::Max,
                );
            }
        }
    }
}

/// This monitor's gauges of one live process.
fn nds_runtime(out: &mut Exposition, entry: &RuntimeEntry, instance: &Labels<'static>) {
    let device = entry.neuron_device_index.to_string();
    let pid = entry.pid.to_string();
    let mut base = with(
        instance,
        &[
            ("runtime_tag", &entry.neuron_runtime_tag),
            ("pid", &pid),
            ("neuron_device_index", &device),
        ],
    );
    base.extend(entry.pods.process_labels());
    out.add(&metrics::NDS_RUNTIME_INFO, &base, 1.0);
    if let Some(memory) = &entry.report.memory_used {
        out.add(
            &metrics::NDS_RUNTIME_LOADED_MODELS,
            &base,
            memory.loaded_models.len() as f64,
        );
    }
}

/// The ecosystem's system families.
fn ecosystem_system(out: &mut Exposition, system: &SystemData, instance: &Labels<'static>) {
    if let Some(cpu) = &system.vcpu_usage {
        out.add(
            &metrics::SYSTEM_VCPU_COUNT,
            instance,
            cpu.usage_data.len() as f64,
        );
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
            out.add(
                &metrics::SYSTEM_VCPU_USAGE_RATIO,
                &with(instance, &[("usage_type", usage_type)]),
                percent.min(100.0) / 100.0,
            );
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
            out.add(family, instance, bytes as f64);
        }
    }
}

/// This monitor's device gauges.
fn nds_devices(out: &mut Exposition, system: &SystemData, instance: &Labels<'static>) {
    let Some(counters) = &system.neuron_counters else {
        return;
    };
    for device in &counters.neuron_devices {
        let index = device.neuron_device_index.to_string();
        out.add(
            &metrics::NDS_DEVICE_SLOTS_OWNED,
            &with(instance, &[("neuron_device_index", &index)]),
            device.slots_owned as f64,
        );
    }
}

/// Every series of `counters` the exposition shows, after the instance labels; a family
/// with a `_created` companion is followed by it, as the companion exporter's client library
/// renders it.
fn render_counters(text: &mut String, counters: &Counters, instance: &str) {
    let mut series = counters.exported().peekable();
    while let Some(family) = series.peek().map(|first| first.family.metric) {
        let MetricFamily {
            name: family_name,
            help,
            metric_type,
            ..
        } = family;
        let _ = writeln!(text, "# HELP {family_name} {help}");
        let _ = writeln!(text, "# TYPE {family_name} {metric_type}");
        let created_name = family.created_name();
        let mut created = String::new();
        while let Some(one) = series.next_if(|next| next.family.metric.name == *family_name) {
            let labels = labels::join(instance, one.labels);
            let (name, labels) = match (one.sample, metric_type) {
                (Sample::Bucket(bound), MetricType::Histogram(bounds)) => {
                    let le = bounds
                        .get(bound)
                        .map_or_else(|| "+Inf".to_owned(), f64::to_string);
                    let le = format!("le=\"{le}\"");
                    (format!("{family_name}_bucket"), labels::join(&labels, &le))
                }
                (Sample::Sum, _) => (format!("{family_name}_sum"), labels),
                (Sample::Count, _) => (format!("{family_name}_count"), labels),
                (Sample::Total | Sample::Bucket(_), _) => ((*family_name).to_owned(), labels),
            };
            let _ = writeln!(text, "{name}{{{labels}}} {}", number(one.value));
            if let Some(created_name) = &created_name {
                let _ = writeln!(
                    created,
                    "{created_name}{{{labels}}} {}",
                    number(one.created)
                );
            }
        }
        if let Some(created_name) = created_name {
            let _ = writeln!(text, "# HELP {created_name} {help}");
            let _ = writeln!(text, "# TYPE {created_name} gauge");
            text.push_str(&created);
        }
    }
}

/// Renders `document` (best the latest of every group, [`LatestReport`]) and the series of
/// `counters` as an exposition.
#[must_use]
pub fn render(document: &MonitorDocument, counters: Option<&Counters>) -> String {
    let mut out = Exposition::default();
    let instance = instance_labels(&document.instance_info);
    let live = || {
        document
            .neuron_runtime_data
            .iter()
            .filter(|entry| entry.error.is_empty())
    };
    for entry in live() {
        ecosystem_runtime(&mut out, entry, &instance);
    }
    ecosystem_system(&mut out, &document.system_data, &instance);
    out.add(&metrics::INSTANCE_INFO, &instance, 1.0);
    let hardware = &document.neuron_hardware_info;
    let device_count = hardware.neuron_device_count.to_string();
    let per_device = hardware.neuroncore_per_device_count.to_string();
    out.add(
        &metrics::NEURON_HARDWARE_INFO,
        &with(
            &instance,
            &[
                ("neuron_device_count", &device_count),
                ("neuroncore_per_device_count", &per_device),
                ("neuron_device_type", &hardware.neuron_device_type),
                ("neuroncore_version", &hardware.neuroncore_version),
            ],
        ),
        1.0,
    );
    for entry in live() {
        nds_runtime(&mut out, entry, &instance);
    }
    nds_devices(&mut out, &document.system_data, &instance);
    let mut text = String::new();
    out.render_into(&mut text);
    if let Some(counters) = counters {
        render_counters(&mut text, counters, &labels::render(&instance));
    }
    text
}

/// The latest value of every group: a report has only the groups due, the exposition shows
/// each group's latest period.
#[derive(Clone, Debug, Default)]
pub struct LatestReport {
    document: MonitorDocument,
}

impl LatestReport {
    /// The merged report.
    #[must_use]
    pub fn document(&self) -> &MonitorDocument {
        &self.document
    }

    /// Takes `report` in: its processes are the live ones (each keeps the groups it had that
    /// are not in `report`), ended slabs leave, and every system group it has replaces the
    /// one before.
    pub fn update(&mut self, report: MonitorDocument) {
        let mut previous = std::mem::take(&mut self.document.neuron_runtime_data);
        let mut merged = report;
        merged
            .neuron_runtime_data
            .retain(|entry| entry.error.is_empty());
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
            now.nds_counters = now.nds_counters.take().or(old.nds_counters);
            now.process_info = now.process_info.take().or(old.process_info);
        }
        let (now, old) = (
            &mut merged.system_data,
            std::mem::take(&mut self.document.system_data),
        );
        now.neuron_hw_counters = now.neuron_hw_counters.take().or(old.neuron_hw_counters);
        now.vcpu_usage = now.vcpu_usage.take().or(old.vcpu_usage);
        now.memory_info = now.memory_info.take().or(old.memory_info);
        now.neuron_counters = now.neuron_counters.take().or(old.neuron_counters);
        self.document = merged;
    }
}

/// The exposition an exporter serves: `latest`'s gauges, the series of `counters`, and the
/// monitor's own process metrics.
#[must_use]
pub fn exposition(latest: &LatestReport, counters: Option<&Counters>) -> String {
    let document = latest.document();
    let mut text = render(document, counters);
    let instance = labels::render(&instance_labels(&document.instance_info));
    render_process_metrics(&ProcessMetrics::current(), &mut text, &instance);
    text
}

/// Appends the process collector's families, each one that `/proc` could say, with
/// `instance` labels (rendered).
fn render_process_metrics(process: &ProcessMetrics, text: &mut String, instance: &str) {
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
        let MetricFamily {
            name,
            help,
            metric_type,
            ..
        } = family;
        let _ = writeln!(text, "# HELP {name} {help}");
        let _ = writeln!(text, "# TYPE {name} {metric_type}");
        let _ = writeln!(text, "{name}{{{instance}}} {value}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_collector_renders_only_what_proc_said() {
        let mut text = String::new();
        render_process_metrics(&ProcessMetrics::current(), &mut text, "");
        assert!(
            text.contains("\n# TYPE process_open_fds gauge\nprocess_open_fds{} "),
            "{text}"
        );
        assert!(
            text.contains("# TYPE process_cpu_seconds_total counter\n"),
            "{text}"
        );
        let mut empty = String::new();
        render_process_metrics(&ProcessMetrics::default(), &mut empty, "");
        assert!(empty.is_empty(), "{empty}");
    }
}
