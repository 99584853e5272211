//! The Neuron devices: `neuron_hardware_info` and the `neuron_hw_counters` system group.
//!
//! Device and core counts come from the module's sysfs tree (through `nds-sysfs`). What only
//! real hardware knows (device type and version, core version, ECC events) is read from the
//! Neuron driver's sysfs tree where it exists (`<root>/neuron<N>/info/architecture/*`,
//! `<root>/neuron<N>/neuron_core0/info/architecture/arch_type`,
//! `<root>/neuron<N>/stats/hardware/<counter>[/total]`); without it the values are empty or
//! 0 and the `error` says so.

use std::fs;
use std::path::{Path, PathBuf};

use nds_document::document::{DeviceEcc, HardwareInfo, HwCounters};
use nds_sysfs::SysfsRoot;

/// Where the Neuron driver publishes its devices.
pub const DEFAULT_HARDWARE_ROOT: &str = "/sys/devices/virtual/neuron_device";

/// The ECC counters of `neuron_hw_counters`, in neuron-monitor's order.
pub const ECC_COUNTERS: [&str; 4] = [
    "mem_ecc_corrected",
    "mem_ecc_uncorrected",
    "sram_ecc_uncorrected",
    "sram_ecc_corrected",
];

/// The Neuron driver's sysfs tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HardwareTree {
    root: PathBuf,
}

impl Default for HardwareTree {
    fn default() -> Self {
        Self::new(DEFAULT_HARDWARE_ROOT)
    }
}

/// One device's ECC totals as the driver counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EccTotals {
    /// Device index.
    pub device: u32,
    /// Values aligned with [`ECC_COUNTERS`].
    pub values: [u64; ECC_COUNTERS.len()],
}

impl EccTotals {
    fn as_document(&self) -> DeviceEcc {
        let [mem_ecc_corrected, mem_ecc_uncorrected, sram_ecc_uncorrected, sram_ecc_corrected] =
            self.values;
        DeviceEcc {
            neuron_device_index: self.device,
            mem_ecc_corrected,
            mem_ecc_uncorrected,
            sram_ecc_uncorrected,
            sram_ecc_corrected,
        }
    }
}

/// A small text file's first line, trimmed; `None` if absent, unreadable or empty.
fn read_line(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_owned())
}

impl HardwareTree {
    /// A tree rooted at `root`.
    #[must_use]
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn device_dir(&self, device: u32) -> PathBuf {
        self.root.join(format!("neuron{device}"))
    }

    /// The totals of every device in `devices`, with one line per problem met (a missing
    /// hardware directory or counter reads as 0).
    #[must_use]
    pub fn ecc_totals(&self, devices: &[u32]) -> (Vec<EccTotals>, Vec<String>) {
        let mut problems = Vec::new();
        let mut missing_dirs = Vec::new();
        let totals = devices
            .iter()
            .map(|&device| {
                let dir = self.device_dir(device).join("stats").join("hardware");
                let mut totals = EccTotals {
                    device,
                    ..EccTotals::default()
                };
                if !dir.is_dir() {
                    missing_dirs.push(dir.display().to_string());
                    return totals;
                }
                let mut unpublished = Vec::new();
                for (value, name) in totals.values.iter_mut().zip(ECC_COUNTERS) {
                    // A counter is a directory with `total` (as the status nodes), or a file.
                    let node = dir.join(name);
                    let file = if node.is_dir() {
                        node.join("total")
                    } else {
                        node
                    };
                    match read_line(&file).map(|line| line.parse::<u64>()) {
                        Some(Ok(parsed)) => *value = parsed,
                        Some(Err(_)) => {
                            problems.push(format!("{}: not a decimal number", file.display()));
                        }
                        None => unpublished.push(name),
                    }
                }
                if !unpublished.is_empty() {
                    problems.push(format!(
                        "{}: no {} (reported as 0)",
                        dir.display(),
                        unpublished.join(", ")
                    ));
                }
                totals
            })
            .collect();
        if !missing_dirs.is_empty() {
            problems.insert(
                0,
                format!(
                    "no Neuron driver hardware counters ({} missing): the neuron_ds module \
                     emulates no hardware, ECC events are reported as 0",
                    missing_dirs.join(", ")
                ),
            );
        }
        (totals, problems)
    }

    /// Type and versions of device `device`: `(device type, device version, core version)`,
    /// each `None` when the driver does not publish it.
    fn architecture(&self, device: u32) -> [Option<String>; 3] {
        let dir = self.device_dir(device);
        let architecture = dir.join("info").join("architecture");
        let device_type = read_line(&architecture.join("device_type"))
            .or_else(|| read_line(&architecture.join("device_name")))
            .map(|name| name.to_lowercase());
        let device_version = read_line(&architecture.join("arch_type")).map(|v| version(&v));
        let core_version = read_line(
            &dir.join("neuron_core0")
                .join("info")
                .join("architecture")
                .join("arch_type"),
        )
        .map(|v| version(&v));
        [device_type, device_version, core_version]
    }
}

