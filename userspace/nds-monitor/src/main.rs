//! `nds-monitor`: neuron-monitor for the Neuron DataStore, the binary that wires the crates of
//! the monitor together: its command line and messages, the JSON or Prometheus reports of the
//! sampling loop (`nds-sampler`) on standard output, and `serve`, the exporter over HTTP(S).
//! It may import every crate of the monitor; none imports it but nds-dist, which reads the
//! command line from the library (src/lib.rs).

#![warn(missing_docs)]

// Floor 0: the messages, the HTTP(S) endpoint, the node-problem-detector check.
mod check;
mod logger;
mod serve;
// Floor 1: why the monitor cannot run (serve's TLS errors among them).
mod error;

use std::io::{self, Write};
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use clap::Parser;
use error::{Error, Result};
use nds_document::{MonitorDocument, Plan};
use nds_exporter::prometheus::instance_labels;
use nds_exporter::Exporter;
use nds_health::state::StateDir;
use nds_health::writer::EventLog;
use nds_health::{exposition, Health};
use nds_host::hardware::HardwareTree;
use nds_host::HostSource;
use nds_monitor::cli::{Cli, Command, Format, PodResourcesAllocator};
use nds_otlp::{OtlpExport, OtlpSettings};
use nds_podresources::{refresh, Allocator};
use nds_sampler::{Consumer, Monitor, Source};
use nds_slabs::SlabSource;
use nds_sysfs::{SysfsRoot, TimeInUseUnit};
use regex::Regex;
use serve::{serve, ServeOptions, TlsFiles};

fn plan(cli: &Cli) -> Result<Plan> {
    let mut plan = match &cli.config_file {
        Some(path) => Plan::from_file(path)?,
        None => Plan::everything(nds_document::config::DEFAULT_PERIOD),
    };
    if let Some(period) = cli.period {
        plan.set_period(period);
    }
    if let Some(filter) = &cli.tag_filter {
        plan.tag_filter =
            Some(Regex::new(filter).map_err(|e| Error::Config(format!("--tag-filter: {e}")))?);
    }
    Ok(plan)
}

fn source(cli: &Cli) -> Source {
    Source {
        slabs: match &cli.slab_dir {
            Some(dir) => SlabSource::Files { dir: dir.clone() },
            None => SlabSource::Kernel {
                dev_dir: cli.dev_dir.clone(),
            },
        },
        sysfs: SysfsRoot::new(&cli.sysfs_root),
        host: HostSource {
            proc_root: cli.proc_root.clone(),
            module_dir: cli.module_dir.clone(),
            hardware: HardwareTree::new(&cli.hardware_sysfs_root),
            instance_metadata: cli.instance_metadata.clone(),
            ..HostSource::default()
        },
        time_in_use_unit: cli.time_in_use_unit_ps.map(TimeInUseUnit::new),
    }
}

fn run(cli: Cli) -> Result<()> {
    if cli.pod_resources_socket.is_some() && cli.command.is_none() && cli.format == Format::Json {
        return Err(Error::Config(
            "--pod-resources-socket labels the Prometheus exposition: use it with serve or \
             --format prometheus"
                .to_owned(),
        ));
    }
    let plan = plan(&cli)?;
    let source = source(&cli);
    // A malformed parameter stops the monitor here; later, a report says so in its group.
    source.time_in_use_unit()?;
    log::info!(
        "{} runtime rule(s), {} system group(s), shortest period {:?}",
        plan.runtimes.len(),
        plan.system.len(),
        plan.shortest_period()
    );
    let now = Instant::now();
    let health = Health::new(plan.health.clone(), now);
    // The module's totals count every slab of its own, and none of a slab file.
    let health = if source.slabs.is_kernel() {
        health.judging_from_totals()
    } else {
        health
    };
    let monitor = Monitor::new(source, plan, now);
    let mut exporter = Exporter::new();
    if let Some(socket) = &cli.pod_resources_socket {
        let only = match cli.pod_resources_allocator {
            PodResourcesAllocator::Auto => None,
            PodResourcesAllocator::DevicePlugin => Some(Allocator::DevicePlugin),
            PodResourcesAllocator::Dra => Some(Allocator::Dra),
        };
        let feed = refresh::start(socket.clone(), cli.pod_resources_period, only)
            .map_err(Error::PodAttribution)?;
        log::info!(
            "pod attribution from {} every {:?}",
            socket.display(),
            cli.pod_resources_period
        );
        exporter = exporter.with_pod_attribution(feed);
    }
    // Said once at start and again whenever it changes; the documents carry it too.
    if let Some(reason) = monitor.source().no_device_reason() {
        log::warn!("{reason}");
    }
    if let Some(Command::Serve {
        listen,
        cert_file,
        key_file,
        max_requests,
        otlp_endpoint,
        otlp_period,
        otlp_node_name,
        state_dir,
        events_capacity,
        ready_min_devices,
    }) = &cli.command
    {
        let otlp = match otlp_endpoint {
            Some(endpoint) => {
                let settings = otlp_settings(endpoint, *otlp_period, otlp_node_name.as_deref());
                log::info!(
                    "OTLP export to {endpoint} every {otlp_period:?}, resource {:?}",
                    settings.resource
                );
                Some(OtlpExport::start(&settings)?)
            }
            None => None,
        };
        let tls = match (cert_file, key_file) {
            (Some(cert_file), Some(key_file)) => Some(
                TlsFiles {
                    cert_file: cert_file.clone(),
                    key_file: key_file.clone(),
                }
                .acceptor()?,
            ),
            _ => None,
        };
        let serve_error = |source| Error::Serve {
            address: listen.clone(),
            source,
        };
        let listener = bind(listen).map_err(serve_error)?;
        let address = listener.local_addr().map_err(serve_error)?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        println!("listening on {scheme}://{address}/metrics");
        io::stdout().flush().map_err(Error::Output)?;
        let health = match events_capacity {
            0 => health,
            &capacity => {
                let state = state_dir.as_deref().map(StateDir::new);
                health.with_event_log(EventLog::new(state, capacity))
            }
        };
        let monitor = monitor.with_consumer((exporter, health));
        let options = ServeOptions {
            tls,
            max_requests: *max_requests,
            otlp,
            ready_min_devices: *ready_min_devices,
        };
        return serve(listener, monitor, options).map_err(serve_error);
    }
    match cli.format {
        Format::Prometheus => {
            let monitor = monitor.with_consumer((exporter, health));
            print_reports(monitor, &cli, |monitor, _| {
                let (exporter, health) = monitor.consumer();
                let instance = instance_labels(&exporter.latest().document().instance_info);
                let verdicts = exposition::encode(health.group(), health.rules(), &instance);
                Ok(exporter.exposition() + &verdicts + "\n")
            })
        }
        Format::Json => print_reports(
            monitor.with_consumer(health),
            &cli,
            |monitor, mut document| {
                document.neuron_health = Some(monitor.consumer().group().clone());
                let text = if cli.pretty {
                    serde_json::to_string_pretty(&document)?
                } else {
                    serde_json::to_string(&document)?
                };
                Ok(text + "\n")
            },
        ),
    }
}

