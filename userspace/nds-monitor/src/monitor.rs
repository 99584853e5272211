//! The monitor: attaches to every owned slab, samples latencies between reports, and builds a
//! [`MonitorDocument`] whenever a group is due.
//!
//! Time is passed in by the caller ([`Monitor::poll`]), so the schedule is testable without
//! sleeping.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nds::{Error as NdsError, Reader};
use nds_abi::layout::{slab_generation_is_owned, NDS_TOTAL_NEURONCORE_COUNT};
use nds_sysfs::CoreTotals;

use crate::config::{Plan, RuntimeGroup, SystemGroup};
use crate::document::{
    InstanceInfo, MemoryInfo, MonitorDocument, RuntimeEntry, RuntimeReport, RuntimeVcpuUsage,
    SystemData, VcpuUsage,
};
use crate::groups::{self, CoreIndexing, Interval};
use crate::hardware::{self, EccTotals};
use crate::host::{self, ProcStat, ProcessCpu};
use crate::imds::InstanceMetadata;
use crate::latency::LatencySamples;
use crate::snapshot::{observe, sample_latencies, Observation, SlabReading};
use crate::source::{Candidate, Owner, SlabKey, Source};
use crate::system;

/// A group's identity in the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum GroupId {
    Runtime(usize, RuntimeGroup),
    System(SystemGroup),
}

/// An attached slab.
#[derive(Debug)]
struct Attachment {
    key: SlabKey,
    candidate: Candidate,
    /// The owner as the slot table (or file name) showed it when attaching.
    owner: Owner,
    /// The slab generation in the mapping when attaching; it must not change.
    generation: Option<u64>,
    store: Reader,
    tag: String,
    /// Per group: when it was last reported for this slab, and the reading then.
    baselines: HashMap<RuntimeGroup, (Instant, SlabReading)>,
    latency: LatencySamples,
    inferences: [u64; NDS_TOTAL_NEURONCORE_COUNT],
    /// The owner's CPU time when `neuron_runtime_vcpu_usage` was last reported.
    cpu_baseline: Option<(Instant, ProcessCpu)>,
}

impl Attachment {
    fn entry(&self, error: String) -> RuntimeEntry {
        RuntimeEntry {
            pid: self.owner.pid,
            address: self.candidate.address.clone(),
            neuron_device_index: self.candidate.device,
            slot: match self.key {
                SlabKey::Slot { slot, .. } => Some(slot),
                SlabKey::File(_) => None,
            },
            generation: self.generation,
            neuron_runtime_tag: self.tag.clone(),
            error,
            report: RuntimeReport::default(),
        }
    }

    /// The entry of an attachment that ended: the slab now shows `generation` and the slot
    /// table `owner_now`.
    fn ended(&self, generation: Option<u64>, owner_now: Option<Owner>) -> RuntimeEntry {
        let pid = self.owner.pid;
        let generations = match (self.generation, generation) {
            (Some(from), Some(to)) if from != to => format!(" (generation {from} -> {to})"),
            _ => String::new(),
        };
        let withheld = "; numbers withheld, they are not this process's";
        let released = "; its counters went to the kernel's totals";
        let reason = match owner_now {
            Some(owner)
                if owner.pid != pid
                    || (owner.generation.is_some() && owner.generation != self.generation) =>
            {
                format!("slab reused by pid {}{generations}{withheld}", owner.pid)
            }
            _ => match generation {
                Some(now) if Some(now) != self.generation && slab_generation_is_owned(now) => {
                    format!("slab reused by another process{generations}{withheld}")
                }
                _ => format!("slab released by pid {pid}{generations}{released}"),
            },
        };
        self.entry(reason)
    }
}

