//! The table of every family the exposition may carry ([`FAMILIES`]): each declared once,
//! with its name, type, unit, `# HELP` text, labels and the row that documents it.
//!
//! nds-exporter names every family through this table: its `prometheus` module the gauges
//! and the process collector's, its `families` module the counters and histogram. The two
//! tables of families in `Documentation/userspace.rst` are generated from it ([`rst`]); a
//! unit test fails while they differ, and
//! `NDS_UPDATE_DOCS=1 cargo test -p nds-metric-table --lib rst` rewrites them.
//! nds-monitor's `tests/metrics.rs` (it needs the sampling loop) renders a full exposition
//! and fails on a family that is rendered but not declared here, declared but never
//! rendered, or rendered with other labels.
//!
//! A series' labels are built from its family's declaration ([`MetricFamily::label_set`]): the
//! declared names, in order, each given a value, so the exporter never spells a label name of
//! a family it renders. It owns names and shapes, and the label sets that name them; it
//! imports nothing of the workspace.

#![warn(missing_docs)]

// Floor 0: label sets.
pub mod label_set;
// Floor 1: the documentation's tables.
pub mod rst;

use std::fmt;

pub use label_set::{LabelSet, PodNames};
use MetricType::{Counter, Gauge, Histogram};

/// Upper bounds of the latency histogram's buckets, in seconds (100 µs to 10 s).
pub const LATENCY_BUCKETS_SECONDS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// The labels every series carries, named as the companion exporter names them.
pub const INSTANCE_LABELS: [&str; 6] = [
    "instance_name",
    "instance_id",
    "instance_type",
    "availability_zone",
    "region",
    "subnet_id",
];

/// The labels naming the container that holds a series' device or core
/// (nds-exporter's `pods`), on the families with [`MetricFamily::pod_labels`].
pub const POD_LABELS: [&str; 3] = ["pod", "namespace", "container"];

/// The labels naming the ResourceClaim a series' device came through, beside
/// [`POD_LABELS`], on a node that allocates devices through DRA.
pub const CLAIM_LABELS: [&str; 2] = ["claim_name", "claim_namespace"];

/// What a family is, as its `# TYPE` line says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MetricType {
    /// One monotonic sample per label set.
    Counter,
    /// One sample per label set, of the latest report.
    Gauge,
    /// `_bucket` samples at these upper bounds (and `+Inf`), then `_sum` and `_count`.
    Histogram(&'static [f64]),
}

impl fmt::Display for MetricType {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram(_) => "histogram",
        })
    }
}

/// Which table of `Documentation/userspace.rst` lists a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocTable {
    /// The companion exporter's families, under "Prometheus: `--format prometheus` and
    /// `serve`".
    Companion,
    /// This monitor's own `nds_*` families, under "Our families".
    Ours,
}

/// Families of one shape that the companion's table documents in one row.
#[derive(Debug, PartialEq)]
pub struct DocGroup {
    /// Every name of the group: `<word>` stands for any word, `{a,b}` for either.
    pub pattern: &'static str,
    /// Said after the pattern, in parentheses.
    pub aside: Option<&'static str>,
}

/// How a family's row reads.
#[derive(Debug, PartialEq)]
pub enum Documented {
    /// A row of the companion's table (or a member of a row shared by a group).
    Companion {
        /// Said after the name, in parentheses (after "counter", for a counter).
        aside: Option<&'static str>,
        /// The group whose row it shares.
        group: Option<&'static DocGroup>,
    },
    /// A row of our table.
    Ours {
        /// What the family counts or says.
        meaning: &'static str,
    },
}

/// One family of the exposition.
#[derive(Debug, PartialEq)]
pub struct MetricFamily {
    /// Its name: with `_total` for a counter, the base name of a histogram.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub metric_type: MetricType,
    /// What one of its values counts, if it is not a plain number.
    pub unit: Option<&'static str>,
    /// Its `# HELP` text.
    pub help: &'static str,
    /// The labels of its series beyond the instance labels (and `le`, the pod labels).
    pub labels: &'static [&'static str],
    /// The values its labels take, or what they mean, for the documentation.
    pub labels_note: Option<&'static str>,
    /// Whether its series carry the pod labels when a container holds their device or core
    /// (the per-pod families: always).
    pub pod_labels: bool,
    /// Whether a counter is followed by its `_created` gauge, as the companion's client
    /// library renders it.
    pub created: bool,
    /// Its row in the documentation.
    pub documented: Documented,
}

impl MetricFamily {
    /// The table that lists it.
    #[must_use]
    pub fn doc_table(&self) -> DocTable {
        match self.documented {
            Documented::Companion { .. } => DocTable::Companion,
            Documented::Ours { .. } => DocTable::Ours,
        }
    }

