//! `nrt-status`: describes Neuron Runtime status codes — identifier, message, band, priority,
//! and the datastore counters (with their sysfs nodes) a status feeds.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;
use nrt_status::bridge::{execution_counters, generic_counter};
use nrt_status::cli::Cli;
use nrt_status::{Counter, NrtStatus};
use serde::Serialize;

/// Everything printed about one status.
#[derive(Debug, Serialize)]
struct StatusReport {
    value: u32,
    identifier: &'static str,
    known: bool,
    message: &'static str,
    user_message: String,
    band: &'static str,
    priority: u8,
    is_retry: bool,
    counters: Vec<CounterReport>,
}

/// One counter a status feeds, and through which runtime path.
#[derive(Debug, Serialize)]
struct CounterReport {
    path: &'static str,
    counter: &'static str,
    index: usize,
    sysfs: Option<String>,
}

impl CounterReport {
    fn new(path: &'static str, counter: Counter) -> Self {
        Self {
            path,
            counter: counter.name(),
            index: counter.index(),
            sysfs: counter.sysfs_node().map(|node| node.to_string()),
        }
    }
}

impl StatusReport {
    fn new(status: NrtStatus) -> Self {
        let execution = execution_counters(status).map(|c| CounterReport::new("execution", c));
        let generic = generic_counter(status).map(|c| CounterReport::new("generic", c));
        Self {
            value: status.as_u32(),
            identifier: status.as_str(),
            known: status.is_known(),
            message: status.message(),
            user_message: status.user_message().to_string(),
            band: status.band().name(),
            priority: status.priority().rank(),
            is_retry: status.is_retry(),
            counters: execution.chain(generic).collect(),
        }
    }

    fn write_text(&self, out: &mut impl Write) -> io::Result<()> {
        writeln!(out, "{} ({})", self.identifier, self.value)?;
        writeln!(out, "  message   {}", self.message)?;
        writeln!(out, "  band      {}", self.band)?;
        writeln!(out, "  priority  {}", self.priority)?;
        writeln!(
            out,
            "  retry     {}",
            if self.is_retry { "yes" } else { "no" }
        )?;
        writeln!(out, "  display   {}", self.user_message)?;
        if self.counters.is_empty() {
            writeln!(out, "  feeds     nothing")?;
        }
        for (i, counter) in self.counters.iter().enumerate() {
            let label = if i == 0 { "feeds" } else { "" };
            let sysfs = counter.sysfs.as_deref().unwrap_or("(no sysfs node)");
            writeln!(
                out,
                "  {label:<9} {}: {} [{}] -> {sysfs}",
                counter.path, counter.counter, counter.index
            )?;
        }
        Ok(())
    }
}

fn run(cli: &Cli, out: &mut impl Write) -> io::Result<()> {
    let statuses = if cli.all {
        NrtStatus::ALL.to_vec()
    } else {
        cli.statuses.clone()
    };
    let reports: Vec<StatusReport> = statuses.into_iter().map(StatusReport::new).collect();
    if cli.json {
        serde_json::to_writer_pretty(&mut *out, &reports)?;
        writeln!(out)?;
    } else {
        for (i, report) in reports.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            report.write_text(out)?;
        }
    }
    out.flush()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli, &mut io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            // Nothing more can be done if stderr is gone too.
            let _ = writeln!(io::stderr(), "nrt-status: {error}");
            ExitCode::FAILURE
        }
    }
}