/// The monitor's state between polls.
#[derive(Debug)]
pub struct Monitor {
    source: Source,
    plan: Plan,
    attachments: BTreeMap<SlabKey, Attachment>,
    /// Entries for slabs that stopped being their process's, waiting for the next report.
    ended: Vec<RuntimeEntry>,
    last_emitted: HashMap<GroupId, Instant>,
    system_baseline: Option<(Instant, Vec<CoreTotals>)>,
    /// `/proc/stat` when `vcpu_usage` was last reported (or the monitor started).
    vcpu_baseline: Option<(Instant, ProcStat)>,
    /// ECC totals when `neuron_hw_counters` was last reported (or the monitor started).
    ecc_baseline: (Instant, Vec<EccTotals>),
    instance: InstanceMetadata,
    ticks_per_second: u64,
    /// Slabs that could not be attached at the last refresh.
    failures: Vec<RuntimeEntry>,
    /// Problems met by the last discovery.
    problems: Vec<String>,
    started: Instant,
}

impl Monitor {
    /// A monitor of `source` following `plan`, starting at `now`.
    #[must_use]
    pub fn new(source: Source, plan: Plan, now: Instant) -> Self {
        let instance =
            InstanceMetadata::start(&source.host.instance_metadata, &source.host.dmi_dir);
        let devices = source.sysfs.devices().unwrap_or_default();
        let (ecc, _) = source.host.hardware.ecc_totals(&devices);
        let vcpu_baseline = ProcStat::read(&source.host.proc_root)
            .ok()
            .map(|stat| (now, stat));
        Self {
            source,
            plan,
            attachments: BTreeMap::new(),
            ended: Vec::new(),
            last_emitted: HashMap::new(),
            system_baseline: None,
            vcpu_baseline,
            ecc_baseline: (now, ecc),
            instance,
            ticks_per_second: host::clock_ticks_per_second(),
            failures: Vec::new(),
            problems: Vec::new(),
            started: now,
        }
    }

    /// The plan in force.
    #[must_use]
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// What the monitor reads.
    #[must_use]
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// `instance_info` as the next report will show it (the metadata is queried in the
    /// background; this never waits).
    #[must_use]
    pub fn instance_info(&self) -> InstanceInfo {
        self.instance.current()
    }

    /// Why there is no device: the source's reason (kernel slabs), or that slab files are read
    /// without one.
    fn no_device(&self) -> String {
        self.source.no_device_reason().unwrap_or_else(|| {
            format!(
                "no Neuron device under {} (slab files need none)",
                self.source.sysfs.path().display()
            )
        })
    }

    /// Samples latencies, and returns a report if any group is due at `now`.
    pub fn poll(&mut self, now: Instant) -> Option<MonitorDocument> {
        self.tick(now);
        let due = self.due(now);
        if due.is_empty() {
            return None;
        }
        Some(self.report(now, |id| due.contains(&id)))
    }

    /// Attaches new owners and samples latencies, without reporting: what a caller that
    /// reports on its own schedule ([`Monitor::report_all`]) does between reports, so that the
    /// report measures a whole period from the attach and has its latency samples.
    pub fn tick(&mut self, now: Instant) {
        self.refresh(now);
        self.sample();
    }

    /// How often to [`tick`](Monitor::tick) between reports: a few dozen times per period.
    #[must_use]
    pub fn sampling_step(&self) -> Duration {
        (self.plan.shortest_period() / 20)
            .clamp(Duration::from_millis(10), Duration::from_millis(100))
    }

    /// Whether any group is due at `now`.
    #[must_use]
    pub fn is_due(&self, now: Instant) -> bool {
        !self.due(now).is_empty()
    }

    /// A report with every group, whatever the schedule (for Prometheus scrapes and `top`).
    pub fn report_all(&mut self, now: Instant) -> MonitorDocument {
        self.tick(now);
        self.report(now, |_| true)
    }

    /// How long until the next group is due after `now` (at most the shortest period).
    #[must_use]
    pub fn until_due(&self, now: Instant) -> Duration {
        self.schedule()
            .into_iter()
            .map(|(id, period)| {
                let last = self.last_emitted.get(&id).copied().unwrap_or(self.started);
                (last + period).saturating_duration_since(now)
            })
            .min()
            .unwrap_or(self.plan.shortest_period())
    }

    fn schedule(&self) -> Vec<(GroupId, Duration)> {
        let runtime = self
            .plan
            .runtimes
            .iter()
            .enumerate()
            .flat_map(|(index, rule)| {
                rule.groups
                    .iter()
                    .map(move |&(group, period)| (GroupId::Runtime(index, group), period))
            });
        let system = self
            .plan
            .system
            .iter()
            .map(|&(group, period)| (GroupId::System(group), period));
        runtime.chain(system).collect()
    }

