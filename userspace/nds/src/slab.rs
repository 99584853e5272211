//! Word-level access to the shared slab.
//!
//! Other processes (and the kernel) write these bytes concurrently, so no `&[u8]` or `&T` to slab
//! memory is ever created: every access is an atomic load or store of one naturally aligned word.
//! Loads are `Relaxed` only, because relaxed loads of at most register width are the only atomic
//! operations Rust guarantees on read-only mappings (readers map the slab `PROT_READ`); ordering
//! comes from explicit fences.
//!
//! A location is always accessed with the same width: counters, the bitmap and the generation as
//! `u64`, records as `u32` for their first two 4-byte halves (the hash and the first payload word)
//! and `u64` after that, with a `u32` tail when the length ends on a 4-byte boundary.

use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use nds_abi::layout::NDS_REQUIRED_SIZE;

use crate::error::{Error, Result};

/// One access unit of a record copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    /// 4 bytes at this record-relative offset.
    U32(usize),
    /// 8 bytes at this record-relative offset.
    U64(usize),
}

/// Splits a record of `len` bytes (a multiple of 4) at an 8-aligned slab offset into words.
///
/// The first 8 bytes are two `u32` words so the hash field is its own atomic word.
pub(crate) fn record_words(len: usize) -> impl Iterator<Item = Word> {
    let mut offset = 0;
    std::iter::from_fn(move || {
        let remaining = len.checked_sub(offset)?;
        let word = if offset < size_of::<u64>() || remaining < size_of::<u64>() {
            (remaining >= size_of::<u32>()).then_some(Word::U32(offset))?
        } else {
            Word::U64(offset)
        };
        offset += match word {
            Word::U32(_) => size_of::<u32>(),
            Word::U64(_) => size_of::<u64>(),
        };
        Some(word)
    })
}

/// A mapped slab, addressed by byte offset.
#[derive(Debug)]
pub(crate) struct SlabView {
    base: NonNull<u8>,
    len: usize,
    writable: bool,
}

// SAFETY: the view only hands out atomics into a mapping that its owner keeps alive for the
// view's lifetime; atomics may be used from any thread.
unsafe impl Send for SlabView {}
// SAFETY: as above; all shared access goes through atomic operations.
unsafe impl Sync for SlabView {}

impl SlabView {
    /// # Safety
    ///
    /// `base..base + len` must stay mapped (and, if `writable`, writable) for the view's
    /// lifetime, and `base` must be page aligned.
    pub(crate) unsafe fn new(base: NonNull<u8>, len: usize, writable: bool) -> Self {
        Self {
            base,
            len,
            writable,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Pointer to `size` bytes at `offset`, if they lie inside the slab and are aligned to `size`.
    fn word_ptr(&self, offset: usize, size: usize) -> Option<NonNull<u8>> {
        let end = offset.checked_add(size)?;
        if end > self.len || !offset.is_multiple_of(size) {
            return None;
        }
        // SAFETY: `offset + size <= len`, so the result stays inside the mapping.
        Some(unsafe { self.base.add(offset) })
    }

    fn atomic_u64(&self, offset: usize) -> Option<&AtomicU64> {
        let ptr = self.word_ptr(offset, size_of::<u64>())?;
        // SAFETY: the word is in bounds and 8-aligned (the base is page aligned), and the mapping
        // outlives `&self`. Other processes mutate it only through atomics of the same width.
        // On read-only mappings callers only perform relaxed loads.
        Some(unsafe { AtomicU64::from_ptr(ptr.cast::<u64>().as_ptr()) })
    }

    fn atomic_u32(&self, offset: usize) -> Option<&AtomicU32> {
        let ptr = self.word_ptr(offset, size_of::<u32>())?;
        // SAFETY: as in `atomic_u64`, for a 4-aligned in-bounds word.
        Some(unsafe { AtomicU32::from_ptr(ptr.cast::<u32>().as_ptr()) })
    }

    /// The `u64` at `offset` for a read-modify-write, or `ReadOnly` on a reader mapping.
    pub(crate) fn writable_u64(&self, offset: usize) -> Result<&AtomicU64> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        self.atomic_u64(offset).ok_or(Error::SlabTooSmall {
            size: self.len_u64(),
        })
    }

    /// Relaxed load of the `u64` at `offset`.
    pub(crate) fn load_u64(&self, offset: usize) -> Result<u64> {
        self.atomic_u64(offset)
            .map(|word| word.load(Ordering::Relaxed))
            .ok_or(Error::SlabTooSmall {
                size: self.len_u64(),
            })
    }

    /// Relaxed load of the `u32` at `offset`.
    pub(crate) fn load_u32(&self, offset: usize) -> Result<u32> {
        self.atomic_u32(offset)
            .map(|word| word.load(Ordering::Relaxed))
            .ok_or(Error::SlabTooSmall {
                size: self.len_u64(),
            })
    }

    /// Stores the `u32` at `offset` with `order`.
    pub(crate) fn store_u32(&self, offset: usize, value: u32, order: Ordering) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        let word = self.atomic_u32(offset).ok_or(Error::SlabTooSmall {
            size: self.len_u64(),
        })?;
        word.store(value, order);
        Ok(())
    }

    /// Visits the words of the record of `len` bytes at slab offset `start` (8-aligned) in
    /// order, each read with one relaxed load; the range is checked once, before the first load.
    #[inline]
    pub(crate) fn load_record(
        &self,
        start: usize,
        len: usize,
        mut visit: impl FnMut(Word, WordValue),
    ) -> Result<()> {
        self.check_record(start, len)?;
        for word in record_words(len) {
            let value = match word {
                Word::U32(at) => {
                    WordValue::U32(self.checked_u32(start + at).load(Ordering::Relaxed))
                }
                Word::U64(at) => {
                    WordValue::U64(self.checked_u64(start + at).load(Ordering::Relaxed))
                }
            };
            visit(word, value);
        }
        Ok(())
    }

