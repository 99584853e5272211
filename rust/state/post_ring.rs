// SPDX-License-Identifier: GPL-2.0

//! The bounded ring of metric posts of one device, read back by sequence number.

use crate::{
    abi::metrics::MetricPost,
    state::seq_ring::SeqRing, //
};
use kernel::prelude::*;

/// Posts kept per device: ten periods of every metric with room to spare.
pub(crate) const RING_CAPACITY: usize = 512;

/// Posts in sequence order, each carrying its sequence number; the oldest are dropped when it
/// is full.
pub(crate) struct PostRing {
    posts: SeqRing<MetricPost, RING_CAPACITY>,
}

impl PostRing {
    /// An empty ring; the first post gets sequence number 1.
    pub(crate) fn new() -> Result<Self> {
        let empty = MetricPost {
            seq: 0,
            period: 0,
            posted_ns: 0,
            device: 0,
            cw_id: 0,
            len: 0,
            reserved: [0; 2],
            value: [0; crate::abi::metrics::METRIC_VALUE_SIZE],
        };
        Ok(Self {
            posts: SeqRing::new(|| empty)?,
        })
    }

    /// Appends `post`, stamping its sequence number; drops the oldest post if full.
    pub(crate) fn push(&mut self, post: MetricPost) {
        self.posts.push_with(|entry, seq| {
            *entry = post;
            entry.seq = seq;
        });
    }

    /// Whether a post from sequence number `from` on is kept (what a reader at `from` would get
    /// at least one of).
    pub(crate) fn has_from(&self, from: u64) -> bool {
        self.posts.has_from(from)
    }

    /// Whether `from` is a position this ring never gave out (see [`SeqRing::is_ahead`]).
    pub(crate) fn is_ahead(&self, from: u64) -> bool {
        self.posts.is_ahead(from)
    }

    /// Up to `max` posts from sequence number `from` on (or from the oldest kept, if `from`
    /// was dropped already); a reader sees a gap in `seq` when it was too slow.
    pub(crate) fn read(&self, from: u64, max: usize) -> Result<KVec<MetricPost>> {
        let mut out = KVec::new();
        let mut seq = from;
        while out.len() < max {
            let Some((at, post)) = self.posts.first_from(seq) else {
                break;
            };
            out.push(*post, GFP_KERNEL)?;
            seq = at + 1;
        }
        Ok(out)
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_post_ring)]
mod tests {
    use super::*;

    fn post(cw_id: u8) -> MetricPost {
        MetricPost {
            seq: 0,
            period: 1,
            posted_ns: 0,
            device: 0,
            cw_id,
            len: 0,
            reserved: [0; 2],
            value: [0; crate::abi::metrics::METRIC_VALUE_SIZE],
        }
    }

    #[test]
    fn posts_come_back_in_order_with_sequence_numbers() -> Result {
        let mut ring = PostRing::new()?;
        for cw_id in 1..=3 {
            ring.push(post(cw_id));
        }
        let read = ring.read(0, 10)?;
        assert_eq!(read.len(), 3);
        assert_eq!((read[0].seq, read[0].cw_id), (1, 1));
        assert_eq!((read[2].seq, read[2].cw_id), (3, 3));
        assert_eq!(ring.read(3, 10)?.len(), 1);
        assert_eq!(ring.read(4, 10)?.len(), 0);
        assert_eq!(ring.read(1, 2)?.len(), 2);
        Ok(())
    }

    #[test]
    fn a_full_ring_drops_the_oldest_and_a_slow_reader_sees_the_gap() -> Result {
        let mut ring = PostRing::new()?;
        let total = RING_CAPACITY as u64 + 10;
        for n in 0..total {
            ring.push(post(u8::try_from(n % 200)?));
        }
        let read = ring.read(1, RING_CAPACITY + 10)?;
        assert_eq!(read.len(), RING_CAPACITY);
        // Posts 1..=10 were dropped although the reader asked for 1.
        assert_eq!(read[0].seq, 11);
        assert_eq!(read[RING_CAPACITY - 1].seq, total);
        Ok(())
    }
}
