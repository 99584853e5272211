//! What producers wrote to the error counters the event stream follows (every status node but
//! `success`), by node name, to compare with the deltas of the stream's `counter` events.

use std::collections::BTreeMap;

use nds_abi::sysfs::{SysfsGroup, SYSFS_COUNTERS};
use nds_loadgen::ProducerReport;

/// A status mix with every uncorrectable hardware error, a repairable one and an execution
/// error.
pub const ERROR_MIX: &str = "SUCCESS=6,EXEC_HW_ERR_HBM_UE=1,EXEC_HW_ERR_NC_UE=1,\
                             EXEC_HW_ERR_DMA_ABORT=1,TIMEOUT=1,EXEC_HW_ERR_REPAIRABLE_HBM_UE=1";

/// Per status node but `success`, what `reports` wrote (nodes they left at zero are absent).
pub fn errors_written(reports: &[ProducerReport]) -> BTreeMap<String, u64> {
    let mut sums = BTreeMap::new();
    for report in reports {
        for counters in report.nc_counters.values() {
            for (name, value) in counters {
                let node = SYSFS_COUNTERS.iter().find(|node| {
                    node.source.name() == name
                        && node.group == SysfsGroup::Status
                        && node.name != "success"
                });
                if let (Some(node), true) = (node, *value > 0) {
                    *sums.entry(node.name.to_owned()).or_insert(0) += value;
                }
            }
        }
    }
    sums
}
