// SPDX-License-Identifier: GPL-2.0

//! Neuron DataStore (NDS): per-process shared-memory telemetry slabs.
//!
//! Each device node `/dev/neuronN` owns 16 zeroed slabs of 256 KiB. A runtime (the
//! producer) takes one for its thread group and writes counters and records into it; monitors
//! map a producer's slab read-only to watch it without asking it anything. When the owner
//! releases the slab, or its last file on the device goes away, the kernel adds the slab's
//! counters to per-NeuronCore totals in sysfs, zeroes the slab and frees it.
//!
//! # Userspace ABI
//!
//! ```c
//! struct neuron_ioctl_neuron_ds_info { int32_t pid; uint64_t mmap_offset; uint32_t size; };
//! #define ACQUIRE 0x80084E47 /* _IOR('N', 71, void *) */
//! #define RELEASE 0x80084E48 /* _IOR('N', 72, void *) */
//!
//! int fd = open("/dev/neuron0", O_RDWR);
//! struct neuron_ioctl_neuron_ds_info info = { .pid = 0 };   /* 0: my own slab */
//! ioctl(fd, ACQUIRE, &info);                                  /* ENOMEM: all 16 owned */
//! void *slab = mmap(NULL, info.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, info.mmap_offset);
//! /* ... write counters ... */
//! munmap(slab, info.size);
//! ioctl(fd, RELEASE, &info);                                  /* aggregate, zero, free */
//! close(fd);
//!
//! /* A monitor: pid != 0 maps that process's slab read-only (ENOENT if it has none, EPERM
//!  * for another user's process without CAP_SYS_ADMIN or CAP_PERFMON). */
//! ```
//!
//! Parameters: `devices`, `cores_per_device`, `metrics_period_ms`, and `node_name` (the
//! node base name, default `neuron`, so that the module can coexist with the real driver).
//!
//! The 24-byte argument, the wire format inside the slab and the sysfs names come from the
//! `abi` module, which is the userspace crate `nds-abi` compiled into the kernel.

use kernel::prelude::*;

pub mod abi;
mod device;
mod edge;
mod metrics;
mod metrics_worker;
mod post_ring;
mod reader;
mod slots;
mod sysfs;
mod totals;
mod version_history;

module! {
    type: NeuronDsModule,
    name: "neuron_ds",
    authors: ["neuron-ds developers"],
    description: "Neuron DataStore: per-process shared-memory telemetry slabs",
    license: "GPL",
    params: {
        devices: u32 {
            default: 1,
            description: "Number of Neuron devices (/dev/neuron0 ...), 1 to 16",
        },
        cores_per_device: u32 {
            default: 2,
            description: "NeuronCores per device whose counters are aggregated, 1 to 16",
        },
        metrics_period_ms: u32 {
            default: 150000,
            description: "Metrics posting period in milliseconds (0: no metrics worker)",
        },
    },
}

/// Upper bound of both parameters.
const MAX_PARAMETER: u32 = 16;

/// A device node base name is short and made of characters that need no quoting anywhere.
fn is_valid_node_name(name: &[u8]) -> bool {
    (1..=32).contains(&name.len())
        && name
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// The loaded module: owns every device.
struct NeuronDsModule {
    _devices: KVec<Pin<KBox<device::NeuronDevice>>>,
}

impl kernel::Module for NeuronDsModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let device_count = module_parameters::devices.value();
        let core_count = module_parameters::cores_per_device.value();
        if !(1..=MAX_PARAMETER).contains(&device_count)
            || !(1..=MAX_PARAMETER).contains(&core_count)
        {
            pr_err!("devices and cores_per_device must be between 1 and {MAX_PARAMETER}\n");
            return Err(EINVAL);
        }
        let core_count = usize::try_from(core_count)?;
        let node_name = edge::node_name_parameter().unwrap_or(c"neuron");
        if !is_valid_node_name(node_name.to_bytes()) {
            pr_err!("node_name must be 1 to 32 characters of [a-z0-9_-]\n");
            return Err(EINVAL);
        }
        let mut devices = KVec::new();
        for index in 0..usize::try_from(device_count)? {
            let device = device::NeuronDevice::new(
                node_name,
                index,
                core_count,
                module_parameters::metrics_period_ms.value(),
            )?;
            devices.push(device, GFP_KERNEL)?;
        }
        Ok(Self { _devices: devices })
    }
}
