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

use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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

    pub(crate) fn is_writable(&self) -> bool {
        self.writable
    }

    /// Pointer to `size` bytes at `offset`, if they lie inside the slab and are aligned to `size`.
    fn word_ptr(&self, offset: usize, size: usize) -> Option<NonNull<u8>> {
        let end = offset.checked_add(size)?;
        if end > self.len || offset % size != 0 {
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

    /// Copies `dst.len()` bytes starting at slab offset `start` (8-aligned) with relaxed loads.
    pub(crate) fn copy_out(&self, start: usize, dst: &mut [u8]) -> Result<()> {
        for word in record_words(dst.len()) {
            match word {
                Word::U32(at) => {
                    let value = self.load_u32(slab_offset(start, at)?)?;
                    write_bytes(dst, at, &value.to_ne_bytes());
                }
                Word::U64(at) => {
                    let value = self.load_u64(slab_offset(start, at)?)?;
                    write_bytes(dst, at, &value.to_ne_bytes());
                }
            }
        }
        Ok(())
    }

    /// Stores `src` at slab offset `start` (8-aligned) with relaxed stores, skipping the first
    /// `skip` bytes (which must end on a word boundary).
    pub(crate) fn copy_in(&self, start: usize, src: &[u8], skip: usize) -> Result<()> {
        for word in record_words(src.len()) {
            match word {
                Word::U32(at) if at >= skip => {
                    let value = u32::from_ne_bytes(read_bytes(src, at));
                    self.store_u32(slab_offset(start, at)?, value, Ordering::Relaxed)?;
                }
                Word::U64(at) if at >= skip => {
                    let value = u64::from_ne_bytes(read_bytes(src, at));
                    self.writable_u64(slab_offset(start, at)?)?
                        .store(value, Ordering::Relaxed);
                }
                Word::U32(_) | Word::U64(_) => {}
            }
        }
        Ok(())
    }

    fn len_u64(&self) -> u64 {
        u64::try_from(self.len).unwrap_or(u64::MAX)
    }
}

fn slab_offset(start: usize, at: usize) -> Result<usize> {
    start.checked_add(at).ok_or(Error::SlabTooSmall { size: 0 })
}

/// Copies `bytes` into `dst` at `at`; `record_words` guarantees the range is in bounds.
fn write_bytes(dst: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(target) = dst.get_mut(at..at + bytes.len()) {
        target.copy_from_slice(bytes);
    }
}

/// Reads `N` bytes of `src` at `at`; `record_words` guarantees the range is in bounds.
fn read_bytes<const N: usize>(src: &[u8], at: usize) -> [u8; N] {
    let mut bytes = [0; N];
    if let Some(source) = src.get(at..at + N) {
        bytes.copy_from_slice(source);
    }
    bytes
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
