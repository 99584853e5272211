//! `nds-monitor`: neuron-monitor for the Neuron DataStore.

mod cli;

use std::io::{self, Write};
use std::net::TcpListener;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use cli::{Cli, Command, Format};
use nds_monitor::config::parse_period;
use nds_monitor::hardware::HardwareTree;
use nds_monitor::serve::serve;
use nds_monitor::{prometheus, Error, HostSource, Monitor, Plan, Result, SlabSource, Source};
use nds_sysfs::{SysfsRoot, TimeInUseUnit};
use regex::Regex;

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
        host: HostSource {
            module_dir: cli.module_dir.clone(),
            hardware: HardwareTree::new(&cli.hardware_sysfs_root),
            instance_metadata: cli.instance_metadata.clone(),
            ..HostSource::default()
        },
        time_in_use_unit: cli.time_in_use_unit_ps.map(TimeInUseUnit::new),
    };
    // A malformed parameter stops the monitor here; later, a report says so in its group.
    source.time_in_use_unit()?;
    let mut monitor = Monitor::new(source, plan, Instant::now());
    // Said once at start and again whenever it changes; the documents carry it too.
    let mut no_device = monitor.source().no_device_reason();
    if let Some(reason) = &no_device {
        eprintln!("nds-monitor: {reason}");
    }
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
        return serve(&listener, &mut monitor, *max_requests).map_err(serve_error);
    }
    let step = monitor.sampling_step();
    let mut printed = 0;
    let mut stdout = io::stdout().lock();
    loop {
        let now = Instant::now();
        let document = match cli.format {
            Format::Json => monitor.poll(now),
            Format::Prometheus if monitor.is_due(now) => Some(monitor.report_all(now)),
            Format::Prometheus => {
                monitor.tick(now);
                None
            }
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
            let now_no_device = monitor.source().no_device_reason();
            if now_no_device != no_device {
                if let Some(reason) = &now_no_device {
                    eprintln!("nds-monitor: {reason}");
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
