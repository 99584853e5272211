//! Slabs for the host benchmarks, the full counter snapshot, and the `memcpy` reference.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use memmap2::{MmapOptions, MmapRaw};
use nds::{Backend, Producer, Reader};
use nds_abi::counters::{NDS_ND_COUNTER_COUNT, NDS_TOTAL_NC_COUNTER_COUNT};
use nds_abi::layout::{NDS_REQUIRED_SIZE, NDS_TOTAL_NEURONCORE_COUNT, NEURON_DATASTORE_SIZE};

use crate::counters::Counter;

/// Counters in a full snapshot: 31 ND + 16 cores × 95 NC.
pub const SNAPSHOT_COUNTERS: usize =
    NDS_ND_COUNTER_COUNT + NDS_TOTAL_NEURONCORE_COUNT * NDS_TOTAL_NC_COUNTER_COUNT;

/// A slab file in a fresh directory, removed on drop.
///
/// The directory is on `/dev/shm` when the host has it, so the slab is shared, cacheable memory
/// that is never written back, like the driver's pages.
#[derive(Debug)]
pub struct ScratchSlab {
    dir: PathBuf,
}

impl ScratchSlab {
    /// Creates the directory; `name` makes it recognizable.
    ///
    /// # Errors
    ///
    /// When the directory cannot be created.
    pub fn new(name: &str) -> io::Result<Self> {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("nds-bench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Self { dir })
    }

    /// The slab file.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.dir.join("slab")
    }

    /// The directory, for other scratch files of the same benchmark.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Opens the slab as its producer (read-write), creating it on first use.
    ///
    /// # Errors
    ///
    /// Those of [`Producer::open`].
    pub fn producer(&self) -> nds::Result<Producer> {
        Producer::open(&Backend::file(self.path()))
    }

    /// Opens the slab as a reader (read-only), as a monitor attached to another process does.
    ///
    /// # Errors
    ///
    /// Those of [`Reader::open`]; the producer must have opened the slab first.
    pub fn reader(&self) -> nds::Result<Reader> {
        let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        Reader::open(&Backend::file(self.path()), pid)
    }
}

impl Drop for ScratchSlab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads every counter of the slab one integer-index call at a time into `out`, ND counters
/// first, then each core's 95 NC counters: what a monitor did before `Reader::snapshot`.
///
/// # Errors
///
/// Those of [`Reader::nd_counter`] and [`Reader::nc_counter`].
pub fn snapshot_counters(
    datastore: &Reader,
    out: &mut [u64; SNAPSHOT_COUNTERS],
) -> nds::Result<()> {
    let (nd, nc) = out.split_at_mut(NDS_ND_COUNTER_COUNT);
    for (index, value) in nd.iter_mut().enumerate() {
        *value = datastore.nd_counter(index)?;
    }
    for (core, counters) in nc.chunks_exact_mut(NDS_TOTAL_NC_COUNTER_COUNT).enumerate() {
        for (index, value) in counters.iter_mut().enumerate() {
            *value = datastore.nc_counter(core, index)?;
        }
    }
    Ok(())
}

/// A read-only shared mapping of a slab's 67,200-byte region map: the `memcpy` reference.
///
/// The mapping hands out a raw pointer only: no Rust reference to memory the producer writes
/// is ever formed (it is only read by `memcpy`).
#[derive(Debug)]
pub struct RegionMap {
    map: MmapRaw,
}

impl RegionMap {
    /// Maps the region map of the slab file at `path`.
    ///
    /// # Errors
    ///
    /// When the file cannot be opened or mapped.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let map = MmapOptions::new()
            .len(NDS_REQUIRED_SIZE)
            .map_raw_read_only(&file)?;
        Ok(Self { map })
    }

    /// Copies the whole region map into `out` with the C library's `memcpy`, as a reader that
    /// trusts no layout would.
    pub fn copy_to(&self, out: &mut [u8; NDS_REQUIRED_SIZE]) {
        // SAFETY: the source is the `NDS_REQUIRED_SIZE` readable bytes mapped in `open`, alive
        // as long as `self`; `out` has as many and cannot overlap a mapping of a file.
        // Concurrent writers only change byte values.
        unsafe {
            libc::memcpy(
                out.as_mut_ptr().cast(),
                self.map.as_ptr().cast(),
                NDS_REQUIRED_SIZE,
            );
        }
    }
}

