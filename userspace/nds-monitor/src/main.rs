//! `nds-monitor`: neuron-monitor for the Neuron DataStore.

use std::io::{self, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use nds_monitor::config::parse_period;
use nds_monitor::serve::serve;
use nds_monitor::{prometheus, Error, Monitor, Plan, Result, SlabSource, Source};
use nds_sysfs::{SysfsRoot, DEFAULT_SYSFS_ROOT};
use regex::Regex;

/// Reports every process's datastore counters and the kernel's totals, one document per period.
#[derive(Debug, Parser)]
#[command(name = "nds-monitor", version, about)]
struct Cli {
    /// Configuration file in neuron-monitor's format.
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// Period of every group, overriding the configuration (e.g. `1s`, `500ms`).
    #[arg(long)]
    period: Option<String>,
    /// Report only processes whose tag matches this regular expression.
    #[arg(long)]
    tag_filter: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
    /// Stop after this many reports.
    #[arg(long)]
    count: Option<u64>,
    /// Indent the JSON (one document then spans several lines).
    #[arg(long)]
    pretty: bool,
    /// Root of the module's sysfs devices.
    #[arg(long, default_value = DEFAULT_SYSFS_ROOT)]
    sysfs_root: PathBuf,
    /// Directory of the device nodes.
    #[arg(long, default_value = "/dev")]
    dev_dir: PathBuf,
    /// Read slab files `neuron<device>-<pid>.slab` from this directory instead of the devices.
    #[arg(long)]
    slab_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the Prometheus exposition over HTTP at /metrics.
    Serve {
        /// Address to listen on; port 0 picks a free one (the address is printed).
        #[arg(long, default_value = "127.0.0.1:9200")]
        listen: String,
        /// Exit after this many requests.
        #[arg(long)]
        max_requests: Option<usize>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// One JSON document per report (neuron-monitor's shape).
    Json,
    /// The Prometheus text exposition format, one exposition per report.
    Prometheus,
}

fn plan(cli: &Cli) -> Result<Plan> {
    let mut plan = match &cli.config {
        Some(path) => Plan::from_file(path)?,
        None => Plan::everything(nds_monitor::config::DEFAULT_PERIOD),
    };
    if let Some(period) = &cli.period {
        plan.set_period(parse_period(Some(period), Duration::ZERO)?);
    }
    if let Some(filter) = &cli.tag_filter {
        plan.tag_filter =
            Some(Regex::new(filter).map_err(|e| Error::Config(format!("--tag-filter: {e}")))?);
    }
    for ignored in &plan.ignored {
        eprintln!("nds-monitor: metric group {ignored:?} is not collected (no datastore source)");
    }
    Ok(plan)
}

fn run(cli: Cli) -> Result<()> {
    let plan = plan(&cli)?;
    let source = Source {
        slabs: match &cli.slab_dir {
            Some(dir) => SlabSource::Files { dir: dir.clone() },
            None => SlabSource::Kernel {
                dev_dir: cli.dev_dir.clone(),
            },
        },
        sysfs: SysfsRoot::new(&cli.sysfs_root),
    };
    let mut monitor = Monitor::new(source, plan, Instant::now());
    if let Some(Command::Serve {
        listen,
        max_requests,
    }) = &cli.command
    {
        let serve_error = |source| Error::Serve {
            address: listen.clone(),
            source,
        };
        let listener = TcpListener::bind(listen).map_err(serve_error)?;
        let address = listener.local_addr().map_err(serve_error)?;
        println!("listening on http://{address}/metrics");
        io::stdout().flush().map_err(Error::Output)?;
        serve(&listener, &mut monitor, *max_requests);
        return Ok(());
    }
    // Latencies are sampled between reports: a few dozen times per period.
    let step = (monitor.plan().shortest_period() / 20)
        .clamp(Duration::from_millis(10), Duration::from_millis(100));
    let mut printed = 0;
    let mut stdout = io::stdout().lock();
    loop {
        let now = Instant::now();
        let document = match cli.format {
            Format::Json => monitor.poll(now),
            Format::Prometheus if monitor.is_due(now) => Some(monitor.report_all(now)),
            Format::Prometheus => None,
        };
        if let Some(document) = document {
            let text = match cli.format {
                Format::Json if cli.pretty => serde_json::to_string_pretty(&document)? + "\n",
                Format::Json => serde_json::to_string(&document)? + "\n",
                Format::Prometheus => prometheus::render(&document) + "\n",
            };
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(Error::Output)?;
            printed += 1;
            if cli.count.is_some_and(|count| printed >= count) {
                return Ok(());
            }
        }
        let wait = monitor.until_due(Instant::now()).min(step);
        std::thread::sleep(wait.max(Duration::from_millis(1)));
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of a pipe went away: that is how `nds-monitor | head` ends.
        Err(Error::Output(error)) if error.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nds-monitor: {error}");
            ExitCode::FAILURE
        }
    }
}
