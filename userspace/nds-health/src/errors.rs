//! The error counters health follows: every status node of the module but `success` (its
//! hardware and execution errors), per NeuronCore, read from what a tenure's slab or ledger
//! record holds ([`ErrorValues`]). A node is named as its sysfs directory is
//! (`hw_hbm_ue_error`), so that an event's counter and the kernel's total have one name.

use std::collections::BTreeMap;

use nds_abi::counters::NDS_TOTAL_NC_COUNTER_COUNT;
use nds_abi::ledger::TenureRecord;
use nds_abi::sysfs::{SysfsCounter, SysfsGroup, SYSFS_COUNTERS};

/// The error nodes, each with its index in [`SYSFS_COUNTERS`].
pub fn error_nodes() -> impl Iterator<Item = (usize, &'static SysfsCounter)> {
    SYSFS_COUNTERS
        .iter()
        .enumerate()
        .filter(|(_, node)| node.group == SysfsGroup::Status && node.name != "success")
}

/// The error node named `name`, by its index in [`SYSFS_COUNTERS`].
#[must_use]
pub fn node_named(name: &str) -> Option<usize> {
    error_nodes()
        .find(|(_, node)| node.name == name)
        .map(|(index, _)| index)
}

/// A counter: a core (of its device) and a node (its index in [`SYSFS_COUNTERS`]).
pub type CounterKey = (usize, usize);

/// The error counters of one tenure that are not zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorValues(BTreeMap<CounterKey, u64>);

impl ErrorValues {
    /// The error counters of `cores` cores of a slab's per-core counters `nc`.
    #[must_use]
    pub fn of_slab(nc: &[[u64; NDS_TOTAL_NC_COUNTER_COUNT]], cores: usize) -> Self {
        let mut values = BTreeMap::new();
        for (core, counters) in nc.iter().enumerate().take(cores) {
            for (index, node) in error_nodes() {
                if let Some(&value) = counters.get(node.source.index()) {
                    if value != 0 {
                        values.insert((core, index), value);
                    }
                }
            }
        }
        Self(values)
    }

    /// The final values of a ledger record.
    #[must_use]
    pub fn of_record(record: &TenureRecord) -> Self {
        let mut values = BTreeMap::new();
        let cores = usize::from(record.core_count);
        for (core, counters) in record.counters.iter().enumerate().take(cores) {
            for (index, _) in error_nodes() {
                if let Some(&value) = counters.get(index) {
                    if value != 0 {
                        values.insert((core, index), value);
                    }
                }
            }
        }
        Self(values)
    }

    /// Values from `(core, node, value)` triples.
    #[must_use]
    pub fn from_triples(triples: impl IntoIterator<Item = (usize, usize, u64)>) -> Self {
        Self(
            triples
                .into_iter()
                .filter(|&(_, _, value)| value != 0)
                .map(|(core, node, value)| ((core, node), value))
                .collect(),
        )
    }

    /// Every counter that is not zero, as `(core, node, value)`.
    pub fn triples(&self) -> impl Iterator<Item = (usize, usize, u64)> + '_ {
        self.0
            .iter()
            .map(|(&(core, node), &value)| (core, node, value))
    }

    /// Each counter's rise over `before`, as `(core, node, delta)`; a counter that went down
    /// rose by nothing (a tenure's counters only grow; final values may leave out some).
    pub fn rises_over<'a>(
        &'a self,
        before: &'a Self,
    ) -> impl Iterator<Item = (usize, usize, u64)> + 'a {
        self.0.iter().filter_map(|(key, &value)| {
            let was = before.0.get(key).copied().unwrap_or(0);
            (value > was).then(|| (key.0, key.1, value - was))
        })
    }

    /// Each counter at the larger of its two values.
    pub fn raise_to(&mut self, other: &Self) {
        for (&key, &value) in &other.0 {
            let mine = self.0.entry(key).or_insert(0);
            *mine = (*mine).max(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use nds_abi::counters::{ExtNcCounter, NcCounter};
    use zerocopy::FromZeros;

    use super::*;

    #[test]
    fn every_status_node_but_success_is_an_error() {
        let names: Vec<&str> = error_nodes().map(|(_, node)| node.name).collect();
        assert!(names.contains(&"hw_hbm_ue_error"));
        assert!(names.contains(&"timeout"));
        assert!(!names.contains(&"success"));
        assert!(!names.contains(&"inference_count"));
        assert_eq!(names.len(), 23);
    }

    #[test]
    fn a_slab_and_a_record_name_the_same_counters() {
        let hbm = node_named("hw_hbm_ue_error").unwrap();
        let mut nc = [[0u64; NDS_TOTAL_NC_COUNTER_COUNT]; 3];
        nc[1][ExtNcCounter::HwErrHbmUe.index()] = 4;
        nc[2][ExtNcCounter::HwErrHbmUe.index()] = 9;
        nc[1][NcCounter::InferCompleted.index()] = 100;
        let slab = ErrorValues::of_slab(&nc, 2);
        assert_eq!(slab.triples().collect::<Vec<_>>(), [(1, hbm, 4)]);
        let mut record = TenureRecord::new_zeroed();
        record.core_count = 2;
        record.counters[1][hbm] = 7;
        let last = ErrorValues::of_record(&record);
        assert_eq!(last.rises_over(&slab).collect::<Vec<_>>(), [(1, hbm, 3)]);
        assert_eq!(slab.rises_over(&last).count(), 0);
        let mut raised = slab.clone();
        raised.raise_to(&last);
        assert_eq!(raised, last);
    }
}
