//! The aggregated counters of one NeuronCore.

use nds_abi::sysfs::{SysfsCounter, SYSFS_COUNTERS};

/// One value per node of [`SYSFS_COUNTERS`], in table order, for one core of one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreTotals {
    /// Device index (the `N` of `neuron<N>`).
    pub device: u32,
    /// Core index (the `C` of `neuron_core<C>`).
    pub core: usize,
    /// Values aligned with [`SYSFS_COUNTERS`].
    pub values: [u64; SYSFS_COUNTERS.len()],
}

impl CoreTotals {
    /// Each node with its value.
    pub fn iter(&self) -> impl Iterator<Item = (&'static SysfsCounter, u64)> + '_ {
        SYSFS_COUNTERS.iter().zip(self.values.iter().copied())
    }

    /// The value of the node named `name` (in either group), if there is such a node.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<u64> {
        self.iter()
            .find(|(counter, _)| counter.name == name)
            .map(|(_, value)| value)
    }
}