    /// The name of its `_created` gauge, if it has one: the counter's name without `_total`,
    /// as the Python client names it.
    #[must_use]
    pub fn created_name(&self) -> Option<String> {
        let base = self.name.strip_suffix("_total").unwrap_or(self.name);
        self.created.then(|| format!("{base}_created"))
    }
}

/// A plain row of the companion's table: no unit, note, pod labels, `_created` or aside.
const fn companion(
    name: &'static str,
    metric_type: MetricType,
    help: &'static str,
    labels: &'static [&'static str],
) -> MetricFamily {
    MetricFamily {
        name,
        metric_type,
        unit: None,
        help,
        labels,
        labels_note: None,
        pod_labels: false,
        created: false,
        documented: Documented::Companion {
            aside: None,
            group: None,
        },
    }
}

/// A plain row of our table: no unit, note or pod labels.
const fn ours(
    name: &'static str,
    metric_type: MetricType,
    help: &'static str,
    labels: &'static [&'static str],
    meaning: &'static str,
) -> MetricFamily {
    MetricFamily {
        documented: Documented::Ours { meaning },
        ..companion(name, metric_type, help, labels)
    }
}

/// A row of the companion's table with `text` after the name.
const fn with_aside(text: &'static str) -> Documented {
    Documented::Companion {
        aside: Some(text),
        group: None,
    }
}

/// A family sharing the companion's row of `group`.
const fn member_of(group: &'static DocGroup) -> Documented {
    Documented::Companion {
        aside: None,
        group: Some(group),
    }
}

/// `neuroncore_utilization_ratio{runtime_tag, neuroncore}`: busy share of each core in use.
pub static NEURONCORE_UTILIZATION_RATIO: MetricFamily = MetricFamily {
    unit: Some("ratio"),
    pod_labels: true,
    documented: with_aside("0–1"),
    ..companion(
        "neuroncore_utilization_ratio",
        Gauge,
        "NeuronCore utilization ratio",
        &["runtime_tag", "neuroncore"],
    )
};

/// `neuron_runtime_vcpu_usage_ratio{runtime_tag, usage_type}`: the processes' CPU use.
pub static NEURON_RUNTIME_VCPU_USAGE_RATIO: MetricFamily = MetricFamily {
    unit: Some("ratio"),
    ..companion(
        "neuron_runtime_vcpu_usage_ratio",
        Gauge,
        "Runtime vCPU utilization ratio",
        &["runtime_tag", "usage_type"],
    )
};

/// `neuron_runtime_memory_used_bytes{runtime_tag, memory_location}`: host and device memory.
pub static NEURON_RUNTIME_MEMORY_USED_BYTES: MetricFamily = MetricFamily {
    unit: Some("bytes"),
    ..companion(
        "neuron_runtime_memory_used_bytes",
        Gauge,
        "Runtime memory used bytes",
        &["runtime_tag", "memory_location"],
    )
};

static NEURONCORE_MEMORY_USAGE: DocGroup = DocGroup {
    pattern: "neuroncore_memory_usage_<kind>",
    aside: Some("five kinds"),
};

/// A core's device memory of one kind, as the companion labels it (`memory_location`
/// `"None"`).
const fn neuroncore_memory_usage(name: &'static str, help: &'static str) -> MetricFamily {
    MetricFamily {
        unit: Some("bytes"),
        labels_note: Some("always ``\"None\"``"),
        pod_labels: true,
        documented: member_of(&NEURONCORE_MEMORY_USAGE),
        ..companion(
            name,
            Gauge,
            help,
            &["runtime_tag", "neuroncore", "memory_location"],
        )
    }
}

/// `neuroncore_memory_usage_constants`.
pub static NEURONCORE_MEMORY_USAGE_CONSTANTS: MetricFamily = neuroncore_memory_usage(
    "neuroncore_memory_usage_constants",
    "NeuronCore memory utilization for constants",
);

/// `neuroncore_memory_usage_model_code`.
pub static NEURONCORE_MEMORY_USAGE_MODEL_CODE: MetricFamily = neuroncore_memory_usage(
    "neuroncore_memory_usage_model_code",
    "NeuronCore memory utilization for model_code",
);

/// `neuroncore_memory_usage_model_shared_scratchpad`.
pub static NEURONCORE_MEMORY_USAGE_MODEL_SHARED_SCRATCHPAD: MetricFamily = neuroncore_memory_usage(
    "neuroncore_memory_usage_model_shared_scratchpad",
    "NeuronCore memory utilization for model_shared_scratchpad",
);