    fn due(&self, now: Instant) -> Vec<GroupId> {
        self.schedule()
            .into_iter()
            .filter(|(id, period)| {
                let last = self.last_emitted.get(id).copied().unwrap_or(self.started);
                now.saturating_duration_since(last) >= *period
            })
            .map(|(id, _)| id)
            .collect()
    }

    fn sample(&mut self) {
        for attachment in self.attachments.values_mut() {
            if let Some(samples) = sample_latencies(&attachment.store, &mut attachment.inferences) {
                samples
                    .into_iter()
                    .for_each(|sample| attachment.latency.push(sample));
            }
        }
    }

    /// Attaches new owners and ends attachments whose slab changed hands.
    fn refresh(&mut self, now: Instant) {
        let (found, problems) = self.source.discover();
        self.problems = problems;
        let stale: Vec<SlabKey> = self
            .attachments
            .iter()
            .filter(|(key, attachment)| match found.get(*key) {
                Some(candidate) => candidate.owner != attachment.owner,
                None => true,
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in stale {
            if let Some(attachment) = self.attachments.remove(&key) {
                let owner_now = found.get(&key).map(|c| c.owner);
                let generation = attachment.store.slab_generation();
                self.ended.push(attachment.ended(generation, owner_now));
            }
        }
        let mut failures = Vec::new();
        for (key, candidate) in found {
            if self.attachments.contains_key(&key) {
                continue;
            }
            match attach(
                key.clone(),
                candidate.clone(),
                now,
                &self.source.host.proc_root,
            ) {
                Ok(Some(attachment)) => {
                    self.attachments.insert(key, attachment);
                }
                Ok(None) => {}
                Err(error) => failures.push(RuntimeEntry {
                    pid: candidate.owner.pid,
                    address: candidate.address.clone(),
                    neuron_device_index: candidate.device,
                    neuron_runtime_tag: candidate.owner.pid.to_string(),
                    error: format!("cannot attach: {error}"),
                    ..RuntimeEntry::default()
                }),
            }
        }
        self.failures = failures;
    }

    fn report(&mut self, now: Instant, due: impl Fn(GroupId) -> bool) -> MonitorDocument {
        let problems = std::mem::take(&mut self.problems);
        let failures = std::mem::take(&mut self.failures);
        // Read every slab, then check with the kernel that each still had the same owner.
        let mut readings: BTreeMap<SlabKey, SlabReading> = BTreeMap::new();
        let mut moved: Vec<(SlabKey, Option<u64>)> = Vec::new();
        for (key, attachment) in &self.attachments {
            match observe(&attachment.store) {
                Observation::Reading(reading) => {
                    readings.insert(key.clone(), *reading);
                }
                Observation::Moved { generation } => moved.push((key.clone(), generation)),
            }
        }
        let (after, _) = self.source.discover();
        for (key, attachment) in &self.attachments {
            if !readings.contains_key(key) {
                continue;
            }
            let still = after.get(key).is_some_and(|c| c.owner == attachment.owner);
            if !still {
                readings.remove(key);
                moved.push((key.clone(), attachment.store.slab_generation()));
            }
        }
        for (key, generation) in moved {
            if let Some(attachment) = self.attachments.remove(&key) {
                let owner_now = after.get(&key).map(|c| c.owner);
                self.ended.push(attachment.ended(generation, owner_now));
            }
        }

        let hardware = hardware::hardware_info(
            &self.source.sysfs,
            &self.source.host.hardware,
            &self.no_device(),
        );
        let per_device = groups::cores_per_device(&hardware);
        let time_unit = self.source.time_in_use_unit().map_err(|e| e.to_string());
        let mut document = MonitorDocument {
            timestamp: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            ..MonitorDocument::default()
        };
        // The online vCPUs, read once and only if a process's vCPU share is due.
        let mut vcpus: Option<usize> = None;
        let proc_root = self.source.host.proc_root.clone();
        for (key, attachment) in &mut self.attachments {
            let Some(reading) = readings.remove(key) else {
                continue;
            };
            attachment.tag = groups::tag_of(&reading, attachment.owner.pid);
            let Some((rule_index, rule)) = self.plan.rule_for(&attachment.tag) else {
                continue;
            };
            let indexing = CoreIndexing {
                device: attachment.candidate.device,
                per_device,
            };
            let mut entry = attachment.entry(String::new());
            for &(group, _) in &rule.groups {
                let id = GroupId::Runtime(rule_index, group);
                if !due(id) {
                    continue;
                }
                let (since, before) = attachment
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
                            time_unit.as_ref().copied().map_err(String::as_str),
                        ));
                    }
                    RuntimeGroup::ExecutionStats => {
                        let samples = attachment.latency.take();
                        report.execution_stats = Some(groups::execution_stats(&interval, &samples));
                    }
                    RuntimeGroup::MemoryUsed => {
                        report.memory_used = Some(groups::memory_used(&interval, indexing));
                    }
                    RuntimeGroup::NeuronRuntimeVcpuUsage => {
                        let vcpus = *vcpus.get_or_insert_with(|| {
                            ProcStat::read(&proc_root).map_or(1, |stat| stat.cpus.len())
                        });
                        report.neuron_runtime_vcpu_usage = Some(runtime_vcpu_usage(
                            &proc_root,
                            attachment,
                            now,
                            vcpus,
                            self.ticks_per_second,
                        ));
                    }
                    RuntimeGroup::NdsCounters => {
                        report.nds_counters = Some(groups::nds_counters(&interval, indexing));
                    }
                    RuntimeGroup::ProcessInfo => {
                        report.process_info = Some(groups::process_info(&interval));
                    }
                }
                attachment.baselines.insert(group, (now, reading.clone()));
            }
            document.neuron_runtime_data.push(entry);
        }
        let ended = std::mem::take(&mut self.ended);
        document.neuron_runtime_data.extend(
            ended
                .into_iter()
                .chain(failures)
                .filter(|entry| self.plan.rule_for(&entry.neuron_runtime_tag).is_some()),
        );

        let system_due: Vec<SystemGroup> = self
            .plan
            .system
            .iter()
            .map(|&(group, _)| group)
            .filter(|&group| due(GroupId::System(group)))
            .collect();
        let mut system_data = SystemData::default();
        for group in system_due {
            match group {
                SystemGroup::NeuronHwCounters => {
                    let devices = self.source.sysfs.devices().unwrap_or_default();
                    let (totals, mut problems) = self.source.host.hardware.ecc_totals(&devices);
                    if devices.is_empty() {
                        problems.push(self.no_device());
                    }
                    let (since, before) = &self.ecc_baseline;
                    let seconds = now.saturating_duration_since(*since).as_secs_f64();
                    system_data.neuron_hw_counters =
                        Some(hardware::hw_counters(&totals, before, seconds, &problems));
                    self.ecc_baseline = (now, totals);
                }
                SystemGroup::VcpuUsage => {
                    system_data.vcpu_usage = Some(self.vcpu_usage(now));
                }
                SystemGroup::MemoryInfo => {
                    let since = self
                        .last_emitted
                        .get(&GroupId::System(group))
                        .copied()
                        .unwrap_or(self.started);
                    let seconds = now.saturating_duration_since(since).as_secs_f64();
                    let info = host::memory_info(&self.source.host.proc_root, seconds);
                    system_data.memory_info = Some(info.unwrap_or_else(|error| MemoryInfo {
                        period: seconds,
                        error: error.to_string(),
                        ..MemoryInfo::default()
                    }));
                }
                SystemGroup::NeuronCounters => {
                    let (totals, error) = system::read_totals(&self.source.sysfs);
                    let (since, before) = self
                        .system_baseline
                        .take()
                        .unwrap_or_else(|| (self.started, Vec::new()));
                    let mut counters = system::system_counters(
                        &self.source.sysfs,
                        &totals,
                        &before,
                        now.saturating_duration_since(since).as_secs_f64(),
                        per_device,
                        error,
                    );
                    if !problems.is_empty() {
                        let mut all = vec![counters.error.clone()];
                        all.extend(problems.iter().cloned());
                        all.retain(|p| !p.is_empty());
                        counters.error = all.join("; ");
                    }
                    system_data.neuron_counters = Some(counters);
                    self.system_baseline = Some((now, totals));
                }
            }
        }
        document.system_data = system_data;
        document.neuron_hardware_info = hardware;
        document.instance_info = self.instance.current();
        for id in self
            .schedule()
            .into_iter()
            .map(|(id, _)| id)
            .filter(|&id| due(id))
        {
            self.last_emitted.insert(id, now);
        }
        document
    }

    /// `vcpu_usage` since the last one (or the monitor's start), moving the baseline.
    fn vcpu_usage(&mut self, now: Instant) -> VcpuUsage {
        let (since, before) = self
            .vcpu_baseline
            .take()
            .map_or((self.started, None), |(at, stat)| (at, Some(stat)));
        let seconds = now.saturating_duration_since(since).as_secs_f64();
        match (ProcStat::read(&self.source.host.proc_root), before) {
            (Ok(stat), Some(before)) => {
                let usage = host::vcpu_usage(&stat, &before, seconds);
                self.vcpu_baseline = Some((now, stat));
                usage
            }
            (Ok(stat), None) => {
                self.vcpu_baseline = Some((now, stat));
                VcpuUsage {
                    period: seconds,
                    error: "no earlier /proc/stat reading to compare with".to_owned(),
                    ..VcpuUsage::default()
                }
            }
            (Err(error), _) => VcpuUsage {
                period: seconds,
                error: error.to_string(),
                ..VcpuUsage::default()
            },
        }
    }
}

