//! The monitor: follows every owned slab between reports ([`Monitor::tick`]: attaching,
//! ending, sampling latencies and, for an exporter, feeding the counters) and makes a
//! [`MonitorDocument`] whenever a group falls due ([`Monitor::poll`]); the groups themselves
//! are built in [`crate::report`] and timed by [`Schedule`].
//!
//! Time is passed in by the caller, so the schedule is testable without sleeping;
//! [`Monitor::next_report`] is the loop that sleeps.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nds::{CounterSnapshot, SlabRead};
use nds_document::config::{Plan, RuntimeGroup};
use nds_document::document::{InstanceInfo, MonitorDocument, RuntimeEntry};
use nds_document::groups::{self, CoreIndexing};
use nds_document::schedule::{GroupId, Schedule};
use nds_exporter::counters::{Counters, Sample, SeriesId};
use nds_exporter::families::{
    MONITOR_ATTACH_FAILURES, MONITOR_POD_RESOURCES_ERRORS, MONITOR_REPORTS, MONITOR_SLABS_ENDED,
};
use nds_exporter::feeds::{SlabLabels, Wants};
use nds_exporter::labels;
use nds_exporter::pods::{self, PodFeed};
use nds_host::hardware;
use nds_host::host;
use nds_host::imds::InstanceMetadata;
use nds_slabs::snapshot::{observe, sample_latencies, Observation, SlabReading};
use nds_slabs::{Candidate, Discovery, SlabKey};
use nds_sysfs::TimeInUseUnit;

use crate::attachment::{AttachFailure, Attachment, EndReason};
use crate::report::{self, RuntimeContext, SystemBaselines, SystemContext};
use crate::source::Source;

/// Ended slabs kept for the next report at most; beyond, the oldest are only counted.
pub const MAX_ENDED: usize = 1024;

/// What the rule of a process tagged `tag` wants sampled (nothing if it is filtered out).
fn wants(plan: &Plan, tag: &str) -> Wants {
    plan.rule_for(tag).map_or(Wants::default(), |(_, rule)| {
        let has = |wanted| rule.groups.iter().any(|&(group, _)| group == wanted);
        Wants {
            execution: has(RuntimeGroup::ExecutionStats),
            nds: has(RuntimeGroup::NdsCounters),
        }
    })
}

/// Entries of ended slabs waiting for the next report: at most [`MAX_ENDED`], the oldest
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

/// The exporter's own series.
#[derive(Debug)]
struct ExporterSeries {
    counters: Counters,
    reports: SeriesId,
    ended: [(EndReason, SeriesId); 3],
    attach_failures: [(AttachFailure, SeriesId); 5],
    /// With pod attribution: its failures' series, and the feed's count it has added so far.
    pod_failures: Option<(SeriesId, u64)>,
}

impl ExporterSeries {
    fn new() -> Self {
        let mut counters = Counters::default();
        let reports = counters.acquire(&MONITOR_REPORTS, Sample::Total, String::new());
        let ended = [EndReason::Released, EndReason::Reused, EndReason::Truncated].map(|reason| {
            let labels = labels::render(&vec![("reason", reason.label().to_owned())]);
            (
                reason,
                counters.acquire(&MONITOR_SLABS_ENDED, Sample::Total, labels),
            )
        });
        let attach_failures = AttachFailure::ALL.map(|reason| {
            let labels = labels::render(&vec![("reason", reason.label().to_owned())]);
            (
                reason,
                counters.acquire(&MONITOR_ATTACH_FAILURES, Sample::Total, labels),
            )
        });
        Self {
            counters,
            reports,
            ended,
            attach_failures,
            pod_failures: None,
        }
    }

    /// Keeps `nds_monitor_pod_resources_errors_total` from now on (once).
    fn count_pod_failures(&mut self) {
        if self.pod_failures.is_none() {
            let series =
                self.counters
                    .acquire(&MONITOR_POD_RESOURCES_ERRORS, Sample::Total, String::new());
            self.pod_failures = Some((series, 0));
        }
    }

