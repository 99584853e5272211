// SPDX-License-Identifier: GPL-2.0

//! The versions seen in one posting period, with how many slabs reported each: the original
//! driver's 8-entry history, from which the two most used are posted.

use kernel::prelude::*;

/// Entries kept, as in the original.
const CAPACITY: usize = 8;

/// Version words and their usage counts.
#[derive(Default)]
pub(crate) struct VersionHistory {
    entries: [(u64, u64); CAPACITY],
    len: usize,
}

impl VersionHistory {
    /// Counts one slab reporting `word`; 0 means "not set" and is ignored. When the history
    /// is full, the least used entry (the first of equals) makes room.
    pub(crate) fn observe(&mut self, word: u64) {
        if word == 0 {
            return;
        }
        let used = self.entries.get_mut(..self.len).unwrap_or(&mut []);
        if let Some(entry) = used.iter_mut().find(|(w, _)| *w == word) {
            entry.1 = entry.1.saturating_add(1);
            return;
        }
        if let Some(free) = self.entries.get_mut(self.len) {
            *free = (word, 1);
            self.len += 1;
            return;
        }
        let mut least = 0;
        for (index, (_, count)) in self.entries.iter().enumerate() {
            if *count < self.entries.get(least).map_or(u64::MAX, |e| e.1) {
                least = index;
            }
        }
        if let Some(entry) = self.entries.get_mut(least) {
            *entry = (word, 1);
        }
    }

    /// The `rank`-th most used version (0: the most used); ties go to the earlier entry.
    pub(crate) fn ranked(&self, rank: usize) -> Option<u64> {
        let used = self.entries.get(..self.len)?;
        let mut taken = [false; CAPACITY];
        let mut pick = None;
        for _ in 0..=rank {
            pick = None;
            for (index, (word, count)) in used.iter().enumerate() {
                let better = match pick {
                    None => true,
                    Some((_, _, best)) => *count > best,
                };
                if !taken.get(index).copied().unwrap_or(true) && better {
                    pick = Some((index, *word, *count));
                }
            }
            let (index, _, _) = pick?;
            if let Some(flag) = taken.get_mut(index) {
                *flag = true;
            }
        }
        pick.map(|(_, word, _)| word)
    }

    /// Forgets everything (a new period starts).
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }
}

#[kunit_tests(neuron_ds_version_history)]
mod tests {
    use super::*;

    #[test]
    fn the_two_most_used_versions_are_ranked_first() {
        let mut history = VersionHistory::default();
        for word in [7, 9, 9, 5, 9, 5] {
            history.observe(word);
        }
        assert_eq!(history.ranked(0), Some(9));
        assert_eq!(history.ranked(1), Some(5));
        assert_eq!(history.ranked(2), Some(7));
        assert_eq!(history.ranked(3), None);
    }

    #[test]
    fn zero_is_not_a_version_and_ties_keep_the_earlier_one() {
        let mut history = VersionHistory::default();
        history.observe(0);
        assert_eq!(history.ranked(0), None);
        history.observe(3);
        history.observe(4);
        assert_eq!(history.ranked(0), Some(3));
        assert_eq!(history.ranked(1), Some(4));
    }

    #[test]
    fn a_full_history_evicts_the_least_used_entry() {
        let mut history = VersionHistory::default();
        // Words 1..=8, each seen twice except 6, seen once.
        for word in 1..=8u64 {
            history.observe(word);
            if word != 6 {
                history.observe(word);
            }
        }
        history.observe(100);
        history.observe(100);
        history.observe(100);
        assert_eq!(history.ranked(0), Some(100));
        // 6 was the least used and made room for 100.
        for rank in 0..8 {
            assert_ne!(history.ranked(rank), Some(6));
        }
        history.clear();
        assert_eq!(history.ranked(0), None);
    }
}
