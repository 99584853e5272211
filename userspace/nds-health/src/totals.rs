//! The kernel's per-core totals as health accounts for them ([`TotalsAccount`]): the module
//! adds every slab's counters to its sysfs totals, live slabs included, so a device is judged
//! from how much its totals rose between reports, whatever slabs this monitor could read; and
//! the part of a rise that no tenure's event accounts for (it happened in a slab the monitor
//! could not read) is evented once, without an owner.
//!
//! For each device, NeuronCore and error node, at each report whose totals were read:
//!
//! * the **rise** is the new total less the last one read. The first read is the baseline (a
//!   rise of 0: nothing before the monitor's first report counts), and a total that went down
//!   was reset (a write to it): the new value is the new baseline, and nothing is counted.
//! * the **unattributed** part is the rise less what the tenures' events since the last read
//!   account for (less what they had run ahead of the totals before). Tenure events that go
//!   beyond the rise (a slab was read a moment before the totals, so its next reading events
//!   what this rise already held) are carried over to the next reads, so that over time the
//!   events of a counter add up to the rises of its total and no more.
//! * a rise read from a ledger record (a tenure's final values: counts no reading of this
//!   monitor saw, often of a slab it could not read) first **claims** what was evented
//!   without an owner on that counter and is not claimed yet; only the rest is evented with
//!   the owner. So a tenure that was never readable is evented as it counts, without an owner,
//!   and its record adds only what the totals had not shown yet: each count is evented once.

use std::collections::BTreeMap;

use nds_sysfs::CoreTotals;

use crate::errors::error_nodes;

/// An error counter of a device: the device, a core of it, and the node (its index in
/// [`nds_abi::sysfs::SYSFS_COUNTERS`]).
pub type TotalKey = (u32, usize, usize);

/// How one counter's total rose at a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rise {
    /// The core, of its device.
    pub core: usize,
    /// The node, by its index in [`nds_abi::sysfs::SYSFS_COUNTERS`].
    pub node: usize,
    /// How much the total rose since the last read.
    pub rise: u64,
    /// The part of it no tenure's event accounts for.
    pub unattributed: u64,
}

/// What is known of one counter's total.
#[derive(Clone, Copy, Debug, Default)]
struct Counter {
    /// The total at the last read (none before the first).
    total: Option<u64>,
    /// Tenure events since the last read.
    attributed: u64,
    /// Tenure events beyond the totals' rises so far.
    ahead: u64,
    /// Evented without an owner and not claimed by a record yet.
    unclaimed: u64,
}

/// The kernel's totals, against the tenure events of the same counters.
#[derive(Debug, Default)]
pub struct TotalsAccount {
    counters: BTreeMap<TotalKey, Counter>,
}

impl TotalsAccount {
    /// Nothing read yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A tenure's event counted `delta` on `key`.
    pub fn attribute(&mut self, key: TotalKey, delta: u64) {
        let counter = self.counters.entry(key).or_default();
        counter.attributed = counter.attributed.saturating_add(delta);
    }

    /// A ledger record's rise of `delta` on `key`: what it claims of the unclaimed events
    /// without an owner is taken off; the rest, to event with the owner, is returned.
    pub fn claim(&mut self, key: TotalKey, delta: u64) -> u64 {
        let Some(counter) = self.counters.get_mut(&key) else {
            return delta;
        };
        let claimed = delta.min(counter.unclaimed);
        counter.unclaimed -= claimed;
        delta - claimed
    }

