//! Latency percentiles from sampled values, in bounded memory.
//!
//! The runtime *sets* the latency counters to the latest execution's values, so the monitor
//! samples them between reports (only on cores whose inference count moved, and only for
//! processes whose rule reports `execution_stats`) and summarizes the samples of each period.
//! A period keeps at most [`RESERVOIR_CAPACITY`] samples of each kind, a uniform random choice
//! of all it saw (reservoir sampling), however long the period and however busy the process.
//! Values are microseconds in the slab and seconds in the report.

use crate::document::Percentiles;

/// Samples kept per kind and period.
pub const RESERVOIR_CAPACITY: usize = 1024;

/// The samples of one period, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencySamples {
    /// End-to-end latencies.
    pub total: Vec<u64>,
    /// Device latencies.
    pub device: Vec<u64>,
}

/// A uniform sample of at most [`RESERVOIR_CAPACITY`] values of a stream.
#[derive(Clone, Debug)]
struct Reservoir {
    kept: Vec<u64>,
    seen: u64,
}

impl Reservoir {
    const fn new() -> Self {
        Self {
            kept: Vec::new(),
            seen: 0,
        }
    }

    /// Offers `value`; `random` is a fresh pseudo-random number.
    fn offer(&mut self, value: u64, random: u64) {
        self.seen += 1;
        if self.kept.len() < RESERVOIR_CAPACITY {
            self.kept.push(value);
        } else if let Some(place) = usize::try_from(random % self.seen)
            .ok()
            .and_then(|index| self.kept.get_mut(index))
        {
            *place = value;
        }
    }

    fn take(&mut self) -> Vec<u64> {
        self.seen = 0;
        std::mem::take(&mut self.kept)
    }
}

/// The current period's latency samples of one process.
#[derive(Clone, Debug)]
pub struct LatencyReservoir {
    total: Reservoir,
    device: Reservoir,
    state: u64,
}

impl Default for LatencyReservoir {
    fn default() -> Self {
        Self {
            total: Reservoir::new(),
            device: Reservoir::new(),
            state: 0x9E37_79B9_7F4A_7C15,
        }
    }
}

impl LatencyReservoir {
    /// Offers one `(total, device)` sample.
    pub fn push(&mut self, (total, device): (u64, u64)) {
        // xorshift64: cheap and good enough to pick which kept sample to replace.
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.total.offer(total, self.state);
        self.device.offer(device, self.state.rotate_left(32));
    }

    /// Samples offered since the last [`take`](Self::take) (kept or not).
    #[must_use]
    pub fn seen(&self) -> u64 {
        self.total.seen
    }

    /// Samples kept now, both kinds together.
    #[must_use]
    pub fn held(&self) -> usize {
        self.total.kept.len() + self.device.kept.len()
    }

    /// The period's samples, starting the next period empty.
    pub fn take(&mut self) -> LatencySamples {
        LatencySamples {
            total: self.total.take(),
            device: self.device.take(),
        }
    }
}

/// Nearest-rank percentiles of `samples` (microseconds) in seconds; `None` when empty.
#[must_use]
pub fn percentiles(samples: &[u64]) -> Option<Percentiles> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let last = sorted.len().checked_sub(1)?;
    let at = |percent: usize| {
        let rank = (percent * sorted.len())
            .div_ceil(100)
            .saturating_sub(1)
            .min(last);
        sorted.get(rank).map_or(0.0, |&us| us as f64 / 1e6)
    };
    Some(Percentiles {
        p0: at(0),
        p1: at(1),
        p25: at(25),
        p50: at(50),
        p75: at(75),
        p99: at(99),
        p100: at(100),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reservoir_is_bounded_and_uniform_enough() {
        let mut reservoir = LatencyReservoir::default();
        for value in 0..100_000u64 {
            reservoir.push((value, value / 2));
        }
        assert_eq!(reservoir.seen(), 100_000);
        let samples = reservoir.take();
        assert_eq!(samples.total.len(), RESERVOIR_CAPACITY);
        assert_eq!(samples.device.len(), RESERVOIR_CAPACITY);
        // A uniform choice of 0..100 000 has its median near 50 000.
        let median = percentiles(&samples.total).unwrap().p50 * 1e6;
        assert!((40_000.0..60_000.0).contains(&median), "{median}");
        assert_eq!(reservoir.seen(), 0);
        reservoir.push((7, 3));
        assert_eq!(reservoir.take().total, [7]);
    }

    #[test]
    fn nearest_rank() {
        assert_eq!(percentiles(&[]), None);
        let samples: Vec<u64> = (1..=100).rev().map(|v| v * 1000).collect();
        let p = percentiles(&samples).unwrap();
        assert_eq!(
            (p.p0, p.p1, p.p50, p.p99, p.p100),
            (0.001, 0.001, 0.05, 0.099, 0.1)
        );
        let one = percentiles(&[2_500]).unwrap();
        assert_eq!((one.p0, one.p50, one.p100), (0.0025, 0.0025, 0.0025));
    }
}
