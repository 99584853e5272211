//! The datastore handle: open/close, header, counters and the slab generation.

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use nds_abi::layout::{
    nc_counter_offset, nd_counter_offset, CounterAddressError, NDS_HEADER_START,
    SLAB_GENERATION_OFFSET,
};
use nds_abi::records::NDS_HEADER_WORD;

use crate::backend::{Backend, Mapping};
use crate::error::{Error, Result};
use crate::slab::SlabView;

/// How long a reader waits before checking the header a second time (libnds: `usleep(500)`).
pub(crate) const HEADER_RETRY_DELAY: Duration = Duration::from_micros(500);

/// An open datastore slab: the producer's read-write handle or a reader's read-only one.
///
/// All methods take `&self`; the handle can be shared between threads.
#[derive(Debug)]
pub struct Datastore {
    mapping: Mapping,
    pid: i32,
    /// Slab generation seen at open, when the mapping reaches it.
    opened_generation: Option<u64>,
    /// Serializes this process's model-slot allocations (other processes never allocate).
    pub(crate) model_slot_lock: Mutex<()>,
}

impl Datastore {
    /// Opens the datastore of `pid` through `backend`.
    ///
    /// `pid == 0` opens the caller's own slab read-write as its producer and commits the header.
    /// Any other pid opens that process's slab read-only and checks the header, retrying once
    /// after 500 µs in case the producer has not committed it yet.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPid`] for a negative pid, [`Error::Ioctl`] / [`Error::Io`] when the slab
    /// cannot be acquired or mapped, [`Error::SlabTooSmall`] / [`Error::UnexpectedSlabSize`] for
    /// a slab that cannot hold the map, [`Error::BadHeader`] when a reader finds no header.
    pub fn open(backend: &Backend, pid: i32) -> Result<Self> {
        Self::open_with_header_retry(backend, pid, || thread::sleep(HEADER_RETRY_DELAY))
    }

    /// [`Datastore::open`] with the pause between the two header checks supplied by the caller.
    pub(crate) fn open_with_header_retry(
        backend: &Backend,
        pid: i32,
        pause: impl FnOnce(),
    ) -> Result<Self> {
        if pid < 0 {
            return Err(Error::InvalidPid(pid));
        }
        let mapping = Mapping::open(backend, pid)?;
        let view = mapping.view();
        if view.is_writable() {
            view.writable_u64(NDS_HEADER_START)?
                .store(NDS_HEADER_WORD, Ordering::Release);
        } else {
            check_header(view, pause)?;
        }
        let opened_generation = view.load_u64(SLAB_GENERATION_OFFSET).ok();
        Ok(Self {
            mapping,
            pid,
            opened_generation,
            model_slot_lock: Mutex::new(()),
        })
    }

    /// Unmaps the slab and, for the device backend, releases it and closes the node.
    ///
    /// Dropping the handle does the same but cannot report errors.
    ///
    /// # Errors
    ///
    /// [`Error::Ioctl`] if the driver rejects RELEASE.
    pub fn close(mut self) -> Result<()> {
        self.mapping.close()
    }

