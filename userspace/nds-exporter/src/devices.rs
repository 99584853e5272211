//! The series of the kernel's and the driver's totals: `nds_device_*` per device, core and
//! node from the module's sysfs totals, and `hardware_ecc_events_total` per device and event
//! type from the driver's, each fed from the totals read for a report.

use std::collections::HashMap;

use nds_abi::sysfs::SysfsGroup;
use nds_document::groups::CoreIndexing;
use nds_host::hardware::{EccTotals, ECC_COUNTERS};
use nds_sysfs::{CoreTotals, TimeInUseUnit};

use crate::counters::{Counters, Sample, Tracked};
use crate::encoder::render_labels;
use crate::families::{self, DEVICE_STATUS, HARDWARE_ECC};

/// The device series, by what they follow.
#[derive(Debug, Default)]
pub struct DeviceSeries {
    /// `hardware_ecc_events_total` per device and event type.
    ecc: HashMap<(u32, usize), Tracked>,
    /// `nds_device_*` per device, core and node.
    cores: HashMap<(u32, usize, usize), Tracked>,
}

impl DeviceSeries {
    /// Feeds the driver's ECC totals.
    pub fn feed_ecc(&mut self, counters: &mut Counters, totals: &[EccTotals]) {
        for device in totals {
            let index = device.device.to_string();
            for (column, (&value, event_type)) in device.values.iter().zip(ECC_COUNTERS).enumerate()
            {
                let tracked = self.ecc.entry((device.device, column)).or_insert_with(|| {
                    let labels = HARDWARE_ECC.metric.label_set(&[event_type, &index]);
                    Tracked::new(counters.acquire(
                        &HARDWARE_ECC,
                        Sample::Total,
                        render_labels(&labels),
                    ))
                });
                tracked.observe(counters, value, 1.0);
            }
        }
    }

    /// Feeds the kernel's totals per core, cores numbered instance-wide with `per_device` per
    /// device, busy time worth `unit` a unit.
    pub fn feed_cores(
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
                    .cores
                    .entry((core.device, core.core, index))
                    .or_insert_with(|| {
                        let device = core.device.to_string();
                        let labels = match node.group {
                            SysfsGroup::Status => {
                                family.metric.label_set(&[&device, &key, node.name])
                            }
                            SysfsGroup::OtherInfo => family.metric.label_set(&[&device, &key]),
                        };
                        Tracked::new(counters.acquire(
                            family,
                            Sample::Total,
                            render_labels(&labels),
                        ))
                    });
                tracked.observe(counters, value, scale);
            }
        }
    }
}
