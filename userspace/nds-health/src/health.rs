//! Health as a view of the sampler's stream ([`Health`], a `nds_sampler::Consumer`): each
//! tenure's error counters are followed from its readings to its final values (its ledger
//! record), and every rise goes, with an event log, into the event stream; at each report
//! every device and NeuronCore is judged by the plan's rules from the errors counted within
//! the window, and verdict changes and the module's comings and goings are evented too.
//!
//! What the window counts: where the kernel's totals count every slab the stream reads (the
//! kernel's slabs, [`Health::judging_from_totals`]), the rises of each device's per-core
//! totals between reports, whatever slabs the monitor could read; the part of a rise no
//! tenure's event accounts for is evented without an owner ([`crate::totals`]). Slab files,
//! which no module counts, are judged from the tenures' rises, and a device with a slab the
//! monitor cannot read is then unknown.
//!
//! A tenure's rises are evented at each report and at its end, so a tenure's events add up to
//! its final values less what it had counted before the stream saw it: nothing for a tenure
//! that began after the stream started, its first reading for one that ran before, and what
//! was last evented for one the saved state of a resumed stream names (judged from totals,
//! less what its ledger record claims of the rises evented without an owner).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nds_abi::ledger::{TenureEnd, TenureRecord};
use nds_document::groups::CoreIndexing;
use nds_document::health::{
    CoreHealth, DeviceHealth, Evidence, HealthGroup, HealthRules, Judged, Reason, Verdict,
};
use nds_exporter::pods::uids::pod_uid;
use nds_host::hardware::ECC_COUNTERS;
use nds_sampler::monitor::LEDGER_WAIT;
use nds_sampler::stream::{
    Consumer, EndReason, Ending, Notice, Reading, RecordOutcome, Report, Tenure, TenureId,
};

use crate::errors::{error_nodes, ErrorValues};
use crate::events::{Event, EventRing};
use crate::state::TenureIdentity;
use crate::totals::TotalsAccount;
use crate::window::ErrorWindow;
use crate::writer::EventLog;

/// Tenures closed without their record, kept so that a record coming late still events its
/// rises (as many as the sampler remembers).
const CLOSED_KEPT: usize = 256;

/// The driver's ECC counters that are errors nothing corrected.
const ECC_ERRORS: [&str; 2] = ["mem_ecc_uncorrected", "sram_ecc_uncorrected"];

/// One tenure as health follows it.
#[derive(Debug)]
struct Followed {
    identity: TenureIdentity,
    /// The owner.
    pid: i32,
    tag: String,
    pod_uid: Option<String>,
    indexing: CoreIndexing,
    /// Its counters as last evented (and counted in the window).
    evented: ErrorValues,
    /// Its counters as last read.
    latest: ErrorValues,
}

/// Who a tenure is across restarts: a slot's by its device, slot and generation, a slab
/// file's by its device and owner.
fn identity_of(
    device: u32,
    slot: Option<usize>,
    generation: Option<u64>,
    pid: i32,
) -> TenureIdentity {
    match slot {
        Some(slot) => TenureIdentity {
            device,
            slot: Some(slot),
            generation,
            pid: 0,
        },
        None => TenureIdentity {
            device,
            slot: None,
            generation: None,
            pid,
        },
    }
}

/// Who the tenure `record` ended may be: a slot's, or a slab file's (whose records name their
/// owner), as the sampler matches records to tenures.
fn identities_of(record: &TenureRecord) -> [TenureIdentity; 2] {
    let slot = Some(usize::from(record.slot));
    [
        identity_of(record.device, slot, Some(record.generation), record.pid),
        identity_of(record.device, None, None, record.pid),
    ]
}

/// The error counters of a reading, if it has any.
fn values_of(reading: &Reading<'_>) -> Option<ErrorValues> {
    let cores = reading.indexing.per_device;
    match (reading.counters, reading.slab) {
        (Some(counters), _) => Some(ErrorValues::of_slab(&counters.nc, cores)),
        (None, Some(slab)) => Some(ErrorValues::of_slab(&slab.nc, cores)),
        (None, None) => None,
    }
}

/// Where a tenure's rises were read, which says how the kernel's totals account for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadFrom {
    /// A reading of its slab (or its last one, standing for its end).
    Reading,
    /// Its ledger record: what no reading of this monitor saw.
    Record,
    /// The ledger record of a resumed stream's history: mostly counted before this monitor's
    /// first report, which its totals' rises do not hold.
    History,
}

/// The end a record tells, as a tenure end event names it.
fn end_of(record: &TenureRecord) -> EndReason {
    match record.ended_by() {
        Some(TenureEnd::Outlived) => EndReason::Reused,
        _ => EndReason::Released,
    }
}