/// `neuroncore_memory_usage_runtime_memory`.
pub static NEURONCORE_MEMORY_USAGE_RUNTIME_MEMORY: MetricFamily = neuroncore_memory_usage(
    "neuroncore_memory_usage_runtime_memory",
    "NeuronCore memory utilization for runtime_memory",
);

/// `neuroncore_memory_usage_tensors`.
pub static NEURONCORE_MEMORY_USAGE_TENSORS: MetricFamily = neuroncore_memory_usage(
    "neuroncore_memory_usage_tensors",
    "NeuronCore memory utilization for tensors",
);

/// `execution_errors_total{runtime_tag, error_type}`: error classes of every process of a tag.
pub static EXECUTION_ERRORS_TOTAL: MetricFamily = MetricFamily {
    created: true,
    ..companion(
        "execution_errors_total",
        Counter,
        "Execution errors total",
        &["runtime_tag", "error_type"],
    )
};

/// `execution_status_total{runtime_tag, status_type}`: outcomes of every process of a tag.
pub static EXECUTION_STATUS_TOTAL: MetricFamily = MetricFamily {
    created: true,
    ..companion(
        "execution_status_total",
        Counter,
        "Execution status total",
        &["runtime_tag", "status_type"],
    )
};

/// `execution_latency_seconds{runtime_tag, percentile}`: percentiles of the total latency.
pub static EXECUTION_LATENCY_SECONDS: MetricFamily = MetricFamily {
    unit: Some("seconds"),
    labels_note: Some("p0 …"),
    documented: with_aside("total latency"),
    ..companion(
        "execution_latency_seconds",
        Gauge,
        "Execution latency in seconds",
        &["runtime_tag", "percentile"],
    )
};

/// `hardware_ecc_events_total{event_type, neuron_device_index}`: the driver's ECC events.
pub static HARDWARE_ECC_EVENTS_TOTAL: MetricFamily = MetricFamily {
    created: true,
    ..companion(
        "hardware_ecc_events_total",
        Counter,
        "Hardware ecc events total",
        &["event_type", "neuron_device_index"],
    )
};

/// `system_vcpu_count`: the host's vCPUs.
pub static SYSTEM_VCPU_COUNT: MetricFamily =
    companion("system_vcpu_count", Gauge, "System vCPU count", &[]);

/// `system_vcpu_usage_ratio{usage_type}`: the host's CPU use in the companion's two buckets.
pub static SYSTEM_VCPU_USAGE_RATIO: MetricFamily = MetricFamily {
    unit: Some("ratio"),
    labels_note: Some("user: user + nice; system: system + io_wait + irq + soft_irq"),
    ..companion(
        "system_vcpu_usage_ratio",
        Gauge,
        "System CPU utilization ratio",
        &["usage_type"],
    )
};

static SYSTEM_MEMORY: DocGroup = DocGroup {
    pattern: "system_{memory,swap}_{total,used}_bytes",
    aside: None,
};

/// The host's memory or swap, total or used.
const fn system_memory(name: &'static str, help: &'static str) -> MetricFamily {
    MetricFamily {
        unit: Some("bytes"),
        documented: member_of(&SYSTEM_MEMORY),
        ..companion(name, Gauge, help, &[])
    }
}

/// `system_memory_total_bytes`.
pub static SYSTEM_MEMORY_TOTAL_BYTES: MetricFamily = system_memory(
    "system_memory_total_bytes",
    "System memory total_bytes bytes",
);

/// `system_memory_used_bytes`.
pub static SYSTEM_MEMORY_USED_BYTES: MetricFamily =
    system_memory("system_memory_used_bytes", "System memory used_bytes bytes");

/// `system_swap_total_bytes`.
pub static SYSTEM_SWAP_TOTAL_BYTES: MetricFamily =
    system_memory("system_swap_total_bytes", "System swap total_bytes bytes");

/// `system_swap_used_bytes`.
pub static SYSTEM_SWAP_USED_BYTES: MetricFamily =
    system_memory("system_swap_used_bytes", "System swap used_bytes bytes");

/// `instance_info`: 1, labelled with the instance.
pub static INSTANCE_INFO: MetricFamily = MetricFamily {
    documented: with_aside("1"),
    ..companion("instance_info", Gauge, "EC2 instance information", &[])
};

/// `neuron_hardware_info{…}`: 1, labelled with the devices' numbers and kinds.
pub static NEURON_HARDWARE_INFO: MetricFamily = MetricFamily {
    documented: with_aside("1"),
    ..companion(
        "neuron_hardware_info",
        Gauge,
        "Neuron Hardware Information",
        &[
            "neuron_device_count",
            "neuroncore_per_device_count",
            "neuron_device_type",
            "neuroncore_version",
        ],
    )
};

