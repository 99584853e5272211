//! The `neuron_counters` system group: the kernel's aggregated totals per device and core.

use std::collections::BTreeMap;

use nds_abi::sysfs::SysfsGroup;
use nds_sysfs::{CoreTotals, SysfsRoot};

use crate::document::{CoreCounters, CounterValue, DeviceCounters, SystemCounters};
use crate::groups::CoreIndexing;

/// `neuron_counters` from the totals now and at the start of the period, cores keyed by their
/// instance-wide index with `per_device` cores per device.
#[must_use]
pub fn system_counters(
    root: &SysfsRoot,
    now: &[CoreTotals],
    before: &[CoreTotals],
    seconds: f64,
    per_device: usize,
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
        let indexing = CoreIndexing {
            device: core.device,
            per_device,
        };
        match indexing.key(core.core) {
            Some(key) => {
                device.neuroncores.insert(key, counters);
            }
            // Only if devices had different core counts, which the module never makes.
            None => problems.push(format!(
                "neuron{} core {} is beyond the first device's {per_device} cores",
                core.device, core.core
            )),
        }
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
