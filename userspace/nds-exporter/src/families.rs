//! The counter and histogram families of the exposition (see [`crate::counters`]).
//!
//! The ecosystem's three counters keep the companion exporter's names, labels and `_created`
//! companions; this monitor's own families follow the Prometheus naming guide: base units
//! (seconds), `_total` on counters, a histogram for latencies, and only labels whose values
//! identify a series for its whole life.

use nds_abi::sysfs::SysfsCounter;
use nds_document::latency::LATENCY_BUCKETS_SECONDS;

use crate::counters::{Family, FamilyKind};

const fn counter(name: &'static str, help: &'static str, outlives_sources: bool) -> Family {
    Family {
        name,
        help,
        kind: FamilyKind::Counter,
        created: None,
        outlives_sources,
    }
}

/// `execution_status_total{runtime_tag, status_type}`: outcomes of every process of a tag.
pub static EXECUTION_STATUS: Family = Family {
    created: Some("execution_status_created"),
    ..counter("execution_status_total", "Execution status total", true)
};

/// `execution_errors_total{runtime_tag, error_type}`: error classes of every process of a tag.
pub static EXECUTION_ERRORS: Family = Family {
    created: Some("execution_errors_created"),
    ..counter("execution_errors_total", "Execution errors total", true)
};

/// `hardware_ecc_events_total{event_type, neuron_device_index}`: the driver's ECC events.
pub static HARDWARE_ECC: Family = Family {
    created: Some("hardware_ecc_events_created"),
    ..counter(
        "hardware_ecc_events_total",
        "Hardware ecc events total",
        true,
    )
};

/// `nds_runtime_status_total{…, neuroncore, status}`: a process's slab, per status node.
pub static RUNTIME_STATUS: Family = counter(
    "nds_runtime_status_total",
    "Executions and errors per status, per process and NeuronCore, as its slab counts them.",
    false,
);

static RUNTIME_MODEL_LOADS: Family = counter(
    "nds_runtime_model_load_count_total",
    "Model loads per process and NeuronCore.",
    false,
);
static RUNTIME_INFERENCES: Family = counter(
    "nds_runtime_inference_count_total",
    "Inferences per process and NeuronCore.",
    false,
);
static RUNTIME_FLOPS: Family = counter(
    "nds_runtime_flop_count_total",
    "Floating-point operations per process and NeuronCore (two per multiply-accumulate).",
    false,
);
static RUNTIME_BUSY: Family = counter(
    "nds_runtime_nc_time_in_use_seconds_total",
    "Time a NeuronCore was busy for the process, seconds.",
    false,
);

/// `nds_device_status_total{neuron_device_index, neuroncore, status}`: the kernel's totals.
pub static DEVICE_STATUS: Family = counter(
    "nds_device_status_total",
    "The kernel's aggregate per status node: released owners plus live ones.",
    true,
);

static DEVICE_MODEL_LOADS: Family = counter(
    "nds_device_model_load_count_total",
    "The kernel's aggregate of model loads per NeuronCore.",
    true,
);
static DEVICE_INFERENCES: Family = counter(
    "nds_device_inference_count_total",
    "The kernel's aggregate of inferences per NeuronCore.",
    true,
);
static DEVICE_FLOPS: Family = counter(
    "nds_device_flop_count_total",
    "The kernel's aggregate of floating-point operations per NeuronCore.",
    true,
);
static DEVICE_BUSY: Family = counter(
    "nds_device_nc_time_in_use_seconds_total",
    "The kernel's aggregate of NeuronCore busy time, seconds.",
    true,
);

/// `nds_runtime_latency_seconds{…, kind}`: sampled execution latencies (total, device).
pub static RUNTIME_LATENCY: Family = Family {
    name: "nds_runtime_latency_seconds",
    help: "Execution latencies sampled from the process's slab (kind total or device), seconds.",
    kind: FamilyKind::Histogram(&LATENCY_BUCKETS_SECONDS),
    created: None,
    outlives_sources: false,
};

/// `nds_monitor_reports_total`: reports made; a scrape shows the latest one's numbers.
pub static MONITOR_REPORTS: Family = counter(
    "nds_monitor_reports_total",
    "Reports made by the monitor: the exposition is the latest one's.",
    true,
);

/// `nds_monitor_slabs_ended_total{reason}`: attachments that ended, released or reused.
pub static MONITOR_SLABS_ENDED: Family = counter(
    "nds_monitor_slabs_ended_total",
    "Slabs the monitor stopped reading: released by their process, reused by another, or \
     truncated (slab files).",
    true,
);

/// `nds_monitor_attach_failures_total{reason}`: slabs the monitor found but could not read.
pub static MONITOR_ATTACH_FAILURES: Family = counter(
    "nds_monitor_attach_failures_total",
    "Slabs the monitor found but could not attach, each counted once: no permission, not a \
     slab, vanished before it could be read, or owned outside the monitor's pid namespace.",
    true,
);

/// `nds_monitor_pod_resources_errors_total`: calls to the kubelet that failed.
pub static MONITOR_POD_RESOURCES_ERRORS: Family = counter(
    "nds_monitor_pod_resources_errors_total",
    "Calls to the kubelet's PodResources List that failed: no socket, refused, an error \
     status, or no answer within the deadline (the last mapping is used a while longer).",
    true,
);

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
            assert!(runtime.name.contains(node.name) && device.name.contains(node.name));
            assert!(runtime.name.ends_with("_total") && device.name.ends_with("_total"));
            assert_eq!(counts_time(node), runtime.name.ends_with("_seconds_total"));
        }
    }
}
