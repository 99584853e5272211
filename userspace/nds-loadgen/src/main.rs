//! `nds-loadgen`: producer processes that play inference runtimes on the Neuron DataStore.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use nds_loadgen::cli::{Cli, Command, RunArgs};
use nds_loadgen::compare::{compare, render, Baseline};
use nds_loadgen::orchestrator::{self, RunOptions, Slabs};
use nds_loadgen::spec::StreamLength;
use nds_loadgen::{producer, Error, ProducerSpec, Result, StatusMix, Summary};
use nds_sysfs::{SysfsRoot, TimeInUseUnit};

fn run(args: RunArgs) -> Result<()> {
    args.mix.parse::<StatusMix>()?;
    let root = SysfsRoot::new(&args.sysfs_root);
    let mut devices = args.devices;
    if devices.is_empty() {
        devices = if args.slab_dir.is_some() {
            vec![0]
        } else {
            root.devices()
                .ok()
                .filter(|d| !d.is_empty())
                .unwrap_or(vec![0])
        };
    }
    let cores = match args.cores {
        Some(cores) => cores,
        None => devices
            .first()
            .and_then(|&device| root.cores(device).ok())
            .map(|cores| cores.len())
            .filter(|&count| count > 0)
            .unwrap_or(2),
    };
    let time_in_use_unit = match args.time_in_use_unit_ps {
        Some(ps_per_unit) => TimeInUseUnit::new(ps_per_unit),
        None => TimeInUseUnit::of_module(&args.module_dir)?,
    };
    let length = match (args.count, args.duration) {
        (_, Some(duration)) => StreamLength::Duration(duration),
        (count, None) => StreamLength::Count(count.unwrap_or(1000)),
    };
    let temporary = args.report_dir.is_none();
    let report_dir = args.report_dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("nds-loadgen-{}", std::process::id()))
    });
    let options = RunOptions {
        devices,
        procs_per_device: args.procs_per_device,
        cores,
        length,
        rate: args.rate,
        mix: args.mix,
        time_in_use_unit,
        tag_prefix: args.tag_prefix,
        crash: args.crash,
        hold: args.hold,
        report_dir: report_dir.clone(),
        slabs: match args.slab_dir {
            Some(dir) => Slabs::Directory(dir),
            None => Slabs::Devices {
                dev_dir: args.dev_dir,
            },
        },
        seed: args.seed,
    };
    let exe = std::env::current_exe().map_err(|e| Error::io("locating this program", e))?;
    let summary = orchestrator::run(&options, &exe, &mut io::stdout(), io::stdin());
    if temporary {
        let _ = std::fs::remove_dir_all(&report_dir);
    }
    let text = serde_json::to_string_pretty(&summary?).map_err(|source| Error::Json {
        path: PathBuf::from("-"),
        source,
    })?;
    match args.summary {
        Some(path) => std::fs::write(&path, text + "\n")
            .map_err(|e| Error::io(format!("writing {}", path.display()), e)),
        None => writeln!(io::stdout(), "{text}").map_err(|e| Error::io("writing the summary", e)),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(*args),
        Command::Producer { parent, spec } => orchestrator::tie_to_parent(parent)
            .map_err(|e| Error::io("tying the producer to its load generator", e))
            .and_then(|()| {
                serde_json::from_str::<ProducerSpec>(&spec).map_err(|source| Error::Json {
                    path: PathBuf::from("--spec"),
                    source,
                })
            })
            .and_then(|spec| producer::run(&spec)),
        Command::Baseline { sysfs_root } => Baseline::capture(&SysfsRoot::new(sysfs_root))
            .and_then(|baseline| {
                serde_json::to_string_pretty(&baseline).map_err(|source| Error::Json {
                    path: PathBuf::from("-"),
                    source,
                })
            })
            .map(|text| println!("{text}")),
        Command::Compare {
            summary,
            baseline,
            sysfs_root,
        } => compare_command(&summary, baseline.as_deref(), &SysfsRoot::new(sysfs_root)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nds-loadgen: {error}");
            ExitCode::FAILURE
        }
    }
}

fn compare_command(summary: &Path, baseline: Option<&Path>, root: &SysfsRoot) -> Result<()> {
    let summary = Summary::read(summary)?;
    let baseline = match baseline {
        Some(path) => {
            let text = std::fs::read(path)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            serde_json::from_slice(&text).map_err(|source| Error::Json {
                path: path.to_path_buf(),
                source,
            })?
        }
        None => Baseline::default(),
    };
    let rows = compare(&summary, &baseline, &root.all_totals()?);
    print!("{}", render(&summary, &rows));
    match rows.iter().filter(|row| !row.matches()).count() {
        0 => Ok(()),
        different => Err(Error::Mismatch(different)),
    }
}
