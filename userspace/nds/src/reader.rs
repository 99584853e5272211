//! The reader's handle: a read-only view of another process's slab (or a producer's own, through
//! [`Producer::reader`](crate::Producer::reader)). It has no write methods at all.

use std::mem::size_of;
use std::thread;
use std::time::Duration;

use nds_abi::counters::NdCounter;
use nds_abi::layout::{
    model_record_offset, nc_counter_offset, nd_counter_offset, CounterAddressError,
    NDS_HEADER_START, NDS_MAX_MODEL_COUNT, NDS_MODEL_BITMAP_START, NDS_PROCESS_EXT_INFO_START,
    NDS_PROCESS_INFO_START, SLAB_GENERATION_OFFSET,
};
use nds_abi::records::{
    ModelRecord, ProcessInfo, ProcessInfoExt, ProcessInfoExtRecord, ProcessInfoRecord,
    NDS_HEADER_WORD,
};
use zerocopy::{FromZeros, IntoBytes};

use crate::backend::{Backend, Mapping};
use crate::error::{Error, Result};
use crate::handles::{nc_word, nd_word, CoreCounter, CounterView, NeuronCore};
use crate::models::{Model, ModelEntry, ModelSlot};
use crate::records::{read_with_retry, Snapshot};
use crate::seqlock::{moved_since, read_guarded, SlabRead, Tenure};
use crate::slab::{RegionMap, SlabView};
use crate::snapshot::{copy_counters, CounterSnapshot};

/// How long a reader waits before checking the header a second time (libnds: `usleep(500)`).
pub(crate) const HEADER_RETRY_DELAY: Duration = Duration::from_micros(500);

/// A read-only handle on a slab.
///
/// All methods take `&self`; the handle can be shared between threads.
#[derive(Debug)]
pub struct Reader {
    mapping: Mapping,
    pid: i32,
    /// The owner's tenure as seen at open, when the mapping reaches the generation word.
    tenure: Option<Tenure>,
}

impl Reader {
    /// Opens the slab of process `pid` through `backend`, read-only, and checks its header,
    /// retrying once after 500 µs in case the producer has not committed it yet.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPid`] unless `pid > 0` (pid 0 names the caller's own slab, which only a
    /// [`Producer`](crate::Producer) opens), [`Error::Ioctl`] / [`Error::Io`] when the slab
    /// cannot be acquired or mapped, [`Error::SlabTooSmall`] / [`Error::UnexpectedSlabSize`]
    /// for a slab that cannot hold the map, [`Error::BadHeader`] when no header is there.
    pub fn open(backend: &Backend, pid: i32) -> Result<Self> {
        Self::open_with_header_retry(backend, pid, || thread::sleep(HEADER_RETRY_DELAY))
    }

    /// [`Reader::open`] with the pause between the two header checks supplied by the caller.
    pub(crate) fn open_with_header_retry(
        backend: &Backend,
        pid: i32,
        pause: impl FnOnce(),
    ) -> Result<Self> {
        if pid <= 0 {
            return Err(Error::InvalidPid(pid));
        }
        let mapping = Mapping::open(backend, pid)?;
        check_header(mapping.view(), pause)?;
        Ok(Self::attach(mapping, pid))
    }

    /// A reader over `mapping`, attached to the tenure it shows now.
    pub(crate) fn attach(mapping: Mapping, pid: i32) -> Self {
        let kernel = mapping.is_device();
        let tenure = mapping
            .view()
            .load_u64(SLAB_GENERATION_OFFSET)
            .ok()
            .map(|generation| Tenure { generation, kernel });
        Self {
            mapping,
            pid,
            tenure,
        }
    }

    pub(crate) fn slab(&self) -> &SlabView {
        self.mapping.view()
    }

    pub(crate) fn region_map(&self) -> RegionMap<'_> {
        self.mapping.region_map()
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

    /// The pid this handle was opened with (0 for a producer's own view).
    #[must_use]
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Bytes mapped.
    #[must_use]
    pub fn mapped_len(&self) -> usize {
        self.slab().len()
    }

    /// Whether the slab file shrank under this handle (someone truncated it): from the first
    /// page found missing on, the mapping reads zeros instead of raising SIGBUS, so nothing read
    /// since belongs to the owner. Always `false` for the device backend.
    #[must_use]
    pub fn file_truncated(&self) -> bool {
        self.mapping.truncated()
    }

