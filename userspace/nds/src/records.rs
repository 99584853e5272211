//! Hashed records and the protocol that publishes and reads them.
//!
//! # Protocol
//!
//! Each record starts with a `u32` FNV-1a-32 hash over the whole record with the hash field read
//! as zero; a hash of zero means "nothing published". Original libnds readers copy the record
//! and check that hash, so the format cannot change, but the ordering must hold on weakly ordered
//! CPUs too. The hash word therefore doubles as a sequence word:
//!
//! Producer (`publish`):
//! 1. store hash = 0 (relaxed), then a release fence;
//! 2. store the payload words (relaxed atomics), folding each into FNV-1a as it is stored;
//! 3. store the new hash with release ordering.
//!
//! Both directions make one pass over the record: FNV-1a's byte-serial multiply chain is the
//! cost, and the loads and stores run alongside it.
//!
//! Reader (`read_record`):
//! 1. load the hash (relaxed) and issue an acquire fence; zero means [`Snapshot::Empty`];
//! 2. copy the payload out with relaxed atomic word loads straight into the caller's value,
//!    folding each word into FNV-1a (hash field as zero) while it is in a register;
//! 3. acquire fence, reload the hash; a different value means [`Snapshot::Torn`];
//! 4. compare the FNV-1a of step 2 with the hash; a mismatch means `Torn`.
//!
//! If the reader saw any payload word of a newer write, the producer's release fence (step 1)
//! and the reader's acquire fence (step 3) order the producer's "hash = 0" before the reload, so
//! the reload cannot return the hash the reader started with unless a later write published the
//! same hash again; the FNV check over the copy still has to pass in that case. Step 1's acquire
//! makes a complete earlier write visible to the copy. A read that is not valid is retried once
//! after 200 µs, as in libnds; the second result is returned as is — never a torn record.
//!
//! All loads are relaxed plus fences because readers map the slab read-only, where Rust only
//! guarantees relaxed atomic loads.

use std::borrow::Cow;
use std::mem::size_of;
use std::sync::atomic::{fence, Ordering};
use std::thread;
use std::time::Duration;

use nds_abi::fnv::{fnv1a_32_update, FNV1A_32_OFFSET_BASIS};
use nds_abi::text::c_text;

use crate::error::Result;
use crate::slab::{SlabView, Word, WordValue};

/// Delay before the single retry of a record read (libnds: `usleep(200)`).
pub(crate) const RECORD_RETRY_DELAY: Duration = Duration::from_micros(200);

/// Outcome of reading a hashed record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Snapshot<T> {
    /// A consistent record whose hash matched.
    Valid(T),
    /// Nothing published (hash zero), or a write was still starting on both attempts.
    Empty,
    /// The record changed under the reader on both attempts, or its bytes do not match its hash.
    Torn,
}

impl<T> Snapshot<T> {
    /// The record, if consistent.
    #[must_use]
    pub fn valid(self) -> Option<T> {
        match self {
            Self::Valid(record) => Some(record),
            Self::Empty | Self::Torn => None,
        }
    }

    /// Applies `f` to a valid record.
    #[must_use]
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Snapshot<U> {
        match self {
            Self::Valid(record) => Snapshot::Valid(f(record)),
            Self::Empty => Snapshot::Empty,
            Self::Torn => Snapshot::Torn,
        }
    }
}

/// A fixed-size C text field (tag, name) as a string: up to the first NUL, invalid UTF-8
/// replaced, never longer than the field.
#[must_use]
pub fn text_lossy(field: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(c_text(field))
}

/// The FNV-1a state after a record's hash field, which is hashed as zero.
const HASH_FIELD_STATE: u32 = fnv1a_32_update(FNV1A_32_OFFSET_BASIS, &[0; size_of::<u32>()]);

/// The record's first word: its hash.
const HASH_WORD: Word = Word::U32(0);

/// Folds one word's bytes, in memory order, into an FNV-1a state.
#[inline(always)]
fn fold(state: u32, value: WordValue) -> u32 {
    match value {
        WordValue::U32(value) => fnv1a_32_update(state, &value.to_ne_bytes()),
        WordValue::U64(value) => fnv1a_32_update(state, &value.to_ne_bytes()),
    }
}