/// `NCv3`, `V3`, `v3` → `v3`: neuron-monitor's spelling of a version.
fn version(text: &str) -> String {
    let lower = text.to_lowercase();
    match lower.find('v') {
        Some(start) => lower.get(start..).unwrap_or(&lower).to_owned(),
        None => format!("v{lower}"),
    }
}

/// `neuron_hw_counters` from the totals now and at the start of the period.
#[must_use]
pub fn hw_counters(
    now: &[EccTotals],
    before: &[EccTotals],
    seconds: f64,
    problems: &[String],
) -> HwCounters {
    let neuron_devices = now
        .iter()
        .map(|totals| {
            let start = before
                .iter()
                .find(|b| b.device == totals.device)
                .map_or([0; ECC_COUNTERS.len()], |b| b.values);
            let mut delta = *totals;
            for (value, start) in delta.values.iter_mut().zip(start) {
                *value = value.saturating_sub(start);
            }
            delta.as_document()
        })
        .collect();
    HwCounters {
        period: seconds,
        error: problems.join("; "),
        neuron_devices,
        lifetime: now.iter().map(EccTotals::as_document).collect(),
    }
}

/// `neuron_hardware_info`: counts from the module, type and versions from the driver;
/// `no_device` explains an empty device list.
#[must_use]
pub fn hardware_info(sysfs: &SysfsRoot, tree: &HardwareTree, no_device: &str) -> HardwareInfo {
    let mut info = HardwareInfo::default();
    let mut problems = Vec::new();
    let devices = match sysfs.devices() {
        Ok(devices) => devices,
        Err(error) => {
            problems.push(error.to_string());
            Vec::new()
        }
    };
    info.neuron_device_count = devices.len();
    let Some(&first) = devices.first() else {
        if problems.is_empty() {
            problems.push(no_device.to_owned());
        }
        info.error = problems.join("; ");
        return info;
    };
    match sysfs.cores(first) {
        Ok(cores) => info.neuroncore_per_device_count = cores.len(),
        Err(error) => problems.push(error.to_string()),
    }
    let [device_type, device_version, core_version] = tree.architecture(first);
    let mut unknown = Vec::new();
    match device_type {
        Some(value) => info.neuron_device_type = value,
        None => unknown.push("neuron_device_type"),
    }
    match device_version {
        Some(value) => info.neuron_device_version = value,
        None => unknown.push("neuron_device_version"),
    }
    match core_version {
        Some(value) => info.neuroncore_version = value,
        None => unknown.push("neuroncore_version"),
    }
    if !unknown.is_empty() {
        problems.push(format!(
            "{} unknown: {} has no Neuron driver architecture files for neuron{first} \
             (the neuron_ds module emulates no hardware)",
            unknown.join(", "),
            tree.root.display()
        ));
    }
    // Neither the module nor the driver's sysfs tree publishes these two.
    problems.push(
        "neuron_device_memory_size and logical_neuroncore_config unknown: no sysfs node \
         publishes them"
            .to_owned(),
    );
    info.error = problems.join("; ");
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_spelled_like_neuron_monitor() {
        assert_eq!(version("NCv3"), "v3");
        assert_eq!(version("v4"), "v4");
        assert_eq!(version("V2"), "v2");
        assert_eq!(version("3"), "v3");
    }

    #[test]
    fn ecc_from_a_driver_tree_and_deltas() {
        let root = std::env::temp_dir().join(format!("nds-hw-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let hardware = root.join("neuron1/stats/hardware");
        fs::create_dir_all(hardware.join("mem_ecc_uncorrected")).unwrap();
        fs::write(hardware.join("mem_ecc_uncorrected/total"), "7\n").unwrap();
        fs::write(hardware.join("sram_ecc_uncorrected"), "3\n").unwrap();
        let tree = HardwareTree::new(&root);
        let (totals, problems) = tree.ecc_totals(&[0, 1]);
        assert_eq!(totals[1].values, [0, 7, 3, 0]);
        assert!(
            problems[0].contains("neuron0/stats/hardware"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("no mem_ecc_corrected, sram_ecc_corrected"),
            "{problems:?}"
        );
        let mut before = totals.clone();
        before[1].values = [0, 5, 3, 0];
        let group = hw_counters(&totals, &before, 2.0, &problems);
        assert_eq!(group.neuron_devices[1].mem_ecc_uncorrected, 2);
        assert_eq!(group.lifetime[1].mem_ecc_uncorrected, 7);
        assert_eq!(group.neuron_devices[0], DeviceEcc::default());
        let _ = fs::remove_dir_all(&root);
    }
}