/// Each device's and core's verdict, as last judged.
#[derive(Debug, Default)]
struct Verdicts {
    devices: BTreeMap<u32, Verdict>,
    cores: BTreeMap<(u32, usize), Verdict>,
}

/// The health view.
#[derive(Debug)]
pub struct Health {
    rules: HealthRules,
    window: ErrorWindow,
    tenures: BTreeMap<TenureId, Followed>,
    closed: VecDeque<Followed>,
    ecc: BTreeMap<(u32, usize), u64>,
    /// Every device listed since the start.
    known: BTreeSet<u32>,
    /// Devices listed at the last report (`Err`: why they could not be).
    listed: Result<Vec<u32>, String>,
    /// Devices whose totals could not be read at their last reading, and why.
    totals_errors: BTreeMap<u32, String>,
    /// The kernel's totals, when the devices are judged from them.
    totals: Option<TotalsAccount>,
    module_loaded: bool,
    verdicts: Verdicts,
    group: HealthGroup,
    log: Option<EventLog>,
    started: Instant,
}

impl Health {
    /// Health by `rules`, from `now`, without an event stream.
    #[must_use]
    pub fn new(rules: HealthRules, now: Instant) -> Self {
        Self {
            window: ErrorWindow::new(rules.window),
            rules,
            tenures: BTreeMap::new(),
            closed: VecDeque::new(),
            ecc: BTreeMap::new(),
            known: BTreeSet::new(),
            listed: Ok(Vec::new()),
            totals_errors: BTreeMap::new(),
            totals: None,
            module_loaded: true,
            verdicts: Verdicts::default(),
            group: HealthGroup::default(),
            log: None,
            started: now,
        }
    }

    /// This view, writing every event to `log`.
    #[must_use]
    pub fn with_event_log(mut self, log: EventLog) -> Self {
        self.log = Some(log);
        self
    }

    /// This view, judging each device and NeuronCore from the rises of the kernel's per-core
    /// totals, which count every slab the stream reads (the kernel's slabs: not slab files,
    /// which no module counts), and eventing without an owner the part of a rise no tenure's
    /// event accounts for. A device whose slab the monitor cannot read is judged all the same.
    #[must_use]
    pub fn judging_from_totals(mut self) -> Self {
        self.totals = Some(TotalsAccount::new());
        self
    }

    /// The ring the events are published to, with an event log.
    #[must_use]
    pub fn events(&self) -> Option<Arc<Mutex<EventRing>>> {
        self.log.as_ref().map(EventLog::ring)
    }

    /// Every device's verdict, as last judged.
    #[must_use]
    pub fn group(&self) -> &HealthGroup {
        &self.group
    }

    /// The rules in force.
    #[must_use]
    pub fn rules(&self) -> &HealthRules {
        &self.rules
    }

    /// The devices the module's sysfs tree listed at the last report (`Err`: why it could not
    /// be listed).
    pub fn listed(&self) -> Result<&[u32], &str> {
        self.listed.as_deref().map_err(String::as_str)
    }

    fn push(&mut self, event: Event) {
        if let Some(log) = &mut self.log {
            log.push(event);
        }
    }

    /// Events each rise of `values` over what `followed` evented, read from `from`: judged
    /// from the totals, it goes into their account (a record's rise less what it claims of
    /// the rises evented without an owner); otherwise into the window.
    fn event_rises(
        &mut self,
        followed: &Followed,
        values: &ErrorValues,
        now: Instant,
        from: ReadFrom,
    ) {
        let device = followed.indexing.device;
        let per_device = followed.indexing.per_device;
        let rises: Vec<(usize, usize, u64)> = values.rises_over(&followed.evented).collect();
        for (core, node, delta) in rises {
            let Some((_, counter)) = error_nodes().find(|(index, _)| *index == node) else {
                continue;
            };
            let key = (device, core, node);
            let delta = match (&mut self.totals, from) {
                (None, _) => {
                    self.window
                        .add(now, (device, Some(core)), counter.name, delta);
                    delta
                }
                (Some(totals), ReadFrom::Reading) => {
                    totals.attribute(key, delta);
                    delta
                }
                (Some(totals), ReadFrom::Record) => {
                    let rest = totals.claim(key, delta);
                    totals.attribute(key, rest);
                    rest
                }
                (Some(totals), ReadFrom::History) => totals.claim(key, delta),
            };
            if delta == 0 {
                continue;
            }
            self.push(Event::Counter {
                neuron_device_index: device,
                neuroncore_index: core_index(device, per_device, core),
                counter: counter.name,
                delta,
                pid: Some(followed.pid),
                runtime_tag: Some(followed.tag.clone()),
                pod_uid: followed.pod_uid.clone(),
                from_final_values: from != ReadFrom::Reading,
            });
        }
    }

