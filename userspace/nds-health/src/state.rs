//! What the event stream keeps across the exporter's restarts, in a state directory
//! (`serve --state-dir`): the stream's id and next number, where each device's ledger was
//! read to, and every live tenure's error counters as last evented. It is written whole at
//! every report before that report's events are published (to a file beside it, then renamed
//! over it), so that whatever a client could have seen is in the file: a restart resumes the
//! numbering after it, events the rises since those values, and never an event twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The file's name in the state directory.
pub const STATE_FILE: &str = "events.json";

/// Where a device's ledger was read to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerPosition {
    /// The last record's sequence number.
    pub seq: u64,
    /// When that record's tenure ended (a record of a later load of the module has a smaller
    /// number but a later end).
    pub ended_ns: u64,
}

impl LedgerPosition {
    /// Whether a record numbered `seq`, of a tenure that ended at `ended_ns`, was read before
    /// this position was saved.
    #[must_use]
    pub fn covers(&self, seq: u64, ended_ns: u64) -> bool {
        seq <= self.seq && ended_ns <= self.ended_ns
    }
}

/// Who a tenure is across the monitor's restarts.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TenureIdentity {
    /// The device.
    pub device: u32,
    /// The slot (none for a slab file).
    pub slot: Option<usize>,
    /// The slab's generation (a slot's; none for a slab file, whose owner names it).
    pub generation: Option<u64>,
    /// The owner.
    pub pid: i32,
}

/// A live tenure's error counters as last evented.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedTenure {
    /// Who.
    pub identity: TenureIdentity,
    /// `(core, node name, value)` of every counter that is not zero.
    pub errors: Vec<(usize, String, u64)>,
}

/// The state file's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedState {
    /// The stream's id.
    pub stream: String,
    /// The number the next event will have.
    pub next_seq: u64,
    /// Each device's ledger position.
    pub ledgers: BTreeMap<u32, LedgerPosition>,
    /// Every live tenure.
    pub tenures: Vec<SavedTenure>,
}

/// A new stream's id: unique enough that a client's number is never taken for another
/// stream's (the clock in nanoseconds and the process id).
#[must_use]
pub fn new_stream_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!("{nanos:x}-{:x}", std::process::id())
}

/// The state directory.
#[derive(Clone, Debug)]
pub struct StateDir {
    path: PathBuf,
}

impl StateDir {
    /// The state kept in `path` (created when first written).
    #[must_use]
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
        }
    }

    fn file(&self) -> PathBuf {
        self.path.join(STATE_FILE)
    }

    /// The state saved last; `None` when there is none.
    ///
    /// # Errors
    ///
    /// The file exists but cannot be read or is not a state file.
    pub fn load(&self) -> Result<Option<SavedState>> {
        let path = self.file();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Io { path, source }),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| Error::Json { path, source })
    }

    /// Replaces the saved state with `state`, whole: a reader finds the old file or the new.
    ///
    /// # Errors
    ///
    /// The directory or the file cannot be written.
    pub fn save(&self, state: &SavedState) -> Result<()> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        std::fs::create_dir_all(&self.path).map_err(io(&self.path))?;
        let path = self.file();
        let partial = self.path.join(format!("{STATE_FILE}.partial"));
        let text = serde_json::to_vec(state).map_err(|source| Error::Json {
            path: path.clone(),
            source,
        })?;
        std::fs::write(&partial, text).map_err(io(&partial))?;
        std::fs::rename(&partial, &path).map_err(io(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_state_is_read_back_and_a_missing_one_is_none() {
        let dir = std::env::temp_dir().join(format!("nds-health-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let state_dir = StateDir::new(&dir.join("sub"));
        assert_eq!(state_dir.load().unwrap(), None);
        let state = SavedState {
            stream: new_stream_id(),
            next_seq: 42,
            ledgers: BTreeMap::from([(
                3,
                LedgerPosition {
                    seq: 7,
                    ended_ns: 99,
                },
            )]),
            tenures: vec![SavedTenure {
                identity: TenureIdentity {
                    device: 3,
                    slot: Some(2),
                    generation: Some(5),
                    pid: 100,
                },
                errors: vec![(1, "hw_hbm_ue_error".to_owned(), 4)],
            }],
        };
        state_dir.save(&state).unwrap();
        assert_eq!(state_dir.load().unwrap(), Some(state));
        std::fs::write(dir.join("sub").join(STATE_FILE), "{").unwrap();
        assert!(state_dir.load().is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_position_covers_the_records_read_before_it_of_the_same_load() {
        let position = LedgerPosition {
            seq: 10,
            ended_ns: 1_000,
        };
        assert!(position.covers(10, 1_000));
        assert!(!position.covers(11, 1_001));
        // The module was loaded again: its ledger numbers from 1, its tenures end later.
        assert!(!position.covers(2, 2_000));
    }
}
