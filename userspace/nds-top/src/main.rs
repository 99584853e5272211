//! `nds-top`: a terminal view of the Neuron DataStore, like neuron-top.

use std::io::{self, IsTerminal};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use nds_document::Plan;
use nds_host::hardware::HardwareTree;
use nds_host::HostSource;
use nds_sampler::{Monitor, Source};
use nds_slabs::SlabSource;
use nds_sysfs::{SysfsRoot, TimeInUseUnit};
use nds_top::cli::Cli;
use nds_top::{render_text, App};
use ratatui::crossterm::event::{self, Event, KeyEventKind};

fn interactive(mut monitor: Monitor, period: Duration) -> io::Result<()> {
    let mut terminal = ratatui::try_init()?;
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
                    app.handle_event(key);
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

/// Dies of SIGPIPE when the reader of standard output goes away, as Unix tools do.
fn die_on_sigpipe() {
    // SAFETY: restoring a signal's default disposition has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    die_on_sigpipe();
    let terminal = io::stdin().is_terminal() && io::stdout().is_terminal();
    if !(cli.once || terminal) {
        eprintln!(
            "nds-top: the interactive view needs a terminal on standard input and output \
             (--once prints one frame as text)"
        );
        return ExitCode::FAILURE;
    }
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
    // A malformed module parameter is said before the screen takes over the terminal.
    if let Err(error) = source.time_in_use_unit() {
        eprintln!("nds-top: {error}");
        return ExitCode::FAILURE;
    }
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
