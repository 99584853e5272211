// SPDX-License-Identifier: GPL-2.0

//! The device's sysfs tree, where the original driver has it:
//!
//! ```text
//! /sys/class/<class>/neuronN -> /sys/devices/virtual/<class>/neuronN/
//!   core_count
//!   neuron_core<c>/stats/status/<name>/{total,present}
//!   neuron_core<c>/stats/other_info/<name>/{total,present}
//!   info/notify_delay
//!   datastore/slots
//! ```
//!
//! Reading a file never changes any state. With `info/notify_delay` 0 or more, a counter's
//! `total` and `present` can be polled (`POLLPRI`) for its changes (`device::events`).

use crate::{
    abi::sysfs::{
        SysfsGroup,
        SYSFS_COUNTERS, //
    },
    device::DeviceState,
    shim::{
        class::{
            Class,
            ClassDevice, //
        },
        sysfs::{
            SysfsDir,
            SysfsFile,
            SysfsFiles,
            SysfsNode,
            SysfsText, //
        },
    },
    state::{
        core_index::CoreIndex,
        notify::NOTIFY_OFF,
        totals::CounterNode, //
    },
};
use core::fmt::Write;
use kernel::{
    prelude::*,
    str::CString,
    sync::Arc, //
};

/// The device directory's own files.
pub(crate) struct DeviceInfo {
    device: Arc<DeviceState>,
}

impl SysfsFiles for DeviceInfo {
    const FILES: &'static [SysfsFile] = &[SysfsFile {
        name: c"core_count",
        mode: 0o444,
    }];

    #[inline]
    fn show(&self, _file: usize, text: &mut SysfsText<'_>) -> Result {
        writeln!(text, "{}", self.device.config().core_count).map_err(|_| EFBIG)
    }

    fn store(&self, _file: usize, _input: &[u8]) -> Result {
        Err(EACCES)
    }
}

/// One aggregated counter of one core.
pub(crate) struct CounterFiles {
    device: Arc<DeviceState>,
    core: CoreIndex,
    node: CounterNode,
}

const TOTAL: usize = 0;
const PRESENT: usize = 1;

impl SysfsFiles for CounterFiles {
    const FILES: &'static [SysfsFile] = &[
        SysfsFile {
            name: c"total",
            mode: 0o644,
        },
        SysfsFile {
            name: c"present",
            mode: 0o644,
        },
    ];

    #[inline]
    fn show(&self, file: usize, text: &mut SysfsText<'_>) -> Result {
        let shown = self.device.counter(self.core, self.node);
        let value = if file == TOTAL {
            shown.total
        } else {
            shown.present
        };
        writeln!(text, "{value}").map_err(|_| EFBIG)
    }

    /// Writing anything resets the counter, as in the original.
    #[inline]
    fn store(&self, _file: usize, _input: &[u8]) -> Result {
        self.device.reset_counter(self.core, self.node);
        Ok(())
    }
}

/// The notification setting, `info/notify_delay`: -1 (off, the default), 0 (notify at every
/// change) or N (at most once per N ms).
pub(crate) struct InfoFiles {
    device: Arc<DeviceState>,
}

impl SysfsFiles for InfoFiles {
    const FILES: &'static [SysfsFile] = &[SysfsFile {
        name: c"notify_delay",
        mode: 0o644,
    }];

    #[inline]
    fn show(&self, _file: usize, text: &mut SysfsText<'_>) -> Result {
        writeln!(text, "{}", self.device.notify_delay()).map_err(|_| EFBIG)
    }

    /// `-1`, or a decimal number of milliseconds up to a day; surrounding whitespace allowed.
    fn store(&self, _file: usize, input: &[u8]) -> Result {
        self.device
            .set_notify_delay(parse_notify_delay(input).ok_or(EINVAL)?)
    }
}

/// `-1` or an unsigned decimal number that fits 32 bits (the device refuses more than a day),
/// with ASCII whitespace around. Read as bytes: every byte of a number is an ASCII digit, so
/// nothing needs decoding as text, and a sign, a second number or any other byte is refused.
fn parse_notify_delay(input: &[u8]) -> Option<i64> {
    match input.trim_ascii() {
        b"-1" => Some(NOTIFY_OFF),
        [] => None,
        digits => digits
            .iter()
            .try_fold(0u32, |value, &digit| {
                let digit = char::from(digit).to_digit(10)?;
                value.checked_mul(10)?.checked_add(digit)
            })
            .map(i64::from),
    }
}

/// The slot table.
pub(crate) struct DatastoreFiles {
    device: Arc<DeviceState>,
}

