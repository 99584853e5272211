//! The tenure ledgers the monitor follows ([`Ledger`]): the kernel's, one per device node
//! ([`DeviceLedgers`]), or any other source of ledger events (the host tests inject theirs,
//! since slab files have no ledger).
//!
//! The monitor holds a device's node open only while it has a use for it (a slab owned there,
//! or a tenure awaiting its record); the others are opened, read and closed once every
//! [`IDLE_SWEEP`] (a tenure there may have begun and ended between two looks at the slot
//! tables), so that no device file keeps the module from unloading for longer than a read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nds::{Error as NdsError, LedgerEvent, LedgerFollower};
use nds_sysfs::SysfsRoot;

/// A source of ledger events.
pub trait Ledger: std::fmt::Debug + Send {
    /// Whether `device`'s ledger is followed: its tenures' ends then wait for their records.
    fn follows(&self, device: u32) -> bool;

    /// Every event since the last call, by device, in each device's order; never blocks.
    /// `hold` names the devices whose ledger is wanted again soon (the others need not stay
    /// open).
    fn read(&mut self, hold: &BTreeSet<u32>) -> Vec<(u32, LedgerEvent)>;
}

/// How often the ledgers of the devices not held open are read.
pub const IDLE_SWEEP: Duration = Duration::from_secs(1);

/// Where a device's ledger stands between reads.
#[derive(Debug)]
enum Followed {
    /// Open.
    Open(LedgerFollower),
    /// Closed; the next sequence number wanted.
    Closed(u64),
    /// Refused (no ledger in this module, no permission); said once, when it was.
    Refused,
}

/// The kernel's ledgers: `FOLLOW_LEDGER` on each device node `<dev_dir>/neuron<N>` of the
/// devices `sysfs` lists, from the oldest record kept on.
#[derive(Debug)]
pub struct DeviceLedgers {
    dev_dir: PathBuf,
    sysfs: SysfsRoot,
    devices: BTreeMap<u32, Followed>,
    /// When the devices not held open were last read.
    swept: Option<Instant>,
}

impl DeviceLedgers {
    /// The ledgers of the devices of `sysfs`, through the nodes in `dev_dir`.
    #[must_use]
    pub fn new(dev_dir: &Path, sysfs: SysfsRoot) -> Self {
        Self {
            dev_dir: dev_dir.to_path_buf(),
            sysfs,
            devices: BTreeMap::new(),
            swept: None,
        }
    }

    /// Opens `device`'s ledger from `from`, or says why not.
    fn open(&self, device: u32, from: u64) -> Followed {
        let node = self.dev_dir.join(format!("neuron{device}"));
        match LedgerFollower::open(&node, from) {
            Ok(follower) => Followed::Open(follower),
            Err(NdsError::Ioctl { errno, .. }) if errno == libc::ENOTTY => {
                log::info!(
                    "{}: the module keeps no tenure ledger: ended tenures keep their last \
                     sampled values",
                    node.display()
                );
                Followed::Refused
            }
            Err(error) => {
                log::warn!("cannot follow the tenure ledger of device {device}: {error}");
                Followed::Refused
            }
        }
    }
}

impl Ledger for DeviceLedgers {
    fn follows(&self, device: u32) -> bool {
        matches!(self.devices.get(&device), Some(Followed::Open(_)))
    }

    fn read(&mut self, hold: &BTreeSet<u32>) -> Vec<(u32, LedgerEvent)> {
        let present: BTreeSet<u32> = self
            .sysfs
            .devices()
            .unwrap_or_default()
            .into_iter()
            .collect();
        // A device that went (the module unloaded) starts its numbering anew when it returns.
        self.devices.retain(|device, _| present.contains(device));
        let sweep = self.swept.is_none_or(|at| at.elapsed() >= IDLE_SWEEP);
        if sweep {
            self.swept = Some(Instant::now());
        }
        let mut events = Vec::new();
        for device in present {
            let due = sweep || hold.contains(&device);
            let followed = match self.devices.remove(&device) {
                None if due => self.open(device, 0),
                None => continue,
                Some(Followed::Closed(next)) if due => self.open(device, next),
                Some(other) => other,
            };
            let followed = match followed {
                Followed::Open(mut follower) => match follower.read() {
                    Ok(read) => {
                        events.extend(read.into_iter().map(|event| (device, event)));
                        if hold.contains(&device) {
                            Followed::Open(follower)
                        } else {
                            Followed::Closed(follower.next())
                        }
                    }
                    Err(error) => {
                        log::warn!("reading the tenure ledger of device {device}: {error}");
                        Followed::Closed(follower.next())
                    }
                },
                other => other,
            };
            self.devices.insert(device, followed);
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_that_is_not_a_device_is_refused_and_nothing_is_held() {
        let dir = std::env::temp_dir().join(format!("nds-ledger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sys/neuron0/datastore")).unwrap();
        std::fs::create_dir_all(dir.join("dev")).unwrap();
        // A regular file where the device node should be: FOLLOW_LEDGER is no ioctl of it.
        std::fs::write(dir.join("dev/neuron0"), "").unwrap();
        let mut ledgers = DeviceLedgers::new(&dir.join("dev"), SysfsRoot::new(dir.join("sys")));
        let hold = BTreeSet::from([0]);
        assert!(ledgers.read(&hold).is_empty());
        assert!(!ledgers.follows(0));
        assert!(matches!(ledgers.devices.get(&0), Some(Followed::Refused)));
        // The device goes: forgotten.
        std::fs::remove_dir_all(dir.join("sys/neuron0")).unwrap();
        assert!(ledgers.read(&hold).is_empty());
        assert!(ledgers.devices.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
