// SPDX-License-Identifier: GPL-2.0

//! The counters the kernel reads out of a slab: live, word by word through the three-band layout
//! of the wire format, or from one snapshot taken when the slab is released.

use crate::{
    abi::{
        counters::{
            NdCounter,
            NDS_ND_COUNTER_COUNT,
            NDS_TOTAL_NC_COUNTER_COUNT, //
        },
        layout::{
            nc_counter_offset,
            nd_counter_offset,
            NDS_PROCESS_INFO_SIZE,
            NDS_PROCESS_INFO_START,
            NEURON_DATASTORE_SIZE,
            SLAB_GENERATION_OFFSET, //
        },
        records::{
            record_hash,
            ProcessInfo,
            ProcessInfoRecord, //
        },
    },
    shim::shared_pages::{
        SharedPages,
        WordOffset,
        Words, //
    },
    state::{
        core_index::{
            CoreIndex,
            PerCore, //
        },
        nc_index::NcIndex,
    },
};
use kernel::{
    page::PAGE_SIZE,
    prelude::*, //
};
use zerocopy::FromBytes;

/// Pages in one slab.
pub(crate) const SLAB_PAGES: usize = NEURON_DATASTORE_SIZE / PAGE_SIZE;

/// A slab's pages, shared with the processes that map it.
pub(crate) type Slab = SharedPages<SLAB_PAGES>;

/// A word of a slab.
pub(crate) type SlabWord = WordOffset<SLAB_PAGES>;

/// The slab's generation word, which the kernel writes.
pub(crate) const GENERATION_WORD: SlabWord = match SlabWord::new(SLAB_GENERATION_OFFSET) {
    Some(word) => word,
    // PANIC: evaluated at compile time; the layout puts the generation at an aligned offset
    // inside the slab.
    None => panic!("the generation word is outside the slab"),
};

/// The counters of one slab.
pub(crate) trait SlabValues {
    /// Counter `counter` of NeuronCore `core`.
    fn nc(&self, core: CoreIndex, counter: NcIndex) -> u64;
    /// ND counter `counter`.
    fn nd(&self, counter: NdCounter) -> u64;
}

impl<T: SlabValues + ?Sized> SlabValues for &T {
    fn nc(&self, core: CoreIndex, counter: NcIndex) -> u64 {
        (**self).nc(core, counter)
    }

    fn nd(&self, counter: NdCounter) -> u64 {
        (**self).nd(counter)
    }
}

/// A slab read as it is now, one atomic 8-byte load per counter (the owner may be writing),
/// with the slab's word lock held until it is dropped.
pub(crate) struct LiveSlab<'a>(Words<'a, SLAB_PAGES>);

impl<'a> LiveSlab<'a> {
    /// Reads `slab`.
    #[inline]
    pub(crate) fn of(slab: &'a Slab) -> Self {
        Self(slab.words())
    }
}

impl SlabValues for LiveSlab<'_> {
    /// Every (core, counter) pair has a word in the layout; one that had none would read 0.
    fn nc(&self, core: CoreIndex, counter: NcIndex) -> u64 {
        nc_counter_offset(core.get(), counter.get())
            .ok()
            .and_then(SlabWord::new)
            .map_or(0, |word| self.0.load(word))
    }

    fn nd(&self, counter: NdCounter) -> u64 {
        nd_counter_offset(counter.index())
            .and_then(SlabWord::new)
            .map_or(0, |word| self.0.load(word))
    }
}

impl LiveSlab<'_> {
    /// The process-info record the owner published, if its hash checks: read word by word
    /// (the owner may be rewriting it, which the hash then refuses).
    pub(crate) fn process_info(&self) -> Option<ProcessInfo> {
        let mut bytes = [0u8; NDS_PROCESS_INFO_SIZE];
        for (at, chunk) in (NDS_PROCESS_INFO_START..)
            .step_by(8)
            .zip(bytes.chunks_mut(8))
        {
            let word = SlabWord::new(at).map_or(0, |word| self.0.load(word));
            let word = word.to_ne_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        let record = ProcessInfoRecord::read_from_bytes(&bytes).ok()?;
        (record.hash != 0 && record.hash == record_hash(&bytes)).then_some(record.info)
    }
}

