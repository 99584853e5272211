//! The errors counted within the last window, per device, core and counter: each rise is kept
//! with when it was seen (rises seen at one report are one entry), and forgotten once it is
//! older than the window. A counter that never rose has no entry; one that rose has at most
//! one entry per report within the window.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// Where a counter is: a device, and a core of it (none for the driver's device counters).
type Place = (u32, Option<usize>, &'static str);

/// The rises within the window.
#[derive(Debug)]
pub struct ErrorWindow {
    window: Duration,
    rises: BTreeMap<Place, VecDeque<(Instant, u64)>>,
}

impl ErrorWindow {
    /// No rise yet, counted over `window`.
    #[must_use]
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            rises: BTreeMap::new(),
        }
    }

    /// Counter `counter` of `device` (core `core` of it, if any) rose by `delta`, seen at `now`.
    pub fn add(
        &mut self,
        now: Instant,
        (device, core): (u32, Option<usize>),
        counter: &'static str,
        delta: u64,
    ) {
        let rises = self.rises.entry((device, core, counter)).or_default();
        match rises.back_mut() {
            Some((at, sum)) if *at == now => *sum += delta,
            _ => rises.push_back((now, delta)),
        }
    }

    /// Forgets the rises older than the window at `now`.
    pub fn forget_before(&mut self, now: Instant) {
        let Some(since) = now.checked_sub(self.window) else {
            return;
        };
        self.rises.retain(|_, rises| {
            while rises.front().is_some_and(|(at, _)| *at < since) {
                rises.pop_front();
            }
            !rises.is_empty()
        });
    }

    /// The errors of `device` within the window, by counter: its cores' and its own.
    #[must_use]
    pub fn of_device(&self, device: u32) -> BTreeMap<String, u64> {
        self.sum(|(at, _, _)| *at == device)
    }

    /// The errors of core `core` of `device` within the window, by counter.
    #[must_use]
    pub fn of_core(&self, device: u32, core: usize) -> BTreeMap<String, u64> {
        self.sum(|(at, on, _)| *at == device && *on == Some(core))
    }

    fn sum(&self, wanted: impl Fn(&Place) -> bool) -> BTreeMap<String, u64> {
        let mut sums = BTreeMap::new();
        for (place, rises) in self.rises.iter().filter(|(place, _)| wanted(place)) {
            let total: u64 = rises.iter().map(|(_, delta)| delta).sum();
            *sums.entry(place.2.to_owned()).or_insert(0) += total;
        }
        sums
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rises_count_until_they_are_older_than_the_window() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let mut window = ErrorWindow::new(10 * second);
        window.add(t0, (0, Some(1)), "hw_nc_ue_error", 2);
        window.add(t0, (0, Some(1)), "hw_nc_ue_error", 1);
        window.add(t0 + 5 * second, (0, Some(0)), "hw_nc_ue_error", 4);
        window.add(t0 + 5 * second, (0, None), "mem_ecc_uncorrected", 1);
        window.add(t0 + 5 * second, (1, Some(0)), "hw_nc_ue_error", 8);
        assert_eq!(window.of_core(0, 1)["hw_nc_ue_error"], 3);
        assert_eq!(window.of_device(0)["hw_nc_ue_error"], 7);
        assert_eq!(window.of_device(0)["mem_ecc_uncorrected"], 1);
        window.forget_before(t0 + 12 * second);
        assert!(window.of_core(0, 1).is_empty(), "older than the window");
        assert_eq!(window.of_device(0)["hw_nc_ue_error"], 4);
        window.forget_before(t0 + 16 * second);
        assert!(window.of_device(0).is_empty() && window.of_device(1).is_empty());
        assert!(
            window.rises.is_empty(),
            "nothing kept for counters that no longer count"
        );
    }
}
