//! The system section: the kernel's aggregated totals, the devices and the host.

use std::collections::BTreeMap;

use nds_abi::sysfs::SysfsGroup;
use nds_sysfs::{CoreTotals, SysfsRoot};

use crate::document::{
    CoreCounters, CounterValue, DeviceCounters, HardwareInfo, InstanceInfo, SystemCounters,
};

/// Reads every core's totals; the error text is empty when everything was read.
#[must_use]
pub fn read_totals(root: &SysfsRoot) -> (Vec<CoreTotals>, String) {
    match root.all_totals() {
        Ok(totals) => (totals, String::new()),
        Err(error) => (Vec::new(), error.to_string()),
    }
}

/// `neuron_counters` from the totals now and at the start of the period.
#[must_use]
pub fn system_counters(
    root: &SysfsRoot,
    now: &[CoreTotals],
    before: &[CoreTotals],
    seconds: f64,
    error: String,
) -> SystemCounters {
    let mut devices: BTreeMap<u32, DeviceCounters> = BTreeMap::new();
    let mut problems = vec![error]
        .into_iter()
        .filter(|e| !e.is_empty())
        .collect::<Vec<_>>();
    for core in now {
        let device = devices
            .entry(core.device)
            .or_insert_with(|| DeviceCounters {
                neuron_device_index: core.device,
                ..DeviceCounters::default()
            });
        let previous = before
            .iter()
            .find(|b| b.device == core.device && b.core == core.core);
        let mut counters = CoreCounters::default();
        for (index, (counter, total)) in core.iter().enumerate() {
            let start = previous
                .and_then(|p| p.values.get(index))
                .copied()
                .unwrap_or(0);
            let value = CounterValue::new(total, start);
            let group = match counter.group {
                SysfsGroup::Status => &mut counters.status,
                SysfsGroup::OtherInfo => &mut counters.other_info,
            };
            group.insert(counter.name.to_owned(), value);
        }
        device.neuroncores.insert(core.core.to_string(), counters);
    }
    for (index, device) in &mut devices {
        match root.slots(*index) {
            Ok(rows) => device.slots_owned = rows.iter().filter(|row| row.is_owned()).count(),
            Err(error) => problems.push(error.to_string()),
        }
    }
    SystemCounters {
        period: seconds,
        error: problems.join("; "),
        neuron_devices: devices.into_values().collect(),
    }
}

/// The devices the module exposes.
#[must_use]
pub fn hardware_info(root: &SysfsRoot) -> HardwareInfo {
    let mut info = HardwareInfo::default();
    match root.devices() {
        Ok(devices) => {
            info.neuron_device_count = devices.len();
            if let Some(&first) = devices.first() {
                match root.cores(first) {
                    Ok(cores) => info.neuroncore_per_device_count = cores.len(),
                    Err(error) => info.error = error.to_string(),
                }
            }
        }
        Err(error) => info.error = error.to_string(),
    }
    info
}

/// The host's name and kernel release.
#[must_use]
pub fn instance_info() -> InstanceInfo {
    let read = |path: &str| std::fs::read_to_string(path).map(|text| text.trim().to_owned());
    let mut info = InstanceInfo::default();
    let mut problems = Vec::new();
    match read("/proc/sys/kernel/hostname") {
        Ok(name) => info.hostname = name,
        Err(error) => problems.push(format!("hostname: {error}")),
    }
    match read("/proc/sys/kernel/osrelease") {
        Ok(release) => info.kernel_release = release,
        Err(error) => problems.push(format!("kernel release: {error}")),
    }
    info.error = problems.join("; ");
    info
}
