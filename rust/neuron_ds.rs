// SPDX-License-Identifier: GPL-2.0

//! Neuron DataStore (NDS): per-process shared-memory telemetry slabs.
//!
//! Each device node hands a process one of its pre-allocated slabs through the
//! `ACQUIRE_NEURON_DS` ioctl and maps it into the process; a runtime writes counters into
//! it and monitors map it read-only.

use kernel::prelude::*;

mod device;

module! {
    type: NeuronDsModule,
    name: "neuron_ds",
    authors: ["neuron-ds developers"],
    description: "Neuron DataStore: shared-memory telemetry slabs",
    license: "GPL",
}

/// The loaded module: owns every device registration.
#[pin_data]
struct NeuronDsModule {
    #[pin]
    device: device::NeuronDevice,
}

impl kernel::InPlaceModule for NeuronDsModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            device <- device::NeuronDevice::new(c"neuron0"),
        })
    }
}
