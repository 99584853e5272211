//! Unloading under load, short form (`make faults` runs 100 cycles): rmmod refuses while
//! owners, readers and a posts reader have the device open, and completes without a
//! complaint while sysfs files are open and being read and the metrics worker is due; a
//! reload starts clean. Runs after `unload` (name order) and leaves the module loaded with
//! the guest's parameters.

use neuron_ds_guest_tests::helper_path;
use std::process::Command;

#[test]
fn rmmod_under_load_refuses_or_completes_cleanly() {
    let status = Command::new(helper_path("ds-unload"))
        .args(["--cycles", "10"])
        .status()
        .expect("run ds-unload");
    assert!(status.success(), "ds-unload: {status}");
}
