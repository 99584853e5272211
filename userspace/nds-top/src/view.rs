//! What one tab shows, condensed from a report.

use nds_document::document::{
    CoreMemory, ErrorSummary, ExecutionSummary, HostBreakdown, MonitorDocument, RuntimeEntry,
};
use nds_document::groups::{cores_per_device, CoreIndexing};
use nds_terminal::escape;

/// A tab of the tab bar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tab {
    /// Label (`all`, or the process tag); process tabs are ordered by device, tag and pid.
    pub title: String,
    /// The process, for per-process tabs.
    pub pid: Option<i32>,
}

/// One NeuronCore's row.
#[derive(Clone, Debug, PartialEq)]
pub struct CoreRow {
    /// `nc<index> nd<device>`, the core's instance-wide index and its device (and the pid on
    /// the "all" tab).
    pub label: String,
    /// Busy percent over the period.
    pub utilization: f64,
    /// FLOP/s.
    pub flops: f64,
    /// Inferences per second.
    pub throughput: f64,
}

/// A model in the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelNode {
    /// Key for expansion state (`pid:model_id`).
    pub key: String,
    /// The model's line.
    pub label: String,
    /// One line per subgraph.
    pub children: Vec<String>,
}

/// Everything one tab shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View {
    /// Core rows.
    pub cores: Vec<CoreRow>,
    /// Outcomes over the period.
    pub executions: ExecutionSummary,
    /// Outcomes since the processes started.
    pub executions_total: ExecutionSummary,
    /// Error classes since the processes started.
    pub errors_total: ErrorSummary,
    /// Host memory.
    pub host: HostBreakdown,
    /// Device memory over all cores.
    pub device: CoreMemory,
    /// Models.
    pub models: Vec<ModelNode>,
    /// Messages about slabs that went away.
    pub notes: Vec<String>,
}

/// The tabs of a report: "all", then one per process with a live slab.
#[must_use]
pub fn tabs(document: &MonitorDocument) -> Vec<Tab> {
    let mut tabs = vec![Tab {
        title: "all".to_owned(),
        pid: None,
    }];
    tabs.extend(live(document).map(|entry| Tab {
        title: escape(&entry.neuron_runtime_tag),
        pid: Some(entry.pid),
    }));
    tabs
}

/// The processes with a live slab, by device, tag and pid (the tab order).
fn live(document: &MonitorDocument) -> impl Iterator<Item = &RuntimeEntry> {
    let mut entries: Vec<&RuntimeEntry> = document
        .neuron_runtime_data
        .iter()
        .filter(|entry| entry.error.is_empty())
        .collect();
    entries.sort_by(|a, b| {
        (a.neuron_device_index, &a.neuron_runtime_tag, a.pid).cmp(&(
            b.neuron_device_index,
            &b.neuron_runtime_tag,
            b.pid,
        ))
    });
    entries.into_iter()
}

fn add_summary(sum: &mut ExecutionSummary, more: &ExecutionSummary) {
    sum.completed = sum.completed.wrapping_add(more.completed);
    sum.completed_with_err = sum.completed_with_err.wrapping_add(more.completed_with_err);
    sum.completed_with_num_err = sum
        .completed_with_num_err
        .wrapping_add(more.completed_with_num_err);
    sum.timed_out = sum.timed_out.wrapping_add(more.timed_out);
    sum.incorrect_input = sum.incorrect_input.wrapping_add(more.incorrect_input);
    sum.failed_to_queue = sum.failed_to_queue.wrapping_add(more.failed_to_queue);
}

fn add_errors(sum: &mut ErrorSummary, more: &ErrorSummary) {
    sum.generic = sum.generic.wrapping_add(more.generic);
    sum.numerical = sum.numerical.wrapping_add(more.numerical);
    sum.transient = sum.transient.wrapping_add(more.transient);
    sum.model = sum.model.wrapping_add(more.model);
    sum.runtime = sum.runtime.wrapping_add(more.runtime);
    sum.hardware = sum.hardware.wrapping_add(more.hardware);
}

