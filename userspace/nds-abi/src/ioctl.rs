//! The datastore ioctls: command numbers and their argument.

use core::mem::size_of;

use zerocopy_derive::{
    FromBytes,
    Immutable,
    IntoBytes,
    KnownLayout, //
};

/// ioctl type byte of the Neuron driver, `'N'` (`NEURON_IOCTL_BASE`).
pub const NEURON_IOCTL_BASE: u32 = 0x4E;

/// `_IOC_READ` direction bits.
const IOC_READ: u32 = 2;

/// Encodes `_IOR(ty, nr, size)` with the generic Linux layout (dir 30, size 16, type 8, nr 0).
const fn ioc_read(ty: u32, nr: u32, size: u32) -> u32 {
    (IOC_READ << 30) | (size << 16) | (ty << 8) | nr
}

/// Size encoded in the datastore ioctl numbers: the driver declares them with a *pointer* type,
/// so the number carries `sizeof(void *)`, not the argument size.
const ARG_POINTER_SIZE: u32 = 8;

/// Acquires a slab: `_IOR('N', 71, struct neuron_ioctl_neuron_ds_info *)`.
pub const NEURON_IOCTL_ACQUIRE_NEURON_DS: u32 = ioc_read(NEURON_IOCTL_BASE, 71, ARG_POINTER_SIZE);

/// Releases a slab: `_IOR('N', 72, struct neuron_ioctl_neuron_ds_info *)`.
pub const NEURON_IOCTL_RELEASE_NEURON_DS: u32 = ioc_read(NEURON_IOCTL_BASE, 72, ARG_POINTER_SIZE);

/// Argument of both datastore ioctls, `struct neuron_ioctl_neuron_ds_info`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct NeuronDsInfo {
    /// In: the process whose slab is wanted; 0 means the caller's own.
    pub pid: i32,
    /// C alignment padding; zero.
    pub reserved0: u32,
    /// Out: `mmap` offset of the slab.
    pub mmap_offset: u64,
    /// Out: slab size, [`super::layout::NEURON_DATASTORE_SIZE`].
    pub size: u32,
    /// C tail padding; zero.
    pub reserved1: u32,
}

impl NeuronDsInfo {
    /// An argument asking for `pid`'s slab, outputs zeroed.
    #[must_use]
    pub const fn for_pid(pid: i32) -> Self {
        Self {
            pid,
            reserved0: 0,
            mmap_offset: 0,
            size: 0,
            reserved1: 0,
        }
    }
}

const _: () = assert!(size_of::<*mut NeuronDsInfo>() == 8);
const _: () = assert!(NEURON_IOCTL_ACQUIRE_NEURON_DS == 0x8008_4E47);
const _: () = assert!(NEURON_IOCTL_RELEASE_NEURON_DS == 0x8008_4E48);
const _: () = assert!(size_of::<NeuronDsInfo>() == 24);
const _: () = assert!(core::mem::offset_of!(NeuronDsInfo, mmap_offset) == 8);
const _: () = assert!(core::mem::offset_of!(NeuronDsInfo, size) == 16);

/// `_IOC_WRITE` direction bits.
const IOC_WRITE: u32 = 1;

/// Encodes `_IOW(ty, nr, size)` with the generic Linux layout.
const fn ioc_write(ty: u32, nr: u32, size: u32) -> u32 {
    (IOC_WRITE << 30) | (size << 16) | (ty << 8) | nr
}

/// Pauses or resumes the periodic metrics posting of a device:
/// `_IOW(NEURON_IOCTL_BASE, 128, struct neuron_ioctl_metrics_ctrl)` (driver 2.25). Unlike the
/// datastore ioctls, the number encodes the argument's own size (the struct, not a pointer).
pub const NEURON_IOCTL_METRICS_CTRL: u32 = ioc_write(
    NEURON_IOCTL_BASE,
    128,
    size_of::<NeuronMetricsCtrl>() as u32,
);

/// Argument of [`NEURON_IOCTL_METRICS_CTRL`], `struct neuron_ioctl_metrics_ctrl`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct NeuronMetricsCtrl {
    /// A [`MetricsMode`] value.
    pub mode: u32,
}

/// `enum neuron_metrics_mode` (`neuron_driver_shared.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricsMode {
    /// `NEURON_METRICS_MODE_PERIODIC_ENABLE`: post every period.
    PeriodicEnable,
    /// `NEURON_METRICS_MODE_PERIODIC_DISABLE`: post nothing until enabled again.
    PeriodicDisable,
}

impl MetricsMode {
    /// The mode a `mode` field names, if it names one.
    #[must_use]
    pub const fn from_raw(mode: u32) -> Option<Self> {
        match mode {
            0 => Some(Self::PeriodicEnable),
            1 => Some(Self::PeriodicDisable),
            _ => None,
        }
    }

    /// The `mode` field's value.
    #[must_use]
    pub const fn raw(self) -> u32 {
        match self {
            Self::PeriodicEnable => 0,
            Self::PeriodicDisable => 1,
        }
    }
}

const _: () = assert!(size_of::<NeuronMetricsCtrl>() == 4);
const _: () = assert!(NEURON_IOCTL_METRICS_CTRL == 0x4004_4E80);
