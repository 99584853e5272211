// SPDX-License-Identifier: GPL-2.0

//! The character device: one misc device per Neuron device.

use kernel::{
    fs::File,
    ioctl::_IOR,
    miscdevice::{
        MiscDevice,
        MiscDeviceOptions,
        MiscDeviceRegistration, //
    },
    prelude::*,
};

/// `NEURON_IOCTL_ACQUIRE_NEURON_DS`: `_IOR('N', 71, void *)`.
pub(crate) const ACQUIRE_NEURON_DS: u32 = _IOR::<u64>(b'N' as u32, 71);
/// `NEURON_IOCTL_RELEASE_NEURON_DS`: `_IOR('N', 72, void *)`.
pub(crate) const RELEASE_NEURON_DS: u32 = _IOR::<u64>(b'N' as u32, 72);

/// One registered device node.
#[pin_data]
pub(crate) struct NeuronDevice {
    #[pin]
    registration: MiscDeviceRegistration<OpenDevice>,
}

impl NeuronDevice {
    /// Registers the device node `name`.
    pub(crate) fn new(name: &'static CStr) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            registration <- MiscDeviceRegistration::register(MiscDeviceOptions { name }),
        })
    }
}

/// What one open file of the device holds.
pub(crate) struct OpenDevice;

#[vtable]
impl MiscDevice for OpenDevice {
    type Ptr = KBox<Self>;

    fn open(_file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<KBox<Self>> {
        KBox::new(OpenDevice, GFP_KERNEL).map_err(Into::into)
    }

    fn ioctl(_me: &OpenDevice, _file: &File, cmd: u32, _arg: usize) -> Result<isize> {
        match cmd {
            ACQUIRE_NEURON_DS | RELEASE_NEURON_DS => Err(ENOSYS),
            _ => Err(ENOTTY),
        }
    }
}

#[kunit_tests(neuron_ds_device)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_original_abi() {
        assert_eq!(ACQUIRE_NEURON_DS, 0x8008_4E47);
        assert_eq!(RELEASE_NEURON_DS, 0x8008_4E48);
    }
}