/// Bytes in MiB, rounded, for labels.
#[must_use]
pub fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// The view of tab `tab` (0: all processes).
#[must_use]
pub fn view(document: &MonitorDocument, tab: usize) -> View {
    let all = tab == 0;
    let entries: Vec<&RuntimeEntry> = match tab {
        0 => live(document).collect(),
        n => live(document).skip(n - 1).take(1).collect(),
    };
    let mut view = View::default();
    let per_device = cores_per_device(&document.neuron_hardware_info);
    for entry in entries {
        let report = &entry.report;
        let device = entry.neuron_device_index;
        if let Some(cores) = &report.neuroncore_counters {
            // The monitor keys cores by instance-wide index already.
            for (core, usage) in &cores.neuroncores_in_use {
                let mut label = format!("nc{core} nd{device}");
                if all {
                    label = format!("{label} {}", entry.pid);
                }
                view.cores.push(CoreRow {
                    label,
                    utilization: usage.neuroncore_utilization,
                    flops: usage.flops,
                    throughput: if cores.period > 0.0 {
                        usage.inferences as f64 / cores.period
                    } else {
                        0.0
                    },
                });
            }
        }
        if let Some(stats) = &report.execution_stats {
            add_summary(&mut view.executions, &stats.execution_summary);
            add_summary(
                &mut view.executions_total,
                &stats.lifetime.execution_summary,
            );
            add_errors(&mut view.errors_total, &stats.lifetime.error_summary);
        }
        if let Some(memory) = &report.memory_used {
            let used = &memory.neuron_runtime_used_bytes.usage_breakdown;
            view.host.application_memory = view
                .host
                .application_memory
                .wrapping_add(used.host.application_memory);
            view.host.constants = view.host.constants.wrapping_add(used.host.constants);
            view.host.dma_buffers = view.host.dma_buffers.wrapping_add(used.host.dma_buffers);
            view.host.tensors = view.host.tensors.wrapping_add(used.host.tensors);
            for core in used.neuroncore_memory_usage.values() {
                view.device.constants = view.device.constants.wrapping_add(core.constants);
                view.device.model_code = view.device.model_code.wrapping_add(core.model_code);
                view.device.model_shared_scratchpad = view
                    .device
                    .model_shared_scratchpad
                    .wrapping_add(core.model_shared_scratchpad);
                view.device.runtime_memory =
                    view.device.runtime_memory.wrapping_add(core.runtime_memory);
                view.device.tensors = view.device.tensors.wrapping_add(core.tensors);
            }
            for model in &memory.loaded_models {
                let owner = if all {
                    format!(" [{}]", entry.pid)
                } else {
                    String::new()
                };
                let running = if model.is_running { " *" } else { "" };
                view.models.push(ModelNode {
                    key: format!("{}:{}", entry.pid, model.model_id),
                    label: format!(
                        "{} #{}{owner}{running}",
                        escape(&model.name),
                        model.model_id
                    ),
                    children: model
                        .subgraphs
                        .iter()
                        .map(|(name, sg)| {
                            let indexing = CoreIndexing {
                                device: sg.neuron_device_index,
                                per_device,
                            };
                            // A subgraph counts its core within its device.
                            let core = usize::try_from(sg.neuroncore_index).unwrap_or(usize::MAX);
                            let index = indexing.key(core).unwrap_or_else(|| "?".to_owned());
                            format!(
                                "{name} nc{index} {}",
                                mib(sg.memory_used_bytes.neuron_device)
                            )
                        })
                        .collect(),
                });
            }
        }
    }
    view.notes = document
        .neuron_runtime_data
        .iter()
        .filter(|entry| !entry.error.is_empty())
        .map(|entry| format!("pid {}: {}", entry.pid, escape(&entry.error)))
        .collect();
    view
}
