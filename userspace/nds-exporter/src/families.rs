//! The counter and histogram families of the exposition (see [`crate::counters`]): how long
//! the series of each family declared in [`nds_metric_table`] stay.
//!
//! The ecosystem's three counters keep the companion exporter's names, labels and `_created`
//! companions; this monitor's own families follow the Prometheus naming guide: base units
//! (seconds), `_total` on counters, a histogram for latencies, and only labels whose values
//! identify a series for its whole life.

use nds_abi::sysfs::SysfsCounter;

use crate::counters::Family;
use nds_metric_table::{self as metrics, MetricFamily};

/// A family whose idle series stay in the exposition (per tag, pod, device or monitor).
const fn lasting(metric: &'static MetricFamily) -> Family {
    Family {
        metric,
        outlives_sources: true,
    }
}

/// A family whose series leave the exposition with their process.
const fn per_process(metric: &'static MetricFamily) -> Family {
    Family {
        metric,
        outlives_sources: false,
    }
}

/// Outcomes of every process of a tag.
pub static EXECUTION_STATUS: Family = lasting(&metrics::EXECUTION_STATUS_TOTAL);

/// Error classes of every process of a tag.
pub static EXECUTION_ERRORS: Family = lasting(&metrics::EXECUTION_ERRORS_TOTAL);

/// Outcomes of every process of a container.
pub static POD_STATUS: Family = lasting(&metrics::NDS_POD_EXECUTION_STATUS_TOTAL);

/// Error classes of every process of a container.
pub static POD_ERRORS: Family = lasting(&metrics::NDS_POD_EXECUTION_ERRORS_TOTAL);

/// The driver's ECC events.
pub static HARDWARE_ECC: Family = lasting(&metrics::HARDWARE_ECC_EVENTS_TOTAL);

/// A process's slab, per core and status node.
pub static RUNTIME_STATUS: Family = per_process(&metrics::NDS_RUNTIME_STATUS_TOTAL);

static RUNTIME_MODEL_LOADS: Family = per_process(&metrics::NDS_RUNTIME_MODEL_LOAD_COUNT_TOTAL);
static RUNTIME_INFERENCES: Family = per_process(&metrics::NDS_RUNTIME_INFERENCE_COUNT_TOTAL);
static RUNTIME_FLOPS: Family = per_process(&metrics::NDS_RUNTIME_FLOP_COUNT_TOTAL);
static RUNTIME_BUSY: Family = per_process(&metrics::NDS_RUNTIME_NC_TIME_IN_USE_SECONDS_TOTAL);

/// The kernel's totals, per core and status node.
pub static DEVICE_STATUS: Family = lasting(&metrics::NDS_DEVICE_STATUS_TOTAL);

static DEVICE_MODEL_LOADS: Family = lasting(&metrics::NDS_DEVICE_MODEL_LOAD_COUNT_TOTAL);
static DEVICE_INFERENCES: Family = lasting(&metrics::NDS_DEVICE_INFERENCE_COUNT_TOTAL);
static DEVICE_FLOPS: Family = lasting(&metrics::NDS_DEVICE_FLOP_COUNT_TOTAL);
static DEVICE_BUSY: Family = lasting(&metrics::NDS_DEVICE_NC_TIME_IN_USE_SECONDS_TOTAL);

/// Sampled execution latencies (total, device).
pub static RUNTIME_LATENCY: Family = per_process(&metrics::NDS_RUNTIME_LATENCY_SECONDS);

/// Reports made; a scrape shows the latest one's numbers.
pub static MONITOR_REPORTS: Family = lasting(&metrics::NDS_MONITOR_REPORTS_TOTAL);

/// Attachments that ended, released or reused.
pub static MONITOR_SLABS_ENDED: Family = lasting(&metrics::NDS_MONITOR_SLABS_ENDED_TOTAL);

/// Slabs the monitor found but could not read.
pub static MONITOR_ATTACH_FAILURES: Family = lasting(&metrics::NDS_MONITOR_ATTACH_FAILURES_TOTAL);

/// Calls to the kubelet that failed.
pub static MONITOR_POD_RESOURCES_ERRORS: Family =
    lasting(&metrics::NDS_MONITOR_POD_RESOURCES_ERRORS_TOTAL);

/// Ledger records read, by outcome.
pub static MONITOR_LEDGER_RECORDS: Family = lasting(&metrics::NDS_MONITOR_LEDGER_RECORDS_TOTAL);

/// Ledger records lost before they were read.
pub static MONITOR_LEDGER_LOST: Family = lasting(&metrics::NDS_MONITOR_LEDGER_LOST_RECORDS_TOTAL);

/// The per-process family of an `other_info` node.
#[must_use]
pub fn runtime_other(node: &SysfsCounter) -> Option<&'static Family> {
    match node.name {
        "model_load_count" => Some(&RUNTIME_MODEL_LOADS),
        "inference_count" => Some(&RUNTIME_INFERENCES),
        "flop_count" => Some(&RUNTIME_FLOPS),
        "nc_time_in_use" => Some(&RUNTIME_BUSY),
        _ => None,
    }
}

/// The per-device family of an `other_info` node.
#[must_use]
pub fn device_other(node: &SysfsCounter) -> Option<&'static Family> {
    match node.name {
        "model_load_count" => Some(&DEVICE_MODEL_LOADS),
        "inference_count" => Some(&DEVICE_INFERENCES),
        "flop_count" => Some(&DEVICE_FLOPS),
        "nc_time_in_use" => Some(&DEVICE_BUSY),
        _ => None,
    }
}

/// Whether a node counts time (in the module's unit), which the families show in seconds.
#[must_use]
pub fn counts_time(node: &SysfsCounter) -> bool {
    node.name == "nc_time_in_use"
}

#[cfg(test)]
mod tests {
    use nds_abi::sysfs::{SysfsGroup, SYSFS_COUNTERS};

    use super::*;

    #[test]
    fn every_other_info_node_has_its_families() {
        for node in SYSFS_COUNTERS
            .iter()
            .filter(|node| node.group == SysfsGroup::OtherInfo)
        {
            let runtime = runtime_other(node).unwrap();
            let device = device_other(node).unwrap();
            let (runtime, device) = (runtime.metric.name, device.metric.name);
            assert!(runtime.contains(node.name) && device.contains(node.name));
            assert!(runtime.ends_with("_total") && device.ends_with("_total"));
            assert_eq!(counts_time(node), runtime.ends_with("_seconds_total"));
        }
    }
}
