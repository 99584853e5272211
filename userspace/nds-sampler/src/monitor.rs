//! The monitor: follows every owned slab between reports ([`Monitor::tick`]: attaching,
//! ending, sampling latencies and counters, following the devices' tenure ledgers) and makes
//! a [`MonitorDocument`] whenever a group falls due ([`Monitor::poll`]). What it observes goes
//! as a stream ([`crate::stream`]) to its document view ([`DocumentView`]) and to its
//! consumer (the exporter, or none); the system groups are built in [`crate::system`] and
//! timed by [`Schedule`].
//!
//! A tenure's end has its final values when its device keeps a ledger: an end that
//! discovery notices waits (at most [`LEDGER_WAIT`]) for the kernel's record of it, and a
//! record that comes first ends its tenure at once. Records of tenures that ended before the
//! monitor started, or began before it and were never read, are history (`kubernetes.rst`,
//! the restart rule) and add nothing; a tenure that began after the start and ended before it
//! could be read is known from its record alone.
//!
//! Time is passed in by the caller, so the schedule is testable without sleeping;
//! [`Monitor::next_report`] is the loop that sleeps.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nds::{CounterSnapshot, LedgerEvent, SlabRead};
use nds_abi::ledger::{TenureEnd, TenureRecord};
use nds_document::config::{Plan, RuntimeGroup};
use nds_document::document::{InstanceInfo, MonitorDocument, RuntimeEntry};
use nds_document::groups::{self, CoreIndexing};
use nds_document::schedule::{GroupId, Schedule};
use nds_host::hardware;
use nds_host::host;
use nds_host::imds::InstanceMetadata;
use nds_slabs::snapshot::{observe, sample_latencies, Observation, SlabReading};
use nds_slabs::{Candidate, Discovery, SlabKey, SlabSource};
use nds_sysfs::TimeInUseUnit;

use crate::attachment::{failure_of, same_slab, AttachAs, Attached, Attachment};
use crate::document::{DocumentView, RuntimeContext, MAX_ENDED};
use crate::ledger::{DeviceLedgers, Ledger};
use crate::source::Source;
use crate::stream::{
    AttachFailure, Consumer, EndReason, Ending, Notice, Reading, RecordOutcome, Report, Tenure,
    TenureId, Wants,
};
use crate::system::{SystemBaselines, SystemContext};

/// How long an ended tenure waits for its ledger record before its last reading stands (the
/// kernel writes the record moments after the slot table shows the end).
pub const LEDGER_WAIT: Duration = Duration::from_secs(2);

/// Tenures closed without their record, remembered so that a record coming later is known as
/// late.
const GAVE_UP_KEPT: usize = 256;

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

/// Whether `record` is the end of `tenure`, attached at `key`: the same device, slot and
/// generation (the kernel's slabs), or the same device and owner (slab files).
fn is_record_of(record: &TenureRecord, key: &SlabKey, tenure: &Tenure) -> bool {
    record.device == tenure.device
        && match key {
            SlabKey::Slot { slot, .. } => {
                usize::from(record.slot) == *slot && tenure.generation == Some(record.generation)
            }
            SlabKey::File(_) => record.pid != 0 && record.pid == tenure.pid,
        }
}

/// How the monitor names the end a record tells.
fn end_of(record: &TenureRecord) -> (EndReason, String) {
    let how = record.ended_by().map_or("ended", TenureEnd::name);
    let reason = match record.ended_by() {
        Some(TenureEnd::Outlived) => EndReason::Reused,
        _ => EndReason::Released,
    };
    let text = format!(
        "slab released by pid {} (ledger record {}: {how}); its counters went to the kernel's \
         totals",
        record.pid, record.seq
    );
    (reason, text)
}

/// A tenure whose end discovery saw, waiting for its ledger record.
#[derive(Debug)]
struct Pending {
    attachment: Attachment,
    reason: EndReason,
    note: String,
    until: Instant,
}

