//! Where the monitor reads: slabs (the kernel's slot tables, or a directory of slab files),
//! the module's sysfs tree and parameters, and the host (`/proc`, DMI, the Neuron driver's
//! sysfs, instance metadata).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nds::Backend;
use nds_sysfs::{SysfsRoot, TimeInUseUnit, DEFAULT_MODULE_DIR};

use crate::hardware::HardwareTree;
use crate::imds::{MetadataSetting, DEFAULT_DMI_DIR};

/// Identifies one slab across polls.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SlabKey {
    /// Slot `slot` of device `device`.
    Slot {
        /// Device index.
        device: u32,
        /// Slot index.
        slot: usize,
    },
    /// A slab file.
    File(PathBuf),
}

/// Who owns a slab according to the kernel (or the file system).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Owner pid.
    pub pid: i32,
    /// Slot generation (`None` for slab files).
    pub generation: Option<u64>,
}

/// A slab file as discovery found it: which file it is, and how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileState {
    /// Its inode: a file removed and created again under the same name is another slab.
    pub inode: u64,
    /// Its length: a file shorter than what was mapped was truncated under the reader.
    pub len: u64,
}

/// An owned slab found by discovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Device index.
    pub device: u32,
    /// Its owner.
    pub owner: Owner,
    /// How to open it for reading.
    pub backend: Backend,
    /// Human-readable location.
    pub address: String,
    /// For a slab file, the file (`None` for the kernel's slabs).
    pub file: Option<FileState>,
}

/// What one look at the slabs found.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Every owned slab this monitor can name, by key.
    pub found: BTreeMap<SlabKey, Candidate>,
    /// Problems met while looking, one line each.
    pub problems: Vec<String>,
    /// Slots owned by a process outside this monitor's pid namespace, with their generation.
    pub hidden: Vec<(SlabKey, u64)>,
}

/// The slabs' source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlabSource {
    /// Device nodes `<dev_dir>/neuron<N>`, slot tables from sysfs.
    Kernel {
        /// Directory of the device nodes.
        dev_dir: PathBuf,
    },
    /// Files named `neuron<device>-<pid>.slab` (as the load generator's `--slab-dir` writes).
    Files {
        /// The directory.
        dir: PathBuf,
    },
}

/// The host's side: everything not about slabs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSource {
    /// `/proc` (CPU, memory, process CPU times).
    pub proc_root: PathBuf,
    /// The module's directory under `/sys/module` (present while it is loaded; its
    /// parameters name the unit of `NDS_NC_COUNTER_TIME_IN_USE`).
    pub module_dir: PathBuf,
    /// The Neuron driver's sysfs tree (device type, versions, ECC counters).
    pub hardware: HardwareTree,
    /// DMI strings, to tell an EC2 instance.
    pub dmi_dir: PathBuf,
    /// Whether and where to query instance metadata.
    pub instance_metadata: MetadataSetting,
}

impl Default for HostSource {
    /// The system's paths, with instance metadata off (the tools ask for
    /// [`MetadataSetting::Auto`] explicitly, so a library user or a test never sends a packet
    /// it did not ask for).
    fn default() -> Self {
        Self {
            proc_root: PathBuf::from("/proc"),
            module_dir: PathBuf::from(DEFAULT_MODULE_DIR),
            hardware: HardwareTree::default(),
            dmi_dir: PathBuf::from(DEFAULT_DMI_DIR),
            instance_metadata: MetadataSetting::Off,
        }
    }
}

/// Everything the monitor reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// Slabs.
    pub slabs: SlabSource,
    /// The module's sysfs tree (slot tables and aggregated totals).
    pub sysfs: SysfsRoot,
    /// The host.
    pub host: HostSource,
    /// The unit of `NDS_NC_COUNTER_TIME_IN_USE` the producers write; `None` follows the
    /// module's `time_in_use_unit_ps` (see [`Source::time_in_use_unit`]).
    pub time_in_use_unit: Option<TimeInUseUnit>,
}

/// The `(device, pid)` of a slab file name, `neuron<device>-<pid>.slab`.
#[must_use]
pub fn parse_slab_file_name(name: &str) -> Option<(u32, i32)> {
    let (device, pid) = name
        .strip_prefix("neuron")?
        .strip_suffix(".slab")?
        .split_once('-')?;
    let pid: i32 = pid.parse().ok()?;
    (pid > 0).then_some((device.parse().ok()?, pid))
}

