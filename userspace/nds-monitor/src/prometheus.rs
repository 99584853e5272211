//! The Prometheus text exposition format (version 0.0.4) of a report.
//!
//! Two sets of families:
//!
//! * the ecosystem's: the names and labels neuron-monitor's companion exporter
//!   (`neuron-monitor-prometheus.py`) produces, which the CloudWatch agent and the
//!   OpenTelemetry Container Insights receiver scrape: `neuroncore_utilization_ratio`,
//!   `execution_status_total{status_type}`, `neuron_runtime_memory_used_bytes{memory_location}`,
//!   `hardware_ecc_events_total`, `system_*`, the `instance_info` and `neuron_hardware_info`
//!   info metrics, and the rest. Runtime series carry `runtime_tag` and, like every series,
//!   the instance labels; NeuronCore indexes are instance-wide. Counters are lifetime totals
//!   (of the process, or of the driver for ECC events); series of processes sharing a tag are
//!   added up (latency percentiles: the larger).
//! * this monitor's, prefixed `nds_`: per-status and usage counters per process and core from
//!   its slab (`nds_runtime_*`) and the kernel's aggregates per device and core from sysfs
//!   (`nds_device_*`), under the sysfs node names (`nds_abi::sysfs::SYSFS_COUNTERS`), with
//!   `pid` so that processes sharing a tag stay apart.

use std::fmt::Write;

use nds_abi::sysfs::{CounterSource, SysfsCounter, SysfsGroup, SYSFS_COUNTERS};

use crate::document::{
    CpuShares, ErrorSummary, ExecutionSummary, InstanceInfo, MonitorDocument, Percentiles,
    RuntimeEntry, SystemData,
};

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

