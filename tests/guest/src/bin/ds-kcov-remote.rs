//! Runs a campaign with the coverage of the module's kernel workers collected:
//! `ds-kcov-remote TAG CMD [ARGS...]`, with `NEURON_DS_KCOV_DIR` naming the directory.
//!
//! KCOV's remote mode: this process's session has a common handle that every task it starts
//! inherits, and the module's workers report what they run to the handle of the last task that
//! acquired or released a slab. The campaign's own processes collect their system calls themselves
//! (`kcov::Collector::from_env`); this one collects the workers' runs while the campaign
//! runs, and writes them to its own `.cov` file. Exits with the campaign's status.

use neuron_ds_guest_tests::kcov::{Collector, DIR_VAR};
use std::{
    process::{exit, Command},
    thread,
    time::Duration,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(tag), Some(program)) = (args.first(), args.get(1)) else {
        eprintln!("usage: ds-kcov-remote TAG CMD [ARGS...]");
        exit(2);
    };
    let Ok(dir) = std::env::var(DIR_VAR) else {
        eprintln!("ds-kcov-remote: {DIR_VAR} names no directory");
        exit(2);
    };
    // Our pid is unique among the running sessions, and nonzero.
    let handle = std::process::id();
    let mut collector = Collector::start_remote(&dir, tag, handle).unwrap_or_else(|e| {
        eprintln!("ds-kcov-remote: cannot start remote coverage: {e}");
        exit(4);
    });
    let mut campaign = Command::new(program)
        .args(&args[2..])
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("ds-kcov-remote: {program}: {e}");
            exit(4);
        });
    let status = loop {
        // Drained often: the module may be unloaded and loaded again under a campaign.
        collector.drain();
        collector.refresh_sections();
        match campaign.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                eprintln!("ds-kcov-remote: waiting for {program}: {e}");
                exit(4);
            }
        }
    };
    // The last worker runs the campaign's final releases queued.
    thread::sleep(Duration::from_millis(500));
    collector.save();
    exit(status.code().unwrap_or(128 + status_signal(&status)));
}

fn status_signal(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.signal().unwrap_or(0)
}
