//! Latency percentiles from sampled values.
//!
//! The runtime *sets* the latency counters to the latest execution's values, so the monitor
//! samples them between reports (only on cores whose inference count moved) and summarizes the
//! samples of each period. Values are microseconds in the slab and seconds in the report.

use crate::document::Percentiles;

/// Samples collected since the last report, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencySamples {
    /// End-to-end latencies.
    pub total: Vec<u64>,
    /// Device latencies.
    pub device: Vec<u64>,
}

impl LatencySamples {
    /// Adds one `(total, device)` sample.
    pub fn push(&mut self, (total, device): (u64, u64)) {
        self.total.push(total);
        self.device.push(device);
    }

    /// Takes the samples out, leaving the collection empty.
    pub fn take(&mut self) -> Self {
        std::mem::take(self)
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
