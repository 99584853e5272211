// SPDX-License-Identifier: GPL-2.0

//! Neuron DataStore (NDS): per-process shared-memory telemetry slabs.
//!
//! Each device node `/dev/neuronN` owns 16 zeroed slabs of 256 KiB. A runtime (the
//! producer) takes one for its thread group and writes counters and records into it; monitors
//! map a producer's slab read-only to watch it without asking it anything. When the owner
//! releases the slab, or its last file on the device goes away, the kernel adds the slab's
//! counters to per-NeuronCore totals in sysfs, zeroes the slab and frees it. Every mapping of a
//! slab ends with the owner's tenure: at the release the owner's faults (`SIGBUS`); a reader's
//! shows the tenure as it ended until the slab is zeroed, then zeros, never a later owner's
//! bytes.
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
//!  * unless the kernel's rule for reading that process allows it, as for /proc/<pid>/mem, or
//!  * the caller has CAP_PERFMON or CAP_SYS_ADMIN). */
//! ```
//!
//! The 24-byte argument, the wire format inside the slab and the sysfs names come from the
//! `abi` module, which is the userspace crate `nds-abi` compiled into the kernel.
//!
//! # Layers
//!
//! * `shim`: generic safe abstractions over kernel APIs 7.3's `kernel` crate lacks; all the
//!   module's `unsafe` code is there.
//! * `state`: pure state machines with KUnit suites (slot pool, totals, metrics, posts).
//! * Top: the device and its release pipeline (`device`), the files (`file`), the sysfs tree
//!   (`sysfs_tree`), the metrics worker, and the wiring (`neuron_device`, this file).
//!
//! Every module imports only from the layers below it.
//!
//! The module is one crate, and rustc emits each of its non-generic functions out of line even
//! where every call is inlined. Functions only ever called from generic code that inlines them
//! (drop glue, the sysfs and workqueue dispatch) are `#[inline]`, so that the object holds no
//! copy that nothing calls.

use kernel::prelude::*;

// The wire format is the userspace crate's, which uses all of it; the module compiles in only
// what it uses (the rest is dead code here, and left out of the object).
#[allow(
    dead_code,
    unreachable_pub,
    reason = "shared with userspace, which uses every item; unused ones are not compiled in"
)]
#[deny(unsafe_code)]
mod abi;
#[deny(unsafe_code)]
mod device;
#[deny(unsafe_code)]
mod file;
#[deny(unsafe_code)]
mod metrics_worker;
#[deny(unsafe_code)]
mod neuron_device;
mod shim;
#[deny(unsafe_code)]
mod state;
#[deny(unsafe_code)]
mod sysfs_tree;

use shim::{
    class::Class,
    param::{
        module_param,
        ModuleParamValue, //
    },
};

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

module_param!(
    STRICT_READER_MAPPINGS: bool = false,
    "strict_reader_mappings",
    "Refuse a reader's PROT_WRITE mmap with EPERM (default: map it read-only)",
    0
);
module_param!(
    ATTACH_REQUIRES_PERFMON: bool = false,
    "attach_requires_perfmon",
    "Let only CAP_PERFMON (or CAP_SYS_ADMIN) attach to another process's slab, whatever uid: for hosts whose security module restricts reading processes, which this module cannot consult (default: the kernel's ptrace read rule, or CAP_PERFMON)",
    0
);
module_param!(
    METRICS_CTRL_ACCEPT_UNKNOWN: bool = false,
    "metrics_ctrl_accept_unknown",
    "Answer METRICS_CTRL with an unknown mode with 0, as the original driver does (default: EINVAL)",
    0
);
module_param!(
    NODE_NAME: charp,
    "node_name",
    "Base name of the device nodes and sysfs devices: /dev/<name>0... (default neuron)",
    0o444
);
module_param!(
    CLASS_NAME: charp,
    "class_name",
    "Device class of the sysfs devices: /sys/class/<class>/ (default neuron_device)",
    0o444
);
module_param!(
    TIME_IN_USE_UNIT_PS: uint = 1,
    "time_in_use_unit_ps",
    "Picoseconds per unit of NC_COUNTER_TIME_IN_USE (1: picoseconds, the original driver's formula; 1000000: microseconds, its sysfs guide)",
    0o444
);