/// Position in a record's payload (the bytes after the hash field) laid out as consecutive
/// parts: the fields of the caller's value, in record order. Record words never straddle two
/// parts (every field boundary is a word boundary of the record).
#[derive(Default)]
struct Cursor {
    part: usize,
    at: usize,
}

impl Cursor {
    /// Moves past `len` bytes of the part `part_len` long.
    #[inline(always)]
    fn advance(&mut self, len: usize, part_len: usize) {
        self.at += len;
        if self.at >= part_len {
            self.part += 1;
            self.at = 0;
        }
    }

    /// Writes the next word of the payload into `parts`.
    #[inline(always)]
    fn put(&mut self, parts: &mut [&mut [u8]], value: WordValue) {
        let Some(part) = parts.get_mut(self.part) else {
            return;
        };
        let part_len = part.len();
        let len = match value {
            WordValue::U32(value) => put_bytes(part, self.at, &value.to_ne_bytes()),
            WordValue::U64(value) => put_bytes(part, self.at, &value.to_ne_bytes()),
        };
        self.advance(len, part_len);
    }

    /// Reads the next word of the payload from `parts`, as wide as `word`.
    #[inline(always)]
    fn take(&mut self, parts: &[&[u8]], word: Word) -> WordValue {
        let part = parts.get(self.part).copied().unwrap_or(&[]);
        let (value, len) = match word {
            Word::U32(_) => (
                WordValue::U32(u32::from_ne_bytes(take_bytes(part, self.at))),
                4,
            ),
            Word::U64(_) => (
                WordValue::U64(u64::from_ne_bytes(take_bytes(part, self.at))),
                8,
            ),
        };
        self.advance(len, part.len());
        value
    }
}

/// Copies `bytes` into `part` at `at` (dropped if it does not fit); returns their length.
#[inline(always)]
fn put_bytes(part: &mut [u8], at: usize, bytes: &[u8]) -> usize {
    if let Some(target) = part.get_mut(at..at + bytes.len()) {
        target.copy_from_slice(bytes);
    }
    bytes.len()
}

/// `N` bytes of `part` at `at` (zeroes if they do not fit).
#[inline(always)]
fn take_bytes<const N: usize>(part: &[u8], at: usize) -> [u8; N] {
    let mut bytes = [0; N];
    if let Some(source) = part.get(at..at + N) {
        bytes.copy_from_slice(source);
    }
    bytes
}

/// Publishes the record of `len` bytes at `offset` whose payload is `parts`, following the
/// protocol above.
pub(crate) fn publish(slab: &SlabView, offset: usize, len: usize, parts: &[&[u8]]) -> Result<()> {
    slab.store_u32(offset, 0, Ordering::Relaxed)?;
    fence(Ordering::Release);
    let mut hash = HASH_FIELD_STATE;
    let mut cursor = Cursor::default();
    slab.store_record(offset, len, |word| {
        if word == HASH_WORD {
            return None;
        }
        let value = cursor.take(parts, word);
        hash = fold(hash, value);
        Some(value)
    })?;
    slab.store_u32(offset, hash, Ordering::Release)
}

/// Withdraws the record of `len` bytes at `offset` and zeroes it, so readers see it as empty.
pub(crate) fn erase(slab: &SlabView, offset: usize, len: usize) -> Result<()> {
    slab.store_u32(offset, 0, Ordering::Relaxed)?;
    fence(Ordering::Release);
    slab.store_record(offset, len, |word| match word {
        HASH_WORD => None,
        Word::U32(_) => Some(WordValue::U32(0)),
        Word::U64(_) => Some(WordValue::U64(0)),
    })
}

/// What one read of a record found; the payload went to the caller's parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordState {
    Valid,
    Empty,
    Torn,
}

impl RecordState {
    /// The snapshot of a value read into caller storage.
    pub(crate) fn with<T>(self, value: T) -> Snapshot<T> {
        match self {
            Self::Valid => Snapshot::Valid(value),
            Self::Empty => Snapshot::Empty,
            Self::Torn => Snapshot::Torn,
        }
    }
}

/// Reads the record of `len` bytes at `offset` into `parts` (its payload's fields in order),
/// retrying once after `pause`. Whatever the outcome, `parts` hold the bytes of the last
/// attempt: callers only use them when the state is valid.
#[inline]
pub(crate) fn read_record(
    slab: &SlabView,
    offset: usize,
    len: usize,
    parts: &mut [&mut [u8]],
    pause: impl FnOnce(),
) -> Result<RecordState> {
    match read_once(slab, offset, len, parts)? {
        RecordState::Valid => Ok(RecordState::Valid),
        RecordState::Empty | RecordState::Torn => {
            pause();
            read_once(slab, offset, len, parts)
        }
    }
}

