//! `nds-metrics`: prints the module's metric posts as JSON lines.

use clap::Parser;
use nds_abi::metrics::METRIC_POST_SIZE;
use nds_metrics::cli::Cli;
use nds_metrics::Decoder;
use std::{
    fs::{File, OpenOptions},
    io::{self, ErrorKind, Read, Write},
    os::unix::fs::OpenOptionsExt,
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
    // Without --follow a device node is read without waiting: what is posted now, then the
    // end (a regular file ignores O_NONBLOCK and ends at its end).
    let flags = if args.follow { 0 } else { libc::O_NONBLOCK };
    let mut source: File = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let mut decoder = Decoder::new();
    let mut buf = vec![0u8; 256 * METRIC_POST_SIZE];
    let mut pending = Vec::new();
    let stdout = io::stdout();
    loop {
        let n = match source.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            // The end of a file (a device node never ends: it blocks or says EAGAIN).
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