/// `neuron<N>` entries of `dir`, sorted; empty if it cannot be listed.
fn device_nodes(dir: &Path) -> Vec<String> {
    let mut nodes: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| {
            name.strip_prefix("neuron")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    nodes.sort();
    nodes
}

impl Source {
    /// The unit of `NDS_NC_COUNTER_TIME_IN_USE`: the one set, else the parameter of the module
    /// in [`HostSource::module_dir`], read now (a reload may change it), else the module's
    /// default, picoseconds, when no module is loaded.
    ///
    /// # Errors
    ///
    /// The module's parameter file exists but cannot be read or parsed.
    pub fn time_in_use_unit(&self) -> nds_sysfs::Result<TimeInUseUnit> {
        match self.time_in_use_unit {
            Some(unit) => Ok(unit),
            None => TimeInUseUnit::of_module(&self.host.module_dir),
        }
    }

    /// Why the kernel's slabs cannot be read at all: the module is not loaded (its
    /// [`HostSource::module_dir`] is gone, as during a reload); `None` while it is, or when
    /// slabs come from files.
    #[must_use]
    pub fn module_missing(&self) -> Option<String> {
        let SlabSource::Kernel { .. } = &self.slabs else {
            return None;
        };
        let module = &self.host.module_dir;
        (!module.is_dir()).then(|| {
            format!(
                "the neuron_ds module is not loaded (no {})",
                module.display()
            )
        })
    }

    /// Why no device was found, naming what was looked for and whether the module is loaded;
    /// `None` when there are devices, or when slabs come from files.
    #[must_use]
    pub fn no_device_reason(&self) -> Option<String> {
        let SlabSource::Kernel { dev_dir } = &self.slabs else {
            return None;
        };
        if self
            .sysfs
            .devices()
            .is_ok_and(|devices| !devices.is_empty())
        {
            return None;
        }
        let module = &self.host.module_dir;
        let loaded = if module.is_dir() {
            format!(
                "the neuron_ds module is loaded ({} exists)",
                module.display()
            )
        } else {
            format!(
                "the neuron_ds module is not loaded (no {}; modprobe neuron_ds)",
                module.display()
            )
        };
        let nodes = device_nodes(dev_dir);
        let found = if nodes.is_empty() {
            "found neither".to_owned()
        } else {
            format!("found {} but no datastore directory", nodes.join(", "))
        };
        Some(format!(
            "no Neuron device: looked for {}/neuron<N>/datastore and the device nodes {}/neuron<N> \
             ({found}); {loaded}; --slab-dir reads slab files instead",
            self.sysfs.path().display(),
            dev_dir.display()
        ))
    }

    /// Every owned slab, by key, with the problems met while looking (one line each) and the
    /// slots owned by processes this monitor cannot name.
    #[must_use]
    pub fn discover(&self) -> Discovery {
        let mut found = BTreeMap::new();
        let mut problems = Vec::new();
        let mut hidden = Vec::new();
        match &self.slabs {
            SlabSource::Kernel { dev_dir } => {
                let devices = self.sysfs.devices().unwrap_or_else(|e| {
                    problems.push(e.to_string());
                    Vec::new()
                });
                if devices.is_empty() {
                    problems.extend(self.no_device_reason());
                }
                for device in devices {
                    let rows = match self.sysfs.slots(device) {
                        Ok(rows) => rows,
                        Err(error) => {
                            problems.push(error.to_string());
                            continue;
                        }
                    };
                    let node = dev_dir.join(format!("neuron{device}"));
                    // Owned (odd generation), but by a process this monitor's pid namespace
                    // cannot name: the kernel shows it as pid 0.
                    hidden.extend(
                        rows.iter()
                            .filter(|row| !row.is_owned() && row.generation % 2 == 1)
                            .map(|row| {
                                (
                                    SlabKey::Slot {
                                        device,
                                        slot: row.slot,
                                    },
                                    row.generation,
                                )
                            }),
                    );
                    for row in rows.into_iter().filter(|row| row.is_owned()) {
                        found.insert(
                            SlabKey::Slot {
                                device,
                                slot: row.slot,
                            },
                            Candidate {
                                device,
                                owner: Owner {
                                    pid: row.pid,
                                    generation: Some(row.generation),
                                },
                                backend: Backend::device(&node),
                                address: format!("{}:slot{}", node.display(), row.slot),
                                file: None,
                            },
                        );
                    }
                }
            }
            SlabSource::Files { dir } => match std::fs::read_dir(dir) {
                Ok(entries) => {
                    for entry in entries.filter_map(|entry| entry.ok()) {
                        let path = entry.path();
                        let parsed = entry.file_name().to_str().and_then(parse_slab_file_name);
                        let Some((device, pid)) = parsed else {
                            continue;
                        };
                        // Gone since the listing: nothing to attach.
                        let Ok(metadata) = std::fs::metadata(&path) else {
                            continue;
                        };
                        let file = FileState {
                            inode: std::os::unix::fs::MetadataExt::ino(&metadata),
                            len: metadata.len(),
                        };
                        found.insert(
                            SlabKey::File(path.clone()),
                            Candidate {
                                device,
                                owner: Owner {
                                    pid,
                                    generation: None,
                                },
                                backend: Backend::file(&path),
                                address: path.display().to_string(),
                                file: Some(file),
                            },
                        );
                    }
                }
                Err(error) => problems.push(format!("{}: {error}", dir.display())),
            },
        }
        Discovery {
            found,
            problems,
            hidden,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_device_reason_names_the_places_and_the_module() {
        let dir = std::env::temp_dir().join(format!("nds-source-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("dev")).unwrap();
        let mut source = Source {
            slabs: SlabSource::Kernel {
                dev_dir: dir.join("dev"),
            },
            sysfs: SysfsRoot::new(dir.join("sys")),
            host: HostSource {
                module_dir: dir.join("module/neuron_ds"),
                ..HostSource::default()
            },
            time_in_use_unit: None,
        };
        let reason = source.no_device_reason().unwrap();
        assert!(reason.contains("is not loaded"), "{reason}");
        assert!(reason.contains("(found neither)"), "{reason}");
        std::fs::create_dir_all(dir.join("module/neuron_ds")).unwrap();
        std::fs::write(dir.join("dev/neuron0"), "").unwrap();
        std::fs::write(dir.join("dev/neuronx"), "").unwrap();
        let reason = source.no_device_reason().unwrap();
        assert!(reason.contains("module is loaded"), "{reason}");
        assert!(
            reason.contains("(found neuron0 but no datastore"),
            "{reason}"
        );
        std::fs::create_dir_all(dir.join("sys/neuron0/datastore")).unwrap();
        assert_eq!(source.no_device_reason(), None);
        source.slabs = SlabSource::Files { dir: dir.clone() };
        std::fs::remove_dir_all(dir.join("sys")).unwrap();
        assert_eq!(source.no_device_reason(), None, "slab files need no device");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_time_unit_is_the_one_set_else_the_modules_read_at_each_call() {
        let dir = std::env::temp_dir().join(format!("nds-source-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut source = Source {
            slabs: SlabSource::Files { dir: dir.clone() },
            sysfs: SysfsRoot::new(dir.join("sys")),
            host: HostSource {
                module_dir: dir.join("module"),
                ..HostSource::default()
            },
            time_in_use_unit: None,
        };
        assert_eq!(
            source.time_in_use_unit().unwrap(),
            TimeInUseUnit::PICOSECOND
        );
        let parameter = dir.join("module/parameters/time_in_use_unit_ps");
        std::fs::create_dir_all(parameter.parent().unwrap()).unwrap();
        std::fs::write(&parameter, "1000000\n").unwrap();
        assert_eq!(
            source.time_in_use_unit().unwrap(),
            TimeInUseUnit::MICROSECOND
        );
        std::fs::write(&parameter, "micro\n").unwrap();
        assert!(source.time_in_use_unit().is_err());
        source.time_in_use_unit = Some(TimeInUseUnit::PICOSECOND);
        assert_eq!(
            source.time_in_use_unit().unwrap(),
            TimeInUseUnit::PICOSECOND,
            "the setting wins over the module"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn slab_file_names() {
        assert_eq!(parse_slab_file_name("neuron1-4242.slab"), Some((1, 4242)));
        for name in [
            "neuron1-0.slab",
            "neuron-1.slab",
            "neuron1-42.tmp",
            "x1-2.slab",
        ] {
            assert_eq!(parse_slab_file_name(name), None, "{name}");
        }
    }
}