const fn counter<'a>(name: &'a str, help: &'static str) -> Spec<'a> {
    Spec {
        name,
        help,
        kind: "counter",
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

/// A label set under construction.
type Labels<'a> = Vec<(&'a str, String)>;

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
        let mut sorted: Vec<&(&str, String)> = labels.iter().collect();
        sorted.sort_by_key(|(name, _)| *name);
        let rendered: Vec<String> = sorted
            .iter()
            .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
            .collect();
        let rendered = rendered.join(",");
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

    fn render(&self) -> String {
        let mut text = String::new();
        for family in &self.families {
            let _ = writeln!(text, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(text, "# TYPE {} {}", family.name, family.kind);
            for (labels, value) in &family.samples {
                let _ = writeln!(text, "{}{{{labels}}} {}", family.name, number(*value));
            }
        }
        text
    }
}

/// Escapes a label value: backslash, double quote and line feed.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
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

fn with<'a>(base: &Labels<'a>, more: &[(&'a str, &str)]) -> Labels<'a> {
    let mut labels = base.clone();
    labels.extend(more.iter().map(|&(name, value)| (name, value.to_owned())));
    labels
}

/// The slab counter name a sysfs node sums.
fn source_name(counter: &SysfsCounter) -> &'static str {
    match counter.source {
        CounterSource::Nc(nc) => nc.name(),
        CounterSource::Ext(ext) => ext.name(),
    }
}

fn error_types(errors: &ErrorSummary) -> [(&'static str, u64); 6] {
    [
        ("generic", errors.generic),
        ("numerical", errors.numerical),
        ("transient", errors.transient),
        ("model", errors.model),
        ("runtime", errors.runtime),
        ("hardware", errors.hardware),
    ]
}

fn status_types(runs: &ExecutionSummary) -> [(&'static str, u64); 6] {
    [
        ("completed", runs.completed),
        ("completed_with_err", runs.completed_with_err),
        ("completed_with_num_err", runs.completed_with_num_err),
        ("timed_out", runs.timed_out),
        ("incorrect_input", runs.incorrect_input),
        ("failed_to_queue", runs.failed_to_queue),
    ]
}

/// Percentiles with the companion exporter's labels (`p50`) and quantiles (`0.5`).
fn percentiles(p: &Percentiles) -> [(&'static str, &'static str, f64); 7] {
    [
        ("p0", "0", p.p0),
        ("p1", "0.01", p.p1),
        ("p25", "0.25", p.p25),
        ("p50", "0.5", p.p50),
        ("p75", "0.75", p.p75),
        ("p99", "0.99", p.p99),
        ("p100", "1", p.p100),
    ]
}

/// The ecosystem's runtime families of one live process.
fn ecosystem_runtime(out: &mut Exposition, entry: &RuntimeEntry, instance: &Labels<'static>) {
    let tag = with(instance, &[("runtime_tag", &entry.neuron_runtime_tag)]);
    let report = &entry.report;
    if let Some(cores) = &report.neuroncore_counters {
        for (core, usage) in &cores.neuroncores_in_use {
            out.add(
                gauge(
                    "neuroncore_utilization_ratio",
                    "NeuronCore utilization ratio",
                ),
                &with(&tag, &[("neuroncore", core)]),
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
            let labels = with(&tag, &[("neuroncore", core), ("memory_location", "None")]);
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
        for (error_type, count) in error_types(&stats.lifetime.error_summary) {
            out.add(
                counter("execution_errors_total", "Execution errors total"),
                &with(&tag, &[("error_type", error_type)]),
                count as f64,
            );
        }
        for (status_type, count) in status_types(&stats.lifetime.execution_summary) {
            out.add(
                counter("execution_status_total", "Execution status total"),
                &with(&tag, &[("status_type", status_type)]),
                count as f64,
            );
        }
        if let Some(total) = &stats.latency_stats.total_latency {
            for (percentile, _, seconds) in percentiles(total) {
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

/// This monitor's runtime families of one process (state and slab counters).
fn nds_runtime(out: &mut Exposition, entry: &RuntimeEntry, instance: &Labels<'static>) {
    let device = entry.neuron_device_index.to_string();
    let pid = entry.pid.to_string();
    let base = with(
        instance,
        &[
            ("runtime_tag", &entry.neuron_runtime_tag),
            ("pid", &pid),
            ("neuron_device_index", &device),
        ],
    );
    let state = if entry.error.is_empty() {
        "ok"
    } else {
        "error"
    };
    out.add(
        gauge(
            "nds_runtime_info",
            "A process with a datastore slab (state error: released, reused or not attachable).",
        ),
        &with(&base, &[("state", state)]),
        1.0,
    );
    let report = &entry.report;
    if let Some(counters) = &report.nds_counters {
        for (core, values) in &counters.neuroncores {
            let labels = with(&base, &[("neuroncore", core)]);
            for node in SYSFS_COUNTERS.iter() {
                let raw = values.get(source_name(node)).map_or(0, |v| v.total);
                let value = raw.wrapping_mul(node.scale) as f64;
                match node.group {
                    SysfsGroup::Status => out.add(
                        counter(
                            "nds_runtime_status_total",
                            "Executions and errors per status since the process started.",
                        ),
                        &with(&labels, &[("status", node.name)]),
                        value,
                    ),
                    SysfsGroup::OtherInfo => out.add(
                        counter(
                            &format!("nds_runtime_{}_total", node.name),
                            "Usage counted since the process started (sysfs other_info node).",
                        ),
                        &labels,
                        value,
                    ),
                }
            }
        }
    }
    if let Some(memory) = &report.memory_used {
        out.add(
            gauge("nds_runtime_loaded_models", "Models loaded by the process."),
            &base,
            memory.loaded_models.len() as f64,
        );
    }
    if let Some(stats) = &report.execution_stats {
        let latencies = [
            ("total", stats.latency_stats.total_latency),
            ("device", stats.latency_stats.device_latency),
        ];
        for (kind, percentiles_of_kind) in latencies {
            let Some(p) = percentiles_of_kind else {
                continue;
            };
            for (_, quantile, seconds) in percentiles(&p) {
                out.add(
                    gauge(
                        "nds_runtime_latency_seconds",
                        "Execution latency quantiles over the last period (total and device).",
                    ),
                    &with(&base, &[("kind", kind), ("quantile", quantile)]),
                    seconds,
                );
            }
        }
    }
}

/// The ecosystem's system families.
fn ecosystem_system(out: &mut Exposition, system: &SystemData, instance: &Labels<'static>) {
    if let Some(hw) = &system.neuron_hw_counters {
        for device in &hw.lifetime {
            let index = device.neuron_device_index.to_string();
            for (event_type, count) in [
                ("mem_ecc_corrected", device.mem_ecc_corrected),
                ("mem_ecc_uncorrected", device.mem_ecc_uncorrected),
                ("sram_ecc_corrected", device.sram_ecc_corrected),
                ("sram_ecc_uncorrected", device.sram_ecc_uncorrected),
            ] {
                out.add(
                    counter("hardware_ecc_events_total", "Hardware ecc events total"),
                    &with(
                        instance,
                        &[("event_type", event_type), ("neuron_device_index", &index)],
                    ),
                    count as f64,
                );
            }
        }
    }
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

/// This monitor's device families: the kernel's aggregates from sysfs.
fn nds_devices(out: &mut Exposition, system: &SystemData, instance: &Labels<'static>) {
    let Some(counters) = &system.neuron_counters else {
        return;
    };
    for device in &counters.neuron_devices {
        let index = device.neuron_device_index.to_string();
        let labels = with(instance, &[("neuron_device_index", &index)]);
        out.add(
            gauge(
                "nds_device_slots_owned",
                "Datastore slabs currently owned by a process.",
            ),
            &labels,
            device.slots_owned as f64,
        );
        for (core, nodes) in &device.neuroncores {
            let labels = with(&labels, &[("neuroncore", core)]);
            for (status, value) in &nodes.status {
                out.add(
                    counter(
                        "nds_device_status_total",
                        "The kernel's aggregate per status: released owners plus live ones.",
                    ),
                    &with(&labels, &[("status", status)]),
                    value.total as f64,
                );
            }
            for (name, value) in &nodes.other_info {
                out.add(
                    counter(
                        &format!("nds_device_{name}_total"),
                        "The kernel's aggregate of a usage counter (sysfs other_info node).",
                    ),
                    &labels,
                    value.total as f64,
                );
            }
        }
    }
}

/// Renders `document` (best made with every group present) as an exposition.
#[must_use]
pub fn render(document: &MonitorDocument) -> String {
    let mut out = Exposition::default();
    let instance = instance_labels(&document.instance_info);
    for entry in document
        .neuron_runtime_data
        .iter()
        .filter(|entry| entry.error.is_empty())
    {
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
    for entry in &document.neuron_runtime_data {
        nds_runtime(&mut out, entry, &instance);
    }
    nds_devices(&mut out, &document.system_data, &instance);
    out.render()
}
