//! Where the slabs are: the kernel's (device nodes, with the module's slot tables saying who
//! owns which), or slab files in a directory.
//!
//! Two ways of naming the owners use it. [`SlabSource::discover`] finds them itself: the
//! owned rows of the slot tables, or every slab file of the directory by its name (the
//! monitor and nds-top). A tool that takes the owners from the slot tables in both cases
//! (nds-ls, whose slab files stand in for the kernel's slabs) opens each one's slab with
//! [`SlabSource::backend`].

use std::path::{Path, PathBuf};

use nds::Backend;
use nds_sysfs::SysfsRoot;

use crate::discovery::{Candidate, Discovery, FileState, Owner, SlabKey};
use crate::naming::{parse_slab_file_name, slab_file_name};

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

/// The device node of `device` in `dev_dir`.
fn device_node(dev_dir: &Path, device: u32) -> PathBuf {
    dev_dir.join(format!("neuron{device}"))
}

/// `neuron<N>` entries of `dir`, sorted; empty if it cannot be listed.
fn listed_device_nodes(dir: &Path) -> Vec<String> {
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

impl SlabSource {
    /// Where the slab of process `pid` on `device` is opened: acquired through the device
    /// node for that pid, or the slab file of that name.
    #[must_use]
    pub fn backend(&self, device: u32, pid: i32) -> Backend {
        match self {
            Self::Kernel { dev_dir } => Backend::device(device_node(dev_dir, device)),
            Self::Files { dir } => Backend::file(dir.join(slab_file_name(device, pid))),
        }
    }

    /// Where slot `slot` of `device` is, as the monitor names a slab by its slot:
    /// `<dev_dir>/neuron<N>:slot<S>` (for slab files, which have no slots, `neuron<N>:slot<S>`).
    #[must_use]
    pub fn slot_address(&self, device: u32, slot: usize) -> String {
        match self {
            Self::Kernel { dev_dir } => {
                format!("{}:slot{slot}", device_node(dev_dir, device).display())
            }
            Self::Files { .. } => format!("neuron{device}:slot{slot}"),
        }
    }

    /// Whether the slabs are the kernel's, whose generation word is the slot table's.
    #[must_use]
    pub fn is_kernel(&self) -> bool {
        matches!(self, Self::Kernel { .. })
    }

    /// Why the kernel's slabs cannot be read at all: the module is not loaded (its directory
    /// `module_dir` is gone, as during a reload); `None` while it is, or for slab files.
    #[must_use]
    pub fn module_missing(&self, module_dir: &Path) -> Option<String> {
        let Self::Kernel { .. } = self else {
            return None;
        };
        (!module_dir.is_dir()).then(|| {
            format!(
                "the neuron_ds module is not loaded (no {})",
                module_dir.display()
            )
        })
    }

    /// Why `sysfs` has no device, naming what was looked for and whether the module (its
    /// directory `module_dir`) is loaded; `None` when there are devices, or for slab files.
    #[must_use]
    pub fn no_device_reason(&self, sysfs: &SysfsRoot, module_dir: &Path) -> Option<String> {
        let Self::Kernel { dev_dir } = self else {
            return None;
        };
        if sysfs.devices().is_ok_and(|devices| !devices.is_empty()) {
            return None;
        }
        let loaded = if module_dir.is_dir() {
            format!(
                "the neuron_ds module is loaded ({} exists)",
                module_dir.display()
            )
        } else {
            format!(
                "the neuron_ds module is not loaded (no {}; modprobe neuron_ds)",
                module_dir.display()
            )
        };
        let nodes = listed_device_nodes(dev_dir);
        let found = if nodes.is_empty() {
            "found neither".to_owned()
        } else {
            format!("found {} but no datastore directory", nodes.join(", "))
        };
        Some(format!(
            "no Neuron device: looked for {}/neuron<N>/datastore and the device nodes {}/neuron<N> \
             ({found}); {loaded}; --slab-dir reads slab files instead",
            sysfs.path().display(),
            dev_dir.display()
        ))
    }

    /// Every owned slab, by key, with the problems met while looking (one line each) and the
    /// slots owned by processes this reader cannot name; the kernel's owners are those of the
    /// slot tables in `sysfs` (`module_dir` says, when there is no device, whether the module
    /// is loaded), slab files' those their names say.
    #[must_use]
    pub fn discover(&self, sysfs: &SysfsRoot, module_dir: &Path) -> Discovery {
        match self {
            Self::Kernel { dev_dir } => self.discover_slots(dev_dir, sysfs, module_dir),
            Self::Files { dir } => discover_files(dir),
        }
    }

    /// [`SlabSource::discover`] of the kernel's slabs, whose nodes are in `dev_dir`.
    fn discover_slots(&self, dev_dir: &Path, sysfs: &SysfsRoot, module_dir: &Path) -> Discovery {
        let mut discovery = Discovery::default();
        let devices = sysfs.devices().unwrap_or_else(|e| {
            discovery.problems.push(e.to_string());
            Vec::new()
        });
        if devices.is_empty() {
            discovery
                .problems
                .extend(self.no_device_reason(sysfs, module_dir));
        }
        for device in devices {
            let rows = match sysfs.slots(device) {
                Ok(rows) => rows,
                Err(error) => {
                    discovery.problems.push(error.to_string());
                    continue;
                }
            };
            let node = device_node(dev_dir, device);
            // Owned (odd generation), but by a process this reader's pid namespace cannot
            // name: the kernel shows it as pid 0.
            discovery.hidden.extend(
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
                discovery.found.insert(
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
                        address: self.slot_address(device, row.slot),
                        file: None,
                    },
                );
            }
        }
        discovery
    }
}