/// Everything of the monitor but its consumer.
#[derive(Debug)]
struct Sampler {
    source: Source,
    plan: Plan,
    schedule: Schedule,
    attachments: BTreeMap<SlabKey, Attachment>,
    /// Ended tenures waiting for their ledger record.
    pending: Vec<Pending>,
    /// Slabs whose tenure its record closed while discovery may still show them: not
    /// attached again while it does.
    closed: Vec<(SlabKey, Candidate)>,
    /// Tenures closed without their record (the wait ran out).
    gave_up: VecDeque<(SlabKey, Tenure)>,
    ledger: Option<Box<dyn Ledger>>,
    /// Whether the ledger was announced to the views.
    ledger_said: bool,
    next_id: u64,
    view: DocumentView,
    system: SystemBaselines,
    instance: InstanceMetadata,
    ticks_per_second: u64,
    /// Slabs that could not be attached at the last refresh.
    failures: Vec<RuntimeEntry>,
    /// Problems met by the last discovery.
    problems: Vec<String>,
    /// Devices with slots owned by processes this monitor cannot name, at the last refresh.
    hidden_devices: BTreeSet<u32>,
    /// Devices with a slab the last refresh could not read, and why.
    unreadable_slabs: BTreeMap<u32, String>,
    /// NeuronCores per device, as the last report found them.
    per_device: usize,
    /// The unit of busy time as the last report read it.
    time_unit: TimeInUseUnit,
    /// Storage for the counters of one slab at each tick.
    scratch: Box<CounterSnapshot>,
    started: Instant,
    /// When the monitor started, `CLOCK_REALTIME` in nanoseconds (the ledger's clock).
    started_ns: u64,
    /// When this process started, in clock ticks since boot, if it could be read.
    own_start_ticks: Option<u64>,
    /// The slabs (and their generation) the last refresh could not attach, and why: each is
    /// counted once, when it first fails.
    attach_failed: BTreeMap<(SlabKey, Option<u64>), AttachFailure>,
}

/// Tells the document view and the consumer of one event.
fn emit(view: &mut DocumentView, consumer: &mut dyn Consumer, event: impl Fn(&mut dyn Consumer)) {
    event(view);
    event(consumer);
}

/// The monitor's state between polls, with its consumer `C`.
#[derive(Debug)]
pub struct Monitor<C = ()> {
    sampler: Sampler,
    consumer: C,
}

impl Monitor {
    /// A monitor of `source` following `plan`, starting at `now`, without a consumer (its
    /// document only).
    #[must_use]
    pub fn new(source: Source, plan: Plan, now: Instant) -> Self {
        let instance =
            InstanceMetadata::start(&source.host.instance_metadata, &source.host.dmi_dir);
        let hardware = hardware::hardware_info(&source.sysfs, &source.host.hardware, "");
        let started_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
            });
        let sampler = Sampler {
            system: SystemBaselines::new(&source, now),
            schedule: Schedule::new(&plan, now),
            per_device: groups::cores_per_device(&hardware),
            time_unit: source.time_in_use_unit().unwrap_or_default(),
            view: DocumentView::new(&source.host.proc_root),
            source,
            plan,
            attachments: BTreeMap::new(),
            pending: Vec::new(),
            closed: Vec::new(),
            gave_up: VecDeque::new(),
            ledger: None,
            ledger_said: false,
            next_id: 0,
            instance,
            ticks_per_second: host::clock_ticks_per_second(),
            failures: Vec::new(),
            problems: Vec::new(),
            hidden_devices: BTreeSet::new(),
            unreadable_slabs: BTreeMap::new(),
            scratch: Box::new(CounterSnapshot::new()),
            started: now,
            started_ns,
            own_start_ticks: host::own_start_ticks(),
            attach_failed: BTreeMap::new(),
        };
        Self {
            sampler,
            consumer: (),
        }
    }
}