    /// The kernel-maintained slab generation (see
    /// [`SLAB_GENERATION_OFFSET`](nds_abi::layout::SLAB_GENERATION_OFFSET)): odd while the slab
    /// is owned, even while free. `None` if the mapping is too short to contain it (small files).
    #[must_use]
    pub fn slab_generation(&self) -> Option<u64> {
        self.slab().load_u64(SLAB_GENERATION_OFFSET).ok()
    }

    /// The generation this handle attached to (the one seen at open), if the mapping reaches it.
    #[must_use]
    pub fn attached_generation(&self) -> Option<u64> {
        self.tenure.map(|tenure| tenure.generation)
    }

    /// Whether the slab generation moved since this handle was opened: the owner released the
    /// slab (its contents were cleared) and it may now belong to another process.
    #[must_use]
    pub fn slab_reused(&self) -> bool {
        self.attached_generation() != self.slab_generation()
    }

    /// `Some(generation)` if the slab no longer belongs to the owner this handle attached to.
    ///
    /// The check closes the generation protocol (see [`SlabRead`]) for everything read before
    /// the call: an acquire fence, then the generation. `None` after a snapshot and record
    /// reads means all of them were of the attached owner's slab. Always `None` for a mapping
    /// that does not reach the generation word.
    #[must_use]
    pub fn moved(&self) -> Option<u64> {
        let tenure = self.tenure?;
        moved_since(tenure, || self.generation_word())
    }

    /// Relaxed load of the generation word, which the tenure's existence says is mapped.
    fn generation_word(&self) -> u64 {
        self.slab().load_u64(SLAB_GENERATION_OFFSET).unwrap_or(0)
    }

