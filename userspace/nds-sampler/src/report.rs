//! Building a report's groups: a process's runtime groups from its slab readings, and the
//! system groups with the baselines they are measured from.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use nds_abi::sysfs::SysfsGroup;
use nds_document::config::{RuntimeGroup, RuntimeRule, SystemGroup};
use nds_document::document::{MemoryInfo, RuntimeEntry, RuntimeVcpuUsage, SystemData, VcpuUsage};
use nds_document::groups::{self, CoreIndexing, Interval};
use nds_document::schedule::{GroupId, Schedule};
use nds_document::system;
use nds_exporter::counters::{Counters, Sample, Tracked};
use nds_exporter::families::{self, DEVICE_STATUS, HARDWARE_ECC};
use nds_exporter::labels;
use nds_host::hardware::{self, EccTotals, ECC_COUNTERS};
use nds_host::host::{self, ProcStat, ProcessCpu};
use nds_slabs::snapshot::SlabReading;
use nds_sysfs::{CoreTotals, TimeInUseUnit};

use crate::attachment::Attachment;
use crate::source::Source;

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
    /// `/proc`.
    pub proc_root: &'a Path,
    /// Clock ticks per second of `/proc` CPU times.
    pub ticks_per_second: u64,
    /// The online vCPUs, read once and only if a process's vCPU share is due.
    pub vcpus: Option<usize>,
}