/// `process_cpu_seconds_total`: the monitor's CPU time.
pub static PROCESS_CPU_SECONDS_TOTAL: MetricFamily = MetricFamily {
    unit: Some("seconds"),
    ..companion(
        "process_cpu_seconds_total",
        Counter,
        "Total user and system CPU time spent in seconds.",
        &[],
    )
};

/// `process_resident_memory_bytes`: the monitor's resident set.
pub static PROCESS_RESIDENT_MEMORY_BYTES: MetricFamily = MetricFamily {
    unit: Some("bytes"),
    ..companion(
        "process_resident_memory_bytes",
        Gauge,
        "Resident memory size in bytes.",
        &[],
    )
};

/// `process_virtual_memory_bytes`: the monitor's virtual memory.
pub static PROCESS_VIRTUAL_MEMORY_BYTES: MetricFamily = MetricFamily {
    unit: Some("bytes"),
    ..companion(
        "process_virtual_memory_bytes",
        Gauge,
        "Virtual memory size in bytes.",
        &[],
    )
};

/// `process_start_time_seconds`: when the monitor started.
pub static PROCESS_START_TIME_SECONDS: MetricFamily = MetricFamily {
    unit: Some("seconds"),
    ..companion(
        "process_start_time_seconds",
        Gauge,
        "Start time of the process since unix epoch in seconds.",
        &[],
    )
};

/// `process_open_fds`: the monitor's open file descriptors.
pub static PROCESS_OPEN_FDS: MetricFamily = companion(
    "process_open_fds",
    Gauge,
    "Number of open file descriptors.",
    &[],
);

/// `process_max_fds`: the monitor's limit on open file descriptors.
pub static PROCESS_MAX_FDS: MetricFamily = companion(
    "process_max_fds",
    Gauge,
    "Maximum number of open file descriptors.",
    &[],
);

/// The labels of a process's series.
const PER_PROCESS: &[&str] = &["runtime_tag", "pid", "neuron_device_index"];
/// The labels of a process's series on one core.
const PER_PROCESS_CORE: &[&str] = &["runtime_tag", "pid", "neuron_device_index", "neuroncore"];
/// The labels of the kernel's totals of one core.
const PER_DEVICE_CORE: &[&str] = &["neuron_device_index", "neuroncore"];

/// `nds_runtime_info{runtime_tag, pid, neuron_device_index}`: 1 per process read.
pub static NDS_RUNTIME_INFO: MetricFamily = MetricFamily {
    pod_labels: true,
    ..ours(
        "nds_runtime_info",
        Gauge,
        "A process whose datastore slab the monitor reads.",
        PER_PROCESS,
        "1 for each process whose slab the monitor reads",
    )
};

/// `nds_runtime_loaded_models{…}`: models a process has loaded.
pub static NDS_RUNTIME_LOADED_MODELS: MetricFamily = MetricFamily {
    unit: Some("models"),
    pod_labels: true,
    ..ours(
        "nds_runtime_loaded_models",
        Gauge,
        "Models loaded by the process.",
        PER_PROCESS,
        "models the process has loaded",
    )
};

/// `nds_runtime_inference_count_total{…, neuroncore}`.
pub static NDS_RUNTIME_INFERENCE_COUNT_TOTAL: MetricFamily = MetricFamily {
    pod_labels: true,
    ..ours(
        "nds_runtime_inference_count_total",
        Counter,
        "Inferences per process and NeuronCore.",
        PER_PROCESS_CORE,
        "inferences",
    )
};

/// `nds_runtime_model_load_count_total{…, neuroncore}`.
pub static NDS_RUNTIME_MODEL_LOAD_COUNT_TOTAL: MetricFamily = MetricFamily {
    pod_labels: true,
    ..ours(
        "nds_runtime_model_load_count_total",
        Counter,
        "Model loads per process and NeuronCore.",
        PER_PROCESS_CORE,
        "model loads",
    )
};

/// `nds_runtime_flop_count_total{…, neuroncore}`.
pub static NDS_RUNTIME_FLOP_COUNT_TOTAL: MetricFamily = MetricFamily {
    pod_labels: true,
    ..ours(
        "nds_runtime_flop_count_total",
        Counter,
        "Floating-point operations per process and NeuronCore (two per multiply-accumulate).",
        PER_PROCESS_CORE,
        "floating-point operations (two per multiply-accumulate)",
    )
};