/// Upper bound of `devices` and `cores_per_device`.
const MAX_PARAMETER: u32 = 16;

/// `name` as text if it is short and made of characters that need no quoting anywhere (a
/// node or class name); checked once, so that nothing after it has a conversion to fail.
fn valid_name(name: &CStr) -> Option<&str> {
    let text = name.to_str().ok()?;
    let valid = (1..=32).contains(&text.len())
        && text
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-');
    valid.then_some(text)
}

/// A device or core count if it is between 1 and `MAX_PARAMETER`.
fn valid_count(count: u32) -> Option<u8> {
    // CAST: at most `MAX_PARAMETER`, which fits in a `u8`.
    (1..=MAX_PARAMETER).contains(&count).then_some(count as u8)
}

const _: () = assert!(MAX_PARAMETER <= u8::MAX as u32);
// Every core of a device has counters in the slab layout.
const _: () = assert!(MAX_PARAMETER as usize <= state::core_index::MAX_CORES);

/// The loaded module: owns the class and every device.
struct NeuronDsModule {
    /// Declared first: the devices go before their class.
    _devices: KVec<neuron_device::NeuronDevice>,
    _class: kernel::sync::Arc<Class>,
}

impl kernel::Module for NeuronDsModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let (Some(device_count), Some(core_count)) = (
            valid_count(module_parameters::devices.get()),
            valid_count(module_parameters::cores_per_device.get()),
        ) else {
            pr_err!("devices and cores_per_device must be between 1 and {MAX_PARAMETER}\n");
            return Err(EINVAL);
        };
        let time_unit_ps = TIME_IN_USE_UNIT_PS.get();
        if time_unit_ps == 0 {
            pr_err!("time_in_use_unit_ps must be at least 1\n");
            return Err(EINVAL);
        }
        let class_name = CLASS_NAME.get().unwrap_or(c"neuron_device");
        let (Some(node_name), Some(class_text)) = (
            valid_name(NODE_NAME.get().unwrap_or(c"neuron")),
            valid_name(class_name),
        ) else {
            pr_err!("node_name and class_name must be 1 to 32 characters of [a-z0-9_-]\n");
            return Err(EINVAL);
        };
        let class = Class::new(class_name).inspect_err(|err| {
            if *err == EEXIST {
                pr_err!(
                    "class {class_text} exists (the Neuron driver?); load with class_name= and node_name=\n"
                );
            }
        })?;
        let mut devices = KVec::new();
        for index in 0..device_count {
            let config = device::DeviceConfig {
                index,
                core_count: usize::from(core_count),
                time_unit_ps,
                strict_reader_mappings: STRICT_READER_MAPPINGS.get(),
                attach_requires_perfmon: ATTACH_REQUIRES_PERFMON.get(),
                accept_unknown_metrics_modes: METRICS_CTRL_ACCEPT_UNKNOWN.get(),
            };
            let device = neuron_device::NeuronDevice::new(
                class.clone(),
                node_name,
                config,
                module_parameters::metrics_period_ms.get(),
            )?;
            devices.push(device, GFP_KERNEL)?;
        }
        // The nodes last, once everything they serve exists; no file opens until every node is
        // registered, since `init` may still fail until then, and the kernel frees the code of
        // a module whose `init` failed whatever files of it are open.
        for device in devices.iter_mut() {
            device.register_node(node_name)?;
        }
        for device in devices.iter() {
            device.start_serving();
        }
        pr_info!("{device_count} devices /dev/{node_name}N in class {class_text}\n");
        Ok(Self {
            _devices: devices,
            _class: class,
        })
    }
}