    /// Copies every counter into `out` while the slab stays with the owner this handle
    /// attached to: one acquire load of the generation, relaxed word loads of the four counter
    /// bands in straight loops, a fence and the generation again, retried a bounded number of
    /// times (the protocol is [`SlabRead`]'s).
    ///
    /// On [`SlabRead::Moved`] or [`SlabRead::Torn`] the contents of `out` are unspecified.
    pub fn snapshot<'s>(&self, out: &'s mut CounterSnapshot) -> SlabRead<&'s CounterSnapshot> {
        let map = self.region_map();
        let outcome = match self.tenure {
            Some(tenure) => read_guarded(
                tenure,
                || self.generation_word(),
                || copy_counters(map, out),
            ),
            // No generation word in the mapping (a short file): nothing can move it.
            None => {
                copy_counters(map, out);
                SlabRead::Valid(())
            }
        };
        outcome.map(|()| &*out)
    }

    /// A read handle on ND `counter`.
    #[must_use]
    pub fn nd(&self, counter: NdCounter) -> CounterView<'_> {
        CounterView::new(nd_word(self.region_map(), counter))
    }

    /// A read handle on per-core `counter` of `core`.
    #[must_use]
    pub fn nc(&self, core: NeuronCore, counter: impl CoreCounter) -> CounterView<'_> {
        CounterView::new(nc_word(self.region_map(), core, counter))
    }

    /// Reads ND counter `index` with one 8-byte atomic load.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidNdCounter`] for `index >= 31`.
    #[inline]
    pub fn nd_counter(&self, index: usize) -> Result<u64> {
        let offset = nd_offset(index)?;
        self.load_counter(offset)
    }

    /// Reads counter `index` of NeuronCore `core` with one 8-byte atomic load.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidCore`] for `core >= 16`, [`Error::InvalidNcCounter`] for `index >= 95`.
    #[inline]
    pub fn nc_counter(&self, core: usize, index: usize) -> Result<u64> {
        let offset = nc_offset(core, index)?;
        self.load_counter(offset)
    }

    #[inline]
    fn load_counter(&self, offset: usize) -> Result<u64> {
        let word = self.region_map().word(offset);
        word.map(|word| CounterView::new(word).get())
            .ok_or_else(|| self.too_small())
    }

    pub(crate) fn too_small(&self) -> Error {
        Error::SlabTooSmall {
            size: u64::try_from(self.mapped_len()).unwrap_or(u64::MAX),
        }
    }

    /// Reads the process-info record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the record.
    pub fn read_process_info(&self) -> Result<Snapshot<ProcessInfo>> {
        let mut info = ProcessInfo::new_zeroed();
        let state = read_with_retry(
            self.slab(),
            NDS_PROCESS_INFO_START,
            size_of::<ProcessInfoRecord>(),
            &mut [info.as_mut_bytes()],
        )?;
        Ok(state.with(info))
    }

    /// Reads the process-info-ext record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the record.
    pub fn read_process_info_ext(&self) -> Result<Snapshot<ProcessInfoExt>> {
        let mut info = ProcessInfoExt::new_zeroed();
        let state = read_with_retry(
            self.slab(),
            NDS_PROCESS_EXT_INFO_START,
            size_of::<ProcessInfoExtRecord>(),
            &mut [info.as_mut_bytes()],
        )?;
        Ok(state.with(info))
    }

    /// The model occupancy bitmap (bit `i` set: slot `i` in use).
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the bitmap.
    pub fn model_bitmap(&self) -> Result<u64> {
        self.slab().load_u64(NDS_MODEL_BITMAP_START)
    }

    /// Reads one slot's record into `model`, which is built in place: the payload is copied
    /// straight from the slab into its fields while the hash is computed.
    ///
    /// On [`Snapshot::Empty`] or [`Snapshot::Torn`] the contents of `model` are unspecified.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the records.
    #[inline]
    pub fn read_model_into<'m>(
        &self,
        slot: ModelSlot,
        model: &'m mut Model,
    ) -> Result<Snapshot<&'m Model>> {
        let offset = model_record_offset(slot.index())
            .ok_or(Error::InvalidModelSlot { slot: slot.index() })?;
        model.slot = slot;
        let state = read_with_retry(
            self.slab(),
            offset,
            size_of::<ModelRecord>(),
            &mut [
                model.node_info.as_mut_bytes(),
                model.mem_usage.as_mut_bytes(),
            ],
        )?;
        Ok(state.with(&*model))
    }

    /// Reads one slot's record.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the records.
    pub fn read_model(&self, slot: ModelSlot) -> Result<Snapshot<Model>> {
        let mut model = Model::zeroed(slot);
        let state = self.read_model_into(slot, &mut model)?.map(|_| ());
        Ok(state.map(|()| model))
    }

    /// Reads every occupied slot, in slot order; slots whose record is empty (allocated but not
    /// yet committed, or being deleted) are skipped, torn ones reported as such.
    ///
    /// # Errors
    ///
    /// None in practice: the mapping always covers the records.
    pub fn read_all_models(&self) -> Result<Vec<ModelEntry>> {
        let used = self.model_bitmap()?;
        let mut models = Vec::new();
        let mut spare: Option<Box<Model>> = None;
        for slot in (0..NDS_MAX_MODEL_COUNT).filter_map(ModelSlot::new) {
            if used & slot.bit() == 0 {
                continue;
            }
            let mut model = spare
                .take()
                .unwrap_or_else(|| Box::new(Model::zeroed(slot)));
            match self.read_model_into(slot, &mut model)?.map(|_| ()) {
                Snapshot::Valid(()) => models.push(ModelEntry::Valid(model)),
                Snapshot::Torn => {
                    models.push(ModelEntry::Torn(slot));
                    spare = Some(model);
                }
                Snapshot::Empty => spare = Some(model),
            }
        }
        Ok(models)
    }
}

/// The byte offset of ND counter `index`.
#[inline]
pub(crate) fn nd_offset(index: usize) -> Result<usize> {
    // A match, not `ok_or`: an eagerly built error would leave its drop on the success path.
    match nd_counter_offset(index) {
        Some(offset) => Ok(offset),
        None => Err(Error::InvalidNdCounter { index }),
    }
}

/// The byte offset of counter `index` of NeuronCore `core`.
#[inline]
pub(crate) fn nc_offset(core: usize, index: usize) -> Result<usize> {
    nc_counter_offset(core, index).map_err(|error| match error {
        CounterAddressError::InvalidCore => Error::InvalidCore { core },
        CounterAddressError::InvalidCounter => Error::InvalidNcCounter { core, index },
    })
}

/// Checks the header word, pausing once and checking again if it is not there yet.
fn check_header(view: &SlabView, pause: impl FnOnce()) -> Result<()> {
    if view.load_u64(NDS_HEADER_START)? == NDS_HEADER_WORD {
        return Ok(());
    }
    pause();
    let found = view.load_u64(NDS_HEADER_START)?;
    if found == NDS_HEADER_WORD {
        Ok(())
    } else {
        Err(Error::BadHeader { found })
    }
}
