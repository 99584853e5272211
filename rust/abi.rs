// SPDX-License-Identifier: GPL-2.0

//! The NDS wire format, compiled from the very files of the userspace crate `nds-abi`, so
//! that the kernel and userspace cannot disagree on a number.

#[path = "../userspace/nds-abi/src/counters.rs"]
pub mod counters;
#[path = "../userspace/nds-abi/src/fnv.rs"]
pub mod fnv;
#[path = "../userspace/nds-abi/src/ioctl.rs"]
pub mod ioctl;
#[path = "../userspace/nds-abi/src/layout.rs"]
pub mod layout;
#[path = "../userspace/nds-abi/src/ledger.rs"]
pub mod ledger;
#[path = "../userspace/nds-abi/src/metrics.rs"]
pub mod metrics;
#[path = "../userspace/nds-abi/src/records.rs"]
pub mod records;
#[path = "../userspace/nds-abi/src/sysfs.rs"]
pub mod sysfs;
#[path = "../userspace/nds-abi/src/text.rs"]
pub mod text;
