//! Where the monitor reads: slabs (the kernel's slot tables, or a directory of slab files),
//! the module's sysfs tree and parameters, and the host (`/proc`, DMI, the Neuron driver's
//! sysfs, instance metadata).

use nds_host::HostSource;
use nds_slabs::{Discovery, SlabSource};
use nds_sysfs::{SysfsRoot, TimeInUseUnit};

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
        self.slabs.module_missing(&self.host.module_dir)
    }

    /// Why no device was found, naming what was looked for and whether the module is loaded;
    /// `None` when there are devices, or when slabs come from files.
    #[must_use]
    pub fn no_device_reason(&self) -> Option<String> {
        self.slabs
            .no_device_reason(&self.sysfs, &self.host.module_dir)
    }

    /// Every owned slab, by key, with the problems met while looking (one line each) and the
    /// slots owned by processes this monitor cannot name.
    #[must_use]
    pub fn discover(&self) -> Discovery {
        self.slabs.discover(&self.sysfs, &self.host.module_dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
