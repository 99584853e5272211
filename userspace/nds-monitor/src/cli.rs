//! The command line of the `nds-monitor` tool: its binary parses it, and `nds-dist` generates
//! the manual page and shell completions from the same definitions.
//!
//! neuron-monitor's own options keep their spelling: `-c, --config-file` and `--verbose 0..4`.

use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use nds_document::config::period_argument;
use nds_host::hardware::DEFAULT_HARDWARE_ROOT;
use nds_host::imds::MetadataSetting;
use nds_sysfs::{DEFAULT_MODULE_DIR, DEFAULT_SYSFS_ROOT};

/// Reports every process's datastore counters and the kernel's totals, one document per period.
#[derive(Debug, Parser)]
#[command(name = "nds-monitor", version, about)]
pub struct Cli {
    /// Configuration file in neuron-monitor's format.
    #[arg(
        short = 'c',
        long = "config-file",
        alias = "config",
        value_name = "FILE"
    )]
    pub config_file: Option<PathBuf>,
    /// Messages on standard error: 0 warnings and errors only, 1 also what the monitor
    /// attaches and ends, 2 also every report and failed request, 3 and 4 everything (4 with
    /// the libraries' own messages).
    #[arg(long, default_value_t = 0, value_name = "0..4",
          value_parser = clap::value_parser!(u8).range(0..=4))]
    pub verbose: u8,
    /// Period of every group, overriding the configuration (e.g. `1s`, `500ms`; 1 ms to a day).
    #[arg(long, value_parser = period_argument)]
    pub period: Option<Duration>,
    /// Report only processes whose tag matches this regular expression.
    #[arg(long)]
    pub tag_filter: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Stop after this many reports.
    #[arg(long)]
    pub count: Option<u64>,
    /// Indent the JSON (one document then spans several lines).
    #[arg(long)]
    pub pretty: bool,
    /// Root of the module's sysfs devices.
    #[arg(long, default_value = DEFAULT_SYSFS_ROOT)]
    pub sysfs_root: PathBuf,
    /// Directory of the device nodes.
    #[arg(long, default_value = "/dev")]
    pub dev_dir: PathBuf,
    /// Read slab files `neuron<device>-<pid>.slab` from this directory instead of the devices.
    #[arg(long)]
    pub slab_dir: Option<PathBuf>,
    /// Picoseconds per unit of NDS_NC_COUNTER_TIME_IN_USE (1: picoseconds, 1000000:
    /// microseconds); default: the loaded module's time_in_use_unit_ps, else 1.
    #[arg(long, value_name = "PS")]
    pub time_in_use_unit_ps: Option<NonZeroU64>,
    /// The module's directory (its parameters, and whether it is loaded).
    #[arg(long, default_value = DEFAULT_MODULE_DIR)]
    pub module_dir: PathBuf,
    /// EC2 instance metadata for `instance_info`: `auto` (queried only if DMI says this is an
    /// EC2 instance), `off`, or an `http://HOST[:PORT]` endpoint to query.
    #[arg(
        long,
        env = "NDS_MONITOR_INSTANCE_METADATA",
        default_value = "auto",
        value_name = "auto|off|URL"
    )]
    pub instance_metadata: MetadataSetting,
    /// Root of the Neuron driver's sysfs devices (device type and ECC counters, where present).
    #[arg(long, default_value = DEFAULT_HARDWARE_ROOT)]
    pub hardware_sysfs_root: PathBuf,
    /// Where to read the host's CPU and memory (`stat`, `meminfo`) and each process's CPU
    /// time and start time (`<pid>/stat`).
    #[arg(long, default_value = "/proc")]
    pub proc_root: PathBuf,
    /// The kubelet's PodResources socket (`/var/lib/kubelet/pod-resources/kubelet.sock`):
    /// label the exposition's per-process and per-core series with the pod, namespace and
    /// container holding their Neuron device or cores. Off unless given; Prometheus only.
    #[arg(long, value_name = "PATH")]
    pub pod_resources_socket: Option<PathBuf>,
    /// How often to ask the kubelet which containers hold the devices.
    #[arg(long, default_value = "10s", value_parser = period_argument,
          requires = "pod_resources_socket")]
    pub pod_resources_period: Duration,
    /// Which allocations to read: the Neuron device plugin's, the Neuron DRA driver's claims,
    /// or (`auto`) whichever the node lists; the log says which it found.
    #[arg(long, value_enum, default_value_t = PodResourcesAllocator::Auto,
          requires = "pod_resources_socket")]
    pub pod_resources_allocator: PodResourcesAllocator,
    /// What to do instead of printing reports.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Prometheus exposition at /metrics (and /healthz) over HTTP, or HTTPS with a
    /// certificate; the monitor reports on its own schedule and every request reads the latest
    /// exposition. Stops on SIGTERM or SIGINT.
    Serve {
        /// Address to listen on; port 0 picks a free one (the address is printed).
        #[arg(long, default_value = "127.0.0.1:9200", value_name = "ADDR")]
        listen: String,
        /// PEM certificate chain to serve HTTPS with (needs --key-file).
        #[arg(long, requires = "key_file", value_name = "FILE")]
        cert_file: Option<PathBuf>,
        /// PEM private key of --cert-file.
        #[arg(long, requires = "cert_file", value_name = "FILE")]
        key_file: Option<PathBuf>,
        /// Exit after answering this many requests.
        #[arg(long)]
        max_requests: Option<usize>,
        /// Also push the exposition's families by OTLP/HTTP to this collector URL
        /// (`http://HOST:4318/v1/metrics`): the same series and labels, counters cumulative.
        /// Off unless given.
        #[arg(long, value_name = "URL")]
        otlp_endpoint: Option<String>,
        /// How often to push to the collector.
        #[arg(long, default_value = "60s", value_parser = period_argument,
              requires = "otlp_endpoint")]
        otlp_period: Duration,
        /// The node's name, as the resource attribute `k8s.node.name` of the pushed metrics.
        /// Unused without --otlp-endpoint (a pod may have NODE_NAME whether or not it pushes).
        #[arg(long, env = "NODE_NAME", value_name = "NAME")]
        otlp_node_name: Option<String>,
        /// Keep the event stream's state here (its id, its next number, where each ledger was
        /// read to, each live tenure's counters as evented), so that a restarted exporter
        /// resumes the stream; without it, every start begins a new stream.
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Events /api/v1/events keeps for clients (a client asking for older ones gets a gap
        /// record); 0 serves no event stream.
        #[arg(long, default_value_t = nds_health::events::DEFAULT_CAPACITY, value_name = "N")]
        events_capacity: usize,
        /// Devices the first report must have listed for /readyz to answer 200.
        #[arg(long, default_value_t = 1, value_name = "N")]
        ready_min_devices: usize,
    },
    /// Check the health verdicts of a running `serve` (its /api/v1/devices), as a
    /// node-problem-detector custom plugin: exit 0 when every device is healthy, 1 when one is
    /// unhealthy, 2 when one is unknown or the exporter cannot be asked; the first line of
    /// the output says why.
    Health {
        /// The exporter's address: `http://HOST:PORT` or `https://HOST:PORT`.
        #[arg(long, default_value = "http://127.0.0.1:9200", value_name = "URL")]
        url: String,
        /// PEM certificates to trust for an https URL (the exporter's CA).
        #[arg(long, value_name = "FILE")]
        ca_file: Option<PathBuf>,
        /// How long to wait for the answer.
        #[arg(long, default_value = "5s", value_parser = period_argument)]
        timeout: Duration,
    },
}

/// Whose allocations pod attribution reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PodResourcesAllocator {
    /// Both: a node lists only one of them.
    Auto,
    /// The device plugin's `aws.amazon.com/neuron`, `neurondevice` and `neuroncore`.
    DevicePlugin,
    /// Claims of the DRA driver `neuron.aws.com`.
    Dra,
}

/// The format of the reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON document per report (neuron-monitor's shape).
    Json,
    /// The Prometheus text exposition format, one exposition per report.
    Prometheus,
}