/// `neuron_runtime_vcpu_usage` of `attachment`'s owner since the last one (or its attach),
/// moving the baseline.
fn runtime_vcpu_usage(
    proc_root: &std::path::Path,
    attachment: &mut Attachment,
    now: Instant,
    vcpus: usize,
    ticks_per_second: u64,
) -> RuntimeVcpuUsage {
    let pid = attachment.owner.pid;
    match ProcessCpu::read(proc_root, pid) {
        Ok(cpu) => {
            let baseline = attachment.cpu_baseline.replace((now, cpu));
            match baseline {
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
            }
        }
        Err(error) => RuntimeVcpuUsage {
            period: attachment.cpu_baseline.map_or(0.0, |(since, _)| {
                now.saturating_duration_since(since).as_secs_f64()
            }),
            error: format!("pid {pid}: {error}"),
            ..RuntimeVcpuUsage::default()
        },
    }
}

/// Opens a reader of `candidate`; `Ok(None)` when the owner is already gone, has not published
/// its header yet, or the slab changed hands since the slot table was read (the next poll tries
/// again).
fn attach(
    key: SlabKey,
    candidate: Candidate,
    now: Instant,
    proc_root: &std::path::Path,
) -> Result<Option<Attachment>, NdsError> {
    let store = match Reader::open(&candidate.backend, candidate.owner.pid) {
        Ok(store) => store,
        Err(NdsError::Ioctl { errno, .. }) if errno == libc::ENOENT => return Ok(None),
        Err(NdsError::BadHeader { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    let generation = store.attached_generation();
    if candidate.owner.generation.is_some() && candidate.owner.generation != generation {
        return Ok(None);
    }
    let candidate_pid = candidate.owner.pid;
    let mut attachment = Attachment {
        key,
        tag: candidate.owner.pid.to_string(),
        owner: candidate.owner,
        candidate,
        generation,
        store,
        baselines: HashMap::new(),
        latency: LatencySamples::default(),
        inferences: [0; NDS_TOTAL_NEURONCORE_COUNT],
        cpu_baseline: ProcessCpu::read(proc_root, candidate_pid)
            .ok()
            .map(|cpu| (now, cpu)),
    };
    if let Observation::Reading(reading) = observe(&attachment.store) {
        attachment.tag = groups::tag_of(&reading, attachment.owner.pid);
        for group in RuntimeGroup::ALL {
            attachment
                .baselines
                .insert(group, (now, (*reading).clone()));
        }
        let _ = sample_latencies(&attachment.store, &mut attachment.inferences);
    }
    Ok(Some(attachment))
}