    /// Reads the kernel's totals of the report: which devices' could not be read and, judged
    /// from them, each rise into the window and its unattributed part into the stream.
    fn read_totals(&mut self, report: &Report<'_>) {
        let Some(device_totals) = report.device_totals else {
            return;
        };
        self.totals_errors = device_totals
            .iter()
            .filter_map(|(&device, read)| Some((device, read.as_ref().err()?.clone())))
            .collect();
        let Some(account) = &mut self.totals else {
            return;
        };
        let mut rises = Vec::new();
        for (&device, read) in device_totals {
            if let Ok(cores) = read {
                rises.extend(account.read(device, cores).into_iter().map(|r| (device, r)));
            }
        }
        for (device, rise) in rises {
            let Some((_, counter)) = error_nodes().find(|(index, _)| *index == rise.node) else {
                continue;
            };
            self.window.add(
                report.now,
                (device, Some(rise.core)),
                counter.name,
                rise.rise,
            );
            if rise.unattributed > 0 {
                self.push(Event::Counter {
                    neuron_device_index: device,
                    neuroncore_index: core_index(device, report.per_device, rise.core),
                    counter: counter.name,
                    delta: rise.unattributed,
                    pid: None,
                    runtime_tag: None,
                    pod_uid: None,
                    from_final_values: false,
                });
            }
        }
    }

    /// Events the end of `followed` with its final `values`, read `from` a reading or a record
    /// (`how`: why it ended, and the sequence number of the record).
    fn finish(
        &mut self,
        mut followed: Followed,
        values: ErrorValues,
        now: Instant,
        how: (EndReason, Option<u64>),
        from: ReadFrom,
    ) {
        self.event_rises(&followed, &values, now, from);
        self.push(Event::TenureEnd {
            neuron_device_index: followed.indexing.device,
            slot: followed.identity.slot,
            pid: followed.pid,
            runtime_tag: followed.tag.clone(),
            pod_uid: followed.pod_uid.clone(),
            end: how.0.name(),
            ledger_seq: how.1,
        });
        if let Some(log) = &mut self.log {
            log.touch();
        }
        if how.1.is_none() {
            // Its record may still come, late: its rises then are evented too.
            followed.evented.raise_to(&values);
            if self.closed.len() >= CLOSED_KEPT {
                self.closed.pop_front();
            }
            self.closed.push_back(followed);
        }
    }

    /// A record of a tenure the previous exporter followed, or that began and ended while no
    /// exporter ran: its rises over what was last evented of it (nothing, if nothing was).
    fn resumed_record(&mut self, record: &TenureRecord, now: Instant) {
        let Some(restored) = self.log.as_mut().and_then(EventLog::restored) else {
            return;
        };
        let covered = restored
            .positions
            .get(&record.device)
            .is_some_and(|position| position.covers(record.seq, record.ended_ns));
        if covered || record.is_redacted() {
            return;
        }
        let identities = identities_of(record);
        let saved = identities.iter().find_map(|identity| {
            let evented = restored.tenures.remove(identity)?;
            Some((identity.clone(), evented))
        });
        let (identity, evented) =
            saved.unwrap_or_else(|| (identities[0].clone(), ErrorValues::default()));
        let tag = record
            .tag()
            .map(|tag| String::from_utf8_lossy(tag).into_owned())
            .unwrap_or_default();
        let cgroup = String::from_utf8_lossy(record.cgroup_path()).into_owned();
        let followed = Followed {
            identity,
            pid: record.pid,
            tag,
            pod_uid: pod_uid(&cgroup),
            indexing: CoreIndexing {
                device: record.device,
                per_device: usize::from(record.core_count),
            },
            evented,
            latest: ErrorValues::default(),
        };
        let values = ErrorValues::of_record(record);
        let how = (end_of(record), Some(record.seq));
        self.finish(followed, values, now, how, ReadFrom::History);
    }

