//! The stress campaign's bookkeeping, shared by the producer, the reader and the controller.
//!
//! Counting producers report every cycle's increments on stdout *before* they let go of the
//! slab and write nothing into it afterwards, so a report is exact whether the release that
//! follows is explicit, on close, at exit or at a kill. The increments of a cycle that was not
//! reported yet are read out of the slab by the controller while the producer is stopped,
//! just before it is killed: either way, what is counted is exactly what landed in the slab.

use crate::nc_offset;
use nds_abi::sysfs::SYSFS_COUNTERS;
use std::collections::BTreeMap;

/// ND counter 12 (`DEVICE_CLUSTER_ID`, not aggregated): producers store their pid there so
/// that readers can check a record against the slab it was read from.
pub const OWNER_ND_COUNTER: usize = 12;

/// Raw counts per (core, sysfs node): the node indexes `SYSFS_COUNTERS`; the values are in
/// slab units (the sysfs figure is the raw count times the node's scale).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally(BTreeMap<(usize, usize), u64>);

impl Tally {
    /// Adds `raw` to (core, node).
    pub fn add(&mut self, core: usize, node: usize, raw: u64) {
        let entry = self.0.entry((core, node)).or_default();
        *entry = entry.wrapping_add(raw);
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &Tally) {
        for (&(core, node), &raw) in &other.0 {
            self.add(core, node, raw);
        }
    }

    /// The raw count of (core, node).
    pub fn raw(&self, core: usize, node: usize) -> u64 {
        self.0.get(&(core, node)).copied().unwrap_or(0)
    }

    /// What (core, node) adds to its sysfs `total`.
    pub fn sysfs_value(&self, core: usize, node: usize) -> u64 {
        self.raw(core, node)
            .wrapping_mul(SYSFS_COUNTERS[node].scale)
    }

    /// Sum of every raw count.
    pub fn raw_sum(&self) -> u64 {
        self.0.values().fold(0, |sum, v| sum.wrapping_add(*v))
    }

    /// `core.node=raw` pairs separated by spaces.
    pub fn encode(&self) -> String {
        let pairs: Vec<String> = self
            .0
            .iter()
            .filter(|(_, raw)| **raw != 0)
            .map(|((core, node), raw)| format!("{core}.{node}={raw}"))
            .collect();
        pairs.join(" ")
    }

    /// Parses what [`Tally::encode`] wrote.
    pub fn decode<'a>(pairs: impl Iterator<Item = &'a str>) -> Option<Self> {
        let mut tally = Self::default();
        for pair in pairs {
            let (place, raw) = pair.split_once('=')?;
            let (core, node) = place.split_once('.')?;
            let node: usize = node.parse().ok()?;
            if node >= SYSFS_COUNTERS.len() {
                return None;
            }
            tally.add(core.parse().ok()?, node, raw.parse().ok()?);
        }
        Some(tally)
    }
}

/// Slab offset of sysfs node `node`'s counter for `core`.
pub fn node_offset(core: usize, node: usize) -> usize {
    nc_offset(core, SYSFS_COUNTERS[node].source.index())
}

/// NeuronCore counter indices that no sysfs node aggregates: chaff producers write only
/// these, so killing them at any instant changes no total.
pub fn unaggregated_nc_counters() -> Vec<usize> {
    (0..95)
        .filter(|index| !SYSFS_COUNTERS.iter().any(|c| c.source.index() == *index))
        .collect()
}

/// Which slab tenure a report or a snapshot belongs to: the slot's mmap offset and its
/// generation (generations are per slot, so both are needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tenure {
    /// The mmap offset ACQUIRE returned.
    pub offset: u64,
    /// The slab generation while owned (odd).
    pub generation: u64,
}

/// The line a producer prints for a finished cycle: `R <offset> <generation> <tally>`.
pub fn report_line(tenure: Tenure, tally: &Tally) -> String {
    format!(
        "R {} {} {}\n",
        tenure.offset,
        tenure.generation,
        tally.encode()
    )
}

/// A parsed line of a producer's output.
#[derive(Debug, PartialEq, Eq)]
pub enum ProducerLine {
    /// A finished cycle: the tenure it had and what it wrote.
    Report(Tenure, Tally),
    /// The producer's end: the ENOMEM answers its ACQUIREs got (and retried).
    Done(u64),
}

impl ProducerLine {
    /// Parses one line; `None` for anything else.
    pub fn parse(line: &str) -> Option<Self> {
        let mut words = line.split_whitespace();
        match words.next()? {
            "R" => {
                let tenure = Tenure {
                    offset: words.next()?.parse().ok()?,
                    generation: words.next()?.parse().ok()?,
                };
                Some(Self::Report(tenure, Tally::decode(words)?))
            }
            "D" => Some(Self::Done(words.next()?.parse().ok()?)),
            _ => None,
        }
    }
}

