// SPDX-License-Identifier: GPL-2.0

//! The versions seen in one posting period, with how many slabs reported each: the original
//! driver's 8-entry history, from which the two most used are posted.

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
        // `min_by_key` returns the first of equal minima.
        if let Some(least) = self.entries.iter_mut().min_by_key(|(_, count)| *count) {
            *least = (word, 1);
        }
    }

    /// The most used version and the next one, if seen; ties go to the earlier entry.
    pub(crate) fn top_two(&self) -> [Option<u64>; 2] {
        // (word, count) of each.
        let mut first: Option<(u64, u64)> = None;
        let mut second = None;
        for &(word, count) in self.entries.iter().take(self.len) {
            if first.is_none_or(|(_, most)| count > most) {
                (first, second) = (Some((word, count)), first);
            } else if second.is_none_or(|(_, next)| count > next) {
                second = Some((word, count));
            }
        }
        [first, second].map(|entry| entry.map(|(word, _)| word))
    }

    /// Forgets everything (a new period starts).
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }
}

#[cfg(neuron_ds_kunit)]
#[kernel::prelude::kunit_tests(neuron_ds_version_history)]
mod tests {
    use super::*;

    #[test]
    fn the_two_most_used_versions_are_ranked_first() {
        let mut history = VersionHistory::default();
        for word in [7, 9, 9, 5, 9, 5] {
            history.observe(word);
        }
        assert_eq!(history.top_two(), [Some(9), Some(5)]);
        // A later entry used as often as the second does not displace it.
        for word in [3, 3] {
            history.observe(word);
        }
        assert_eq!(history.top_two(), [Some(9), Some(5)]);
    }

    #[test]
    fn zero_is_not_a_version_and_ties_keep_the_earlier_one() {
        let mut history = VersionHistory::default();
        history.observe(0);
        assert_eq!(history.top_two(), [None, None]);
        history.observe(3);
        assert_eq!(history.top_two(), [Some(3), None]);
        history.observe(4);
        assert_eq!(history.top_two(), [Some(3), Some(4)]);
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
        assert_eq!(history.top_two(), [Some(100), Some(1)]);
        // 6 was the least used and made room for 100.
        assert!(history.entries.iter().all(|(word, _)| *word != 6));
        history.clear();
        assert_eq!(history.top_two(), [None, None]);
    }
}
