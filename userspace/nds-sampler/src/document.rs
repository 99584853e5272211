//! The JSON document's view of the stream ([`DocumentView`]): per tenure, the baselines of its
//! groups, the period's latency samples and its CPU time, all from the events it was told;
//! at a report, the entry of every process read for it, each group due over the period since
//! that group's baseline, and the entries of the tenures that ended since.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Instant;

use nds_document::config::{Plan, RuntimeGroup};
use nds_document::document::{RuntimeEntry, RuntimeReport, RuntimeVcpuUsage};
use nds_document::groups::{self, Interval};
use nds_document::latency::LatencyReservoir;
use nds_document::schedule::GroupId;
use nds_host::host::{self, ProcStat, ProcessCpu};
use nds_slabs::snapshot::SlabReading;
use nds_sysfs::TimeInUseUnit;

use crate::stream::{Consumer, Ending, Reading, Tenure, TenureId};

/// Ended tenures' entries kept for the next report at most; beyond, the oldest are only
/// counted.
pub const MAX_ENDED: usize = 1024;

/// Entries of ended tenures waiting for the next report: at most [`MAX_ENDED`], the oldest
/// dropped (and counted) beyond.
#[derive(Debug, Default)]
struct EndedQueue {
    entries: VecDeque<RuntimeEntry>,
    dropped: u64,
}

impl EndedQueue {
    fn push(&mut self, entry: RuntimeEntry) {
        if self.entries.len() >= MAX_ENDED {
            self.entries.pop_front();
            self.dropped += 1;
        }
        self.entries.push_back(entry);
    }

    /// The entries, and how many were dropped, since the last take.
    fn take(&mut self) -> (VecDeque<RuntimeEntry>, u64) {
        (
            std::mem::take(&mut self.entries),
            std::mem::take(&mut self.dropped),
        )
    }
}

/// What the document keeps of one tenure.
#[derive(Debug)]
struct DocTenure {
    tenure: Tenure,
    /// The process tag, as last read.
    tag: String,
    /// Per group: when it was last reported, and the reading then.
    baselines: HashMap<RuntimeGroup, (Instant, SlabReading)>,
    /// The current period's latency samples.
    latency: LatencyReservoir,
    /// The owner's CPU time when `neuron_runtime_vcpu_usage` was last reported.
    cpu_baseline: Option<(Instant, ProcessCpu)>,
    /// The reading of the report being made.
    reported: Option<SlabReading>,
}

impl DocTenure {
    /// The entry of this process in a report (no group yet), with `error`.
    fn entry(&self, error: String) -> RuntimeEntry {
        RuntimeEntry {
            pid: self.tenure.pid,
            address: self.tenure.address.clone(),
            neuron_device_index: self.tenure.device,
            slot: self.tenure.slot,
            generation: self.tenure.generation,
            neuron_runtime_tag: self.tag.clone(),
            error,
            report: RuntimeReport::default(),
        }
    }
}

/// What every process's groups of one report share.
pub struct RuntimeContext<'a> {
    /// The report's time.
    pub now: Instant,
    /// The groups due.
    pub due: &'a [GroupId],
    /// NeuronCores per device.
    pub per_device: usize,
    /// The unit of busy time, or why it is unknown.
    pub time_unit: Result<TimeInUseUnit, &'a str>,
    /// Clock ticks per second of `/proc` CPU times.
    pub ticks_per_second: u64,
}

/// The document's view of the stream.
#[derive(Debug)]
pub struct DocumentView {
    proc_root: PathBuf,
    tenures: BTreeMap<TenureId, DocTenure>,
    /// The tenures read for the report being made, in the order they were read.
    reported: Vec<TenureId>,
    ended: EndedQueue,
}

impl DocumentView {
    /// A view reading processes' CPU times under `proc_root`.
    #[must_use]
    pub fn new(proc_root: &Path) -> Self {
        Self {
            proc_root: proc_root.to_path_buf(),
            tenures: BTreeMap::new(),
            reported: Vec::new(),
            ended: EndedQueue::default(),
        }
    }

    /// Latency samples held for the next reports.
    #[must_use]
    pub fn latency_samples_held(&self) -> usize {
        self.tenures.values().map(|doc| doc.latency.held()).sum()
    }

    /// The entries of the processes read for this report whose tag `plan` reports, each with
    /// its groups of `context.due` over the period since that group's baseline, which moves
    /// to this reading.
    pub fn runtime_entries(
        &mut self,
        plan: &Plan,
        context: &RuntimeContext<'_>,
    ) -> Vec<RuntimeEntry> {
        let mut vcpus = None;
        let mut entries = Vec::new();
        for id in std::mem::take(&mut self.reported) {
            let Some(doc) = self.tenures.get_mut(&id) else {
                continue;
            };
            let Some(reading) = doc.reported.take() else {
                continue;
            };
            let Some(rule) = plan.rule_for(&doc.tag) else {
                continue;
            };
            entries.push(runtime_entry(
                doc,
                reading,
                rule,
                context,
                &self.proc_root,
                &mut vcpus,
            ));
        }
        entries
    }

    /// The entries of the tenures that ended since the last call, and how many more ended
    /// than were kept.
    pub fn take_ended(&mut self) -> (VecDeque<RuntimeEntry>, u64) {
        self.ended.take()
    }
}

