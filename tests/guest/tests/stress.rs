//! The stress campaign in its short form (`make stress` runs the full one): producers,
//! readers and kills on two devices; every count lands in sysfs exactly once.

use neuron_ds_guest_tests::helper_path;
use std::process::Command;

#[test]
fn short_stress_campaign_loses_nothing() {
    let status = Command::new(helper_path("ds-stress"))
        .args(["--cycles", "4000", "--processes", "64"])
        .status()
        .expect("run ds-stress");
    assert!(status.success(), "ds-stress: {status}");
}
