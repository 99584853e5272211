//! The system groups of a report, with the baselines they are measured from, and the totals
//! read for them (the exporter's device series follow those). The kernel's totals are read
//! device by device, once per report, for `neuron_counters` and for the consumers that read
//! them at every report.

use std::time::Instant;

use nds_document::config::SystemGroup;
use nds_document::document::{MemoryInfo, SystemData, VcpuUsage};
use nds_document::schedule::{GroupId, Schedule};
use nds_document::system;
use nds_host::hardware::{self, EccTotals};
use nds_host::host::{self, ProcStat};
use nds_sysfs::{CoreTotals, SysfsRoot};

use crate::source::Source;
use crate::stream::DeviceTotals;

/// What the system groups are measured from.
#[derive(Debug)]
pub struct SystemBaselines {
    /// The kernel's totals when `neuron_counters` was last reported.
    totals: Option<(Instant, Vec<CoreTotals>)>,
    /// `/proc/stat` when `vcpu_usage` was last reported (or the monitor started).
    vcpu: Option<(Instant, ProcStat)>,
    /// ECC totals when `neuron_hw_counters` was last reported (or the monitor started).
    ecc: (Instant, Vec<EccTotals>),
}

/// The system groups of a report, and the totals read for them.
#[derive(Debug, Default)]
pub struct SystemReport {
    /// The groups due.
    pub data: SystemData,
    /// The kernel's totals per core, when `neuron_counters` was due.
    pub core_totals: Option<Vec<CoreTotals>>,
    /// The driver's ECC totals per device, when `neuron_hw_counters` was due.
    pub ecc_totals: Option<Vec<EccTotals>>,
    /// The kernel's totals of each device listed, when `neuron_counters` was due or they were
    /// wanted at every report.
    pub device_totals: Option<DeviceTotals>,
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
    /// The devices sysfs lists (`Err`: why it cannot be listed).
    pub devices: Result<&'a [u32], &'a str>,
    /// Whether the kernel's totals are wanted whether or not `neuron_counters` is due.
    pub totals_wanted: bool,
}

/// The totals of each of `devices`.
fn read_device_totals(sysfs: &SysfsRoot, devices: &[u32]) -> DeviceTotals {
    devices
        .iter()
        .map(|&device| {
            let totals = sysfs
                .device_totals(device)
                .map_err(|error| error.to_string());
            (device, totals)
        })
        .collect()
}

/// What `neuron_counters` is made from: the totals of every device listed, or none and why
/// (the listing's error, or the first device's whose totals could not be read).
fn group_totals(devices: Result<&[u32], &str>, read: &DeviceTotals) -> (Vec<CoreTotals>, String) {
    let devices = match devices {
        Ok(devices) => devices,
        Err(why) => return (Vec::new(), why.to_owned()),
    };
    let mut totals = Vec::new();
    for device in devices {
        match read.get(device) {
            Some(Ok(cores)) => totals.extend(cores.iter().cloned()),
            Some(Err(why)) => return (Vec::new(), why.clone()),
            None => {}
        }
    }
    (totals, String::new())
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
        }
    }

    /// The system groups due, moving their baselines.
    pub fn report(&mut self, context: &SystemContext<'_>) -> SystemReport {
        let now = context.now;
        let source = context.source;
        let mut report = SystemReport::default();
        let due = |group| context.due.contains(&GroupId::System(group));
        let device_totals = (context.totals_wanted || due(SystemGroup::NeuronCounters))
            .then(|| read_device_totals(&source.sysfs, context.devices.unwrap_or_default()));
        for group in SystemGroup::ALL {
            if !due(group) {
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
                    report.data.neuron_hw_counters =
                        Some(hardware::hw_counters(&totals, before, seconds, &problems));
                    report.ecc_totals = Some(totals.clone());
                    self.ecc = (now, totals);
                }
                SystemGroup::VcpuUsage => report.data.vcpu_usage = Some(self.vcpu_usage(context)),
                SystemGroup::MemoryInfo => {
                    let since = context.schedule.last_reported(GroupId::System(group));
                    let seconds = now.saturating_duration_since(since).as_secs_f64();
                    let info = host::memory_info(&source.host.proc_root, seconds);
                    report.data.memory_info = Some(info.unwrap_or_else(|error| MemoryInfo {
                        period: seconds,
                        error: error.to_string(),
                        ..MemoryInfo::default()
                    }));
                }
                SystemGroup::NeuronCounters => {
                    let read = device_totals.as_ref();
                    let (totals, error) =
                        group_totals(context.devices, read.unwrap_or(&DeviceTotals::new()));
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
                    report.data.neuron_counters = Some(counters_group);
                    report.core_totals = Some(totals.clone());
                    self.totals = Some((now, totals));
                }
            }
        }
        report.device_totals = device_totals;
        report
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
