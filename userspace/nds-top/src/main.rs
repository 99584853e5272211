//! `nds-top`: a terminal view of the Neuron DataStore, like neuron-top.

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use nds_monitor::{Monitor, Plan, SlabSource, Source};
use nds_sysfs::{SysfsRoot, DEFAULT_SYSFS_ROOT};
use nds_top::{render_text, App};
use ratatui::crossterm::event::{self, Event, KeyEventKind};

/// Shows every process's NeuronCores, executions, memory and models.
#[derive(Debug, Parser)]
#[command(name = "nds-top", version, about)]
struct Cli {
    /// Refresh period.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    period: Duration,
    /// Print one frame as plain text after one period, then exit.
    #[arg(long)]
    once: bool,
    /// Width of the `--once` frame.
    #[arg(long, default_value_t = 80)]
    width: u16,
    /// Height of the `--once` frame.
    #[arg(long, default_value_t = 24)]
    height: u16,
    /// Keys to apply before drawing the `--once` frame (e.g. `2x` for the first process,
    /// models unfolded).
    #[arg(long, default_value = "")]
    keys: String,
    /// Root of the module's sysfs devices.
    #[arg(long, default_value = DEFAULT_SYSFS_ROOT)]
    sysfs_root: PathBuf,
    /// Directory of the device nodes.
    #[arg(long, default_value = "/dev")]
    dev_dir: PathBuf,
    /// Read slab files from this directory instead of the devices.
    #[arg(long)]
    slab_dir: Option<PathBuf>,
}

fn interactive(mut monitor: Monitor, period: Duration) -> io::Result<()> {
    let mut terminal = ratatui::init();
    let mut app = App::new(monitor.report_all(Instant::now()));
    let mut next = Instant::now() + period;
    let result = loop {
        if let Err(error) = terminal.draw(|frame| nds_top::ui::draw(frame, &app)) {
            break Err(error);
        }
        let wait = next.saturating_duration_since(Instant::now());
        match event::poll(wait) {
            Ok(true) => match event::read() {
                Ok(Event::Key(key)) if key.kind == KeyEventKind::Press => {
                    app.handle_key(key.code);
                    if app.quit {
                        break Ok(());
                    }
                }
                Ok(_) => {}
                Err(error) => break Err(error),
            },
            Ok(false) => {
                let now = Instant::now();
                app.update(monitor.report_all(now));
                next = now + period;
            }
            Err(error) => break Err(error),
        }
    };
    ratatui::restore();
    result
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let source = Source {
        slabs: match &cli.slab_dir {
            Some(dir) => SlabSource::Files { dir: dir.clone() },
            None => SlabSource::Kernel {
                dev_dir: cli.dev_dir.clone(),
            },
        },
        sysfs: SysfsRoot::new(&cli.sysfs_root),
    };
    let start = Instant::now();
    let mut monitor = Monitor::new(source, Plan::everything(cli.period), start);
    if cli.once {
        // Attach now, measure over one period.
        let _ = monitor.poll(start);
        std::thread::sleep(cli.period);
        let mut app = App::new(monitor.report_all(Instant::now()));
        for key in cli.keys.chars() {
            app.handle_key(event::KeyCode::Char(key));
        }
        print!("{}", render_text(&app, cli.width, cli.height));
        return ExitCode::SUCCESS;
    }
    match interactive(monitor, cli.period) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nds-top: {error}");
            ExitCode::FAILURE
        }
    }
}
