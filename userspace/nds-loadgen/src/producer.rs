//! One producer process: owns a slab, writes its stream, reports, then crashes, exits or holds.

use std::io::{self, BufRead, Write};

use nds::{Backend, Producer};
use nds_slabs::slab_file_name;

use crate::error::{Error, Result};
use crate::mix::StatusMix;
use crate::recorder::{Recorder, Tally};
use crate::spec::{ProducerSpec, SlabSource};
use crate::workload::{StreamEnd, Workload};

/// The line a producer prints once its report is written and it is holding its slab.
pub const READY_LINE: &str = "ready";

/// Runs the producer described by `spec` in this process.
///
/// The report is written before anything else can happen to the process: a crashing producer
/// then kills itself with SIGKILL (this function does not return), any other prints
/// [`READY_LINE`], holds its slab until standard input closes when asked to, and gives the slab
/// back either with RELEASE or by exiting with it still owned.
///
/// # Errors
///
/// Any datastore, self-check or I/O failure.
pub fn run(spec: &ProducerSpec) -> Result<()> {
    let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let backend = match &spec.source {
        SlabSource::Device(path) => Backend::device(path),
        SlabSource::Directory(dir) => {
            let path = dir.join(slab_file_name(spec.device, pid));
            // A file left by an earlier process with the same pid would not start zeroed.
            match std::fs::remove_file(&path) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => {
                    return Err(Error::io(format!("removing {}", path.display()), error))
                }
                _ => Backend::file(path),
            }
        }
    };
    let store = Producer::open(&backend)?;
    let tally = Tally::new();
    let mix: StatusMix = spec.mix.parse()?;
    let mut workload = Workload::start(Recorder::new(&store, &tally), &tally, spec, mix, pid)?;
    let end = workload.run(spec.length, spec.rate, spec.crash)?;
    tally.verify(&store, spec.cores)?;
    let crashed = end == StreamEnd::CrashPoint;
    workload.report(crashed).write(&spec.report)?;
    if crashed {
        die_by_sigkill();
    }
    let mut stdout = io::stdout();
    writeln!(stdout, "{READY_LINE}")
        .and_then(|()| stdout.flush())
        .map_err(|e| Error::io("writing the ready line", e))?;
    if spec.hold {
        // Any line or end of file ends the hold.
        let mut line = String::new();
        io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| Error::io("waiting on standard input", e))?;
    }
    if spec.explicit_release {
        store.close()?;
    } else {
        // Leave the slab mapped and owned: the kernel releases it when the process exits.
        std::mem::forget(store);
    }
    Ok(())
}

/// Ends the process the way an out-of-memory kill or a `kill -9` would.
fn die_by_sigkill() -> ! {
    // SAFETY: sending a signal to ourselves has no memory-safety preconditions.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL cannot be caught or ignored; the process is gone before this loop runs again.
    loop {
        std::thread::park();
    }
}