impl Consumer for DocumentView {
    fn began(&mut self, tenure: &Tenure, first: &Reading<'_>) {
        let now = first.now;
        let baselines = first.slab.map_or_else(HashMap::new, |reading| {
            RuntimeGroup::ALL
                .into_iter()
                .map(|group| (group, (now, reading.clone())))
                .collect()
        });
        let doc = DocTenure {
            tenure: tenure.clone(),
            tag: first.tag.to_owned(),
            baselines,
            latency: LatencyReservoir::default(),
            cpu_baseline: ProcessCpu::read(&self.proc_root, tenure.pid)
                .ok()
                .map(|cpu| (now, cpu)),
            reported: None,
        };
        self.tenures.insert(tenure.id, doc);
    }

    fn reading(&mut self, tenure: &Tenure, reading: &Reading<'_>) {
        let Some(doc) = self.tenures.get_mut(&tenure.id) else {
            return;
        };
        reading.tag.clone_into(&mut doc.tag);
        for &sample in reading.latencies {
            doc.latency.push(sample);
        }
        if let Some(slab) = reading.slab {
            if doc.reported.replace(slab.clone()).is_none() {
                self.reported.push(tenure.id);
            }
        }
    }

    fn ended(&mut self, tenure: &Tenure, ending: &Ending<'_>) {
        if let Some(doc) = self.tenures.remove(&tenure.id) {
            self.reported.retain(|id| *id != tenure.id);
            self.ended.push(doc.entry(ending.note.to_owned()));
        }
    }
}

/// The entry of `doc`'s process, reported by rule `rule_index` from `reading`: its groups due
/// now, each over the period since that group's baseline, which moves to `reading`. `vcpus`
/// is read once per report, and only if a process's vCPU share is due.
fn runtime_entry(
    doc: &mut DocTenure,
    reading: SlabReading,
    (rule_index, rule): (usize, &nds_document::config::RuntimeRule),
    context: &RuntimeContext<'_>,
    proc_root: &Path,
    vcpus: &mut Option<usize>,
) -> RuntimeEntry {
    let now = context.now;
    let indexing = groups::CoreIndexing {
        device: doc.tenure.device,
        per_device: context.per_device,
    };
    let mut entry = doc.entry(String::new());
    let mut reported = Vec::new();
    for &(group, _) in &rule.groups {
        if !context.due.contains(&GroupId::Runtime(rule_index, group)) {
            continue;
        }
        reported.push(group);
        let (since, before) = doc
            .baselines
            .get(&group)
            .map_or((now, &reading), |(at, before)| (*at, before));
        let interval = Interval {
            now: &reading,
            before,
            seconds: now.saturating_duration_since(since).as_secs_f64(),
        };
        let report = &mut entry.report;
        match group {
            RuntimeGroup::NeuroncoreCounters => {
                report.neuroncore_counters = Some(groups::neuroncore_counters(
                    &interval,
                    indexing,
                    context.time_unit,
                ));
            }
            RuntimeGroup::ExecutionStats => {
                let samples = doc.latency.take();
                report.execution_stats = Some(groups::execution_stats(&interval, &samples));
            }
            RuntimeGroup::MemoryUsed => {
                report.memory_used = Some(groups::memory_used(&interval, indexing));
            }
            RuntimeGroup::NeuronRuntimeVcpuUsage => {
                let vcpus = *vcpus.get_or_insert_with(|| {
                    ProcStat::read(proc_root).map_or(1, |stat| stat.cpus.len())
                });
                report.neuron_runtime_vcpu_usage = Some(runtime_vcpu_usage(
                    proc_root,
                    doc,
                    now,
                    vcpus,
                    context.ticks_per_second,
                ));
            }
            RuntimeGroup::NdsCounters => {
                report.nds_counters = Some(groups::nds_counters(&interval, indexing));
            }
            RuntimeGroup::ProcessInfo => {
                report.process_info = Some(groups::process_info(&interval));
            }
        }
    }
    // Each group reported measures its next period from this reading (the last one takes it).
    if let Some((last, others)) = reported.split_last() {
        for &group in others {
            doc.baselines.insert(group, (now, reading.clone()));
        }
        doc.baselines.insert(*last, (now, reading));
    }
    entry
}

/// `neuron_runtime_vcpu_usage` of `doc`'s owner since the last one (or its attach), moving
/// the baseline.
fn runtime_vcpu_usage(
    proc_root: &Path,
    doc: &mut DocTenure,
    now: Instant,
    vcpus: usize,
    ticks_per_second: u64,
) -> RuntimeVcpuUsage {
    let pid = doc.tenure.pid;
    match ProcessCpu::read(proc_root, pid) {
        Ok(cpu) => match doc.cpu_baseline.replace((now, cpu)) {
            Some((since, before)) => host::runtime_vcpu_usage(
                cpu,
                before,
                now.saturating_duration_since(since).as_secs_f64(),
                vcpus,
                ticks_per_second,
            ),
            None => RuntimeVcpuUsage {
                error: format!("pid {pid}: first reading of its CPU time"),
                ..RuntimeVcpuUsage::default()
            },
        },
        Err(error) => RuntimeVcpuUsage {
            period: doc.cpu_baseline.map_or(0.0, |(since, _)| {
                now.saturating_duration_since(since).as_secs_f64()
            }),
            error: format!("pid {pid}: {error}"),
            ..RuntimeVcpuUsage::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_entries_are_capped() {
        let mut queue = EndedQueue::default();
        for pid in 0..i32::try_from(MAX_ENDED).unwrap() + 10 {
            queue.push(RuntimeEntry {
                pid,
                ..RuntimeEntry::default()
            });
        }
        let (entries, dropped) = queue.take();
        assert_eq!((entries.len(), dropped), (MAX_ENDED, 10));
        assert_eq!(entries.front().map(|e| e.pid), Some(10), "the oldest went");
        let (entries, dropped) = queue.take();
        assert_eq!((entries.len(), dropped), (0, 0));
    }
}
