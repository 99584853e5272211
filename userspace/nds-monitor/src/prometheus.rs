//! The Prometheus text exposition format (version 0.0.4) of a report.
//!
//! Counters end in `_total`; every runtime series carries `device`, `pid` and `tag` labels,
//! per-core series also `core`. The per-status and usage counters are the ones the kernel
//! aggregates in sysfs, under the same names (`nds_abi::sysfs::SYSFS_COUNTERS`): per process
//! from its slab (`neuron_runtime_*`), per device from sysfs (`neuron_device_*`).

use std::fmt::Write;

use nds_abi::sysfs::{CounterSource, SysfsCounter, SysfsGroup, SYSFS_COUNTERS};

use crate::document::{MonitorDocument, RuntimeEntry};

/// The media type of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One metric family being assembled.
struct Family {
    name: String,
    help: &'static str,
    kind: &'static str,
    samples: Vec<String>,
}

/// Families in output order, each written once with all its samples.
#[derive(Default)]
struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    fn add(
        &mut self,
        name: &str,
        help: &'static str,
        kind: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        let index = match self.families.iter().position(|f| f.name == name) {
            Some(index) => index,
            None => {
                self.families.push(Family {
                    name: name.to_owned(),
                    help,
                    kind,
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        let labels: Vec<String> = labels
            .iter()
            .map(|(key, value)| format!("{key}=\"{}\"", escape(value)))
            .collect();
        if let Some(family) = self.families.get_mut(index) {
            family
                .samples
                .push(format!("{name}{{{}}} {}", labels.join(","), number(value)));
        }
    }

    fn render(&self) -> String {
        let mut text = String::new();
        for family in &self.families {
            let _ = writeln!(text, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(text, "# TYPE {} {}", family.name, family.kind);
            for sample in &family.samples {
                let _ = writeln!(text, "{sample}");
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

/// The slab counter name a sysfs node sums.
fn source_name(counter: &SysfsCounter) -> &'static str {
    match counter.source {
        CounterSource::Nc(nc) => nc.name(),
        CounterSource::Ext(ext) => ext.name(),
    }
}

fn runtime_series(out: &mut Exposition, entry: &RuntimeEntry) {
    let device = entry.neuron_device_index.to_string();
    let pid = entry.pid.to_string();
    let tag = entry.neuron_runtime_tag.as_str();
    let base = [
        ("device", device.as_str()),
        ("pid", pid.as_str()),
        ("tag", tag),
    ];
    let state = if entry.error.is_empty() {
        "ok"
    } else {
        "error"
    };
    let mut labels = base.to_vec();
    labels.push(("state", state));
    out.add(
        "neuron_runtime_info",
        "A process with a datastore slab (state error: released, reused or not attachable).",
        "gauge",
        &labels,
        1.0,
    );
    let report = &entry.report;
    if let Some(counters) = &report.nds_counters {
        for (core, values) in &counters.neuroncores {
            for counter in SYSFS_COUNTERS.iter() {
                let raw = values.get(source_name(counter)).map_or(0, |v| v.total);
                let value = raw.wrapping_mul(counter.scale) as f64;
                let mut labels = base.to_vec();
                labels.push(("core", core));
                match counter.group {
                    SysfsGroup::Status => {
                        labels.push(("status", counter.name));
                        out.add(
                            "neuron_runtime_status_total",
                            "Executions and errors per status since the process started.",
                            "counter",
                            &labels,
                            value,
                        );
                    }
                    SysfsGroup::OtherInfo => out.add(
                        &format!("neuron_runtime_{}_total", counter.name),
                        "Usage counted since the process started (sysfs other_info node).",
                        "counter",
                        &labels,
                        value,
                    ),
                }
            }
        }
    }
    if let Some(cores) = &report.neuroncore_counters {
        for (core, usage) in &cores.neuroncores_in_use {
            let mut labels = base.to_vec();
            labels.push(("core", core));
            out.add(
                "neuron_runtime_neuroncore_utilization_percent",
                "NeuronCore busy time over the last period, percent.",
                "gauge",
                &labels,
                usage.neuroncore_utilization,
            );
        }
    }
    if let Some(memory) = &report.memory_used {
        let used = &memory.neuron_runtime_used_bytes;
        for (location, bytes) in [("host", used.host), ("neuron_device", used.neuron_device)] {
            let mut labels = base.to_vec();
            labels.push(("location", location));
            out.add(
                "neuron_runtime_memory_used_bytes",
                "Memory the process uses.",
                "gauge",
                &labels,
                bytes as f64,
            );
        }
        out.add(
            "neuron_runtime_loaded_models",
            "Models loaded by the process.",
            "gauge",
            &base,
            memory.loaded_models.len() as f64,
        );
    }
    if let Some(stats) = &report.execution_stats {
        let latencies = [
            ("total", stats.latency_stats.total_latency),
            ("device", stats.latency_stats.device_latency),
        ];
        for (kind, percentiles) in latencies {
            let Some(p) = percentiles else { continue };
            for (quantile, value) in [
                ("0", p.p0),
                ("0.01", p.p1),
                ("0.25", p.p25),
                ("0.5", p.p50),
                ("0.75", p.p75),
                ("0.99", p.p99),
                ("1", p.p100),
            ] {
                let mut labels = base.to_vec();
                labels.push(("kind", kind));
                labels.push(("quantile", quantile));
                out.add(
                    "neuron_runtime_latency_seconds",
                    "Execution latency quantiles over the last period.",
                    "gauge",
                    &labels,
                    value,
                );
            }
        }
    }
}

/// Renders `document` (best made with every group present) as an exposition.
#[must_use]
pub fn render(document: &MonitorDocument) -> String {
    let mut out = Exposition::default();
    for entry in &document.neuron_runtime_data {
        runtime_series(&mut out, entry);
    }
    if let Some(system) = &document.system_data.neuron_counters {
        for device in &system.neuron_devices {
            let index = device.neuron_device_index.to_string();
            out.add(
                "neuron_device_slots_owned",
                "Datastore slabs currently owned by a process.",
                "gauge",
                &[("device", &index)],
                device.slots_owned as f64,
            );
            for (core, counters) in &device.neuroncores {
                let labels = [("device", index.as_str()), ("core", core.as_str())];
                for (status, value) in &counters.status {
                    let mut labels = labels.to_vec();
                    labels.push(("status", status));
                    out.add(
                        "neuron_device_status_total",
                        "The kernel's aggregate per status: released owners plus live ones.",
                        "counter",
                        &labels,
                        value.total as f64,
                    );
                }
                for (name, value) in &counters.other_info {
                    out.add(
                        &format!("neuron_device_{name}_total"),
                        "The kernel's aggregate of a usage counter (sysfs other_info node).",
                        "counter",
                        &labels,
                        value.total as f64,
                    );
                }
            }
        }
    }
    out.render()
}