/// `nds_runtime_nc_time_in_use_seconds_total{…, neuroncore}`.
pub static NDS_RUNTIME_NC_TIME_IN_USE_SECONDS_TOTAL: MetricFamily = MetricFamily {
    unit: Some("seconds"),
    pod_labels: true,
    ..ours(
        "nds_runtime_nc_time_in_use_seconds_total",
        Counter,
        "Time a NeuronCore was busy for the process, seconds.",
        PER_PROCESS_CORE,
        "time the NeuronCore was busy for the process",
    )
};

/// `nds_runtime_status_total{…, neuroncore, status}`: a process's slab, per status node.
pub static NDS_RUNTIME_STATUS_TOTAL: MetricFamily = MetricFamily {
    labels_note: Some("a status node's sysfs name, e.g. ``success``, ``exec_bad_input``"),
    pod_labels: true,
    ..ours(
        "nds_runtime_status_total",
        Counter,
        "Executions and errors per status, per process and NeuronCore, as its slab counts them.",
        &[
            "runtime_tag",
            "pid",
            "neuron_device_index",
            "neuroncore",
            "status",
        ],
        "executions per status, from the slab",
    )
};

/// `nds_runtime_latency_seconds{…, kind}`: sampled execution latencies (total, device).
pub static NDS_RUNTIME_LATENCY_SECONDS: MetricFamily = MetricFamily {
    unit: Some("seconds"),
    labels_note: Some("``total`` or ``device``"),
    pod_labels: true,
    ..ours(
        "nds_runtime_latency_seconds",
        Histogram(&LATENCY_BUCKETS_SECONDS),
        "Execution latencies sampled from the process's slab (kind total or device), seconds.",
        &["runtime_tag", "pid", "neuron_device_index", "kind"],
        "sampled execution latencies, buckets 100 µs to 10 s, only where a rule asks for \
         ``execution_stats``",
    )
};

/// `nds_pod_execution_status_total{status_type}` and the pod labels: outcomes of every process
/// of a container.
pub static NDS_POD_EXECUTION_STATUS_TOTAL: MetricFamily = MetricFamily {
    labels_note: Some(
        "as in ``execution_status_total``; with ``pod``, ``namespace``, ``container``",
    ),
    pod_labels: true,
    ..ours(
        "nds_pod_execution_status_total",
        Counter,
        "Execution outcomes of every process of a container, each exact to its end.",
        &["status_type"],
        "outcomes of every process a container held, each to its final value",
    )
};

/// `nds_pod_execution_errors_total{error_type}` and the pod labels: error classes of every
/// process of a container.
pub static NDS_POD_EXECUTION_ERRORS_TOTAL: MetricFamily = MetricFamily {
    labels_note: Some(
        "as in ``execution_errors_total``; with ``pod``, ``namespace``, ``container``",
    ),
    pod_labels: true,
    ..ours(
        "nds_pod_execution_errors_total",
        Counter,
        "Execution error classes of every process of a container.",
        &["error_type"],
        "error classes of every process a container held",
    )
};

/// `nds_device_slots_owned{neuron_device_index}`: slabs owned now.
pub static NDS_DEVICE_SLOTS_OWNED: MetricFamily = MetricFamily {
    unit: Some("slabs"),
    ..ours(
        "nds_device_slots_owned",
        Gauge,
        "Datastore slabs currently owned by a process.",
        &["neuron_device_index"],
        "slabs owned by a process now",
    )
};

/// `nds_device_inference_count_total{neuron_device_index, neuroncore}`.
pub static NDS_DEVICE_INFERENCE_COUNT_TOTAL: MetricFamily = ours(
    "nds_device_inference_count_total",
    Counter,
    "The kernel's aggregate of inferences per NeuronCore.",
    PER_DEVICE_CORE,
    "the kernel's aggregate of inferences",
);

/// `nds_device_model_load_count_total{neuron_device_index, neuroncore}`.
pub static NDS_DEVICE_MODEL_LOAD_COUNT_TOTAL: MetricFamily = ours(
    "nds_device_model_load_count_total",
    Counter,
    "The kernel's aggregate of model loads per NeuronCore.",
    PER_DEVICE_CORE,
    "the kernel's aggregate of model loads",
);

/// `nds_device_flop_count_total{neuron_device_index, neuroncore}`.
pub static NDS_DEVICE_FLOP_COUNT_TOTAL: MetricFamily = ours(
    "nds_device_flop_count_total",
    Counter,
    "The kernel's aggregate of floating-point operations per NeuronCore.",
    PER_DEVICE_CORE,
    "the kernel's aggregate of floating-point operations",
);