impl<C: Consumer> Monitor<C> {
    /// This monitor, telling `consumer` what it observes from now on. For a consumer that
    /// follows counters, a monitor of the kernel's slabs without a ledger yet follows the
    /// devices' tenure ledgers, for the final values of each tenure.
    #[must_use]
    pub fn with_consumer<D: Consumer>(mut self, consumer: D) -> Monitor<D> {
        let source = &self.sampler.source;
        if let (None, true, SlabSource::Kernel { dev_dir }) = (
            &self.sampler.ledger,
            consumer.follows_counters(),
            &source.slabs,
        ) {
            let ledger = DeviceLedgers::new(dev_dir, source.sysfs.clone());
            self.sampler.ledger = Some(Box::new(ledger));
        }
        Monitor {
            sampler: self.sampler,
            consumer,
        }
    }

    /// This monitor, following `ledger` instead of the devices' (`None`: no ledger).
    #[must_use]
    pub fn with_ledger(mut self, ledger: Option<Box<dyn Ledger>>) -> Self {
        self.sampler.ledger = ledger;
        self
    }

    /// The consumer.
    #[must_use]
    pub fn consumer(&self) -> &C {
        &self.consumer
    }

    /// The consumer, to change.
    pub fn consumer_mut(&mut self) -> &mut C {
        &mut self.consumer
    }

    /// The plan in force.
    #[must_use]
    pub fn plan(&self) -> &Plan {
        &self.sampler.plan
    }

    /// What the monitor reads.
    #[must_use]
    pub fn source(&self) -> &Source {
        &self.sampler.source
    }

    /// When the monitor started, on the ledger's clock (`CLOCK_REALTIME`, nanoseconds).
    #[must_use]
    pub fn started_ns(&self) -> u64 {
        self.sampler.started_ns
    }

    /// Slabs attached now.
    #[must_use]
    pub fn attached(&self) -> usize {
        self.sampler.attachments.len()
    }

    /// Ended tenures waiting for their ledger record.
    #[must_use]
    pub fn awaiting_records(&self) -> usize {
        self.sampler.pending.len()
    }

    /// Latency samples held for the next reports (at most
    /// [`RESERVOIR_CAPACITY`](nds_document::latency::RESERVOIR_CAPACITY) of each kind per
    /// process).
    #[must_use]
    pub fn latency_samples_held(&self) -> usize {
        self.sampler.view.latency_samples_held()
    }

    /// `instance_info` as the next report will show it (the metadata is queried in the
    /// background; this never waits).
    #[must_use]
    pub fn instance_info(&self) -> InstanceInfo {
        self.sampler.instance.current()
    }

    /// Ticks, and returns a report if any group is due at `now`.
    pub fn poll(&mut self, now: Instant) -> Option<MonitorDocument> {
        self.tick(now);
        let due = self.sampler.schedule.due(now);
        if due.is_empty() {
            return None;
        }
        Some(self.sampler.report(now, &due, &mut self.consumer))
    }

    /// A report with every group, whatever the schedule (for `top`, which reports on its own
    /// period).
    pub fn report_all(&mut self, now: Instant) -> MonitorDocument {
        self.tick(now);
        let all: Vec<GroupId> = self.sampler.schedule.all().collect();
        self.sampler.report(now, &all, &mut self.consumer)
    }

