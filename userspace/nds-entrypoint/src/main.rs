//! `nds-entrypoint`, installed in the image as `/opt/bin/entrypoint.sh`.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::Cli;
use nds_entrypoint::command::default_monitor;
use nds_entrypoint::{pass_perfmon_on, Perfmon, Result, ServeCommand, Tls};

fn run(cli: Cli) -> Result<std::convert::Infallible> {
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
        monitor_args: cli.monitor_args,
    };
    if pass_perfmon_on()? == Perfmon::NotPermitted {
        eprintln!(
            "entrypoint.sh: CAP_PERFMON is not permitted; nds-monitor reads only the slabs of its own user"
        );
    }
    Err(command.exec())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(never) => match never {},
        Err(error) => {
            eprintln!("entrypoint.sh: {error}");
            ExitCode::FAILURE
        }
    }
}
