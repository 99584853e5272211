//! Runs a program as another user: `ds-as IDENTITY PROGRAM ARGS...` switches to IDENTITY
//! (`root`, `uid:N`, `uid:N+cap:C`) and executes PROGRAM, which then runs as a process that
//! user started would (dumpable, its capability ambient).

use neuron_ds_guest_tests::identity::Identity;
use std::{os::unix::process::CommandExt, process::exit};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(identity), Some(program)) =
        (args.first().and_then(|a| Identity::parse(a)), args.get(1))
    else {
        eprintln!("usage: ds-as IDENTITY PROGRAM ARGS...");
        exit(2);
    };
    if let Err(e) = identity.assume() {
        eprintln!("ds-as: switching to {}: {e}", identity.text());
        exit(2);
    }
    let error = std::process::Command::new(program).args(&args[2..]).exec();
    eprintln!("ds-as: {program}: {error}");
    exit(127);
}
