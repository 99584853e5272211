//! `nds-ls`: the devices and the processes holding a datastore slab, like neuron-ls.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;
use nds_ls::cli::{Cli, OutputFormat};
use nds_ls::{render_json, render_table, Source};
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

fn main() -> ExitCode {
    let cli = Cli::parse();
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