    /// Stores the words `value_of` gives for the record of `len` bytes at slab offset `start`
    /// (8-aligned) with relaxed stores, in order, skipping words for which it gives `None`; the
    /// range and writability are checked once, before the first store.
    #[inline]
    pub(crate) fn store_record(
        &self,
        start: usize,
        len: usize,
        mut value_of: impl FnMut(Word) -> Option<WordValue>,
    ) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        self.check_record(start, len)?;
        for word in record_words(len) {
            match (word, value_of(word)) {
                (Word::U32(at), Some(WordValue::U32(value))) => {
                    self.checked_u32(start + at).store(value, Ordering::Relaxed);
                }
                (Word::U64(at), Some(WordValue::U64(value))) => {
                    self.checked_u64(start + at).store(value, Ordering::Relaxed);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether `start..start + len` lies inside the slab with `start` 8-aligned.
    fn check_record(&self, start: usize, len: usize) -> Result<()> {
        match start.checked_add(len) {
            Some(end) if end <= self.len && start.is_multiple_of(size_of::<u64>()) => Ok(()),
            _ => Err(Error::SlabTooSmall {
                size: self.len_u64(),
            }),
        }
    }

    /// The `u64` at `offset`, which [`SlabView::check_record`] has already placed in bounds.
    fn checked_u64(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(
            offset + size_of::<u64>() <= self.len && offset.is_multiple_of(size_of::<u64>())
        );
        // SAFETY: in bounds and 8-aligned (checked by `check_record` for the whole record, and
        // `record_words` only yields aligned words inside it); see `atomic_u64`.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(offset).cast::<u64>()) }
    }

    /// The `u32` at `offset`, which [`SlabView::check_record`] has already placed in bounds.
    fn checked_u32(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(
            offset + size_of::<u32>() <= self.len && offset.is_multiple_of(size_of::<u32>())
        );
        // SAFETY: as in `checked_u64`, for a 4-aligned word.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast::<u32>()) }
    }

    fn len_u64(&self) -> u64 {
        u64::try_from(self.len).unwrap_or(u64::MAX)
    }
}

/// The value of one record word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WordValue {
    /// A 4-byte word.
    U32(u32),
    /// An 8-byte word.
    U64(u64),
}

/// The 67,200-byte region map of a view known to cover it: counter words without a bounds
/// check per access.
///
/// Only [`RegionMap::new`] makes one, for a view its caller knows to cover the map, so every
/// offset below [`NDS_REQUIRED_SIZE`] is mapped for the borrow's lifetime.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RegionMap<'a> {
    base: NonNull<u8>,
    view: PhantomData<&'a SlabView>,
}

impl<'a> RegionMap<'a> {
    /// The region map of `view`.
    ///
    /// # Safety
    ///
    /// `view` is at least [`NDS_REQUIRED_SIZE`] bytes long.
    pub(crate) unsafe fn new(view: &'a SlabView) -> Self {
        debug_assert!(view.len >= NDS_REQUIRED_SIZE);
        Self {
            base: view.base,
            view: PhantomData,
        }
    }

    /// The `u64` word at `offset`, if it lies inside the region map and is 8-aligned.
    #[inline]
    pub(crate) fn word(self, offset: usize) -> Option<&'a AtomicU64> {
        if !offset.is_multiple_of(size_of::<u64>()) || offset >= NDS_REQUIRED_SIZE {
            return None;
        }
        // SAFETY: the region map is mapped for 'a (see the type's invariant), the word is
        // inside it and 8-aligned (the base is page aligned); others mutate it only atomically.
        Some(unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(offset).cast::<u64>()) })
    }

    /// Copies `out.len()` consecutive words starting at `start` with relaxed loads, in one
    /// straight loop. The range is checked once: if it does not lie inside the map, nothing is
    /// copied (the counter bands always do: nds-abi asserts their ends).
    #[inline]
    pub(crate) fn load_words(self, start: usize, out: &mut [u64]) {
        let in_map = out
            .len()
            .checked_mul(size_of::<u64>())
            .and_then(|bytes| bytes.checked_add(start))
            .is_some_and(|end| end <= NDS_REQUIRED_SIZE);
        if !in_map || !start.is_multiple_of(size_of::<u64>()) {
            return;
        }
        // SAFETY: the words are inside the mapped region map (checked above) and 8-aligned.
        let first = unsafe { self.base.as_ptr().add(start).cast::<u64>() };
        for (index, value) in out.iter_mut().enumerate() {
            // SAFETY: `index < out.len()`, so the word is one of those checked above; it is
            // only ever accessed atomically.
            *value = unsafe { AtomicU64::from_ptr(first.add(index)) }.load(Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(len: usize) -> Vec<Word> {
        record_words(len).collect()
    }

    #[test]
    fn hash_field_is_its_own_word_and_records_are_covered_exactly() {
        for len in [8, 64, 260, 672] {
            let words = words(len);
            assert_eq!(words[0], Word::U32(0), "hash word for {len}");
            assert_eq!(words[1], Word::U32(4));
            let mut covered = 0;
            for word in &words {
                let (at, size) = match *word {
                    Word::U32(at) => (at, 4),
                    Word::U64(at) => (at, 8),
                };
                assert_eq!(at, covered, "gap or overlap at {at} in {len}");
                assert_eq!(at % size, 0, "misaligned word at {at}");
                covered += size;
            }
            assert_eq!(covered, len);
        }
        assert_eq!(words(260).last(), Some(&Word::U32(256)));
        assert_eq!(words(672).last(), Some(&Word::U64(664)));
    }
}