/// The entry of `attachment`'s process, reported by rule `rule_index` from `reading`: its
/// groups due now, each over the period since that group's baseline, which moves to `reading`.
pub fn runtime_entry(
    attachment: &mut Attachment,
    reading: SlabReading,
    (rule_index, rule): (usize, &RuntimeRule),
    context: &mut RuntimeContext<'_>,
) -> RuntimeEntry {
    let now = context.now;
    let indexing = CoreIndexing {
        device: attachment.candidate.device,
        per_device: context.per_device,
    };
    let mut entry = attachment.entry(String::new());
    for &(group, _) in &rule.groups {
        if !context.due.contains(&GroupId::Runtime(rule_index, group)) {
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
                    context.time_unit,
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
                let proc_root = context.proc_root;
                let vcpus = *context.vcpus.get_or_insert_with(|| {
                    ProcStat::read(proc_root).map_or(1, |stat| stat.cpus.len())
                });
                report.neuron_runtime_vcpu_usage = Some(runtime_vcpu_usage(
                    proc_root,
                    attachment,
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
        attachment.baselines.insert(group, (now, reading.clone()));
    }
    entry
}

/// `neuron_runtime_vcpu_usage` of `attachment`'s owner since the last one (or its attach),
/// moving the baseline.
fn runtime_vcpu_usage(
    proc_root: &Path,
    attachment: &mut Attachment,
    now: Instant,
    vcpus: usize,
    ticks_per_second: u64,
) -> RuntimeVcpuUsage {
    let pid = attachment.owner.pid;
    match ProcessCpu::read(proc_root, pid) {
        Ok(cpu) => match attachment.cpu_baseline.replace((now, cpu)) {
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
            period: attachment.cpu_baseline.map_or(0.0, |(since, _)| {
                now.saturating_duration_since(since).as_secs_f64()
            }),
            error: format!("pid {pid}: {error}"),
            ..RuntimeVcpuUsage::default()
        },
    }
}

/// What the system groups are measured from, and the device series they feed.
#[derive(Debug)]
pub struct SystemBaselines {
    /// The kernel's totals when `neuron_counters` was last reported.
    totals: Option<(Instant, Vec<CoreTotals>)>,
    /// `/proc/stat` when `vcpu_usage` was last reported (or the monitor started).
    vcpu: Option<(Instant, ProcStat)>,
    /// ECC totals when `neuron_hw_counters` was last reported (or the monitor started).
    ecc: (Instant, Vec<EccTotals>),
    /// `hardware_ecc_events_total` per device and event type.
    ecc_series: HashMap<(u32, usize), Tracked>,
    /// `nds_device_*` per device, core and node.
    device_series: HashMap<(u32, usize, usize), Tracked>,
}

/// What the system groups of one report share.
pub struct SystemContext<'a> {
    /// The report's time.
    pub now: Instant,
    /// The groups due.
    pub due: &'a [GroupId],
    /// Where everything is read.
    pub source: &'a Source,
    /// The schedule (for the periods of groups without a baseline of their own).
    pub schedule: &'a Schedule,
    /// Problems met by the last discovery (they go into `neuron_counters`' error).
    pub problems: &'a [String],
    /// NeuronCores per device.
    pub per_device: usize,
    /// Why there is no device, for the groups that need one.
    pub no_device: &'a str,
    /// When the monitor started.
    pub started: Instant,
}

impl SystemBaselines {
    /// The baselines at the monitor's start `now`.
    #[must_use]
    pub fn new(source: &Source, now: Instant) -> Self {
        let devices = source.sysfs.devices().unwrap_or_default();
        let (ecc, _) = source.host.hardware.ecc_totals(&devices);
        Self {
            totals: None,
            vcpu: ProcStat::read(&source.host.proc_root)
                .ok()
                .map(|stat| (now, stat)),
            ecc: (now, ecc),
            ecc_series: HashMap::new(),
            device_series: HashMap::new(),
        }
    }

    /// The system groups due, moving their baselines; the device series are fed when
    /// `counters` is given.
    pub fn report(
        &mut self,
        context: &SystemContext<'_>,
        mut counters: Option<&mut Counters>,
    ) -> SystemData {
        let now = context.now;
        let source = context.source;
        let mut data = SystemData::default();
        for group in SystemGroup::ALL {
            if !context.due.contains(&GroupId::System(group)) {
                continue;
            }
            match group {
                SystemGroup::NeuronHwCounters => {
                    let devices = source.sysfs.devices().unwrap_or_default();
                    let (totals, mut problems) = source.host.hardware.ecc_totals(&devices);
                    if devices.is_empty() {
                        problems.push(context.no_device.to_owned());
                    }
                    let (since, before) = &self.ecc;
                    let seconds = now.saturating_duration_since(*since).as_secs_f64();
                    data.neuron_hw_counters =
                        Some(hardware::hw_counters(&totals, before, seconds, &problems));
                    if let Some(counters) = counters.as_deref_mut() {
                        self.feed_ecc(counters, &totals);
                    }
                    self.ecc = (now, totals);
                }
                SystemGroup::VcpuUsage => data.vcpu_usage = Some(self.vcpu_usage(context)),
                SystemGroup::MemoryInfo => {
                    let since = context.schedule.last_reported(GroupId::System(group));
                    let seconds = now.saturating_duration_since(since).as_secs_f64();
                    let info = host::memory_info(&source.host.proc_root, seconds);
                    data.memory_info = Some(info.unwrap_or_else(|error| MemoryInfo {
                        period: seconds,
                        error: error.to_string(),
                        ..MemoryInfo::default()
                    }));
                }
                SystemGroup::NeuronCounters => {
                    let (totals, error) = system::read_totals(&source.sysfs);
                    let (since, before) = self
                        .totals
                        .take()
                        .unwrap_or_else(|| (context.started, Vec::new()));
                    let mut counters_group = system::system_counters(
                        &source.sysfs,
                        &totals,
                        &before,
                        now.saturating_duration_since(since).as_secs_f64(),
                        context.per_device,
                        error,
                    );
                    if !context.problems.is_empty() {
                        let mut all = vec![counters_group.error.clone()];
                        all.extend(context.problems.iter().cloned());
                        all.retain(|p| !p.is_empty());
                        counters_group.error = all.join("; ");
                    }
                    data.neuron_counters = Some(counters_group);
                    if let Some(counters) = counters.as_deref_mut() {
                        let unit = source.time_in_use_unit().unwrap_or_default();
                        self.feed_devices(counters, &totals, context.per_device, unit);
                    }
                    self.totals = Some((now, totals));
                }
            }
        }
        data
    }

    fn feed_ecc(&mut self, counters: &mut Counters, totals: &[EccTotals]) {
        for device in totals {
            let index = device.device.to_string();
            for (column, (&value, event_type)) in device.values.iter().zip(ECC_COUNTERS).enumerate()
            {
                let tracked = self
                    .ecc_series
                    .entry((device.device, column))
                    .or_insert_with(|| {
                        let labels = labels::render(&vec![
                            ("event_type", event_type.to_owned()),
                            ("neuron_device_index", index.clone()),
                        ]);
                        Tracked::new(counters.acquire(&HARDWARE_ECC, Sample::Total, labels))
                    });
                tracked.observe(counters, value, 1.0);
            }
        }
    }

    fn feed_devices(
        &mut self,
        counters: &mut Counters,
        totals: &[CoreTotals],
        per_device: usize,
        unit: TimeInUseUnit,
    ) {
        for core in totals {
            let indexing = CoreIndexing {
                device: core.device,
                per_device,
            };
            let Some(key) = indexing.key(core.core) else {
                continue;
            };
            for (index, (node, value)) in core.iter().enumerate() {
                let (family, scale) = match node.group {
                    SysfsGroup::Status => (Some(&DEVICE_STATUS), 1.0),
                    SysfsGroup::OtherInfo if families::counts_time(node) => {
                        (families::device_other(node), unit.seconds(1))
                    }
                    SysfsGroup::OtherInfo => (families::device_other(node), 1.0),
                };
                let Some(family) = family else {
                    continue;
                };
                let tracked = self
                    .device_series
                    .entry((core.device, core.core, index))
                    .or_insert_with(|| {
                        let mut labels = vec![
                            ("neuron_device_index", core.device.to_string()),
                            ("neuroncore", key.clone()),
                        ];
                        if node.group == SysfsGroup::Status {
                            labels.push(("status", node.name.to_owned()));
                        }
                        Tracked::new(counters.acquire(
                            family,
                            Sample::Total,
                            labels::render(&labels),
                        ))
                    });
                tracked.observe(counters, value, scale);
            }
        }
    }

    /// `vcpu_usage` since the last one (or the monitor's start), moving the baseline.
    fn vcpu_usage(&mut self, context: &SystemContext<'_>) -> VcpuUsage {
        let now = context.now;
        let (since, before) = self
            .vcpu
            .take()
            .map_or((context.started, None), |(at, stat)| (at, Some(stat)));
        let seconds = now.saturating_duration_since(since).as_secs_f64();
        match (ProcStat::read(&context.source.host.proc_root), before) {
            (Ok(stat), Some(before)) => {
                let usage = host::vcpu_usage(&stat, &before, seconds);
                self.vcpu = Some((now, stat));
                usage
            }
            (Ok(stat), None) => {
                self.vcpu = Some((now, stat));
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
