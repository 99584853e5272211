//! Where slabs are found: the kernel's slot tables, or a directory of slab files.

use std::collections::BTreeMap;
use std::path::PathBuf;

use nds::Backend;
use nds_sysfs::SysfsRoot;

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

/// Everything the monitor reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// Slabs.
    pub slabs: SlabSource,
    /// The module's sysfs tree (slot tables and aggregated totals).
    pub sysfs: SysfsRoot,
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

impl Source {
    /// Every owned slab, by key, with the problems met while looking (one line each).
    #[must_use]
    pub fn discover(&self) -> (BTreeMap<SlabKey, Candidate>, Vec<String>) {
        let mut found = BTreeMap::new();
        let mut problems = Vec::new();
        match &self.slabs {
            SlabSource::Kernel { dev_dir } => {
                let devices = self.sysfs.devices().unwrap_or_else(|e| {
                    problems.push(e.to_string());
                    Vec::new()
                });
                for device in devices {
                    let rows = match self.sysfs.slots(device) {
                        Ok(rows) => rows,
                        Err(error) => {
                            problems.push(error.to_string());
                            continue;
                        }
                    };
                    let node = dev_dir.join(format!("neuron{device}"));
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
                        if let Some((device, pid)) = parsed {
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
                                },
                            );
                        }
                    }
                }
                Err(error) => problems.push(format!("{}: {error}", dir.display())),
            },
        }
        (found, problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