    /// Why `device` cannot be judged from numbers now, if it cannot.
    fn unreadable(
        &self,
        device: u32,
        slabs: &BTreeMap<u32, String>,
        module: Option<&str>,
    ) -> Option<(Reason, String)> {
        if let Some(why) = module {
            return Some((Reason::ModuleUnloaded, why.to_owned()));
        }
        let why = match &self.listed {
            Err(why) => why.clone(),
            Ok(listed) if !listed.contains(&device) => {
                format!("neuron{device} is no longer listed in the module's sysfs tree")
            }
            Ok(_) => match (self.totals_errors.get(&device), slabs.get(&device)) {
                (Some(why), _) => why.clone(),
                // Judged from the totals, a slab the monitor cannot read leaves nothing out.
                (None, Some(why)) if self.totals.is_none() => why.clone(),
                (None, _) => return None,
            },
        };
        Some((Reason::Unreadable, why))
    }

    /// Judges every device and core, and events each verdict that changed.
    fn judge(&mut self, report: &Report<'_>) {
        let mut devices = Vec::new();
        let known: Vec<u32> = self.known.iter().copied().collect();
        for device in known {
            let unreadable =
                self.unreadable(device, report.unreadable_slabs, report.module_missing);
            let errors = self.window.of_device(device);
            let evidence = Evidence {
                errors: errors.clone(),
                unreadable: unreadable.clone(),
            };
            let verdict = self.rules.judge(&evidence);
            self.changed((device, None), &verdict);
            let mut cores = Vec::new();
            for core in 0..report.per_device {
                let errors = self.window.of_core(device, core);
                let evidence = Evidence {
                    errors: errors.clone(),
                    unreadable: unreadable.clone(),
                };
                let verdict = self.rules.judge(&evidence);
                let neuroncore_index = core_index(device, report.per_device, core);
                self.changed((device, Some((core, neuroncore_index))), &verdict);
                cores.push(CoreHealth {
                    neuroncore_index,
                    judged: Judged { verdict, errors },
                });
            }
            devices.push(DeviceHealth {
                neuron_device_index: device,
                judged: Judged { verdict, errors },
                neuroncores: cores,
            });
        }
        self.group = HealthGroup {
            window: self.rules.window.as_secs_f64(),
            devices,
        };
    }

    /// Events `verdict` of `device` (of its core `core`, numbered `index` instance-wide) if
    /// it is not the one it had.
    fn changed(&mut self, (device, core): (u32, Option<(usize, usize)>), verdict: &Verdict) {
        let previous = match core {
            None => self.verdicts.devices.insert(device, verdict.clone()),
            Some((core, _)) => self.verdicts.cores.insert((device, core), verdict.clone()),
        };
        let same = previous.as_ref().is_some_and(|previous| {
            (previous.state, previous.reason, previous.action)
                == (verdict.state, verdict.reason, verdict.action)
        });
        if same {
            return;
        }
        if core.is_none() && previous.is_some() {
            log::warn!(
                "neuron{device}: {} ({}, recommended action: {}): {}",
                verdict.state.name(),
                verdict.reason.name(),
                verdict.action.name(),
                verdict.message
            );
        }
        self.push(Event::Verdict {
            neuron_device_index: device,
            neuroncore_index: core.map(|(_, index)| index),
            state: verdict.state,
            reason: verdict.reason,
            action: verdict.action,
            previous: previous.map(|previous| previous.state),
            message: verdict.message.clone(),
        });
    }

    /// Counts the rises of the driver's uncorrected ECC counters (from their first reading).
    fn ecc(&mut self, report: &Report<'_>) {
        let Some(totals) = report.ecc_totals else {
            return;
        };
        for device in totals {
            for (column, (&value, &name)) in device.values.iter().zip(&ECC_COUNTERS).enumerate() {
                let Some(&counter) = ECC_ERRORS.iter().find(|&&error| error == name) else {
                    continue;
                };
                let last = self.ecc.insert((device.device, column), value);
                let delta = last.map_or(0, |last| value.saturating_sub(last));
                if delta > 0 {
                    self.window
                        .add(report.now, (device.device, None), counter, delta);
                    self.push(Event::Ecc {
                        neuron_device_index: device.device,
                        counter,
                        delta,
                    });
                }
            }
        }
    }
}

/// The instance-wide index of core `core` of `device`, with `per_device` cores per device.
fn core_index(device: u32, per_device: usize, core: usize) -> usize {
    let device = usize::try_from(device).unwrap_or(usize::MAX);
    device.saturating_mul(per_device).saturating_add(core)
}

impl Consumer for Health {
    fn reads_totals(&self) -> bool {
        true
    }