    /// The pid this handle was opened with (0 for the producer).
    #[must_use]
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether this is a reader handle, on which every mutator fails with [`Error::ReadOnly`].
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        !self.slab().is_writable()
    }

    /// Bytes mapped.
    #[must_use]
    pub fn mapped_len(&self) -> usize {
        self.slab().len()
    }

    pub(crate) fn slab(&self) -> &SlabView {
        self.mapping.view()
    }

    /// The kernel-maintained slab generation (see
    /// [`SLAB_GENERATION_OFFSET`](nds_abi::layout::SLAB_GENERATION_OFFSET)): odd while the slab
    /// is owned, even while free. `None` if the mapping is too short to contain it (small files).
    #[must_use]
    pub fn slab_generation(&self) -> Option<u64> {
        self.slab().load_u64(SLAB_GENERATION_OFFSET).ok()
    }

    /// Whether the slab generation moved since this handle was opened: the owner released the
    /// slab (its contents were cleared) and it may now belong to another process.
    #[must_use]
    pub fn slab_reused(&self) -> bool {
        self.opened_generation != self.slab_generation()
    }

    fn nd_offset(index: usize) -> Result<usize> {
        nd_counter_offset(index).ok_or(Error::InvalidNdCounter { index })
    }

    fn nc_offset(core: usize, index: usize) -> Result<usize> {
        nc_counter_offset(core, index).map_err(|error| match error {
            CounterAddressError::InvalidCore => Error::InvalidCore { core },
            CounterAddressError::InvalidCounter => Error::InvalidNcCounter { core, index },
        })
    }

    /// Reads ND counter `index` with one 8-byte atomic load.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidNdCounter`] for `index >= 31`.
    pub fn nd_counter(&self, index: usize) -> Result<u64> {
        self.slab().load_u64(Self::nd_offset(index)?)
    }

    /// Atomically adds `delta` to ND counter `index` (wrapping).
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle, [`Error::InvalidNdCounter`] for `index >= 31`.
    pub fn increment_nd_counter(&self, index: usize, delta: u64) -> Result<()> {
        self.update(Self::nd_offset(index), |word| {
            word.fetch_add(delta, Ordering::Relaxed);
        })
    }

    /// Atomically subtracts `delta` from ND counter `index` (wrapping).
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nd_counter`].
    pub fn decrement_nd_counter(&self, index: usize, delta: u64) -> Result<()> {
        self.update(Self::nd_offset(index), |word| {
            word.fetch_sub(delta, Ordering::Relaxed);
        })
    }

    /// Atomically stores `value` in ND counter `index`.
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nd_counter`].
    pub fn set_nd_counter(&self, index: usize, value: u64) -> Result<()> {
        self.update(Self::nd_offset(index), |word| {
            word.store(value, Ordering::Relaxed);
        })
    }

    /// Atomically sets bit `bit` of ND counter `index` (e.g. the feature bitmap).
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nd_counter`], and [`Error::InvalidBit`] for `bit >= 64`.
    pub fn or_nd_counter(&self, index: usize, bit: u64) -> Result<()> {
        let mask = bit_mask(bit)?;
        self.update(Self::nd_offset(index), |word| {
            word.fetch_or(mask, Ordering::Relaxed);
        })
    }

    /// Reads counter `index` of NeuronCore `core` with one 8-byte atomic load.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidCore`] for `core >= 16`, [`Error::InvalidNcCounter`] for `index >= 95`.
    pub fn nc_counter(&self, core: usize, index: usize) -> Result<u64> {
        self.slab().load_u64(Self::nc_offset(core, index)?)
    }

    /// Atomically adds `delta` to counter `index` of NeuronCore `core` (wrapping).
    ///
    /// # Errors
    ///
    /// [`Error::ReadOnly`] on a reader handle, otherwise as [`Datastore::nc_counter`].
    pub fn increment_nc_counter(&self, core: usize, index: usize, delta: u64) -> Result<()> {
        self.update(Self::nc_offset(core, index), |word| {
            word.fetch_add(delta, Ordering::Relaxed);
        })
    }

    /// Atomically subtracts `delta` from counter `index` of NeuronCore `core` (wrapping).
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nc_counter`].
    pub fn decrement_nc_counter(&self, core: usize, index: usize, delta: u64) -> Result<()> {
        self.update(Self::nc_offset(core, index), |word| {
            word.fetch_sub(delta, Ordering::Relaxed);
        })
    }

    /// Atomically stores `value` in counter `index` of NeuronCore `core`.
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nc_counter`].
    pub fn set_nc_counter(&self, core: usize, index: usize, value: u64) -> Result<()> {
        self.update(Self::nc_offset(core, index), |word| {
            word.store(value, Ordering::Relaxed);
        })
    }

    /// Atomically sets bit `bit` of counter `index` of NeuronCore `core`.
    ///
    /// # Errors
    ///
    /// As [`Datastore::increment_nc_counter`], and [`Error::InvalidBit`] for `bit >= 64`.
    pub fn or_nc_counter(&self, core: usize, index: usize, bit: u64) -> Result<()> {
        let mask = bit_mask(bit)?;
        self.update(Self::nc_offset(core, index), |word| {
            word.fetch_or(mask, Ordering::Relaxed);
        })
    }

    /// Applies `op` to the counter word at `offset`, refusing reader handles before validating
    /// the address (as libnds does).
    fn update(
        &self,
        offset: Result<usize>,
        op: impl FnOnce(&std::sync::atomic::AtomicU64),
    ) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::ReadOnly);
        }
        op(self.slab().writable_u64(offset?)?);
        Ok(())
    }
}

fn bit_mask(bit: u64) -> Result<u64> {
    u32::try_from(bit)
        .ok()
        .and_then(|shift| 1u64.checked_shl(shift))
        .ok_or(Error::InvalidBit { bit })
}

/// Checks the header word, pausing once and checking again if it is not there yet.
fn check_header(view: &SlabView, pause: impl FnOnce()) -> Result<()> {
    if view.load_u64(NDS_HEADER_START)? == NDS_HEADER_WORD {
        return Ok(());
    }
    pause();
    match view.load_u64(NDS_HEADER_START)? {
        NDS_HEADER_WORD => Ok(()),
        found => Err(Error::BadHeader { found }),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;
    use crate::test_support::ScratchDir;

    fn blank_slab(dir: &ScratchDir) -> std::path::PathBuf {
        let path = dir.path().join("slab");
        std::fs::write(&path, vec![0u8; nds_abi::layout::NEURON_DATASTORE_SIZE]).unwrap();
        path
    }

    #[test]
    fn reader_accepts_a_header_committed_during_the_retry_pause() {
        let dir = ScratchDir::new();
        let path = blank_slab(&dir);
        let mut paused = false;
        let reader = Datastore::open_with_header_retry(&Backend::file(&path), 1, || {
            paused = true;
            let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.write_all_at(&NDS_HEADER_WORD.to_le_bytes(), 0)
                .unwrap();
        })
        .expect("header appeared before the second check");
        assert!(paused, "the first check must have failed");
        assert!(reader.is_read_only());
    }

    #[test]
    fn reader_rejects_a_header_still_missing_after_the_pause() {
        let dir = ScratchDir::new();
        let path = blank_slab(&dir);
        let mut pauses = 0;
        let error = Datastore::open_with_header_retry(&Backend::file(&path), 1, || pauses += 1)
            .expect_err("no header");
        assert_eq!(pauses, 1, "exactly one retry");
        assert!(matches!(error, Error::BadHeader { found: 0 }));
        assert_eq!(error.errno(), libc::EINVAL);
    }

    #[test]
    fn reader_does_not_pause_when_the_header_is_present() {
        let dir = ScratchDir::new();
        let path = blank_slab(&dir);
        Datastore::open(&Backend::file(&path), 0)
            .unwrap()
            .close()
            .unwrap();
        let reader =
            Datastore::open_with_header_retry(&Backend::file(&path), 7, || panic!("paused"));
        assert!(reader.is_ok());
    }

    #[test]
    fn bit_masks() {
        assert_eq!(bit_mask(0).unwrap(), 1);
        assert_eq!(bit_mask(63).unwrap(), 1 << 63);
        assert!(matches!(bit_mask(64), Err(Error::InvalidBit { bit: 64 })));
        assert!(bit_mask(u64::MAX).is_err());
    }
}