/// `nds_device_nc_time_in_use_seconds_total{neuron_device_index, neuroncore}`.
pub static NDS_DEVICE_NC_TIME_IN_USE_SECONDS_TOTAL: MetricFamily = MetricFamily {
    unit: Some("seconds"),
    ..ours(
        "nds_device_nc_time_in_use_seconds_total",
        Counter,
        "The kernel's aggregate of NeuronCore busy time, seconds.",
        PER_DEVICE_CORE,
        "the kernel's aggregate of NeuronCore busy time",
    )
};

/// `nds_device_status_total{neuron_device_index, neuroncore, status}`: the kernel's totals.
pub static NDS_DEVICE_STATUS_TOTAL: MetricFamily = ours(
    "nds_device_status_total",
    Counter,
    "The kernel's aggregate per status node: released owners plus live ones.",
    &["neuron_device_index", "neuroncore", "status"],
    "the kernel's aggregate per status node",
);

/// `nds_monitor_reports_total`: reports made; a scrape shows the latest one's numbers.
pub static NDS_MONITOR_REPORTS_TOTAL: MetricFamily = MetricFamily {
    unit: Some("reports"),
    ..ours(
        "nds_monitor_reports_total",
        Counter,
        "Reports made by the monitor: the exposition is the latest one's.",
        &[],
        "reports the monitor made (a scrape shows the latest one)",
    )
};

/// `nds_monitor_slabs_ended_total{reason}`: attachments that ended, released or reused.
pub static NDS_MONITOR_SLABS_ENDED_TOTAL: MetricFamily = MetricFamily {
    unit: Some("slabs"),
    labels_note: Some("``released``, ``reused``, ``truncated``, each always present"),
    ..ours(
        "nds_monitor_slabs_ended_total",
        Counter,
        "Slabs the monitor stopped reading: released by their process, reused by another, or \
         truncated (slab files).",
        &["reason"],
        "slabs the monitor stopped reading",
    )
};

/// `nds_monitor_attach_failures_total{reason}`: slabs the monitor found but could not read.
pub static NDS_MONITOR_ATTACH_FAILURES_TOTAL: MetricFamily = MetricFamily {
    unit: Some("slabs"),
    labels_note: Some(
        "``no_permission``, ``not_a_slab``, ``vanished``, ``no_pid_view``, ``other``, each \
         always present",
    ),
    ..ours(
        "nds_monitor_attach_failures_total",
        Counter,
        "Slabs the monitor found but could not attach, each counted once: no permission, not a \
         slab, vanished before it could be read, or owned outside the monitor's pid namespace.",
        &["reason"],
        "slabs found but not attached, each counted once (``no_pid_view``: a slot owned \
         outside the monitor's pid namespace, as in a pod without ``hostPID``)",
    )
};

/// `nds_monitor_pod_resources_errors_total`: calls to the kubelet that failed.
pub static NDS_MONITOR_POD_RESOURCES_ERRORS_TOTAL: MetricFamily = MetricFamily {
    unit: Some("calls"),
    ..ours(
        "nds_monitor_pod_resources_errors_total",
        Counter,
        "Calls to the kubelet's PodResources List that failed: no socket, refused, an error \
         status, or no answer within the deadline (the last mapping is used a while longer).",
        &[],
        "calls to the kubelet's PodResources ``List`` that failed (only with \
         ``--pod-resources-socket``)",
    )
};

/// `nds_monitor_ledger_records_total{outcome}`: tenure ledger records read, by what became of
/// them.
pub static NDS_MONITOR_LEDGER_RECORDS_TOTAL: MetricFamily = MetricFamily {
    unit: Some("records"),
    labels_note: Some(
        "``final``, ``unseen``, ``history``, ``redacted``, ``late``, each always present",
    ),
    ..ours(
        "nds_monitor_ledger_records_total",
        Counter,
        "Tenure ledger records read: the final values of a tenure read (final), of one never \
         read (unseen), history from before the start (not counted), redacted for this monitor \
         (skipped), or late (its tenure was closed with its last reading).",
        &["outcome"],
        "records of the devices' tenure ledgers read, by what became of them (only where the \
         monitor follows the ledgers: the kernel's slabs)",
    )
};

/// `nds_monitor_ledger_lost_records_total`: records the ledgers dropped before they were read.
pub static NDS_MONITOR_LEDGER_LOST_RECORDS_TOTAL: MetricFamily = MetricFamily {
    unit: Some("records"),
    ..ours(
        "nds_monitor_ledger_lost_records_total",
        Counter,
        "Tenure ledger records a device's ring dropped before the monitor read them (their \
         tenures keep their last readings).",
        &[],
        "records the devices' tenure ledgers dropped before the monitor read them (each gap is \
         logged with its sequence numbers)",
    )
};

