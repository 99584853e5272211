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
//! 2. store the payload words (relaxed atomics);
//! 3. store the new hash with release ordering.
//!
//! Reader (`read_record`):
//! 1. load the hash (relaxed) and issue an acquire fence; zero means [`Snapshot::Empty`];
//! 2. copy the payload out with relaxed atomic word loads;
//! 3. acquire fence, reload the hash; a different value means [`Snapshot::Torn`];
//! 4. recompute FNV-1a over the copy with the hash field zero; a mismatch means `Torn`.
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

use nds_abi::layout::{NDS_PROCESS_EXT_INFO_START, NDS_PROCESS_INFO_START};
use nds_abi::records::{
    record_hash, ProcessInfo, ProcessInfoExt, ProcessInfoExtRecord, ProcessInfoRecord,
};
use nds_abi::text::c_text;
use zerocopy::{FromBytes, IntoBytes};

use crate::datastore::Datastore;
use crate::error::{Error, Result};
use crate::slab::SlabView;

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

/// Publishes `record` (hash field ignored) at `offset` following the protocol above.
pub(crate) fn publish(slab: &SlabView, offset: usize, record: &[u8]) -> Result<()> {
    let hash = record_hash(record);
    slab.store_u32(offset, 0, Ordering::Relaxed)?;
    fence(Ordering::Release);
    slab.copy_in(offset, record, size_of::<u32>())?;
    slab.store_u32(offset, hash, Ordering::Release)
}

/// Withdraws the record at `offset` and overwrites it with `zeros`, so readers see it as empty.
pub(crate) fn erase(slab: &SlabView, offset: usize, zeros: &[u8]) -> Result<()> {
    slab.store_u32(offset, 0, Ordering::Relaxed)?;
    fence(Ordering::Release);
    slab.copy_in(offset, zeros, size_of::<u32>())
}

/// Reads the record of type `R` at `offset`, retrying once after `pause`.
pub(crate) fn read_record<R: FromBytes + IntoBytes>(
    slab: &SlabView,
    offset: usize,
    pause: impl FnOnce(),
) -> Result<Snapshot<R>> {
    match read_once(slab, offset)? {
        Snapshot::Valid(record) => Ok(Snapshot::Valid(record)),
        Snapshot::Empty | Snapshot::Torn => {
            pause();
            read_once(slab, offset)
        }
    }
}

fn read_once<R: FromBytes + IntoBytes>(slab: &SlabView, offset: usize) -> Result<Snapshot<R>> {
    let published = slab.load_u32(offset)?;
    fence(Ordering::Acquire);
    if published == 0 {
        return Ok(Snapshot::Empty);
    }
    let mut record = R::new_zeroed();
    let bytes = record.as_mut_bytes();
    slab.copy_out(offset, bytes)?;
    fence(Ordering::Acquire);
    if slab.load_u32(offset)? != published || record_hash(bytes) != published {
        return Ok(Snapshot::Torn);
    }
    // The copy's hash word may predate `published`; the verified value is the one to keep.
    if let Some(hash_field) = bytes.get_mut(..size_of::<u32>()) {
        hash_field.copy_from_slice(&published.to_ne_bytes());
    }
    Ok(Snapshot::Valid(record))
}

/// Reads with the production retry delay.
pub(crate) fn read_with_retry<R: FromBytes + IntoBytes>(
    slab: &SlabView,
    offset: usize,
) -> Result<Snapshot<R>> {
    read_record(slab, offset, || thread::sleep(RECORD_RETRY_DELAY))
}

impl Datastore {
    pub(crate) fn require_writable(&self) -> Result<()> {
        if self.is_read_only() {
            Err(Error::ReadOnly)
        } else {
            Ok(())
        }
    }

    /// Publishes the process-info record.
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle.
    pub fn commit_process_info(&self, info: &ProcessInfo) -> Result<()> {
        self.require_writable()?;
        let record = ProcessInfoRecord {
            hash: 0,
            info: *info,
        };
        publish(self.slab(), NDS_PROCESS_INFO_START, record.as_bytes())
    }

    /// Reads the process-info record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the record.
    pub fn read_process_info(&self) -> Result<Snapshot<ProcessInfo>> {
        Ok(
            read_with_retry::<ProcessInfoRecord>(self.slab(), NDS_PROCESS_INFO_START)?
                .map(|record| record.info),
        )
    }

    /// Publishes the process-info-ext record.
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle.
    pub fn commit_process_info_ext(&self, info: &ProcessInfoExt) -> Result<()> {
        self.require_writable()?;
        let record = ProcessInfoExtRecord {
            hash: 0,
            info: *info,
        };
        publish(self.slab(), NDS_PROCESS_EXT_INFO_START, record.as_bytes())
    }

    /// Reads the process-info-ext record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the record.
    pub fn read_process_info_ext(&self) -> Result<Snapshot<ProcessInfoExt>> {
        Ok(
            read_with_retry::<ProcessInfoExtRecord>(self.slab(), NDS_PROCESS_EXT_INFO_START)?
                .map(|record| record.info),
        )
    }
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

    use super::{read_record, Snapshot};
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

    /// Decodes the `R` at the start of `bytes` and checks the result against the oracle.
    fn check<R: FromBytes + IntoBytes + Immutable>(bytes: &[u8]) -> Result<(), TestCaseError> {
        let len = size_of::<R>();
        let record = &bytes[..len];
        let buffer = Buffer::new(record);
        let view = buffer.view(len);
        let mut paused = false;
        let snapshot = read_record::<R>(&view, 0, || paused = true);
        let stored = u32::from_ne_bytes(record[..4].try_into().unwrap());
        match snapshot {
            Ok(Snapshot::Valid(decoded)) => {
                prop_assert_ne!(stored, 0);
                prop_assert_eq!(
                    record_hash(record),
                    stored,
                    "accepted a record whose hash does not match"
                );
                prop_assert_eq!(decoded.as_bytes(), record);
                prop_assert!(!paused, "a valid record is returned on the first read");
            }
            Ok(Snapshot::Empty) => prop_assert_eq!(stored, 0),
            Ok(Snapshot::Torn) => {
                prop_assert_ne!(stored, 0);
                prop_assert_ne!(record_hash(record), stored);
                prop_assert!(paused, "a bad record is read twice");
            }
            Err(error) => prop_assert!(false, "the view covers the record, yet {error}"),
        }
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
            check::<ProcessInfoRecord>(&bytes)?;
            check::<ProcessInfoExtRecord>(&bytes)?;
            check::<ModelRecord>(&bytes)?;
        }

        #[test]
        fn a_zero_hash_word_is_always_empty(mut bytes in vec(any::<u8>(), 672)) {
            bytes[..4].fill(0);
            check::<ModelRecord>(&bytes)?;
        }

        #[test]
        fn views_shorter_than_the_record_are_errors_not_panics(
            bytes in vec(any::<u8>(), 0..700),
            offset in 0..800usize,
        ) {
            let buffer = Buffer::new(&bytes);
            let view = buffer.view(bytes.len());
            let result = read_record::<ModelRecord>(&view, offset, || {});
            if offset % 8 == 0 && offset + 672 <= bytes.len() {
                prop_assert!(result.is_ok());
            } else if let Ok(snapshot) = result {
                // Only an unpublished (zero) hash word can be read before the copy fails.
                prop_assert_eq!(snapshot, Snapshot::Empty);
            }
        }
    }
}