    fn began(&mut self, tenure: &Tenure, first: &Reading<'_>) {
        let identity = identity_of(tenure.device, tenure.slot, tenure.generation, tenure.pid);
        let latest = values_of(first).unwrap_or_default();
        let evented = match self.log.as_mut().and_then(EventLog::restored) {
            // Not in the saved state: it began after the save, and nothing of it was evented.
            Some(restored) => restored.tenures.remove(&identity).unwrap_or_default(),
            // What it counted before this monitor started may be in another stream already.
            None if tenure.ran_before_monitor => latest.clone(),
            None => ErrorValues::default(),
        };
        if let Some(log) = &mut self.log {
            log.touch();
        }
        self.tenures.insert(
            tenure.id,
            Followed {
                identity,
                pid: tenure.pid,
                tag: first.tag.to_owned(),
                pod_uid: tenure.cgroup.as_deref().and_then(pod_uid),
                indexing: first.indexing,
                evented,
                latest,
            },
        );
    }

    fn reading(&mut self, tenure: &Tenure, reading: &Reading<'_>) {
        let Some(followed) = self.tenures.get_mut(&tenure.id) else {
            return;
        };
        if let Some(values) = values_of(reading) {
            followed.latest.raise_to(&values);
        }
        if followed.tag != reading.tag {
            reading.tag.clone_into(&mut followed.tag);
        }
        followed.indexing = reading.indexing;
    }

    fn ended(&mut self, tenure: &Tenure, ending: &Ending<'_>) {
        let followed = match self.tenures.remove(&tenure.id) {
            Some(followed) => followed,
            // Known from its record alone: it began after the stream started.
            None if !ending.seen => Followed {
                identity: identity_of(tenure.device, tenure.slot, tenure.generation, tenure.pid),
                pid: tenure.pid,
                tag: ending.tag.to_owned(),
                pod_uid: tenure.cgroup.as_deref().and_then(pod_uid),
                indexing: ending.indexing,
                evented: ErrorValues::default(),
                latest: ErrorValues::default(),
            },
            None => return,
        };
        let mut values = followed.latest.clone();
        if let Some(record) = ending.record {
            values.raise_to(&ErrorValues::of_record(record));
        }
        let seq = ending.record.map(|record| record.seq);
        let from = match seq {
            Some(_) => ReadFrom::Record,
            None => ReadFrom::Reading,
        };
        self.finish(followed, values, ending.now, (ending.reason, seq), from);
    }

    fn reported(&mut self, report: &Report<'_>) {
        let now = report.now;
        let loaded = report.module_missing.is_none();
        if loaded != self.module_loaded {
            self.module_loaded = loaded;
            let message = report
                .module_missing
                .map_or_else(|| "the module is loaded".to_owned(), str::to_owned);
            log::info!("event: {message}");
            self.push(Event::Module { loaded, message });
        }
        let mut rises = Vec::new();
        for (id, followed) in &self.tenures {
            if followed
                .latest
                .rises_over(&followed.evented)
                .next()
                .is_some()
            {
                rises.push(*id);
            }
        }
        for id in rises {
            if let Some(mut followed) = self.tenures.remove(&id) {
                let latest = followed.latest.clone();
                self.event_rises(&followed, &latest, now, ReadFrom::Reading);
                followed.evented = latest;
                self.tenures.insert(id, followed);
            }
        }
        self.ecc(report);
        self.window.forget_before(now);
        self.listed = report.devices.map(<[u32]>::to_vec).map_err(str::to_owned);
        if let Ok(listed) = &self.listed {
            self.known.extend(listed.iter().copied());
        }
        self.read_totals(report);
        self.judge(report);
        if now.saturating_duration_since(self.started) > 2 * LEDGER_WAIT {
            if let Some(log) = &mut self.log {
                log.settle_restored();
            }
        }
        if let Some(log) = &mut self.log {
            let live = self
                .tenures
                .values()
                .map(|followed| (&followed.identity, &followed.evented));
            log.flush(live);
        }
    }

    fn noticed(&mut self, notice: &Notice) {
        if let Notice::LedgerLost {
            device,
            first,
            last,
        } = *notice
        {
            self.push(Event::LedgerLost {
                neuron_device_index: device,
                first,
                last,
            });
        }
    }

    fn recorded(&mut self, record: &TenureRecord, outcome: RecordOutcome) {
        let now = Instant::now();
        match outcome {
            RecordOutcome::History => self.resumed_record(record, now),
            RecordOutcome::Late => {
                let identities = identities_of(record);
                let mut closed = self.closed.iter();
                if let Some(index) = closed.position(|f| identities.contains(&f.identity)) {
                    if let Some(followed) = self.closed.remove(index) {
                        let values = ErrorValues::of_record(record);
                        self.event_rises(&followed, &values, now, ReadFrom::Record);
                    }
                }
            }
            _ => {}
        }
        if let Some(log) = &mut self.log {
            log.read_record(record.device, record.seq, record.ended_ns);
        }
    }
}