/// `nds_device_health_state{neuron_device_index, state}`: the device's verdict, one-hot.
pub static NDS_DEVICE_HEALTH_STATE: MetricFamily = MetricFamily {
    labels_note: Some(
        "state: healthy, unhealthy, unknown; 1 for the verdict, 0 for the two others",
    ),
    ..ours(
        "nds_device_health_state",
        Gauge,
        "The device's health verdict, one-hot over healthy, unhealthy and unknown.",
        &["neuron_device_index", "state"],
        "each device's health verdict: a series per state, 1 for the device's",
    )
};

/// `nds_device_health_reason{neuron_device_index, reason, action}`: why, one-hot.
pub static NDS_DEVICE_HEALTH_REASON: MetricFamily = MetricFamily {
    labels_note: Some(
        "reason: ``no_errors``, ``repairable_hbm_errors``, ``hbm_uncorrectable_errors``, \
         ``nc_uncorrectable_errors``, ``dma_aborts``, ``collectives_errors``, \
         ``ecc_uncorrectable_errors``, ``unreadable``, ``module_unloaded``; action: the \
         reason's recommended action under the rules in force (monitor, update_software, \
         reset, terminate)",
    ),
    ..ours(
        "nds_device_health_reason",
        Gauge,
        "Why the device's verdict is what it is, one-hot over the reasons, with each reason's \
         recommended action.",
        &["neuron_device_index", "reason", "action"],
        "the reason of each device's verdict: a series per reason, 1 for the device's",
    )
};

/// `nds_neuroncore_health_state{neuron_device_index, neuroncore, state}`: each core's
/// verdict, one-hot.
pub static NDS_NEURONCORE_HEALTH_STATE: MetricFamily = MetricFamily {
    labels_note: Some(
        "state: healthy, unhealthy, unknown; 1 for the verdict, 0 for the two others",
    ),
    ..ours(
        "nds_neuroncore_health_state",
        Gauge,
        "The NeuronCore's health verdict, one-hot over healthy, unhealthy and unknown.",
        &["neuron_device_index", "neuroncore", "state"],
        "each NeuronCore's health verdict (on its own errors): a series per state",
    )
};