/// Prints every report of `monitor` as `text` makes it, until `--count` of them were.
fn print_reports<C: Consumer>(
    mut monitor: Monitor<C>,
    cli: &Cli,
    text: impl Fn(&Monitor<C>, MonitorDocument) -> Result<String>,
) -> Result<()> {
    let mut no_device = monitor.source().no_device_reason();
    let mut printed = 0;
    let mut stdout = io::stdout().lock();
    let never = AtomicBool::new(false);
    while let Some(document) = monitor.next_report(&never, |_| {}) {
        let text = text(&monitor, document)?;
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(Error::Output)?;
        printed += 1;
        let now_no_device = monitor.source().no_device_reason();
        if now_no_device != no_device {
            if let Some(reason) = &now_no_device {
                log::warn!("{reason}");
            }
            no_device = now_no_device;
        }
        if cli.count.is_some_and(|count| printed >= count) {
            return match no_device {
                Some(_) => Err(Error::NoDevice),
                None => Ok(()),
            };
        }
    }
    Ok(())
}

/// How long one OTLP export may take.
const OTLP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The host's name (`host.name`), as the kernel has it.
fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_owned()).filter(|name| !name.is_empty())
}

/// The OTLP settings of `serve`: the resource names the host, this monitor instance and the
/// node (each series also carries the instance labels, as on `/metrics`).
fn otlp_settings(endpoint: &str, period: std::time::Duration, node: Option<&str>) -> OtlpSettings {
    let mut resource = Vec::new();
    if let Some(host) = host_name() {
        resource.push(("host.name".to_owned(), host.clone()));
        resource.push(("service.instance.id".to_owned(), host));
    }
    if let Some(node) = node.filter(|node| !node.is_empty()) {
        resource.push(("k8s.node.name".to_owned(), node.to_owned()));
    }
    OtlpSettings {
        endpoint: endpoint.to_owned(),
        period,
        timeout: OTLP_TIMEOUT,
        resource,
    }
}

/// Dies of SIGPIPE when the reader of standard output goes away, as Unix tools do (Rust
/// ignores it, which turns a closed pipe into write errors).
fn die_on_sigpipe() {
    // SAFETY: restoring a signal's default disposition has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logger::init(cli.verbose);
    if let Some(Command::Health {
        url,
        ca_file,
        timeout,
    }) = &cli.command
    {
        let (outcome, message) = check::check(url, ca_file.as_deref(), *timeout);
        println!("{message}");
        return ExitCode::from(outcome as u8);
    }
    // An exporter outlives whoever reads its standard streams; a report stream does not.
    if cli.command.is_none() {
        die_on_sigpipe();
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // SIGPIPE is ignored after all (inherited): a closed pipe ends the stream quietly.
        Err(Error::Output(error)) if error.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            log::error!("{error}");
            ExitCode::FAILURE
        }
    }
}

/// Binds `listen`; `[::]:PORT` (every address, IPv6 and IPv4) falls back to `0.0.0.0:PORT` on
/// a kernel without IPv6, so that the dual-stack default works on every node.
fn bind(listen: &str) -> io::Result<TcpListener> {
    match TcpListener::bind(listen) {
        Err(error) if error.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
            match listen.strip_prefix("[::]:") {
                Some(port) => {
                    log::warn!("no IPv6 here ({error}): listening on 0.0.0.0:{port}");
                    TcpListener::bind(format!("0.0.0.0:{port}"))
                }
                None => Err(error),
            }
        }
        other => other,
    }
}