#[inline]
fn read_once(
    slab: &SlabView,
    offset: usize,
    len: usize,
    parts: &mut [&mut [u8]],
) -> Result<RecordState> {
    let published = slab.load_u32(offset)?;
    fence(Ordering::Acquire);
    if published == 0 {
        return Ok(RecordState::Empty);
    }
    let mut hash = HASH_FIELD_STATE;
    let mut cursor = Cursor::default();
    slab.load_record(offset, len, |word, value| {
        if word != HASH_WORD {
            hash = fold(hash, value);
            cursor.put(parts, value);
        }
    })?;
    fence(Ordering::Acquire);
    if slab.load_u32(offset)? != published || hash != published {
        return Ok(RecordState::Torn);
    }
    Ok(RecordState::Valid)
}

/// Reads with the production retry delay.
#[inline]
pub(crate) fn read_with_retry(
    slab: &SlabView,
    offset: usize,
    len: usize,
    parts: &mut [&mut [u8]],
) -> Result<RecordState> {
    read_record(slab, offset, len, parts, || {
        thread::sleep(RECORD_RETRY_DELAY)
    })
}

#[cfg(test)]
mod properties {
    //! The decoder against an exact oracle: with nobody writing, a record is valid exactly
    //! when its hash word is non-zero and matches its bytes, empty exactly when the hash word
    //! is zero, and torn otherwise — for any bytes, sealed or not, damaged or not.

    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::ptr::NonNull;

    use nds_abi::records::{record_hash, ModelRecord, ProcessInfoExtRecord, ProcessInfoRecord};
    use proptest::collection::vec;
    use proptest::prelude::*;
    use zerocopy::{FromBytes, Immutable, IntoBytes};

    use super::{erase, publish, read_record, RecordState};
    use crate::slab::SlabView;

    /// Cases per property unless `PROPTEST_CASES` says otherwise.
    const CASES: u32 = 20_000;
    const PAGE: usize = 4096;

    /// A page-aligned heap copy of some bytes, standing in for a mapping.
    struct Buffer {
        base: NonNull<u8>,
        layout: Layout,
    }

    impl Buffer {
        fn new(bytes: &[u8]) -> Self {
            let layout = Layout::from_size_align(bytes.len().max(1), PAGE).unwrap();
            // SAFETY: the layout has a non-zero size.
            let base = NonNull::new(unsafe { alloc_zeroed(layout) }).expect("allocation");
            // SAFETY: the allocation holds at least `bytes.len()` bytes and is fresh.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.as_ptr(), bytes.len()) };
            Self { base, layout }
        }

        fn view(&self, len: usize) -> SlabView {
            // SAFETY: `len` bytes from the page-aligned base stay allocated while `self` lives,
            // and every view is dropped before its buffer.
            unsafe { SlabView::new(self.base, len, false) }
        }
    }

