//! Writes that are recorded: every value goes into the slab first and, only once that
//! succeeded, into the producer's own tally, so the tally is exactly what landed.

use std::cell::RefCell;
use std::collections::BTreeMap;

use nds::{CounterSnapshot, NeuronCore, Producer, SlabRead};
use nds_abi::counters::{ExtNcCounter, NcCounter, NdCounter};
use nrt_status::{Counter, CounterSink, MemorySink};

use crate::error::{Error, Result};

/// What a producer has written: per-core counters and ND counters, as final values (the slab
/// starts zeroed, so a final value is exactly what the producer added).
#[derive(Debug, Default)]
pub struct Tally {
    nc: MemorySink,
    nd: RefCell<BTreeMap<usize, u64>>,
}

impl Tally {
    /// An empty tally.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The recorded value of per-core `counter` on `core` (0 if never written).
    #[must_use]
    pub fn nc(&self, core: usize, counter: Counter) -> u64 {
        self.nc.get(core, counter)
    }

    /// Every per-core counter written, with its value.
    #[must_use]
    pub fn nc_values(&self) -> BTreeMap<(usize, usize), (Counter, u64)> {
        self.nc
            .snapshot()
            .into_iter()
            .map(|((core, counter), value)| ((core, counter.index()), (counter, value)))
            .collect()
    }

    /// The recorded value of ND `counter` (0 if never written).
    #[must_use]
    pub fn nd(&self, counter: NdCounter) -> u64 {
        self.nd.borrow().get(&counter.index()).copied().unwrap_or(0)
    }

    /// Checks that `store` holds exactly the recorded values in every named counter of cores
    /// `0..cores` and every named ND counter, from one snapshot of the slab as a reader sees it.
    ///
    /// # Errors
    ///
    /// [`Error::SelfCheck`] naming the first difference, or saying that the slab moved.
    pub fn verify(&self, store: &Producer, cores: usize) -> Result<()> {
        let mut snapshot = Box::new(CounterSnapshot::new());
        let slab = match store.reader().snapshot(&mut snapshot) {
            SlabRead::Valid(slab) => slab,
            SlabRead::Moved { generation } => {
                return Err(Error::SelfCheck(format!(
                    "the own slab moved to generation {generation}"
                )))
            }
            SlabRead::Torn => {
                return Err(Error::SelfCheck(
                    "the own slab's generation word is being rewritten".into(),
                ))
            }
        };
        let per_core = NcCounter::ALL
            .iter()
            .map(|&c| Counter::Nc(c))
            .chain(ExtNcCounter::ALL.iter().map(|&c| Counter::Ext(c)));
        for counter in per_core {
            for core in NeuronCore::ALL.into_iter().take(cores) {
                let (slab, recorded) = (slab.nc(core, counter), self.nc(core.index(), counter));
                if slab != recorded {
                    return Err(Error::SelfCheck(format!(
                        "core {} {counter}: slab holds {slab}, recorded {recorded}",
                        core.index()
                    )));
                }
            }
        }
        for &counter in NdCounter::ALL {
            let (slab, recorded) = (slab.nd(counter), self.nd(counter));
            if slab != recorded {
                return Err(Error::SelfCheck(format!(
                    "{}: slab holds {slab}, recorded {recorded}",
                    counter.name()
                )));
            }
        }
        Ok(())
    }

    /// Every ND counter written, with its value.
    #[must_use]
    pub fn nd_values(&self) -> Vec<(NdCounter, u64)> {
        self.nd
            .borrow()
            .iter()
            .filter_map(|(&index, &value)| NdCounter::from_index(index).map(|c| (c, value)))
            .collect()
    }
}

/// A producer's datastore handle paired with its tally.
#[derive(Debug)]
pub struct Recorder<'a> {
    store: &'a Producer,
    tally: &'a Tally,
}

impl<'a> Recorder<'a> {
    /// Records writes to `store` into `tally`.
    #[must_use]
    pub fn new(store: &'a Producer, tally: &'a Tally) -> Self {
        Self { store, tally }
    }

    /// The datastore written to.
    #[must_use]
    pub fn store(&self) -> &'a Producer {
        self.store
    }

    /// Sets ND `counter` to `value`.
    ///
    /// # Errors
    ///
    /// The datastore's error; nothing is recorded then.
    pub fn set_nd(&self, counter: NdCounter, value: u64) -> nds::Result<()> {
        self.store.set_nd_counter(counter.index(), value)?;
        self.tally.nd.borrow_mut().insert(counter.index(), value);
        Ok(())
    }

    /// ORs bit `bit` into ND `counter`.
    ///
    /// # Errors
    ///
    /// The datastore's error; nothing is recorded then.
    pub fn or_nd(&self, counter: NdCounter, bit: u64) -> nds::Result<()> {
        self.store.or_nd_counter(counter.index(), bit)?;
        let mask = u32::try_from(bit)
            .ok()
            .and_then(|shift| 1u64.checked_shl(shift))
            .unwrap_or(0);
        *self
            .tally
            .nd
            .borrow_mut()
            .entry(counter.index())
            .or_insert(0) |= mask;
        Ok(())
    }
}

impl CounterSink for Recorder<'_> {
    type Error = nds::Error;

    fn add_nc(&self, core: usize, counter: Counter, delta: u64) -> nds::Result<()> {
        self.store.add_nc(core, counter, delta)?;
        let Ok(()) = self.tally.nc.add_nc(core, counter, delta);
        Ok(())
    }

    fn set_nc(&self, core: usize, counter: Counter, value: u64) -> nds::Result<()> {
        self.store.set_nc(core, counter, value)?;
        let Ok(()) = self.tally.nc.set_nc(core, counter, value);
        Ok(())
    }
}
