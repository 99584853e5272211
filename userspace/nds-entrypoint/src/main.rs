//! `nds-entrypoint`, installed in the image as `/opt/bin/entrypoint.sh`.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::Cli;
use nds_entrypoint::command::default_monitor;
use nds_entrypoint::init::{is_pid_one, supervise};
use nds_entrypoint::{pass_perfmon_on, Otlp, Perfmon, Result, ServeCommand, Tls};

/// Runs the monitor; returns the container's exit code (as process 1) or only on failure.
fn run(cli: Cli) -> Result<u8> {
    let command = ServeCommand {
        monitor: match cli.monitor {
            Some(monitor) => monitor,
            None => default_monitor()?,
        },
        config: cli.neuron_monitor_config,
        address: cli.address,
        port: cli.port,
        tls: cli
            .cert_file
            .zip(cli.key_file)
            .map(|(cert_file, key_file)| Tls {
                cert_file,
                key_file,
            }),
        otlp: cli.otlp_endpoint.map(|endpoint| Otlp {
            endpoint,
            period: cli.otlp_period,
        }),
        state_dir: cli.state_dir,
        monitor_args: cli.monitor_args,
    };
    if pass_perfmon_on()? == Perfmon::NotPermitted {
        eprintln!(
            "entrypoint.sh: CAP_PERFMON is not permitted; nds-monitor reads only the slabs of its own user"
        );
    }
    if is_pid_one() {
        // An exit code is 0..=255; 128 + a signal number is too.
        return supervise(&mut command.command()).map(|code| u8::try_from(code).unwrap_or(u8::MAX));
    }
    Err(command.exec())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("entrypoint.sh: {error}");
            ExitCode::FAILURE
        }
    }
}
