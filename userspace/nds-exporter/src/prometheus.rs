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
//! monitor's [`Counters`], monotonic for the life of the monitor.

use std::fmt::Write;

use nds_document::document::{
    CpuShares, InstanceInfo, MonitorDocument, Percentiles, RuntimeEntry, SystemData,
};
use nds_host::process_metrics::ProcessMetrics;

use crate::counters::{Counters, FamilyKind, Sample};
use crate::labels::{self, with, Labels};
use crate::pods::PodLabels;

/// The media type of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How two samples of one series (same labels) combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Combine {
    Sum,
    Max,
}

/// A metric family's identity.
#[derive(Clone, Copy, Debug)]
struct Spec<'a> {
    name: &'a str,
    help: &'static str,
    kind: &'static str,
}

const fn gauge<'a>(name: &'a str, help: &'static str) -> Spec<'a> {
    Spec {
        name,
        help,
        kind: "gauge",
    }
}

/// One metric family being assembled.
struct Family {
    name: String,
    help: &'static str,
    kind: &'static str,
    /// Rendered label sets with their values, in first-seen order.
    samples: Vec<(String, f64)>,
}

/// Families in output order, each written once with all its samples.
#[derive(Default)]
struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    fn put(&mut self, spec: Spec<'_>, labels: &Labels<'_>, value: f64, combine: Combine) {
        let index = match self.families.iter().position(|f| f.name == spec.name) {
            Some(index) => index,
            None => {
                self.families.push(Family {
                    name: spec.name.to_owned(),
                    help: spec.help,
                    kind: spec.kind,
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        let rendered = labels::render(labels);
        let Some(family) = self.families.get_mut(index) else {
            return;
        };
        match family
            .samples
            .iter_mut()
            .find(|(labels, _)| *labels == rendered)
        {
            Some((_, existing)) => {
                *existing = match combine {
                    Combine::Sum => *existing + value,
                    Combine::Max => existing.max(value),
                }
            }
            None => family.samples.push((rendered, value)),
        }
    }

    fn add(&mut self, spec: Spec<'_>, labels: &Labels<'_>, value: f64) {
        self.put(spec, labels, value, Combine::Sum);
    }

    fn render_into(&self, text: &mut String) {
        for family in &self.families {
            let _ = writeln!(text, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(text, "# TYPE {} {}", family.name, family.kind);
            for (labels, value) in &family.samples {
                let _ = writeln!(text, "{}{{{labels}}} {}", family.name, number(*value));
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
    vec![
        ("instance_name", info.instance_name.clone()),
        ("instance_id", info.instance_id.clone()),
        ("instance_type", info.instance_type.clone()),
        ("availability_zone", info.instance_availability_zone.clone()),
        ("region", info.instance_region.clone()),
        ("subnet_id", info.subnet_id.clone()),
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
                gauge(
                    "neuroncore_utilization_ratio",
                    "NeuronCore utilization ratio",
                ),
                &labels,
                usage.neuroncore_utilization / 100.0,
            );
        }
    }
    if let Some(cpu) = &report.neuron_runtime_vcpu_usage {
        let usage = cpu.vcpu_usage;
        for (usage_type, percent) in [("user", usage.user), ("system", usage.system)] {
            out.add(
                gauge(
                    "neuron_runtime_vcpu_usage_ratio",
                    "Runtime vCPU utilization ratio",
                ),
                &with(&tag, &[("usage_type", usage_type)]),
                percent / 100.0,
            );
        }
    }
    if let Some(memory) = &report.memory_used {
        let used = &memory.neuron_runtime_used_bytes;
        for (location, bytes) in [("host", used.host), ("neuron_device", used.neuron_device)] {
            out.add(
                gauge(
                    "neuron_runtime_memory_used_bytes",
                    "Runtime memory used bytes",
                ),
                &with(&tag, &[("memory_location", location)]),
                bytes as f64,
            );
        }
        for (core, kinds) in &used.usage_breakdown.neuroncore_memory_usage {
            // The companion exporter leaves memory_location unset here, which prints "None".
            let mut labels = with(&tag, &[("neuroncore", core), ("memory_location", "None")]);
            labels.extend(entry.pods.core_labels(core));
            for (name, help, bytes) in [
                (
                    "neuroncore_memory_usage_constants",
                    "NeuronCore memory utilization for constants",
                    kinds.constants,
                ),
                (
                    "neuroncore_memory_usage_model_code",
                    "NeuronCore memory utilization for model_code",
                    kinds.model_code,
                ),
                (
                    "neuroncore_memory_usage_model_shared_scratchpad",
                    "NeuronCore memory utilization for model_shared_scratchpad",
                    kinds.model_shared_scratchpad,
                ),
                (
                    "neuroncore_memory_usage_runtime_memory",
                    "NeuronCore memory utilization for runtime_memory",
                    kinds.runtime_memory,
                ),
                (
                    "neuroncore_memory_usage_tensors",
                    "NeuronCore memory utilization for tensors",
                    kinds.tensors,
                ),
            ] {
                out.add(gauge(name, help), &labels, bytes as f64);
            }
        }
    }
    if let Some(stats) = &report.execution_stats {
        if let Some(total) = &stats.latency_stats.total_latency {
            for (percentile, seconds) in percentiles(total) {
                out.put(
                    gauge("execution_latency_seconds", "Execution latency in seconds"),
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
    out.add(
        gauge(
            "nds_runtime_info",
            "A process whose datastore slab the monitor reads.",
        ),
        &base,
        1.0,
    );
    if let Some(memory) = &entry.report.memory_used {
        out.add(
            gauge("nds_runtime_loaded_models", "Models loaded by the process."),
            &base,
            memory.loaded_models.len() as f64,
        );
    }
}

/// The ecosystem's system families.
fn ecosystem_system(out: &mut Exposition, system: &SystemData, instance: &Labels<'static>) {
    if let Some(cpu) = &system.vcpu_usage {
        out.add(
            gauge("system_vcpu_count", "System vCPU count"),
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
                gauge("system_vcpu_usage_ratio", "System CPU utilization ratio"),
                &with(instance, &[("usage_type", usage_type)]),
                percent.min(100.0) / 100.0,
            );
        }
    }
    if let Some(memory) = &system.memory_info {
        for (name, help, bytes) in [
            (
                "system_memory_total_bytes",
                "System memory total_bytes bytes",
                memory.memory_total_bytes,
            ),
            (
                "system_memory_used_bytes",
                "System memory used_bytes bytes",
                memory.memory_used_bytes,
            ),
            (
                "system_swap_total_bytes",
                "System swap total_bytes bytes",
                memory.swap_total_bytes,
            ),
            (
                "system_swap_used_bytes",
                "System swap used_bytes bytes",
                memory.swap_used_bytes,
            ),
        ] {
            out.add(gauge(name, help), instance, bytes as f64);
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
            gauge(
                "nds_device_slots_owned",
                "Datastore slabs currently owned by a process.",
            ),
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
    while let Some(family) = series.peek().map(|first| first.family) {
        let kind = match family.kind {
            FamilyKind::Counter => "counter",
            FamilyKind::Histogram(_) => "histogram",
        };
        let _ = writeln!(text, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(text, "# TYPE {} {kind}", family.name);
        let mut created = String::new();
        while let Some(one) = series.next_if(|next| next.family.name == family.name) {
            let labels = labels::join(instance, one.labels);
            let (name, labels) = match (one.sample, family.kind) {
                (Sample::Bucket(bound), FamilyKind::Histogram(bounds)) => {
                    let le = bounds
                        .get(bound)
                        .map_or_else(|| "+Inf".to_owned(), f64::to_string);
                    let le = format!("le=\"{le}\"");
                    (
                        format!("{}_bucket", family.name),
                        labels::join(&labels, &le),
                    )
                }
                (Sample::Sum, _) => (format!("{}_sum", family.name), labels),
                (Sample::Count, _) => (format!("{}_count", family.name), labels),
                (Sample::Total | Sample::Bucket(_), _) => (family.name.to_owned(), labels),
            };
            let _ = writeln!(text, "{name}{{{labels}}} {}", number(one.value));
            if let Some(created_name) = family.created {
                let _ = writeln!(
                    created,
                    "{created_name}{{{labels}}} {}",
                    number(one.created)
                );
            }
        }
        if let Some(created_name) = family.created {
            let _ = writeln!(text, "# HELP {created_name} {}", family.help);
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
    out.add(
        gauge("instance_info", "EC2 instance information"),
        &instance,
        1.0,
    );
    let hardware = &document.neuron_hardware_info;
    let device_count = hardware.neuron_device_count.to_string();
    let per_device = hardware.neuroncore_per_device_count.to_string();
    out.add(
        gauge("neuron_hardware_info", "Neuron Hardware Information"),
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
    ProcessMetrics::current().render_into(&mut text, &instance);
    text
}
