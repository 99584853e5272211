//! Prints the `make bench` table from one run's results.
//!
//! Usage: `nds-bench-report CRITERION_DIR GUEST_OUTPUT`
//!
//! `CRITERION_DIR` is criterion's output directory (`target/criterion`), `GUEST_OUTPUT` a file
//! holding the guest timing binary's output (any other lines in it are ignored). A measurement
//! that is missing shows as `n/a`; the exit status is 0 whatever the verdicts: benchmarks only
//! print.

use std::path::PathBuf;
use std::process::ExitCode;

use nds_bench::report::{rows, Results};

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [criterion, guest] = args.as_slice() else {
        eprintln!("usage: nds-bench-report CRITERION_DIR GUEST_OUTPUT");
        return ExitCode::from(2);
    };
    let mut results = Results::default();
    if let Err(error) = results.add_criterion(criterion) {
        eprintln!(
            "nds-bench-report: host results in {}: {error}",
            criterion.display()
        );
    }
    match std::fs::read_to_string(guest) {
        Ok(output) => results.add_guest(&output),
        Err(error) => eprintln!(
            "nds-bench-report: guest results in {}: {error}",
            guest.display()
        ),
    }
    print!("{}", results.table(&rows()));
    ExitCode::SUCCESS
}