    /// A report without any group: the processes attached now, the instance and the hardware,
    /// for an exporter's first exposition, before any period has passed.
    pub fn report_processes(&mut self, now: Instant) -> MonitorDocument {
        self.tick(now);
        self.sampler.report(now, &[], &mut self.consumer)
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

    /// Attaches new owners, ends attachments whose slab changed hands, reads the ledgers, and
    /// samples: latencies of processes whose rule reports `execution_stats`, and every counter
    /// when the consumer follows them.
    pub fn tick(&mut self, now: Instant) {
        let consumer = &mut self.consumer;
        self.sampler.refresh(now, consumer);
        self.sampler.follow_ledger(now, consumer);
        self.sampler.stop_waiting(now, consumer);
        self.sampler.sample(now, consumer);
    }

    /// How often to [`tick`](Monitor::tick) between reports: a few dozen times per period.
    #[must_use]
    pub fn sampling_step(&self) -> Duration {
        (self.sampler.plan.shortest_period() / 20)
            .clamp(Duration::from_millis(10), Duration::from_millis(100))
    }

    /// Whether every group of the plan has been reported at least once: each source the plan
    /// reads has been read.
    #[must_use]
    pub fn reported_every_group(&self) -> bool {
        self.sampler.schedule.reported_every_group()
    }

    /// Whether any group is due at `now`.
    #[must_use]
    pub fn is_due(&self, now: Instant) -> bool {
        !self.sampler.schedule.due(now).is_empty()
    }

    /// How long until the next group is due after `now` (at most the shortest period).
    #[must_use]
    pub fn until_due(&self, now: Instant) -> Duration {
        let shortest = self.sampler.plan.shortest_period();
        self.sampler.schedule.until_due(now, shortest).min(shortest)
    }
}

impl Sampler {
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

    fn next_id(&mut self) -> TenureId {
        self.next_id += 1;
        TenureId(self.next_id)
    }

    /// How the cores of `device` are numbered instance-wide.
    fn indexing(&self, device: u32) -> CoreIndexing {
        CoreIndexing {
            device,
            per_device: self.per_device,
        }
    }

