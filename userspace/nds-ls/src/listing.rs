//! What nds-ls lists: neuron-ls's device and process objects, filled from the datastore.
//!
//! Every key of neuron-ls's JSON is here with the type the original gives it. The module's
//! devices are virtual, so what only the hardware knows is left empty, typed as the original
//! types it: `bdf` and `cpu_affinity` are `""`, `numa_node` is `"-1"` (the kernel's "no NUMA
//! node", which the original prints for such devices), `connected_to` is `null` (the
//! original's value for a device linked to none), `memory_size` is 0, and
//! `logical_neuroncore_config` is 0 (a runtime setting the datastore never sees; nds-monitor's
//! `neuron_hardware_info` says 0 for it too).

use std::io;

use nds::Reader;
use nds_document::groups::{process_info, tag_of, Interval};
use nds_slabs::{observe, Observation, SlabReading};
use nds_sysfs::{SlotRow, SysfsRoot};
use serde::Serialize;

use crate::command::command_of;
use crate::error::Result;
use crate::source::Source;

/// The `numa_node` of a device without one, as the kernel and neuron-ls print it.
const NO_NUMA_NODE: &str = "-1";

/// One device, as an element of neuron-ls's JSON array.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceEntry {
    /// Device index (the `N` of `neuron<N>`).
    pub neuron_device: u32,
    /// PCI address; empty (the module's devices are virtual).
    pub bdf: String,
    /// CPUs near the device; empty (unknown).
    pub cpu_affinity: String,
    /// NUMA node; `"-1"`, none.
    pub numa_node: String,
    /// Devices linked to this one; `null`, none.
    pub connected_to: Option<Vec<u32>>,
    /// NeuronCores of the device (its `core_count`).
    pub nc_count: usize,
    /// Physical cores per logical NeuronCore; 0, unknown.
    pub logical_neuroncore_config: u32,
    /// Device memory in bytes; 0, unknown.
    pub memory_size: u64,
    /// The device's NeuronCores, numbered instance-wide: device `d`, core `c` →
    /// `d * cores_per_device + c`, with the first device's core count (as nds-monitor keys
    /// them).
    pub neuroncore_ids: Vec<usize>,
    /// The processes holding a slab on the device, by pid.
    pub neuron_processes: Vec<ProcessEntry>,
    /// Ours: empty when fine, else what could not be read about the device.
    pub error: String,
}

/// One process holding a slab: neuron-ls's three keys, then ours.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessEntry {
    /// Process id, in our pid namespace (the slot table's).
    pub pid: i32,
    /// Its command line (see [`command_of`]); empty when `/proc` has none.
    pub command: String,
    /// `major.minor.build` of its runtime (process-info); empty when unknown.
    pub neuron_runtime_version: String,
    /// Ours: its tag, `NEURON_PROCESS_TAG`, as nds-monitor derives it: process-info-ext's,
    /// else process-info's, else the pid.
    pub neuron_runtime_tag: String,
    /// Ours: the framework type of process-info; 0 when unknown.
    pub framework_type: i32,
    /// Ours: `major.minor.build` of its framework (process-info); empty when unknown.
    pub framework_version: String,
    /// Ours: the slot of its slab.
    pub slot: usize,
    /// Ours: the slab generation the slot table shows.
    pub generation: u64,
    /// Ours: empty when fine; else why the slab could not be read (then the versions are
    /// empty and the tag is the pid), or which of its records is missing or torn.
    pub error: String,
}

/// Every device of `source` with its cores and the processes holding a slab on it, by device
/// index. A device or slab that cannot be read is listed with an `error`.
///
/// # Errors
///
/// [`Error::Devices`](crate::Error::Devices) if the sysfs root exists but cannot be listed.
pub fn list(source: &Source) -> Result<Vec<DeviceEntry>> {
    let mut devices: Vec<DeviceEntry> = source
        .sysfs
        .devices()?
        .into_iter()
        .map(|device| device_entry(source, device))
        .collect();
    let per_device = devices.first().map_or(0, |first| first.nc_count);
    for entry in &mut devices {
        let device = usize::try_from(entry.neuron_device).unwrap_or(usize::MAX);
        let first = device.saturating_mul(per_device);
        entry.neuroncore_ids = (0..entry.nc_count)
            .map(|core| first.saturating_add(core))
            .collect();
    }
    Ok(devices)
}

