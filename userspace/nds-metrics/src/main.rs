//! `nds-metrics`: prints the module's metric posts as JSON lines.

mod cli;

use clap::Parser;
use cli::Cli;
use nds_abi::metrics::METRIC_POST_SIZE;
use nds_metrics::Decoder;
use std::{
    fs::File,
    io::{self, Read, Write},
    path::PathBuf,
    process::ExitCode,
    thread,
    time::Duration,
};

fn run(args: &Cli) -> io::Result<()> {
    let path = args
        .input
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("/dev/neuron{}", args.device)));
    let mut source = File::open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let mut decoder = Decoder::new();
    let mut buf = vec![0u8; 256 * METRIC_POST_SIZE];
    let mut pending = Vec::new();
    let stdout = io::stdout();
    loop {
        let n = source.read(&mut buf)?;
        if n == 0 {
            if !args.follow {
                break;
            }
            thread::sleep(Duration::from_millis(args.interval));
            continue;
        }
        pending.extend_from_slice(&buf[..n]);
        let whole = pending.len() - pending.len() % METRIC_POST_SIZE;
        let mut events = Vec::new();
        // `whole` is a multiple of the post size, so this cannot fail.
        let _ = decoder.decode(&pending[..whole], &mut events);
        pending.drain(..whole);
        let mut out = stdout.lock();
        for event in events {
            writeln!(out, "{}", event.to_json())?;
        }
        out.flush()?;
    }
    if !pending.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} trailing bytes: not a post stream", pending.len()),
        ));
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Cli::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("nds-metrics: {err}");
            ExitCode::FAILURE
        }
    }
}