    /// The reading of `attachment` at `now` with every record, `slab` (no counters: nobody
    /// follows them from it).
    fn full_reading<'a>(
        &self,
        attachment: &'a Attachment,
        now: Instant,
        slab: Option<&'a SlabReading>,
    ) -> Reading<'a> {
        Reading {
            now,
            tag: &attachment.tag,
            wants: wants(&self.plan, &attachment.tag),
            indexing: self.indexing(attachment.tenure.device),
            time_unit: self.time_unit,
            counters: None,
            latencies: &[],
            slab,
        }
    }

    fn sample(&mut self, now: Instant, consumer: &mut dyn Consumer) {
        let follows = consumer.follows_counters();
        let Self {
            attachments,
            plan,
            scratch,
            view,
            per_device,
            time_unit,
            ..
        } = self;
        for attachment in attachments.values_mut() {
            let wants = wants(plan, &attachment.tag);
            let mut latencies = Vec::new();
            if wants.execution {
                if let Some(samples) =
                    sample_latencies(&attachment.store, &mut attachment.inferences)
                {
                    latencies = samples;
                }
            }
            let valid = follows
                && matches!(attachment.store.snapshot(scratch), SlabRead::Valid(_))
                && !attachment.store.file_truncated();
            if !valid && latencies.is_empty() {
                continue;
            }
            let reading = Reading {
                now,
                tag: &attachment.tag,
                wants,
                indexing: CoreIndexing {
                    device: attachment.tenure.device,
                    per_device: *per_device,
                },
                time_unit: *time_unit,
                counters: valid.then_some(&**scratch),
                latencies: &latencies,
                slab: None,
            };
            let tenure = &attachment.tenure;
            emit(view, consumer, |to| to.reading(tenure, &reading));
        }
    }

    /// Tells of the end of `attachment`'s tenure, with `record` (its final values) if there is
    /// one.
    fn finish(
        &mut self,
        attachment: &Attachment,
        (reason, note): (EndReason, &str),
        record: Option<&TenureRecord>,
        now: Instant,
        consumer: &mut dyn Consumer,
    ) {
        let ending = Ending {
            now,
            reason,
            note,
            tag: &attachment.tag,
            wants: wants(&self.plan, &attachment.tag),
            indexing: self.indexing(attachment.tenure.device),
            time_unit: self.time_unit,
            record,
            seen: true,
        };
        let tenure = &attachment.tenure;
        emit(&mut self.view, consumer, |to| to.ended(tenure, &ending));
    }

    /// Ends the attachment at `key`: discovery now finds `found` there. With a ledger on its
    /// device, the end waits for its record.
    fn end(
        &mut self,
        key: &SlabKey,
        generation: Option<u64>,
        found: Option<&Candidate>,
        now: Instant,
        consumer: &mut dyn Consumer,
    ) {
        let Some(attachment) = self.attachments.remove(key) else {
            return;
        };
        let (reason, note) = attachment.ended(generation, found);
        log::info!(
            "pid {} (\"{}\") at {}: {note}",
            attachment.tenure.pid,
            attachment.tag,
            attachment.tenure.address,
        );
        let device = attachment.tenure.device;
        if self.ledger.as_ref().is_some_and(|l| l.follows(device)) {
            self.pending.push(Pending {
                attachment,
                reason,
                note,
                until: now + LEDGER_WAIT,
            });
        } else {
            self.finish(&attachment, (reason, &note), None, now, consumer);
        }
    }

    /// Attaches new owners and ends attachments whose slab changed hands.
    fn refresh(&mut self, now: Instant, consumer: &mut dyn Consumer) {
        let Discovery {
            found,
            problems,
            hidden,
        } = self.source.discover();
        self.problems = problems;
        self.hidden_devices = hidden
            .iter()
            .filter_map(|(key, _)| match key {
                SlabKey::Slot { device, .. } => Some(*device),
                SlabKey::File(_) => None,
            })
            .collect();
        let mut failed: BTreeMap<(SlabKey, Option<u64>), AttachFailure> = hidden
            .into_iter()
            .map(|(key, generation)| ((key, Some(generation)), AttachFailure::NoPidView))
            .collect();
        self.closed
            .retain(|(key, then)| found.get(key).is_some_and(|now| same_slab(now, then)));
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
            self.end(&key, generation, found.get(&key), now, consumer);
        }
        let mut failures = Vec::new();
        for (key, candidate) in found {
            let closed = self.closed.iter().any(|(at, _)| *at == key);
            if closed || self.attachments.contains_key(&key) {
                continue;
            }
            let proc_root = &self.source.host.proc_root;
            // An owner that is not visible (a slab file whose process is gone) is counted
            // whole, as one that started after this monitor.
            let owner_start = host::process_start_ticks(proc_root, candidate.owner.pid);
            let ran_before_monitor = owner_start
                .zip(self.own_start_ticks)
                .is_some_and(|(owner, own)| owner <= own);
            let cgroup = host::process_cgroup(proc_root, candidate.owner.pid);
            let attach_as = AttachAs {
                id: TenureId(self.next_id + 1),
                ran_before_monitor,
                cgroup: cgroup.as_deref(),
            };
            match Attachment::attach(key.clone(), candidate.clone(), attach_as) {
                Ok(Some(Attached { attachment, first })) => {
                    self.next_id();
                    log::info!(
                        "attached pid {} (\"{}\") at {}",
                        attachment.tenure.pid,
                        attachment.tag,
                        attachment.tenure.address
                    );
                    let reading = self.full_reading(&attachment, now, first.as_deref());
                    let tenure = &attachment.tenure;
                    emit(&mut self.view, consumer, |to| to.began(tenure, &reading));
                    self.attachments.insert(key, attachment);
                }
                Ok(None) => {}
                Err(error) => {
                    let reason = failure_of(&error);
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
        self.unreadable_slabs = failures
            .iter()
            .map(|entry| (entry.neuron_device_index, entry.error.clone()))
            .chain(self.hidden_devices.iter().map(|&device| {
                let why = "a slot is owned by a process outside this monitor's pid namespace";
                (device, why.to_owned())
            }))
            .collect();
        self.failures = failures;
        // A slab that keeps failing is counted once.
        for (slab, reason) in &failed {
            if self.attach_failed.get(slab) != Some(reason) {
                emit(&mut self.view, consumer, |to| {
                    to.noticed(&Notice::AttachFailed(*reason));
                });
            }
        }
        self.attach_failed = failed;
    }

    /// Reads what the ledgers have, and settles each record.
    fn follow_ledger(&mut self, now: Instant, consumer: &mut dyn Consumer) {
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        // The devices whose ledger is wanted again at the next tick.
        let hold: BTreeSet<u32> = self
            .attachments
            .values()
            .map(|attachment| &attachment.tenure)
            .chain(
                self.pending
                    .iter()
                    .map(|pending| &pending.attachment.tenure),
            )
            .map(|tenure| tenure.device)
            .chain(self.hidden_devices.iter().copied())
            .collect();
        let events = ledger.read(&hold);
        if !self.ledger_said {
            self.ledger_said = true;
            emit(&mut self.view, consumer, |to| {
                to.noticed(&Notice::LedgerFollowed);
            });
        }
        for (device, event) in events {
            let notice = match event {
                LedgerEvent::Lost { first, last } => {
                    log::warn!(
                        "device {device}: the tenure ledger dropped records {first}..={last} \
                         before the monitor read them; their tenures keep their last readings"
                    );
                    Notice::LedgerLost {
                        device,
                        first,
                        last,
                    }
                }
                LedgerEvent::Tenure(record) => {
                    let outcome = self.settle(&record, now, consumer);
                    consumer.recorded(&record, outcome);
                    Notice::LedgerRecord(outcome)
                }
                LedgerEvent::Restarted => {
                    log::info!(
                        "device {device}: the tenure ledger started over (the module was \
                         loaded again); following it from its first record"
                    );
                    continue;
                }
            };
            emit(&mut self.view, consumer, |to| to.noticed(&notice));
        }
    }

    /// What `record` says of the tenures the monitor knows.
    fn settle(
        &mut self,
        record: &TenureRecord,
        now: Instant,
        consumer: &mut dyn Consumer,
    ) -> RecordOutcome {
        let values = (!record.is_redacted()).then_some(record);
        let live = self
            .attachments
            .iter()
            .find(|(key, attachment)| is_record_of(record, key, &attachment.tenure))
            .map(|(key, _)| key.clone());
        if let Some(key) = live {
            if let Some(attachment) = self.attachments.remove(&key) {
                // Discovery may show the slab a little longer: not the next tenure's.
                self.closed.push((key, attachment.candidate.clone()));
                let (reason, note) = end_of(record);
                log::info!(
                    "pid {} (\"{}\") at {}: {note}",
                    attachment.tenure.pid,
                    attachment.tag,
                    attachment.tenure.address
                );
                self.finish(&attachment, (reason, &note), values, now, consumer);
            }
        } else if let Some(index) = self.pending.iter().position(|pending| {
            is_record_of(record, &pending.attachment.key, &pending.attachment.tenure)
        }) {
            let pending = self.pending.remove(index);
            let ending = (pending.reason, pending.note.as_str());
            self.finish(&pending.attachment, ending, values, now, consumer);
        } else if let Some((_, tenure)) = self
            .gave_up
            .iter()
            .find(|(key, tenure)| !record.is_redacted() && is_record_of(record, key, tenure))
        {
            log::info!(
                "ledger record {} of device {} (pid {}) came after its tenure was closed with \
                 its last reading",
                record.seq,
                record.device,
                tenure.pid
            );
            return RecordOutcome::Late;
        } else if self.is_history(record) {
            // Before the monitor's time, whether or not it may read the record.
            return RecordOutcome::History;
        } else if record.is_redacted() {
            return RecordOutcome::Redacted;
        } else {
            self.unseen(record, now, consumer);
            return RecordOutcome::Unseen;
        }
        if record.is_redacted() {
            RecordOutcome::Redacted
        } else {
            RecordOutcome::Final
        }
    }

    /// Whether `record` is of a tenure that ended before the monitor started, or began before
    /// it (and was not read by it: the restart rule).
    fn is_history(&self, record: &TenureRecord) -> bool {
        record.ended_ns < self.started_ns || record.started_ns < self.started_ns
    }

    /// Tells of a tenure known only from its `record`: it began after the monitor started and
    /// ended before the monitor could read it.
    fn unseen(&mut self, record: &TenureRecord, now: Instant, consumer: &mut dyn Consumer) {
        let tag = record
            .tag()
            .map(|tag| String::from_utf8_lossy(tag).into_owned())
            .filter(|tag| !tag.is_empty())
            .unwrap_or_else(|| record.pid.to_string());
        let cgroup = String::from_utf8_lossy(record.cgroup_path()).into_owned();
        let slot = usize::from(record.slot);
        let tenure = Tenure {
            id: self.next_id(),
            device: record.device,
            slot: Some(slot),
            generation: Some(record.generation),
            pid: record.pid,
            address: self.source.slabs.slot_address(record.device, slot),
            ran_before_monitor: false,
            cgroup: (!cgroup.is_empty()).then_some(cgroup),
        };
        let (reason, note) = end_of(record);
        log::info!(
            "pid {} (\"{tag}\") at {}: {note}; it ended before the monitor could read it",
            tenure.pid,
            tenure.address
        );
        let ending = Ending {
            now,
            reason,
            note: &note,
            tag: &tag,
            wants: wants(&self.plan, &tag),
            indexing: self.indexing(record.device),
            time_unit: self.time_unit,
            record: Some(record),
            seen: false,
        };
        emit(&mut self.view, consumer, |to| to.ended(&tenure, &ending));
    }

    /// Closes the tenures whose record did not come in time with their last readings.
    fn stop_waiting(&mut self, now: Instant, consumer: &mut dyn Consumer) {
        let (due, waiting): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|pending| pending.until <= now);
        self.pending = waiting;
        for pending in due {
            log::info!(
                "no ledger record of pid {} at {} within {LEDGER_WAIT:?}: its last reading stands",
                pending.attachment.tenure.pid,
                pending.attachment.tenure.address
            );
            let ending = (pending.reason, pending.note.as_str());
            self.finish(&pending.attachment, ending, None, now, consumer);
            if self.gave_up.len() >= GAVE_UP_KEPT {
                self.gave_up.pop_front();
            }
            self.gave_up
                .push_back((pending.attachment.key, pending.attachment.tenure));
        }
    }

    /// Reads every attached slab, then checks with discovery that each still had the same
    /// owner; attachments whose slab moved end.
    fn read_attached(
        &mut self,
        now: Instant,
        consumer: &mut dyn Consumer,
    ) -> BTreeMap<SlabKey, SlabReading> {
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
            self.end(&key, generation, after.get(&key), now, consumer);
        }
        readings
    }

    fn report(
        &mut self,
        now: Instant,
        due: &[GroupId],
        consumer: &mut dyn Consumer,
    ) -> MonitorDocument {
        let problems = std::mem::take(&mut self.problems);
        let failures = std::mem::take(&mut self.failures);
        let readings = self.read_attached(now, consumer);
        let no_device = self.no_device();
        let hardware =
            hardware::hardware_info(&self.source.sysfs, &self.source.host.hardware, &no_device);
        self.per_device = groups::cores_per_device(&hardware);
        let time_unit = self.source.time_in_use_unit().map_err(|e| e.to_string());
        if let Ok(unit) = time_unit {
            self.time_unit = unit;
        }
        for (key, reading) in &readings {
            let Some(attachment) = self.attachments.get_mut(key) else {
                continue;
            };
            attachment.tag = groups::tag_of(reading, attachment.tenure.pid);
            let Some(attachment) = self.attachments.get(key) else {
                continue;
            };
            let reading = self.full_reading(attachment, now, Some(reading));
            let tenure = &attachment.tenure;
            emit(&mut self.view, consumer, |to| to.reading(tenure, &reading));
        }
        let mut document = MonitorDocument {
            timestamp: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            ..MonitorDocument::default()
        };
        let context = RuntimeContext {
            now,
            due,
            per_device: self.per_device,
            time_unit: time_unit.as_ref().copied().map_err(String::as_str),
            ticks_per_second: self.ticks_per_second,
        };
        document.neuron_runtime_data = self.view.runtime_entries(&self.plan, &context);
        let (ended, dropped) = self.view.take_ended();
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
        let devices = self.source.sysfs.devices().map_err(|e| e.to_string());
        let system_context = SystemContext {
            now,
            due,
            source: &self.source,
            schedule: &self.schedule,
            problems: &problems,
            per_device: self.per_device,
            no_device: &no_device,
            started: self.started,
            devices: devices.as_deref().map_err(String::as_str),
            totals_wanted: consumer.reads_totals(),
        };
        let system = self.system.report(&system_context);
        document.system_data = system.data;
        document.neuron_hardware_info = hardware;
        document.instance_info = self.instance.current();
        self.schedule.mark(due, now);
        let module_missing = self.source.module_missing();
        let report = Report {
            now,
            document: &document,
            core_totals: system.core_totals.as_deref(),
            ecc_totals: system.ecc_totals.as_deref(),
            per_device: self.per_device,
            time_unit: self.time_unit,
            devices: devices.as_deref().map_err(String::as_str),
            device_totals: system.device_totals.as_ref(),
            unreadable_slabs: &self.unreadable_slabs,
            module_missing: module_missing.as_deref(),
        };
        emit(&mut self.view, consumer, |to| to.reported(&report));
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
    use std::path::PathBuf;

    use nds_abi::ledger::TENURE_REDACTED;
    use zerocopy::FromZeros;

    use super::*;

    fn tenure(device: u32, generation: Option<u64>, pid: i32) -> Tenure {
        Tenure {
            id: TenureId(1),
            device,
            slot: Some(3),
            generation,
            pid,
            address: String::new(),
            ran_before_monitor: false,
            cgroup: None,
        }
    }

    #[test]
    fn a_record_is_its_slots_tenure_by_generation_or_its_files_by_owner() {
        let mut record = TenureRecord::new_zeroed();
        (record.device, record.slot, record.generation, record.pid) = (1, 3, 7, 42);
        let slot = SlabKey::Slot { device: 1, slot: 3 };
        assert!(is_record_of(&record, &slot, &tenure(1, Some(7), 42)));
        assert!(
            !is_record_of(&record, &slot, &tenure(1, Some(9), 42)),
            "the slot's next tenure"
        );
        assert!(!is_record_of(
            &record,
            &SlabKey::Slot { device: 1, slot: 4 },
            &tenure(1, Some(7), 42)
        ));
        assert!(!is_record_of(&record, &slot, &tenure(2, Some(7), 42)));
        // Redacted: no pid, but the slot and generation still say whose end it was.
        record.flags = TENURE_REDACTED;
        record.pid = 0;
        assert!(is_record_of(&record, &slot, &tenure(1, Some(7), 42)));
        let file = SlabKey::File(PathBuf::from("neuron1-42.slab"));
        assert!(!is_record_of(&record, &file, &tenure(1, Some(0), 42)));
        record.pid = 42;
        assert!(is_record_of(&record, &file, &tenure(1, Some(0), 42)));
    }

    #[test]
    fn an_outlived_tenure_is_a_reuse_every_other_end_a_release() {
        let mut record = TenureRecord::new_zeroed();
        record.seq = 12;
        record.pid = 42;
        for (end, reason, name) in [
            (TenureEnd::Release, EndReason::Released, "release"),
            (TenureEnd::LastClose, EndReason::Released, "close"),
            (TenureEnd::Reaped, EndReason::Released, "reaped"),
            (TenureEnd::Outlived, EndReason::Reused, "outlived"),
        ] {
            record.end = end as u8;
            let (found, text) = end_of(&record);
            assert_eq!(found, reason, "{name}");
            assert!(
                text.starts_with(&format!(
                    "slab released by pid 42 (ledger record 12: {name})"
                )),
                "{text}"
            );
        }
    }
}
