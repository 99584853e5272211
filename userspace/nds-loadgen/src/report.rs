//! What a producer reports: exactly what it added to every counter of its slab.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use nds_abi::sysfs::SysfsCounter;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::models::LoadedModel;
use crate::recorder::Tally;

/// One producer's account of its slab, written when its stream ends (or at its crash point).
///
/// Counter maps are keyed by the C enumerator names of `nds_abi` (and per-core maps by the core
/// index as a string, as in neuron-monitor's JSON); counters never written are absent. Values
/// are final values, i.e. what the producer added to a slab that started zeroed; latency and
/// memory counters are *set*, so theirs are the last values written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerReport {
    /// Process tag.
    pub tag: String,
    /// Process id.
    pub pid: i32,
    /// Device index.
    pub device: u32,
    /// Whether the producer crashed (killed itself with SIGKILL right after this report).
    pub crashed: bool,
    /// Executions reported.
    pub executions: u64,
    /// Executions per status identifier.
    pub statuses: BTreeMap<String, u64>,
    /// Models loaded during the stream.
    pub model_loads: u64,
    /// Models unloaded during the stream.
    pub model_unloads: u64,
    /// Failed load attempts (counted through the generic-status path).
    pub failed_loads: u64,
    /// Models loaded when the report was written.
    pub loaded_models: Vec<LoadedModel>,
    /// ND counters.
    pub nd_counters: BTreeMap<String, u64>,
    /// Per-core counters: core → counter → value.
    pub nc_counters: BTreeMap<String, BTreeMap<String, u64>>,
}

impl ProducerReport {
    /// Fills the counter maps from `tally`.
    pub fn set_counters(&mut self, tally: &Tally) {
        self.nd_counters = tally
            .nd_values()
            .into_iter()
            .map(|(counter, value)| (counter.name().to_owned(), value))
            .collect();
        self.nc_counters.clear();
        for ((core, _), (counter, value)) in tally.nc_values() {
            self.nc_counters
                .entry(core.to_string())
                .or_default()
                .insert(counter.name().to_owned(), value);
        }
    }

    /// The per-core counter named `name` on `core` (0 if absent).
    #[must_use]
    pub fn nc(&self, core: usize, name: &str) -> u64 {
        self.nc_counters
            .get(&core.to_string())
            .and_then(|counters| counters.get(name))
            .copied()
            .unwrap_or(0)
    }

    /// What this producer's slab adds to sysfs node `counter` of `core` when it is released.
    #[must_use]
    pub fn sysfs_contribution(&self, core: usize, counter: &SysfsCounter) -> u64 {
        let name = match counter.source {
            nds_abi::sysfs::CounterSource::Nc(nc) => nc.name(),
            nds_abi::sysfs::CounterSource::Ext(ext) => ext.name(),
        };
        self.nc(core, name).wrapping_mul(counter.scale)
    }

    /// Writes the report to `path` atomically (a temporary file renamed into place, synced).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] or [`Error::Json`].
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(|source| Error::Json {
            path: path.to_path_buf(),
            source,
        })?;
        let staging = path.with_extension("tmp");
        let context = |what: &str| format!("{what} {}", staging.display());
        let mut file = File::create(&staging).map_err(|e| Error::io(context("creating"), e))?;
        file.write_all(&text)
            .and_then(|()| file.sync_all())
            .map_err(|e| Error::io(context("writing"), e))?;
        fs::rename(&staging, path)
            .map_err(|e| Error::io(format!("renaming to {}", path.display()), e))
    }

    /// Reads a report written by [`ProducerReport::write`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] or [`Error::Json`].
    pub fn read(path: &Path) -> Result<Self> {
        let text =
            fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        serde_json::from_slice(&text).map_err(|source| Error::Json {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// Every producer's report, as the orchestrator prints it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The reports, ordered by tag.
    pub producers: Vec<ProducerReport>,
}

impl Summary {
    /// The sum over producers on `device` of what they add to sysfs node `counter` of `core`.
    #[must_use]
    pub fn sysfs_contribution(&self, device: u32, core: usize, counter: &SysfsCounter) -> u64 {
        self.producers
            .iter()
            .filter(|report| report.device == device)
            .map(|report| report.sysfs_contribution(core, counter))
            .fold(0, u64::wrapping_add)
    }

    /// Reads a summary from `path`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] or [`Error::Json`].
    pub fn read(path: &Path) -> Result<Self> {
        let text =
            fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        serde_json::from_slice(&text).map_err(|source| Error::Json {
            path: path.to_path_buf(),
            source,
        })
    }
}