    /// Adds the failures `feed` counted since the last time.
    fn sync_pod_failures(&mut self, feed: &PodFeed) {
        if let Some((series, added)) = self.pod_failures.as_mut() {
            let now = feed.failures();
            self.counters
                .add(*series, now.saturating_sub(*added) as f64);
            *added = now;
        }
    }

    /// Counts the failures of `now` that were not failures of `before` (a slab that keeps
    /// failing is counted once).
    fn count_failures(
        &mut self,
        before: &BTreeMap<(SlabKey, Option<u64>), AttachFailure>,
        now: &BTreeMap<(SlabKey, Option<u64>), AttachFailure>,
    ) {
        for (slab, reason) in now {
            if before.get(slab) == Some(reason) {
                continue;
            }
            if let Some((_, series)) = self.attach_failures.iter().find(|(r, _)| r == reason) {
                self.counters.add(*series, 1.0);
            }
        }
    }
}

/// The monitor's state between polls.
#[derive(Debug)]
pub struct Monitor {
    source: Source,
    plan: Plan,
    schedule: Schedule,
    attachments: BTreeMap<SlabKey, Attachment>,
    /// Entries for slabs that stopped being their process's, waiting for the next report.
    ended: EndedQueue,
    system: SystemBaselines,
    instance: InstanceMetadata,
    ticks_per_second: u64,
    /// Slabs that could not be attached at the last refresh.
    failures: Vec<RuntimeEntry>,
    /// Problems met by the last discovery.
    problems: Vec<String>,
    /// NeuronCores per device, as the last report found them.
    per_device: usize,
    /// The unit of busy time as the last report read it.
    time_unit: TimeInUseUnit,
    /// The counters, for a monitor that renders an exposition.
    exporter: Option<ExporterSeries>,
    /// Storage for the counters of one slab at each tick.
    scratch: Box<CounterSnapshot>,
    started: Instant,
    /// When this process started, in clock ticks since boot, if it could be read.
    own_start_ticks: Option<u64>,
    /// The slabs (and their generation) the last refresh could not attach, and why: each is
    /// counted once, when it first fails.
    attach_failed: BTreeMap<(SlabKey, Option<u64>), AttachFailure>,
    /// Which containers hold the devices, with pod attribution on.
    pods: Option<PodFeed>,
}

impl Monitor {
    /// A monitor of `source` following `plan`, starting at `now`.
    #[must_use]
    pub fn new(source: Source, plan: Plan, now: Instant) -> Self {
        let instance =
            InstanceMetadata::start(&source.host.instance_metadata, &source.host.dmi_dir);
        let hardware = hardware::hardware_info(&source.sysfs, &source.host.hardware, "");
        Self {
            system: SystemBaselines::new(&source, now),
            schedule: Schedule::new(&plan, now),
            per_device: groups::cores_per_device(&hardware),
            time_unit: source.time_in_use_unit().unwrap_or_default(),
            source,
            plan,
            attachments: BTreeMap::new(),
            ended: EndedQueue::default(),
            instance,
            ticks_per_second: host::clock_ticks_per_second(),
            failures: Vec::new(),
            problems: Vec::new(),
            exporter: None,
            scratch: Box::new(CounterSnapshot::new()),
            started: now,
            own_start_ticks: host::own_start_ticks(),
            attach_failed: BTreeMap::new(),
            pods: None,
        }
    }

    /// Keeps the exporter's counters ([`Monitor::counters`]): every attached slab's counters
    /// are followed at every tick, so that what a process counted until it ended is in them.
    #[must_use]
    pub fn with_counters(mut self) -> Self {
        let mut exporter = ExporterSeries::new();
        if self.pods.is_some() {
            exporter.count_pod_failures();
        }
        self.exporter = Some(exporter);
        self
    }