    impl Drop for Buffer {
        fn drop(&mut self) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.base.as_ptr(), self.layout) };
        }
    }

    /// Decodes the `R` at the start of `bytes` into a payload split at `split` (a field
    /// boundary of the record), and checks the result against the oracle.
    fn check<R: FromBytes + IntoBytes + Immutable>(
        bytes: &[u8],
        split: usize,
    ) -> Result<(), TestCaseError> {
        let len = size_of::<R>();
        let record = &bytes[..len];
        let buffer = Buffer::new(record);
        let view = buffer.view(len);
        let mut paused = false;
        let mut payload = vec![0u8; len - 4];
        let (first, second) = payload.split_at_mut(split);
        let state = read_record(&view, 0, len, &mut [first, second], || paused = true);
        let stored = u32::from_ne_bytes(record[..4].try_into().unwrap());
        match state {
            Ok(RecordState::Valid) => {
                prop_assert_ne!(stored, 0);
                prop_assert_eq!(
                    record_hash(record),
                    stored,
                    "accepted a record whose hash does not match"
                );
                prop_assert_eq!(&payload[..], &record[4..]);
                prop_assert!(!paused, "a valid record is returned on the first read");
            }
            Ok(RecordState::Empty) => prop_assert_eq!(stored, 0),
            Ok(RecordState::Torn) => {
                prop_assert_ne!(stored, 0);
                prop_assert_ne!(record_hash(record), stored);
                prop_assert!(paused, "a bad record is read twice");
            }
            Err(error) => prop_assert!(false, "the view covers the record, yet {error}"),
        }
        Ok(())
    }

    /// Publishes `payload` (split at `split`) into a zeroed writable record and checks that
    /// the slab then holds exactly the payload under its FNV-1a hash.
    fn publish_round_trip(payload: &[u8], split: usize) -> Result<(), TestCaseError> {
        let len = payload.len() + 4;
        let buffer = Buffer::new(&vec![0xEE; len]);
        // SAFETY: as in `Buffer::view`, writable because the buffer is ours alone.
        let view = unsafe { SlabView::new(buffer.base, len, true) };
        let (first, second) = payload.split_at(split);
        publish(&view, 0, len, &[first, second]).unwrap();
        // SAFETY: `len` initialized bytes of the buffer; nothing writes them any more.
        let written = unsafe { std::slice::from_raw_parts(buffer.base.as_ptr(), len) };
        prop_assert_eq!(&written[4..], payload);
        let hash = u32::from_ne_bytes(written[..4].try_into().unwrap());
        prop_assert_eq!(hash, record_hash(written));
        erase(&view, 0, len).unwrap();
        // SAFETY: as above.
        let erased = unsafe { std::slice::from_raw_parts(buffer.base.as_ptr(), len) };
        prop_assert!(erased.iter().all(|&byte| byte == 0));
        Ok(())
    }

    /// 672 bytes (the largest record), maybe sealed with the right hash, then maybe damaged.
    fn record_bytes() -> impl Strategy<Value = Vec<u8>> {
        (
            vec(any::<u8>(), 672),
            0..3u8,
            vec((4..672usize, 1..=255u8), 0..4),
        )
            .prop_map(|(mut bytes, seal, damage)| {
                if seal != 0 {
                    // Sealed for one of the three record sizes; the others see a stale hash.
                    let len = [64, 260, 672][usize::from(seal) % 3];
                    let hash = record_hash(&bytes[..len]);
                    bytes[..4].copy_from_slice(&hash.to_ne_bytes());
                }
                for (at, flip) in damage {
                    bytes[at] ^= flip;
                }
                bytes
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(CASES))]

        #[test]
        fn records_decode_exactly_when_their_hash_matches(bytes in record_bytes()) {
            check::<ProcessInfoRecord>(&bytes, 60)?;
            check::<ProcessInfoExtRecord>(&bytes, 256)?;
            // The model's payload as its two fields, node info and memory grid.
            check::<ModelRecord>(&bytes, 284)?;
            check::<ModelRecord>(&bytes, 668)?;
        }

        #[test]
        fn a_zero_hash_word_is_always_empty(mut bytes in vec(any::<u8>(), 672)) {
            bytes[..4].fill(0);
            check::<ModelRecord>(&bytes, 284)?;
        }


        #[test]
        fn views_shorter_than_the_record_are_errors_not_panics(
            bytes in vec(any::<u8>(), 0..700),
            offset in 0..800usize,
        ) {
            let buffer = Buffer::new(&bytes);
            let view = buffer.view(bytes.len());
            let mut payload = [0u8; 668];
            let result = read_record(&view, offset, 672, &mut [&mut payload[..]], || {});
            if offset % 8 == 0 && offset + 672 <= bytes.len() {
                prop_assert!(result.is_ok());
            } else if let Ok(state) = result {
                // Only an unpublished (zero) hash word can be read before the copy fails.
                prop_assert_eq!(state, RecordState::Empty);
            }
        }
    }

    proptest! {
        // Publishing has no branch on the bytes: a tenth of the decoder's cases covers it.
        #![proptest_config(ProptestConfig::with_cases(CASES / 10))]

        #[test]
        fn a_published_record_holds_its_payload_under_its_hash(payload in vec(any::<u8>(), 668)) {
            publish_round_trip(&payload[..60], 60)?;
            publish_round_trip(&payload[..256], 256)?;
            publish_round_trip(&payload, 284)?;
        }
    }
}
