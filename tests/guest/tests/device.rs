//! The device node exists, and commands outside the ABI are refused with ENOTTY.

use neuron_ds_guest_tests::{ioctl, open_device, DEVICE};

#[test]
fn device_node_opens_read_write() {
    open_device(DEVICE).expect("open /dev/neuron0");
}

#[test]
fn unknown_ioctl_is_enotty() {
    let file = open_device(DEVICE).unwrap();
    let err = ioctl(&file, 0x8008_4E99, 0).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
}
