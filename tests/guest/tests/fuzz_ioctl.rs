//! The syscall fuzzer in its short form (`make fuzz-ioctl` runs a million calls): no
//! broken promise, no kernel complaint, no slot left owned.

use neuron_ds_guest_tests::helper_path;
use std::process::Command;

#[test]
fn short_fuzz_run_breaks_no_promise() {
    let status = Command::new(helper_path("ds-fuzz"))
        .args(["--calls", "20000", "--seed", "7"])
        .status()
        .expect("run ds-fuzz");
    assert!(status.success(), "ds-fuzz: {status}");
}
