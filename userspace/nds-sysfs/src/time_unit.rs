//! The unit of `NDS_NC_COUNTER_TIME_IN_USE`, as the loaded module reads it.
//!
//! The original driver's utilization formula takes the counter as picoseconds; its sysfs guide
//! calls it microseconds. The module names its choice in the read-only parameter
//! `time_in_use_unit_ps` (picoseconds per unit, default 1), and producers and readers of the
//! counter follow it so that the module's utilization posts, its sysfs totals and the monitor
//! agree.

use std::fs;
use std::io::ErrorKind;
use std::num::NonZeroU64;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};

/// Where the loaded module appears in sysfs (its parameters are under `parameters/`).
pub const DEFAULT_MODULE_DIR: &str = "/sys/module/neuron_ds";

/// The parameter file, relative to the module's directory.
const PARAMETER: &str = "parameters/time_in_use_unit_ps";

/// Picoseconds in a second.
const PS_PER_SECOND: f64 = 1e12;

/// Picoseconds per unit of `NDS_NC_COUNTER_TIME_IN_USE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimeInUseUnit {
    ps_per_unit: NonZeroU64,
}

impl Default for TimeInUseUnit {
    /// The module's default: picoseconds, as the original driver's formula reads the counter.
    fn default() -> Self {
        Self::PICOSECOND
    }
}

impl TimeInUseUnit {
    /// One picosecond per unit (the module's default).
    pub const PICOSECOND: Self = Self::new(NonZeroU64::MIN);

    /// One microsecond per unit (the original's sysfs guide).
    pub const MICROSECOND: Self = Self::new(NonZeroU64::new(1_000_000).unwrap());

    /// A unit of `ps_per_unit` picoseconds.
    #[must_use]
    pub const fn new(ps_per_unit: NonZeroU64) -> Self {
        Self { ps_per_unit }
    }

    /// Picoseconds per unit.
    #[must_use]
    pub const fn ps_per_unit(self) -> NonZeroU64 {
        self.ps_per_unit
    }

    /// `count` units in seconds.
    #[must_use]
    pub fn seconds(self, count: u64) -> f64 {
        count as f64 * self.ps_per_unit.get() as f64 / PS_PER_SECOND
    }

    /// `time` as a count of units, to the nearest unit (saturating at `u64::MAX`).
    #[must_use]
    pub fn count(self, time: Duration) -> u64 {
        let ps = time.as_nanos().saturating_mul(1000);
        let unit = u128::from(self.ps_per_unit.get());
        u64::try_from(ps.saturating_add(unit / 2) / unit).unwrap_or(u64::MAX)
    }

    /// The unit the module loaded from `module_dir` (normally [`DEFAULT_MODULE_DIR`]) reads:
    /// its `parameters/time_in_use_unit_ps`, or the module's default, picoseconds, when that
    /// file does not exist (no module loaded: slab files on a host).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the file exists but cannot be read, [`Error::Parse`] if it does not
    /// hold one positive decimal number.
    pub fn of_module(module_dir: &Path) -> Result<Self> {
        let path = module_dir.join(PARAMETER);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => return Err(Error::Io { path, source }),
        };
        match text.trim().parse() {
            Ok(ps_per_unit) => Ok(Self::new(ps_per_unit)),
            Err(_) => Err(Error::Parse {
                path,
                text: text.trim().to_owned(),
                reason: "expected picoseconds per unit, a decimal number of at least 1",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picoseconds_convert_both_ways() {
        let unit = TimeInUseUnit::PICOSECOND;
        assert_eq!(unit.ps_per_unit().get(), 1);
        assert_eq!(unit.count(Duration::from_micros(750)), 750_000_000);
        assert_eq!(unit.count(Duration::from_nanos(3)), 3_000);
        assert_eq!(unit.seconds(750_000_000), 0.000_75);
        assert_eq!(unit.seconds(2_000_000_000_000), 2.0);
    }

    #[test]
    fn microseconds_convert_both_ways() {
        let unit = TimeInUseUnit::MICROSECOND;
        assert_eq!(unit.ps_per_unit().get(), 1_000_000);
        assert_eq!(unit.count(Duration::from_micros(750)), 750);
        assert_eq!(unit.count(Duration::from_secs(2)), 2_000_000);
        assert_eq!(unit.seconds(750), 0.000_75);
        assert_eq!(unit.seconds(2_000_000), 2.0);
    }

    #[test]
    fn a_count_rounds_to_the_nearest_unit_and_saturates() {
        let unit = TimeInUseUnit::MICROSECOND;
        assert_eq!(unit.count(Duration::from_nanos(1_499)), 1);
        assert_eq!(unit.count(Duration::from_nanos(1_500)), 2);
        assert_eq!(unit.count(Duration::from_nanos(499)), 0);
        assert_eq!(TimeInUseUnit::PICOSECOND.count(Duration::MAX), u64::MAX);
    }

    #[test]
    fn the_default_is_the_modules_picoseconds() {
        assert_eq!(TimeInUseUnit::default(), TimeInUseUnit::PICOSECOND);
    }
}