/// A reader's figures, printed as `S name=value ...` at its end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReaderStats {
    /// Successful attaches (ACQUIRE + mmap + header).
    pub attached: u64,
    /// Snapshots whose generation did not move and whose record was valid.
    pub valid: u64,
    /// Snapshots without a published record yet.
    pub empty: u64,
    /// Snapshots whose record read torn twice.
    pub torn: u64,
    /// Snapshots during which the slab was released or changed hands (generation moved).
    pub moved: u64,
    /// Attaches refused because the owner was gone (ENOENT).
    pub gone: u64,
    /// Attaches refused because the slab changed hands between ACQUIRE and mmap (EINVAL).
    pub stale: u64,
    /// Attaches that found no header (slab just acquired, or just released).
    pub no_header: u64,
    /// Records inconsistent with the slab they came from: must stay 0.
    pub mismatches: u64,
}

impl ReaderStats {
    const NAMES: [&'static str; 9] = [
        "attached",
        "valid",
        "empty",
        "torn",
        "moved",
        "gone",
        "stale",
        "no_header",
        "mismatches",
    ];

    fn fields(&self) -> [u64; 9] {
        [
            self.attached,
            self.valid,
            self.empty,
            self.torn,
            self.moved,
            self.gone,
            self.stale,
            self.no_header,
            self.mismatches,
        ]
    }

    /// The `S ...` line.
    pub fn line(&self) -> String {
        let pairs: Vec<String> = Self::NAMES
            .iter()
            .zip(self.fields())
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        format!("S {}\n", pairs.join(" "))
    }

    /// Parses an `S ...` line.
    pub fn parse(line: &str) -> Option<Self> {
        let mut words = line.split_whitespace();
        if words.next()? != "S" {
            return None;
        }
        let mut values = [0u64; 9];
        for pair in words {
            let (name, value) = pair.split_once('=')?;
            let at = Self::NAMES.iter().position(|n| *n == name)?;
            values[at] = value.parse().ok()?;
        }
        let [attached, valid, empty, torn, moved, gone, stale, no_header, mismatches] = values;
        Some(Self {
            attached,
            valid,
            empty,
            torn,
            moved,
            gone,
            stale,
            no_header,
            mismatches,
        })
    }

    /// Adds `other`'s figures.
    pub fn merge(&mut self, other: &Self) {
        let sum = |a: u64, b: u64| a + b;
        *self = Self {
            attached: sum(self.attached, other.attached),
            valid: sum(self.valid, other.valid),
            empty: sum(self.empty, other.empty),
            torn: sum(self.torn, other.torn),
            moved: sum(self.moved, other.moved),
            gone: sum(self.gone, other.gone),
            stale: sum(self.stale, other.stale),
            no_header: sum(self.no_header, other.no_header),
            mismatches: sum(self.mismatches, other.mismatches),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_round_trip() {
        let mut tally = Tally::default();
        tally.add(1, 26, 7);
        tally.add(0, 0, 1000);
        tally.add(1, 26, 3);
        let tenure = Tenure {
            offset: 262_144,
            generation: 41,
        };
        let line = report_line(tenure, &tally);
        assert_eq!(line, "R 262144 41 0.0=1000 1.26=10\n");
        assert_eq!(
            ProducerLine::parse(&line),
            Some(ProducerLine::Report(tenure, tally.clone()))
        );
        // flop_count (node 26) counts two per MAC.
        assert_eq!(tally.sysfs_value(1, 26), 20);
        assert_eq!(ProducerLine::parse("D 3"), Some(ProducerLine::Done(3)));
        let empty = Tenure {
            offset: 0,
            generation: 9,
        };
        assert_eq!(
            ProducerLine::parse("R 0 9 "),
            Some(ProducerLine::Report(empty, Tally::default()))
        );
        assert_eq!(ProducerLine::parse("R 0 1 0.99=1"), None);
    }

    #[test]
    fn reader_stats_round_trip() {
        let stats = ReaderStats {
            attached: 5,
            valid: 3,
            mismatches: 0,
            gone: 2,
            ..ReaderStats::default()
        };
        assert_eq!(ReaderStats::parse(&stats.line()), Some(stats));
    }

    #[test]
    fn chaff_counters_are_never_aggregated() {
        let chaff = unaggregated_nc_counters();
        assert!(chaff.contains(&8) && chaff.contains(&21));
        for counter in SYSFS_COUNTERS.iter() {
            assert!(!chaff.contains(&counter.source.index()));
        }
    }
}
