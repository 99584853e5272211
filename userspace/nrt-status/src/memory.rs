//! An in-memory [`CounterSink`]: the expected per-counter totals of a stream of bridge events,
//! computed without any datastore.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::sink::CounterSink;
use crate::Counter;

/// Counter values keyed by (NeuronCore, counter). Counters never written read as zero;
/// additions wrap like the datastore's 64-bit counters.
#[derive(Debug, Default)]
pub struct MemorySink {
    values: Mutex<HashMap<(usize, Counter), u64>>,
}

impl MemorySink {
    /// An empty tally.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of `counter` on `core` (zero if never written).
    pub fn get(&self, core: usize, counter: Counter) -> u64 {
        self.lock().get(&(core, counter)).copied().unwrap_or(0)
    }

    /// Every counter written so far, with its value.
    pub fn snapshot(&self) -> HashMap<(usize, Counter), u64> {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(usize, Counter), u64>> {
        // A panic elsewhere cannot leave a half-written u64 behind, so poisoning is harmless.
        self.values.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl CounterSink for MemorySink {
    type Error = Infallible;

    fn add_nc(&self, core: usize, counter: Counter, delta: u64) -> Result<(), Self::Error> {
        let mut values = self.lock();
        let value = values.entry((core, counter)).or_insert(0);
        *value = value.wrapping_add(delta);
        Ok(())
    }

    fn set_nc(&self, core: usize, counter: Counter, value: u64) -> Result<(), Self::Error> {
        self.lock().insert((core, counter), value);
        Ok(())
    }
}
