//! The SDK-only C program (`tests/c/nds_sdk_program.c`, linked statically against the C API
//! library) against the module: it opens `/dev/neuron0` with `ndl_open_device`, publishes as a
//! runtime does and reads everything back from a forked monitor. What it published reaches the
//! kernel's aggregates when it closes its datastore.

use std::process::{Command, Stdio};

use neuron_ds_guest_tests::{helper_path, slots, sysfs_counter};

/// The C program's own verdict line, `<who>: N passed, N failed`, as (passed, failed).
fn verdict(output: &str, who: &str) -> (u64, u64) {
    let line = output
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{who}: ")))
        .unwrap_or_else(|| panic!("no {who} verdict in:\n{output}"));
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .map(|part| part.parse().unwrap())
        .collect();
    assert_eq!(numbers.len(), 2, "verdict line {line:?}");
    (numbers[0], numbers[1])
}

#[test]
fn sdk_program_runs_against_the_module() {
    // The program adds 5 and takes 2 from INFER_COMPLETED of core 1, the status "success".
    let success_before = sysfs_counter(1, "status", "success", "total");

    let program = Command::new(helper_path("nds-sdk-program"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nds-sdk-program");
    let pid = i32::try_from(program.id()).unwrap();
    let output = program.wait_with_output().expect("run nds-sdk-program");
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "nds-sdk-program: {:?}",
        output.status
    );

    let (passed, failed) = verdict(&stdout, "sdk program");
    assert_eq!(failed, 0);
    assert!(passed > 100, "only {passed} checks ran");
    let (monitor_passed, monitor_failed) = verdict(&stdout, "monitor");
    assert_eq!(monitor_failed, 0);
    assert!(
        monitor_passed > 64,
        "only {monitor_passed} monitor checks ran"
    );

    // nds_close released the slab: the kernel folded its counters in and freed the slot.
    assert_eq!(
        sysfs_counter(1, "status", "success", "total"),
        success_before + 3
    );
    assert!(slots().iter().all(|row| row.pid != pid), "{:?}", slots());
}