impl SysfsFiles for DatastoreFiles {
    const FILES: &'static [SysfsFile] = &[SysfsFile {
        name: c"slots",
        mode: 0o444,
    }];

    fn show(&self, _file: usize, text: &mut SysfsText<'_>) -> Result {
        self.device.write_slot_table(text)
    }

    fn store(&self, _file: usize, _input: &[u8]) -> Result {
        Err(EACCES)
    }
}

/// Every sysfs directory of one device; dropping it removes them, children first (fields,
/// vector and array elements drop in order, and each core's directories are listed innermost
/// first), after the device forgets the counter files' notifiers.
pub(crate) struct SysfsTree {
    device: Arc<DeviceState>,
    _counters: KVec<SysfsNode<CounterFiles>>,
    /// Per core: `other_info`, `status`, `stats`, `neuron_coreN`.
    _dirs: KVec<[SysfsDir; 4]>,
    _datastore: SysfsNode<DatastoreFiles>,
    _info: SysfsNode<InfoFiles>,
    _device: ClassDevice<DeviceInfo>,
}

impl Drop for SysfsTree {
    fn drop(&mut self) {
        self.device.clear_counter_notifiers();
    }
}

impl SysfsTree {
    /// Creates `neuron<index>` in `class` with the tree of `device`.
    pub(crate) fn build(class: Arc<Class>, name: &CStr, device: &Arc<DeviceState>) -> Result<Self> {
        let dev = ClassDevice::new(
            class,
            name,
            DeviceInfo {
                device: device.clone(),
            },
        )?;
        let datastore = SysfsNode::new(
            &dev,
            c"datastore",
            DatastoreFiles {
                device: device.clone(),
            },
        )?;
        let info = SysfsNode::new(
            &dev,
            c"info",
            InfoFiles {
                device: device.clone(),
            },
        )?;
        // Every vector at its final size at once: no push below reallocates.
        let cores = device.config().core_count;
        let nodes = cores.checked_mul(SYSFS_COUNTERS.len()).ok_or(EINVAL)?;
        let mut dirs = KVec::with_capacity(cores, GFP_KERNEL)?;
        let mut counters = KVec::with_capacity(nodes, GFP_KERNEL)?;
        let mut notifiers = KVec::with_capacity(nodes, GFP_KERNEL)?;
        for core in CoreIndex::first(cores) {
            let name = CString::try_from_fmt(fmt!("neuron_core{}", core.get()))?;
            let core_dir = SysfsDir::new(&dev, &name)?;
            let stats = SysfsDir::new(&core_dir, c"stats")?;
            let status = SysfsDir::new(&stats, c"status")?;
            let other_info = SysfsDir::new(&stats, c"other_info")?;
            for (node, counter) in CounterNode::all().zip(SYSFS_COUNTERS.iter()) {
                let parent = match counter.group {
                    SysfsGroup::Status => &status,
                    SysfsGroup::OtherInfo => &other_info,
                };
                let files = CounterFiles {
                    device: device.clone(),
                    core,
                    node,
                };
                let name = CString::try_from_fmt(fmt!("{}", counter.name))?;
                let node = SysfsNode::new(parent, &name, files)?;
                let notifier = |file| node.notifier(&CounterFiles::FILES[file]);
                notifiers.push_within_capacity([notifier(TOTAL), notifier(PRESENT)])?;
                counters.push_within_capacity(node)?;
            }
            dirs.push_within_capacity([other_info, status, stats, core_dir])?;
        }
        device.set_counter_notifiers(notifiers);
        Ok(Self {
            device: device.clone(),
            _counters: counters,
            _dirs: dirs,
            _datastore: datastore,
            _info: info,
            _device: dev,
        })
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_sysfs_tree)]
mod tests {
    use super::*;

    #[test]
    fn notify_delay_takes_minus_one_or_an_unsigned_decimal_number() {
        for (input, value) in [
            (&b"-1"[..], Some(-1)),
            (b"0\n", Some(0)),
            (b" 250 ", Some(250)),
            (b"86400000", Some(86_400_000)),
            (b"123456789", Some(123_456_789)),
            (b"4294967295", Some(4_294_967_295)),
            (b"4294967296", None),
            (b"007", Some(7)),
            (b"12a", None),
            ("\u{0661}".as_bytes(), None),
            (b"+5", None),
            (b" -1 2", None),
            (b"\xff", None),
            (b"-2", None),
            (b"1.5", None),
            (b"", None),
            (b"x", None),
        ] {
            assert_eq!(parse_notify_delay(input), value);
        }
    }
}