/// One counter word of a slab file, reached through a writable shared mapping of the whole
/// slab without the client library: what an increment costs on that memory, no API around it.
#[derive(Debug)]
pub struct MappedWord {
    map: MmapRaw,
    offset: usize,
}

impl MappedWord {
    /// Maps the slab file at `path` read-write and points at `counter`.
    ///
    /// # Errors
    ///
    /// When the file cannot be opened or mapped, or `counter` does not exist.
    pub fn open(path: &Path, counter: Counter) -> io::Result<Self> {
        let offset = counter
            .offset()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let file = File::options().read(true).write(true).open(path)?;
        let map = MmapOptions::new()
            .len(NEURON_DATASTORE_SIZE)
            .map_raw(&file)?;
        Ok(Self { map, offset })
    }

    /// The counter word.
    #[must_use]
    pub fn word(&self) -> &AtomicU64 {
        // SAFETY: `offset` is a counter's offset, inside the mapping and 8-aligned (the mapping
        // is page-aligned); the mapping lives as long as `self`, and every access to slab
        // words is atomic.
        unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(self.offset).cast()) }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::counters::{typed_increment, Band};

    #[test]
    fn every_benchmarked_counter_has_a_typed_handle_on_the_same_word() {
        let slab = ScratchSlab::new("unit-typed").unwrap();
        let producer = slab.producer().unwrap();
        for band in Band::ALL {
            for lane in 0..2 {
                let counter = band.counter(lane);
                let word = counter.word(&producer).expect("a named counter");
                typed_increment(word, 5);
                counter.increment(&producer, 1).unwrap();
                assert_eq!(
                    counter.read(producer.reader()).unwrap(),
                    6,
                    "{band:?} lane {lane}"
                );
                assert_eq!(word.get(), 6);
            }
        }
    }

    #[test]
    fn the_snapshot_sees_every_counter_once_and_in_order() {
        let slab = ScratchSlab::new("unit-snapshot").unwrap();
        let producer = slab.producer().unwrap();
        let mut expected = Vec::new();
        for index in 0..NDS_ND_COUNTER_COUNT {
            expected.push(Counter::Nd(index));
        }
        for core in 0..NDS_TOTAL_NEURONCORE_COUNT {
            for index in 0..NDS_TOTAL_NC_COUNTER_COUNT {
                expected.push(Counter::Nc { core, index });
            }
        }
        assert_eq!(expected.len(), SNAPSHOT_COUNTERS);
        for (value, counter) in (1..).zip(&expected) {
            counter.increment(&producer, value).unwrap();
        }
        let mut out = [0; SNAPSHOT_COUNTERS];
        snapshot_counters(&slab.reader().unwrap(), &mut out).unwrap();
        assert!(out.iter().copied().eq(1..=SNAPSHOT_COUNTERS as u64));
    }

    #[test]
    fn the_memcpy_reference_copies_the_region_map() {
        let slab = ScratchSlab::new("unit-memcpy").unwrap();
        let producer = slab.producer().unwrap();
        Counter::Nc {
            core: 15,
            index: 94,
        }
        .increment(&producer, 0xAB)
        .unwrap();
        let mut out = [0; NDS_REQUIRED_SIZE];
        RegionMap::open(&slab.path()).unwrap().copy_to(&mut out);
        assert_eq!(
            out[NDS_REQUIRED_SIZE - 16],
            0xAB,
            "last counter before the pad word"
        );
    }

    #[test]
    fn the_mapped_word_is_the_counter_the_library_increments() {
        let slab = ScratchSlab::new("unit-word").unwrap();
        let producer = slab.producer().unwrap();
        let counter = Counter::Nc { core: 5, index: 1 };
        counter.increment(&producer, 3).unwrap();
        let word = MappedWord::open(&slab.path(), counter).unwrap();
        assert_eq!(word.word().fetch_add(4, Ordering::Relaxed), 3);
        assert_eq!(counter.read(producer.reader()).unwrap(), 7);
        assert!(MappedWord::open(&slab.path(), Counter::Nd(31)).is_err());
    }
}
