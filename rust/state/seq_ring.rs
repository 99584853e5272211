// SPDX-License-Identifier: GPL-2.0

//! A bounded ring of entries numbered in sequence, read back from a sequence number: the metric
//! posts and the tenure ledger of a device. The entries live in one allocation made when the
//! ring is, filled in place, so that appending allocates nothing and never fails.

use crate::shim::zeroed::zeroed_kvbox;
use kernel::prelude::*;
use zerocopy::FromZeros;

/// `N` entries in sequence order; appending to a full ring overwrites the oldest.
///
/// # Invariants
///
/// The entry with sequence number `s` (for `oldest <= s < next`) is at index `s % N`, and
/// `next - oldest <= N`; `oldest >= 1`.
pub(crate) struct SeqRing<T, const N: usize> {
    entries: KVBox<[T; N]>,
    oldest: u64,
    next: u64,
}

impl<T, const N: usize> SeqRing<T, N> {
    /// Evaluated by the constructor: a ring holds something.
    const HOLDS: () = assert!(N > 0);

    /// An empty ring whose `N` entries are made by `empty`, in place; the first entry
    /// appended gets sequence number 1. Each entry passes through this function's frame: a
    /// large one belongs in [`SeqRing::new_zeroed`].
    pub(crate) fn new(empty: impl Fn() -> T) -> Result<Self> {
        let () = Self::HOLDS;
        let entries = KVBox::init(
            pin_init::init_array_from_fn(|_| Ok::<_, Error>(empty())),
            GFP_KERNEL,
        )?;
        // INVARIANT: empty.
        Ok(Self {
            entries,
            oldest: 1,
            next: 1,
        })
    }

    /// An empty ring whose entries are all zero bytes, allocated zeroed: for entries too large
    /// to pass through a stack frame.
    pub(crate) fn new_zeroed() -> Result<Self>
    where
        [T; N]: FromZeros,
    {
        let () = Self::HOLDS;
        // INVARIANT: empty.
        Ok(Self {
            entries: zeroed_kvbox(GFP_KERNEL)?,
            oldest: 1,
            next: 1,
        })
    }

    fn index_of(seq: u64) -> usize {
        // CAST: the modulo keeps the value below `N`, a `usize`; the compiler sees the bound,
        // so indexing with it has no failing branch.
        (seq % N as u64) as usize
    }

    /// Appends an entry: `fill` writes it over the oldest one's place (given the entry that
    /// was there and its new sequence number). Returns the sequence number.
    pub(crate) fn push_with(&mut self, fill: impl FnOnce(&mut T, u64)) -> u64 {
        let seq = self.next;
        // PANIC: never, `index_of` is below the ring's length.
        fill(&mut self.entries[Self::index_of(seq)], seq);
        self.next += 1;
        if self.next - self.oldest > N as u64 {
            // INVARIANT: the entry of `oldest` was just overwritten.
            self.oldest += 1;
        }
        seq
    }

    /// Whether an entry from sequence number `from` on is kept (what a reader at `from` would
    /// get at least one of).
    pub(crate) fn has_from(&self, from: u64) -> bool {
        from.max(self.oldest) < self.next
    }

    /// Whether `from` is beyond the next entry to be appended: a position this ring never
    /// gave out (one kept across a reload of the module, from the ring of the load before).
    pub(crate) fn is_ahead(&self, from: u64) -> bool {
        from > self.next
    }

    /// The first entry kept from sequence number `from` on (from the oldest kept, if `from`
    /// was overwritten already), with its sequence number: a reader sees a gap when it was too
    /// slow.
    pub(crate) fn first_from(&self, from: u64) -> Option<(u64, &T)> {
        let seq = from.max(self.oldest);
        // PANIC: as in `push_with`.
        (seq < self.next).then(|| (seq, &self.entries[Self::index_of(seq)]))
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_seq_ring)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back_in_order_and_a_slow_reader_sees_the_gap() -> Result {
        let mut ring = SeqRing::<u32, 4>::new(|| 0)?;
        assert_eq!(ring.first_from(0), None);
        for value in 1..=3 {
            let seq = ring.push_with(|entry, seq| *entry = value * 10 + seq as u32);
            assert_eq!(u64::from(value), seq);
        }
        assert_eq!(ring.first_from(0), Some((1, &11)));
        assert_eq!(ring.first_from(3), Some((3, &33)));
        assert_eq!(ring.first_from(4), None);
        assert!(ring.has_from(3) && !ring.has_from(4));
        // 4 is the next to come, 5 no position of this ring.
        assert!(!ring.is_ahead(4) && ring.is_ahead(5));
        for value in 4..=6 {
            ring.push_with(|entry, _| *entry = value);
        }
        // Six appended, four kept: a reader at 1 gets 3, two lost.
        assert_eq!(ring.first_from(1), Some((3, &33)));
        assert_eq!(ring.first_from(6), Some((6, &6)));
        Ok(())
    }
}
