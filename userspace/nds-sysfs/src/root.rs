//! Paths of the module's sysfs tree and the reads that walk it.

use std::fs;
use std::path::{Path, PathBuf};

use nds_abi::sysfs::{SysfsCounter, SYSFS_COUNTERS};

use crate::error::{Error, Result};
use crate::slots::{parse_slot_table, SlotRow};
use crate::totals::CoreTotals;

/// Where the module's devices appear: its device class, as the original driver's
/// (`/sys/class/neuron_device/neuron<N>` → `/sys/devices/virtual/neuron_device/neuron<N>`).
pub const DEFAULT_SYSFS_ROOT: &str = "/sys/class/neuron_device";

/// The base name of the device directories unless the module was loaded with another
/// `node_name`.
const DEFAULT_DEVICE_NAME: &str = "neuron";

/// The two files of a counter node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysfsFile {
    /// `total`: released owners plus the current owners' live values.
    Total,
    /// `present`: what the last release added.
    Present,
}

impl SysfsFile {
    fn name(self) -> &'static str {
        match self {
            Self::Total => "total",
            Self::Present => "present",
        }
    }
}

/// A directory holding `<name><N>` device directories (normally [`DEFAULT_SYSFS_ROOT`]).
///
/// The device directories are named like the device nodes: `neuron<N>`, or whatever
/// `node_name` the module was loaded with (any name of lowercase letters, digits, `_` and `-`
/// followed by the device number; a directory is a device when it has a `datastore` directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysfsRoot {
    path: PathBuf,
}

impl Default for SysfsRoot {
    fn default() -> Self {
        Self::new(DEFAULT_SYSFS_ROOT)
    }
}

impl SysfsRoot {
    /// A tree rooted at `path`.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The root directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory of device `device`: `neuron<device>`, or the device directory of another
    /// base name with that number.
    #[must_use]
    pub fn device_dir(&self, device: u32) -> PathBuf {
        let default = self.path.join(format!("{DEFAULT_DEVICE_NAME}{device}"));
        if default.is_dir() {
            return default;
        }
        self.device_entries()
            .into_iter()
            .find(|(number, _)| *number == device)
            .map_or(default, |(_, path)| path)
    }

    /// Every device directory under the root with its number.
    fn device_entries(&self) -> Vec<(u32, PathBuf)> {
        let Ok(entries) = fs::read_dir(&self.path) else {
            return Vec::new();
        };
        entries
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let digits_from = name.find(|c: char| c.is_ascii_digit())?;
                let (base, digits) = name.split_at(digits_from);
                let plain_base = !base.is_empty()
                    && base
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'-');
                if !plain_base || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let path = entry.path();
                path.join("datastore")
                    .is_dir()
                    .then(|| Some((digits.parse().ok()?, path)))?
            })
            .collect()
    }

    /// Indices of the Neuron devices present, ascending; empty when the module is not loaded.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the root exists but cannot be listed.
    pub fn devices(&self) -> Result<Vec<u32>> {
        if let Err(source) = fs::read_dir(&self.path) {
            if source.kind() != std::io::ErrorKind::NotFound {
                return Err(Error::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        }
        let mut devices: Vec<u32> = self
            .device_entries()
            .into_iter()
            .map(|(number, _)| number)
            .collect();
        devices.sort_unstable();
        devices.dedup();
        Ok(devices)
    }

    /// Indices of the NeuronCores of `device`, ascending.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the device directory cannot be listed.
    pub fn cores(&self, device: u32) -> Result<Vec<usize>> {
        numbered_entries(&self.device_dir(device), "neuron_core")
    }

    /// The NeuronCores of `device` as its `core_count` file says; `None` when the file does
    /// not exist (a tree without it: count the `neuron_core<C>` directories instead).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if it exists but cannot be read, [`Error::Parse`] if it is not one
    /// decimal number.
    pub fn core_count(&self, device: u32) -> Result<Option<usize>> {
        let path = self.device_dir(device).join("core_count");
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Io { path, source }),
        };
        match text.trim().parse() {
            Ok(count) => Ok(Some(count)),
            Err(_) => Err(Error::Parse {
                path,
                text: text.trim().to_owned(),
                reason: "expected one decimal number",
            }),
        }
    }

    /// The slot table of `device`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if it cannot be read, [`Error::Parse`] if it is malformed.
    pub fn slots(&self, device: u32) -> Result<Vec<SlotRow>> {
        let path = self.device_dir(device).join("datastore").join("slots");
        parse_slot_table(&path, &read(&path)?)
    }

    /// The path of one counter file.
    #[must_use]
    pub fn counter_path(
        &self,
        device: u32,
        core: usize,
        counter: &SysfsCounter,
        file: SysfsFile,
    ) -> PathBuf {
        self.device_dir(device)
            .join(format!("neuron_core{core}"))
            .join("stats")
            .join(counter.group.dir_name())
            .join(counter.name)
            .join(file.name())
    }

    /// One counter file's value.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if it cannot be read, [`Error::Parse`] if it is not one decimal number.
    pub fn counter(
        &self,
        device: u32,
        core: usize,
        counter: &SysfsCounter,
        file: SysfsFile,
    ) -> Result<u64> {
        let path = self.counter_path(device, core, counter, file);
        let text = read(&path)?;
        text.trim().parse().map_err(|_| Error::Parse {
            path,
            text: text.trim().to_owned(),
            reason: "expected one decimal number",
        })
    }

    /// Every node of one core, read from `file`.
    ///
    /// # Errors
    ///
    /// As [`SysfsRoot::counter`].
    pub fn core_totals(&self, device: u32, core: usize, file: SysfsFile) -> Result<CoreTotals> {
        let mut values = [0; SYSFS_COUNTERS.len()];
        for (value, counter) in values.iter_mut().zip(SYSFS_COUNTERS.iter()) {
            *value = self.counter(device, core, counter, file)?;
        }
        Ok(CoreTotals {
            device,
            core,
            values,
        })
    }

    /// The `total` of every node of every core of every device.
    ///
    /// # Errors
    ///
    /// As [`SysfsRoot::counter`].
    pub fn all_totals(&self) -> Result<Vec<CoreTotals>> {
        let mut totals = Vec::new();
        for device in self.devices()? {
            totals.extend(self.device_totals(device)?);
        }
        Ok(totals)
    }

    /// The `total` of every node of every core of `device`.
    ///
    /// # Errors
    ///
    /// As [`SysfsRoot::counter`], or [`Error::Io`] if its cores cannot be listed.
    pub fn device_totals(&self, device: u32) -> Result<Vec<CoreTotals>> {
        self.cores(device)?
            .into_iter()
            .map(|core| self.core_totals(device, core, SysfsFile::Total))
            .collect()
    }
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The `N`s of the entries of `dir` named `<prefix>N`, ascending; none if `dir` is missing.
fn numbered_entries<N: std::str::FromStr + Ord>(dir: &Path, prefix: &str) -> Result<Vec<N>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut numbers: Vec<N> = entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let name = entry.file_name();
            let digits = name.to_str()?.strip_prefix(prefix)?;
            // Only plain decimal suffixes: `neuron_core0` is not device `_core0` of `neuron`.
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse().ok()
        })
        .collect();
    numbers.sort();
    Ok(numbers)
}
