//! `nds-ls`: the devices and the processes holding a datastore slab, like neuron-ls.

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::process::ExitCode;

use clap::Parser;
use nds::LedgerFollower;
use nds_ls::cli::{Cli, OutputFormat};
use nds_ls::{ledger, render_json, render_table, Source};
use nds_slabs::SlabSource;
use nds_sysfs::SysfsRoot;

/// Why no device was found, for standard error.
fn no_device_reason(cli: &Cli) -> String {
    format!(
        "no Neuron device: no {}/neuron<N>/datastore (is the neuron_ds module loaded? with \
         --slab-dir too, the devices and their slot tables come from --sysfs-root)",
        cli.sysfs_root.display()
    )
}

/// The format asked for, by either spelling.
fn output_format(cli: &Cli) -> OutputFormat {
    if cli.json_output {
        OutputFormat::Json
    } else {
        cli.output_format
    }
}

/// `--ledger`: every device's ledger, then (`--follow`) what comes, until interrupted.
fn print_ledgers(cli: &Cli) -> ExitCode {
    let devices = match SysfsRoot::new(&cli.sysfs_root).devices() {
        Ok(devices) if !devices.is_empty() => devices,
        Ok(_) => {
            eprintln!("nds-ls: {}", no_device_reason(cli));
            return ExitCode::FAILURE;
        }
        Err(error) => {
            eprintln!("nds-ls: listing the devices: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut followers = Vec::new();
    for device in devices {
        let node = cli.dev_dir.join(format!("neuron{device}"));
        match LedgerFollower::open(&node, 0) {
            Ok(follower) => followers.push((device, follower)),
            Err(error) => {
                eprintln!("nds-ls: {}: {error}", node.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let json = output_format(cli) == OutputFormat::Json;
    let mut stdout = io::stdout().lock();
    if !json {
        let _ = writeln!(stdout, "{}", ledger::TABLE_HEADER);
    }
    loop {
        for (device, follower) in &mut followers {
            let events = match follower.read() {
                Ok(events) => events,
                Err(error) => {
                    eprintln!("nds-ls: device {device}: {error}");
                    return ExitCode::FAILURE;
                }
            };
            for event in &events {
                let line = if json {
                    ledger::json_object(*device, event).to_string()
                } else {
                    ledger::table_line(*device, event)
                };
                match writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
                    Ok(()) => {}
                    Err(error) if error.kind() == io::ErrorKind::BrokenPipe => {
                        return ExitCode::SUCCESS;
                    }
                    Err(error) => {
                        eprintln!("nds-ls: writing the output: {error}");
                        return ExitCode::FAILURE;
                    }
                }
            }
        }
        if !cli.follow {
            return ExitCode::SUCCESS;
        }
        let mut polled: Vec<libc::pollfd> = followers
            .iter()
            .map(|(_, follower)| libc::pollfd {
                fd: follower.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `polled` holds one valid pollfd per open follower, for the call only; the
        // count is theirs.
        let ready = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, -1) };
        if ready < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            eprintln!(
                "nds-ls: waiting for the ledger: {}",
                io::Error::last_os_error()
            );
            return ExitCode::FAILURE;
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.ledger {
        return print_ledgers(&cli);
    }
    let source = Source {
        sysfs: SysfsRoot::new(&cli.sysfs_root),
        slabs: match &cli.slab_dir {
            Some(dir) => SlabSource::Files { dir: dir.clone() },
            None => SlabSource::Kernel {
                dev_dir: cli.dev_dir.clone(),
            },
        },
        proc_root: cli.proc_root.clone(),
    };
    let devices = match nds_ls::list(&source) {
        Ok(devices) => devices,
        Err(error) => {
            eprintln!("nds-ls: {error}");
            return ExitCode::FAILURE;
        }
    };
    if devices.is_empty() {
        eprintln!("nds-ls: {}", no_device_reason(&cli));
    }
    let text = match output_format(&cli) {
        OutputFormat::Table => render_table(&devices, cli.wide),
        OutputFormat::Json => match render_json(&devices) {
            Ok(json) => json,
            Err(error) => {
                eprintln!("nds-ls: {error}");
                return ExitCode::FAILURE;
            }
        },
    };
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped early (`nds-ls | head`) took what it wanted.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nds-ls: writing the output: {error}");
            ExitCode::FAILURE
        }
    }
}