    /// The totals of `device`'s cores were read: each error counter whose total rose.
    pub fn read(&mut self, device: u32, cores: &[CoreTotals]) -> Vec<Rise> {
        let mut rises = Vec::new();
        for core in cores {
            for (node, _) in error_nodes() {
                let Some(&total) = core.values.get(node) else {
                    continue;
                };
                let counter = self.counters.entry((device, core.core, node)).or_default();
                let attributed = std::mem::take(&mut counter.attributed);
                let rise = match counter.total.replace(total) {
                    Some(last) if total >= last => total - last,
                    // The first read, or a reset: a new baseline, against which the tenure
                    // events read so far mean nothing.
                    _ => {
                        counter.ahead = 0;
                        continue;
                    }
                };
                let accounted = counter.ahead.saturating_add(attributed);
                let unattributed = rise.saturating_sub(accounted);
                counter.ahead = accounted.saturating_sub(rise);
                counter.unclaimed = counter.unclaimed.saturating_add(unattributed);
                if rise > 0 {
                    rises.push(Rise {
                        core: core.core,
                        node,
                        rise,
                        unattributed,
                    });
                }
            }
        }
        rises
    }
}

#[cfg(test)]
mod tests {
    use nds_abi::sysfs::SYSFS_COUNTERS;

    use super::*;
    use crate::errors::node_named;

    /// The totals of one core whose `hw_nc_ue_error` is `value`.
    fn core(core: usize, value: u64) -> CoreTotals {
        let mut values = [0; SYSFS_COUNTERS.len()];
        values[node_named("hw_nc_ue_error").unwrap()] = value;
        CoreTotals {
            device: 3,
            core,
            values,
        }
    }

    /// `(core, rise, unattributed)` of each rise at a read of core 1 at `value`.
    fn read(account: &mut TotalsAccount, value: u64) -> Vec<(usize, u64, u64)> {
        account
            .read(3, &[core(1, value)])
            .into_iter()
            .map(|rise| (rise.core, rise.rise, rise.unattributed))
            .collect()
    }

    fn key() -> TotalKey {
        (3, 1, node_named("hw_nc_ue_error").unwrap())
    }

    #[test]
    fn the_first_read_is_the_baseline_and_a_reset_counts_nothing() {
        let mut account = TotalsAccount::new();
        account.attribute(key(), 4);
        assert!(read(&mut account, 10).is_empty(), "the baseline");
        assert_eq!(read(&mut account, 12), [(1, 2, 2)]);
        // A write reset the total: 0, then 1 counted since.
        account.attribute(key(), 1);
        assert!(read(&mut account, 1).is_empty(), "nothing negative");
        assert_eq!(read(&mut account, 3), [(1, 2, 2)], "from the new baseline");
    }

    #[test]
    fn what_the_tenures_events_account_for_is_not_evented_again() {
        let mut account = TotalsAccount::new();
        read(&mut account, 0);
        account.attribute(key(), 2);
        assert_eq!(
            read(&mut account, 5),
            [(1, 5, 3)],
            "2 of the 5 were a tenure's"
        );
        // A slab read a moment before the totals: what it counted in between is in the rise
        // and not in its events yet.
        assert_eq!(read(&mut account, 6), [(1, 1, 1)]);
        // Its next reading events it: beyond the rise (none), carried over ...
        account.attribute(key(), 1);
        assert!(read(&mut account, 6).is_empty());
        // ... and taken off the next rise.
        assert_eq!(read(&mut account, 8), [(1, 2, 1)]);
        let attributed = 2 + 1;
        let unattributed = 3 + 1 + 1;
        assert_eq!(
            attributed + unattributed,
            8,
            "the events add up to the rises"
        );
    }

    #[test]
    fn a_record_claims_what_was_evented_without_its_owner() {
        let mut account = TotalsAccount::new();
        assert_eq!(account.claim(key(), 5), 5, "nothing read yet");
        read(&mut account, 0);
        // A slab the monitor cannot read counts 4, then 3 more.
        assert_eq!(read(&mut account, 4), [(1, 4, 4)]);
        assert_eq!(read(&mut account, 7), [(1, 3, 3)]);
        // It ends, having counted 1 more: its record says 8, of which 7 were evented.
        assert_eq!(account.claim(key(), 8), 1);
        account.attribute(key(), 1);
        assert_eq!(read(&mut account, 8), [(1, 1, 0)], "each count once");
        assert_eq!(account.claim(key(), 2), 2, "nothing left to claim");
    }
}