/// [`SlabSource::discover`] of the slab files in `dir`.
fn discover_files(dir: &Path) -> Discovery {
    let mut discovery = Discovery::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            discovery
                .problems
                .push(format!("{}: {error}", dir.display()));
            return discovery;
        }
    };
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
        discovery.found.insert(
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
    discovery
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_device_reason_names_the_places_and_the_module() {
        let dir = std::env::temp_dir().join(format!("nds-source-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("dev")).unwrap();
        let mut slabs = SlabSource::Kernel {
            dev_dir: dir.join("dev"),
        };
        let sysfs = SysfsRoot::new(dir.join("sys"));
        let module_dir = dir.join("module/neuron_ds");
        let reason = slabs.no_device_reason(&sysfs, &module_dir).unwrap();
        assert!(reason.contains("is not loaded"), "{reason}");
        assert!(reason.contains("(found neither)"), "{reason}");
        std::fs::create_dir_all(&module_dir).unwrap();
        std::fs::write(dir.join("dev/neuron0"), "").unwrap();
        std::fs::write(dir.join("dev/neuronx"), "").unwrap();
        let reason = slabs.no_device_reason(&sysfs, &module_dir).unwrap();
        assert!(reason.contains("module is loaded"), "{reason}");
        assert!(
            reason.contains("(found neuron0 but no datastore"),
            "{reason}"
        );
        std::fs::create_dir_all(dir.join("sys/neuron0/datastore")).unwrap();
        assert_eq!(slabs.no_device_reason(&sysfs, &module_dir), None);
        slabs = SlabSource::Files { dir: dir.clone() };
        std::fs::remove_dir_all(dir.join("sys")).unwrap();
        assert_eq!(
            slabs.no_device_reason(&sysfs, &module_dir),
            None,
            "slab files need no device"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_owners_slab_is_its_device_node_or_its_file() {
        let kernel = SlabSource::Kernel {
            dev_dir: PathBuf::from("/dev"),
        };
        assert_eq!(kernel.backend(2, 42), Backend::device("/dev/neuron2"));
        assert_eq!(kernel.slot_address(2, 3), "/dev/neuron2:slot3");
        assert!(kernel.is_kernel());
        let files = SlabSource::Files {
            dir: PathBuf::from("/run/slabs"),
        };
        assert_eq!(
            files.backend(2, 42),
            Backend::file("/run/slabs/neuron2-42.slab")
        );
        assert!(!files.is_kernel());
    }
}