    /// Labels the exporter's series with the containers `feed` says hold each slab's device
    /// and cores ([`nds_exporter::pods`]), and counts the feed's failures.
    #[must_use]
    pub fn with_pod_attribution(mut self, feed: PodFeed) -> Self {
        if let Some(exporter) = self.exporter.as_mut() {
            exporter.count_pod_failures();
        }
        self.pods = Some(feed);
        self
    }

    /// The exporter's counters, if kept ([`Monitor::with_counters`]).
    #[must_use]
    pub fn counters(&self) -> Option<&Counters> {
        self.exporter.as_ref().map(|exporter| &exporter.counters)
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

    /// Slabs attached now.
    #[must_use]
    pub fn attached(&self) -> usize {
        self.attachments.len()
    }

    /// Latency samples held for the next reports (at most
    /// [`RESERVOIR_CAPACITY`](nds_document::latency::RESERVOIR_CAPACITY) of each kind per
    /// process).
    #[must_use]
    pub fn latency_samples_held(&self) -> usize {
        self.attachments
            .values()
            .map(|attachment| attachment.latency.held())
            .sum()
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

    /// Ticks, and returns a report if any group is due at `now`.
    pub fn poll(&mut self, now: Instant) -> Option<MonitorDocument> {
        self.tick(now);
        let due = self.schedule.due(now);
        if due.is_empty() {
            return None;
        }
        Some(self.report(now, &due))
    }

    /// A report with every group, whatever the schedule (for `top`, which reports on its own
    /// period).
    pub fn report_all(&mut self, now: Instant) -> MonitorDocument {
        self.tick(now);
        let all: Vec<GroupId> = self.schedule.all().collect();
        self.report(now, &all)
    }

    /// A report without any group: the processes attached now, the instance and the hardware,
    /// for an exporter's first exposition, before any period has passed.
    pub fn report_processes(&mut self, now: Instant) -> MonitorDocument {
        self.tick(now);
        self.report(now, &[])
    }

    /// Sleeps and ticks until a report is due, and returns it; `None` once `stop` is set
    /// (looked at every tick). `on_tick` runs after every tick.
    pub fn next_report(
        &mut self,
        stop: &AtomicBool,
        mut on_tick: impl FnMut(&Self),
    ) -> Option<MonitorDocument> {
        let step = self.sampling_step();
        loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            let document = self.poll(Instant::now());
            on_tick(self);
            if document.is_some() {
                return document;
            }
            let wait = self.until_due(Instant::now()).min(step);
            std::thread::sleep(wait.max(Duration::from_millis(1)));
        }
    }

    /// Attaches new owners, ends attachments whose slab changed hands, and samples: latencies
    /// of processes whose rule reports `execution_stats`, and (with counters) every counter.
    pub fn tick(&mut self, now: Instant) {
        self.refresh(now);
        self.sample(now);
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
        !self.schedule.due(now).is_empty()
    }

    /// How long until the next group is due after `now` (at most the shortest period).
    #[must_use]
    pub fn until_due(&self, now: Instant) -> Duration {
        let shortest = self.plan.shortest_period();
        self.schedule.until_due(now, shortest).min(shortest)
    }

    fn sample(&mut self, now: Instant) {
        let attribution = self.pods.as_ref().and_then(|feed| feed.current(now));
        if let (Some(exporter), Some(feed)) = (self.exporter.as_mut(), self.pods.as_ref()) {
            exporter.sync_pod_failures(feed);
        }
        for attachment in self.attachments.values_mut() {
            let wants = wants(&self.plan, &attachment.tag);
            let mut latencies = Vec::new();
            if wants.execution {
                if let Some(samples) =
                    sample_latencies(&attachment.store, &mut attachment.inferences)
                {
                    for &sample in &samples {
                        attachment.latency.push(sample);
                    }
                    latencies = samples;
                }
            }
            let Some(exporter) = self.exporter.as_mut() else {
                continue;
            };
            let valid = matches!(
                attachment.store.snapshot(&mut self.scratch),
                SlabRead::Valid(_)
            );
            if !valid || attachment.store.file_truncated() {
                continue;
            }
            let indexing = CoreIndexing {
                device: attachment.candidate.device,
                per_device: self.per_device,
            };
            // Only looked at with a mapping to resolve against.
            let counted = attribution
                .as_ref()
                .map_or(0, |_| pods::counted_cores(&self.scratch, self.per_device));
            let who = SlabLabels {
                tag: &attachment.tag,
                pid: attachment.owner.pid,
                indexing,
                pods: attachment
                    .pods
                    .update(attribution.as_ref(), indexing, counted),
            };
            let counters = &mut exporter.counters;
            attachment
                .feeds
                .observe(counters, &self.scratch, &who, self.time_unit, wants);
            for sample in latencies {
                attachment.feeds.observe_latency(counters, sample);
            }
        }
    }

    /// Ends the attachment at `key`: discovery now finds `found` there.
    fn end(&mut self, key: &SlabKey, generation: Option<u64>, found: Option<&Candidate>) {
        let Some(attachment) = self.attachments.remove(key) else {
            return;
        };
        let (reason, entry) = attachment.ended(generation, found);
        log::info!(
            "pid {} (\"{}\") at {}: {}",
            entry.pid,
            entry.neuron_runtime_tag,
            entry.address,
            entry.error
        );
        if let Some(exporter) = self.exporter.as_mut() {
            if let Some(&(_, id)) = exporter.ended.iter().find(|(r, _)| *r == reason) {
                exporter.counters.add(id, 1.0);
            }
            attachment.feeds.release(&mut exporter.counters);
        }
        self.ended.push(entry);
    }

    /// Attaches new owners and ends attachments whose slab changed hands.
    fn refresh(&mut self, now: Instant) {
        let Discovery {
            found,
            problems,
            hidden,
        } = self.source.discover();
        self.problems = problems;
        let mut failed: BTreeMap<(SlabKey, Option<u64>), AttachFailure> = hidden
            .into_iter()
            .map(|(key, generation)| ((key, Some(generation)), AttachFailure::NoPidView))
            .collect();
        let stale: Vec<SlabKey> = self
            .attachments
            .iter()
            .filter(|(key, attachment)| attachment.is_stale(found.get(*key)))
            .map(|(key, _)| key.clone())
            .collect();
        for key in stale {
            let generation = self
                .attachments
                .get(&key)
                .and_then(|attachment| attachment.store.slab_generation());
            self.end(&key, generation, found.get(&key));
        }
        let mut failures = Vec::new();
        for (key, candidate) in found {
            if self.attachments.contains_key(&key) {
                continue;
            }
            let proc_root = &self.source.host.proc_root;
            // An owner that is not visible (a slab file whose process is gone) is counted
            // whole, as one that started after this monitor.
            let owner_start = host::process_start_ticks(proc_root, candidate.owner.pid);
            let ran_before_monitor = owner_start
                .zip(self.own_start_ticks)
                .is_some_and(|(owner, own)| owner <= own);
            match Attachment::attach(
                key.clone(),
                candidate.clone(),
                now,
                proc_root,
                ran_before_monitor,
            ) {
                Ok(Some(attachment)) => {
                    log::info!(
                        "attached pid {} (\"{}\") at {}",
                        attachment.owner.pid,
                        attachment.tag,
                        attachment.candidate.address
                    );
                    self.attachments.insert(key, attachment);
                }
                Ok(None) => {}
                Err(error) => {
                    let reason = AttachFailure::of(&error);
                    failed.insert((key.clone(), candidate.owner.generation), reason);
                    if reason == AttachFailure::Vanished {
                        // Gone before it could be read: nothing to report about it.
                        continue;
                    }
                    log::debug!("cannot attach {}: {error}", candidate.address);
                    failures.push(RuntimeEntry {
                        pid: candidate.owner.pid,
                        address: candidate.address.clone(),
                        neuron_device_index: candidate.device,
                        neuron_runtime_tag: candidate.owner.pid.to_string(),
                        error: format!("cannot attach: {error}"),
                        ..RuntimeEntry::default()
                    });
                }
            }
        }
        self.failures = failures;
        if let Some(exporter) = self.exporter.as_mut() {
            exporter.count_failures(&self.attach_failed, &failed);
        }
        self.attach_failed = failed;
    }

    /// Reads every attached slab, then checks with discovery that each still had the same
    /// owner; attachments whose slab moved end.
    fn read_attached(&mut self) -> BTreeMap<SlabKey, SlabReading> {
        let mut readings = BTreeMap::new();
        let mut moved: Vec<(SlabKey, Option<u64>)> = Vec::new();
        for (key, attachment) in &self.attachments {
            match observe(&attachment.store) {
                Observation::Reading(reading) if !attachment.store.file_truncated() => {
                    readings.insert(key.clone(), *reading);
                }
                Observation::Reading(_) => moved.push((key.clone(), None)),
                Observation::Moved { generation } => moved.push((key.clone(), generation)),
            }
        }
        let after = self.source.discover().found;
        for (key, attachment) in &self.attachments {
            if readings.contains_key(key) && attachment.is_stale(after.get(key)) {
                readings.remove(key);
                moved.push((key.clone(), attachment.store.slab_generation()));
            }
        }
        for (key, generation) in moved {
            self.end(&key, generation, after.get(&key));
        }
        readings
    }

    fn report(&mut self, now: Instant, due: &[GroupId]) -> MonitorDocument {
        let problems = std::mem::take(&mut self.problems);
        let failures = std::mem::take(&mut self.failures);
        let mut readings = self.read_attached();
        let no_device = self.no_device();
        let hardware =
            hardware::hardware_info(&self.source.sysfs, &self.source.host.hardware, &no_device);
        self.per_device = groups::cores_per_device(&hardware);
        let time_unit = self.source.time_in_use_unit().map_err(|e| e.to_string());
        if let Ok(unit) = time_unit {
            self.time_unit = unit;
        }
        let mut document = MonitorDocument {
            timestamp: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            ..MonitorDocument::default()
        };
        let mut context = RuntimeContext {
            now,
            due,
            per_device: self.per_device,
            time_unit: time_unit.as_ref().copied().map_err(String::as_str),
            proc_root: &self.source.host.proc_root,
            ticks_per_second: self.ticks_per_second,
            vcpus: None,
        };
        for (key, attachment) in &mut self.attachments {
            let Some(reading) = readings.remove(key) else {
                continue;
            };
            attachment.tag = groups::tag_of(&reading, attachment.owner.pid);
            let Some(rule) = self.plan.rule_for(&attachment.tag) else {
                continue;
            };
            let entry = report::runtime_entry(attachment, reading, rule, &mut context);
            document.neuron_runtime_data.push(entry);
        }
        let (ended, dropped) = self.ended.take();
        if dropped > 0 {
            log::warn!(
                "{dropped} ended slabs were not reported: more than {MAX_ENDED} ended in one period"
            );
        }
        document.neuron_runtime_data.extend(
            ended
                .into_iter()
                .chain(failures)
                .filter(|entry| self.plan.rule_for(&entry.neuron_runtime_tag).is_some()),
        );
        let system_context = SystemContext {
            now,
            due,
            source: &self.source,
            schedule: &self.schedule,
            problems: &problems,
            per_device: self.per_device,
            no_device: &no_device,
            started: self.started,
        };
        let counters = self
            .exporter
            .as_mut()
            .map(|exporter| &mut exporter.counters);
        document.system_data = self.system.report(&system_context, counters);
        document.neuron_hardware_info = hardware;
        document.instance_info = self.instance.current();
        self.schedule.mark(due, now);
        if let Some(exporter) = self.exporter.as_mut() {
            exporter.counters.add(exporter.reports, 1.0);
        }
        log::debug!(
            "report: {} processes, {} groups due",
            document.neuron_runtime_data.len(),
            due.len()
        );
        document
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