const _: () = assert!(NDS_PROCESS_INFO_START.is_multiple_of(8));

/// Every counter of a device's cores in one slab, and its published process-info, copied at
/// one moment.
pub(crate) struct SlabSnapshot {
    /// Cores of the device, whose counters are copied; the others' stay 0.
    core_count: usize,
    /// Per core, its counters by index.
    nc: KBox<PerCore<[u64; NDS_TOTAL_NC_COUNTER_COUNT]>>,
    nd: [u64; NDS_ND_COUNTER_COUNT],
    process_info: Option<ProcessInfo>,
}

impl SlabSnapshot {
    /// Room for the counters of `core_count` cores.
    pub(crate) fn new(core_count: usize) -> Result<Self> {
        Ok(Self {
            core_count,
            nc: KBox::init(
                PerCore::try_init(|_| Ok([0; NDS_TOTAL_NC_COUNTER_COUNT])),
                GFP_KERNEL,
            )?,
            nd: [0; NDS_ND_COUNTER_COUNT],
            process_info: None,
        })
    }

    /// The cores whose counters are copied.
    pub(crate) fn core_count(&self) -> usize {
        self.core_count
    }

    /// The process-info record published when the snapshot was taken.
    pub(crate) fn process_info(&self) -> Option<&ProcessInfo> {
        self.process_info.as_ref()
    }

    /// Copies every counter of the device's cores, every ND counter and the published
    /// process-info out of `slab`.
    pub(crate) fn take(&mut self, slab: &LiveSlab<'_>) {
        self.process_info = slab.process_info();
        for core in CoreIndex::first(self.core_count) {
            for (counter, value) in NcIndex::all().zip(self.nc[core].iter_mut()) {
                *value = slab.nc(core, counter);
            }
        }
        for (index, value) in self.nd.iter_mut().enumerate() {
            *value = NdCounter::from_index(index).map_or(0, |counter| slab.nd(counter));
        }
    }
}

impl SlabValues for SlabSnapshot {
    fn nc(&self, core: CoreIndex, counter: NcIndex) -> u64 {
        // PANIC: never, `counter.get()` is below the number of a core's counters.
        self.nc[core][counter.get()]
    }

    fn nd(&self, counter: NdCounter) -> u64 {
        self.nd.get(counter.index()).copied().unwrap_or(0)
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_slab_values)]
mod tests {
    use super::*;
    use crate::abi::{
        counters::NcCounter,
        layout::{
            NDS_EXT_NEURONCORE_COUNTERS_START,
            NDS_EXT_NEURONCORE_NC_DATA_START,
            NDS_NEURONCORE_COUNTERS_START,
            NEURON_DATASTORE_SIZE, //
        },
    };
    use kernel::page::PAGE_SIZE;

    fn new_slab() -> Result<Pin<KBox<Slab>>> {
        Slab::new_zeroed()
    }

    fn word(offset: usize) -> Result<SlabWord> {
        SlabWord::new(offset).ok_or(EINVAL)
    }

    fn nth_core(index: usize) -> Result<CoreIndex> {
        CoreIndex::new(index).ok_or(EINVAL)
    }

    fn nth_counter(index: usize) -> Result<NcIndex> {
        NcIndex::new(index).ok_or(EINVAL)
    }

    #[test]
    fn each_band_reads_the_word_at_its_documented_offset() -> Result {
        let slab = new_slab()?;
        // (core, index, byte offset) spot checks of the original layout.
        let cases = [
            (0, 0, 256),
            (3, 30, 1240),
            (0, 31, 55936),
            (3, 94, 57976),
            (4, 0, 57984),
            (15, 94, 67184),
        ];
        for (n, (_, _, offset)) in cases.into_iter().enumerate() {
            slab.store(word(offset)?, 1000 + u64::try_from(n)?);
        }
        for (n, (core, index, _)) in cases.into_iter().enumerate() {
            assert_eq!(
                LiveSlab::of(&slab).nc(nth_core(core)?, nth_counter(index)?),
                1000 + u64::try_from(n)?
            );
        }
        assert_eq!(NDS_NEURONCORE_COUNTERS_START, 0x100);
        assert_eq!(NDS_EXT_NEURONCORE_COUNTERS_START, 0xDA80);
        assert_eq!(NDS_EXT_NEURONCORE_NC_DATA_START, 0xE280);
        Ok(())
    }