/// Every family, in the order of the documentation's rows.
pub static FAMILIES: [&MetricFamily; 51] = [
    &NEURONCORE_UTILIZATION_RATIO,
    &NEURON_RUNTIME_VCPU_USAGE_RATIO,
    &NEURON_RUNTIME_MEMORY_USED_BYTES,
    &NEURONCORE_MEMORY_USAGE_CONSTANTS,
    &NEURONCORE_MEMORY_USAGE_MODEL_CODE,
    &NEURONCORE_MEMORY_USAGE_MODEL_SHARED_SCRATCHPAD,
    &NEURONCORE_MEMORY_USAGE_RUNTIME_MEMORY,
    &NEURONCORE_MEMORY_USAGE_TENSORS,
    &EXECUTION_ERRORS_TOTAL,
    &EXECUTION_STATUS_TOTAL,
    &EXECUTION_LATENCY_SECONDS,
    &HARDWARE_ECC_EVENTS_TOTAL,
    &SYSTEM_VCPU_COUNT,
    &SYSTEM_VCPU_USAGE_RATIO,
    &SYSTEM_MEMORY_TOTAL_BYTES,
    &SYSTEM_MEMORY_USED_BYTES,
    &SYSTEM_SWAP_TOTAL_BYTES,
    &SYSTEM_SWAP_USED_BYTES,
    &INSTANCE_INFO,
    &NEURON_HARDWARE_INFO,
    &PROCESS_CPU_SECONDS_TOTAL,
    &PROCESS_RESIDENT_MEMORY_BYTES,
    &PROCESS_VIRTUAL_MEMORY_BYTES,
    &PROCESS_START_TIME_SECONDS,
    &PROCESS_OPEN_FDS,
    &PROCESS_MAX_FDS,
    &NDS_RUNTIME_INFO,
    &NDS_RUNTIME_LOADED_MODELS,
    &NDS_RUNTIME_INFERENCE_COUNT_TOTAL,
    &NDS_RUNTIME_MODEL_LOAD_COUNT_TOTAL,
    &NDS_RUNTIME_FLOP_COUNT_TOTAL,
    &NDS_RUNTIME_NC_TIME_IN_USE_SECONDS_TOTAL,
    &NDS_RUNTIME_STATUS_TOTAL,
    &NDS_RUNTIME_LATENCY_SECONDS,
    &NDS_POD_EXECUTION_STATUS_TOTAL,
    &NDS_POD_EXECUTION_ERRORS_TOTAL,
    &NDS_DEVICE_SLOTS_OWNED,
    &NDS_DEVICE_INFERENCE_COUNT_TOTAL,
    &NDS_DEVICE_MODEL_LOAD_COUNT_TOTAL,
    &NDS_DEVICE_FLOP_COUNT_TOTAL,
    &NDS_DEVICE_NC_TIME_IN_USE_SECONDS_TOTAL,
    &NDS_DEVICE_STATUS_TOTAL,
    &NDS_MONITOR_REPORTS_TOTAL,
    &NDS_MONITOR_SLABS_ENDED_TOTAL,
    &NDS_MONITOR_ATTACH_FAILURES_TOTAL,
    &NDS_MONITOR_POD_RESOURCES_ERRORS_TOTAL,
    &NDS_MONITOR_LEDGER_RECORDS_TOTAL,
    &NDS_MONITOR_LEDGER_LOST_RECORDS_TOTAL,
    &NDS_DEVICE_HEALTH_STATE,
    &NDS_DEVICE_HEALTH_REASON,
    &NDS_NEURONCORE_HEALTH_STATE,
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::ptr;

    use regex::{Captures, Regex};

    use super::*;

    /// The names `pattern` of a [`DocGroup`] stands for, as a regular expression.
    fn names_of(pattern: &str) -> Regex {
        let escaped = regex::escape(pattern);
        let words = Regex::new("<[a-z]+>")
            .unwrap()
            .replace_all(&escaped, "[a-z_]+");
        let alternatives = Regex::new(r"\\\{([a-z_,]+)\\\}")
            .unwrap()
            .replace_all(&words, |either: &Captures<'_>| {
                format!("({})", either[1].replace(',', "|"))
            });
        Regex::new(&format!("^{alternatives}$")).unwrap()
    }

    fn group_of(family: &MetricFamily) -> Option<&'static DocGroup> {
        match family.documented {
            Documented::Companion { group, .. } => group,
            Documented::Ours { .. } => None,
        }
    }

    #[test]
    fn every_name_is_declared_once() {
        let mut names = BTreeSet::new();
        for family in FAMILIES {
            assert!(names.insert(family.name.to_owned()), "{}", family.name);
            if let Some(created) = family.created_name() {
                assert!(names.insert(created.clone()), "{created}");
            }
        }
    }

    #[test]
    fn a_group_is_one_row_of_families_of_one_shape() {
        let groups: Vec<&DocGroup> = FAMILIES.iter().filter_map(|f| group_of(f)).collect();
        for group in groups {
            let members: Vec<usize> = (0..FAMILIES.len())
                .filter(|&index| group_of(FAMILIES[index]).is_some_and(|g| ptr::eq(g, group)))
                .collect();
            let (first, last) = (members[0], members[members.len() - 1]);
            assert_eq!(
                last - first + 1,
                members.len(),
                "{} adjacent",
                group.pattern
            );
            let pattern = names_of(group.pattern);
            for (index, family) in FAMILIES.iter().enumerate() {
                assert_eq!(
                    pattern.is_match(family.name),
                    members.contains(&index),
                    "{} and {}",
                    group.pattern,
                    family.name
                );
            }
            let shape = |family: &MetricFamily| {
                (
                    family.metric_type,
                    family.unit,
                    family.labels,
                    family.labels_note,
                    family.pod_labels,
                    family.created,
                )
            };
            for &index in &members {
                assert_eq!(shape(FAMILIES[index]), shape(FAMILIES[first]));
            }
        }
    }

    #[test]
    fn names_types_units_and_labels_agree() {
        let reserved: Vec<&str> = INSTANCE_LABELS
            .iter()
            .chain(&POD_LABELS)
            .chain(&CLAIM_LABELS)
            .chain(&["le"])
            .copied()
            .collect();
        for family in FAMILIES {
            let name = family.name;
            let counter = family.metric_type == MetricType::Counter;
            assert_eq!(counter, name.ends_with("_total"), "{name}");
            assert!(!family.created || counter, "{name}");
            assert!(!family.help.is_empty(), "{name}");
            assert_eq!(
                family.doc_table() == DocTable::Ours,
                name.starts_with("nds_"),
                "{name}"
            );
            // A unit the name spells is the declared one; ours spell every base unit.
            for unit in ["seconds", "bytes", "ratio"] {
                if name.split('_').any(|word| word == unit) {
                    assert_eq!(family.unit, Some(unit), "{name}");
                } else if family.doc_table() == DocTable::Ours {
                    assert_ne!(family.unit, Some(unit), "{name}");
                }
            }
            for label in family.labels {
                assert!(!reserved.contains(label), "{name} declares {label}");
            }
        }
    }
}