/// A device's entry, all but its instance-wide core ids (which need every device's count).
fn device_entry(source: &Source, device: u32) -> DeviceEntry {
    let mut problems = Vec::new();
    let nc_count = core_count(&source.sysfs, device, &mut problems);
    let mut neuron_processes = match source.sysfs.slots(device) {
        Ok(rows) => rows
            .iter()
            .filter(|row| row.is_owned())
            .map(|row| process_entry(source, device, row))
            .collect(),
        Err(error) => {
            problems.push(error.to_string());
            Vec::new()
        }
    };
    neuron_processes.sort_by_key(|process: &ProcessEntry| (process.pid, process.slot));
    DeviceEntry {
        neuron_device: device,
        bdf: String::new(),
        cpu_affinity: String::new(),
        numa_node: NO_NUMA_NODE.to_owned(),
        connected_to: None,
        nc_count,
        logical_neuroncore_config: 0,
        memory_size: 0,
        neuroncore_ids: Vec::new(),
        neuron_processes,
        error: problems.join("; "),
    }
}

/// The device's `core_count`; where it is missing or malformed, its `neuron_core<C>`
/// directories counted (a malformed one is a problem too).
fn core_count(sysfs: &SysfsRoot, device: u32, problems: &mut Vec<String>) -> usize {
    match sysfs.core_count(device) {
        Ok(Some(count)) => return count,
        Ok(None) => {}
        Err(error) => problems.push(error.to_string()),
    }
    match sysfs.cores(device) {
        Ok(cores) => cores.len(),
        Err(error) => {
            problems.push(error.to_string());
            0
        }
    }
}

/// The entry of the process of slot-table row `row`, with what its slab says if it can be read.
fn process_entry(source: &Source, device: u32, row: &SlotRow) -> ProcessEntry {
    let mut entry = ProcessEntry {
        pid: row.pid,
        command: command_of(&source.proc_root, row.pid),
        neuron_runtime_version: String::new(),
        neuron_runtime_tag: row.pid.to_string(),
        framework_type: 0,
        framework_version: String::new(),
        slot: row.slot,
        generation: row.generation,
        error: String::new(),
    };
    match read_slab(source, device, row) {
        Ok(reading) => {
            // One reading is both ends of the interval: only its records are used.
            let info = process_info(&Interval {
                now: &reading,
                before: &reading,
                seconds: 0.0,
            });
            entry.neuron_runtime_version = info.runtime_version;
            entry.framework_type = info.framework_type;
            entry.framework_version = info.framework_version;
            entry.neuron_runtime_tag = tag_of(&reading, row.pid);
            entry.error = info.error;
        }
        Err(why) => entry.error = why,
    }
    entry
}

/// One reading of the slab of `row`'s process, if it is still that owner's.
fn read_slab(source: &Source, device: u32, row: &SlotRow) -> Result<Box<SlabReading>, String> {
    let backend = source.slabs.backend(device, row.pid);
    let reader = Reader::open(&backend, row.pid).map_err(|error| unreadable(&error))?;
    if source.slabs.is_kernel() {
        if let Some(found) = reader.attached_generation() {
            if found != row.generation {
                return Err(format!(
                    "the slab changed hands since the slot table was read (generation {} \
                     there, {found} now)",
                    row.generation
                ));
            }
        }
    }
    match observe(&reader) {
        Observation::Reading(reading) => Ok(reading),
        Observation::Moved { generation } => Err(match generation {
            Some(generation) => {
                format!("the slab was released while being read (generation {generation} now)")
            }
            None => "the slab was released while being read".to_owned(),
        }),
    }
}

/// Why a slab could not be opened, saying first what the errno means here.
fn unreadable(error: &nds::Error) -> String {
    let kind = match error {
        nds::Error::Ioctl { errno, .. } => io::Error::from_raw_os_error(*errno).kind(),
        nds::Error::Io { source, .. } => source.kind(),
        _ => io::ErrorKind::InvalidData,
    };
    let detail = match error {
        nds::Error::Ioctl { request, errno } => {
            format!("{request}: {}", io::Error::from_raw_os_error(*errno))
        }
        other => other.to_string(),
    };
    match kind {
        io::ErrorKind::PermissionDenied => format!("not permitted (another user's slab): {detail}"),
        io::ErrorKind::NotFound => format!("slab gone: {detail}"),
        _ => format!("slab unreadable: {detail}"),
    }
}