    #[test]
    fn counters_0_to_30_of_cores_4_and_up_live_only_in_the_ext_data_band() -> Result {
        let slab = new_slab()?;
        // Core 4, counter 1 is at 57984 + 8; the NC band slot right after core 3 is not it.
        slab.store(word(57984 + 8)?, 42);
        slab.store(word(256 + 8 * (31 * 4 + 1))?, 7);
        assert_eq!(LiveSlab::of(&slab).nc(nth_core(4)?, nth_counter(1)?), 42);
        Ok(())
    }

    #[test]
    fn every_pair_has_its_own_word_and_there_is_no_seventeenth_core_or_96th_counter() -> Result {
        let slab = new_slab()?;
        // Every (core, counter) word gets a distinct value: two pairs sharing a word, or a
        // pair outside the slab, would show.
        for (n, (core, counter)) in CoreIndex::all()
            .flat_map(|core| NcIndex::all().map(move |counter| (core, counter)))
            .enumerate()
        {
            let offset = nc_counter_offset(core.get(), counter.get()).map_err(|_| EINVAL)?;
            slab.store(word(offset)?, u64::try_from(n)? + 1);
        }
        let live = LiveSlab::of(&slab);
        for (n, (core, counter)) in CoreIndex::all()
            .flat_map(|core| NcIndex::all().map(move |counter| (core, counter)))
            .enumerate()
        {
            assert_eq!(live.nc(core, counter), u64::try_from(n)? + 1);
        }
        assert!(CoreIndex::new(16).is_none());
        assert!(CoreIndex::new(usize::MAX).is_none());
        assert!(NcIndex::new(95).is_none());
        Ok(())
    }

    #[test]
    fn a_snapshot_keeps_the_values_of_the_moment_it_was_taken() -> Result {
        let slab = new_slab()?;
        let success =
            word(nc_counter_offset(1, NcCounter::InferCompleted.index()).map_err(|_| EINVAL)?)?;
        let cluster = word(nd_counter_offset(NdCounter::DeviceClusterId.index()).ok_or(EINVAL)?)?;
        slab.store(success, 5);
        slab.store(cluster, 9);
        let mut snapshot = SlabSnapshot::new(2)?;
        snapshot.take(&LiveSlab::of(&slab));
        slab.store(success, 6);
        assert_eq!(
            snapshot.nc(
                nth_core(1)?,
                nth_counter(NcCounter::InferCompleted.index())?
            ),
            5
        );
        assert_eq!(snapshot.nd(NdCounter::DeviceClusterId), 9);
        // Cores beyond the device are not copied.
        let beyond =
            word(nc_counter_offset(2, NcCounter::InferCompleted.index()).map_err(|_| EINVAL)?)?;
        slab.store(beyond, 4);
        snapshot.take(&LiveSlab::of(&slab));
        assert_eq!(
            snapshot.nc(
                nth_core(2)?,
                nth_counter(NcCounter::InferCompleted.index())?
            ),
            0
        );
        assert_eq!(
            snapshot.nc(
                nth_core(1)?,
                nth_counter(NcCounter::InferCompleted.index())?
            ),
            6
        );
        Ok(())
    }

    #[test]
    fn zeroing_clears_every_page() -> Result {
        let slab = new_slab()?;
        for offset in (0..NEURON_DATASTORE_SIZE).step_by(PAGE_SIZE) {
            slab.store(word(offset + PAGE_SIZE - 8)?, 3);
        }
        slab.zero_all();
        for offset in (0..NEURON_DATASTORE_SIZE).step_by(8) {
            assert_eq!(slab.load(word(offset)?), 0);
        }
        assert_eq!(SlabWord::new(NEURON_DATASTORE_SIZE), None);
        assert_eq!(SlabWord::new(4), None);
        assert!(SlabWord::new(NEURON_DATASTORE_SIZE - 8).is_some());
        Ok(())
    }
}
