//! The latest pod attribution, published by the refresher and read by the sampling loop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::attribution::Attribution;

/// A mapping and when it was had.
#[derive(Debug)]
struct Published {
    at: Instant,
    attribution: Arc<Attribution>,
}

#[derive(Debug)]
struct Shared {
    latest: Mutex<Option<Published>>,
    failures: AtomicU64,
    keep_for: Duration,
}

/// The latest mapping from the kubelet, and how many calls to it failed; clones share it.
#[derive(Clone, Debug)]
pub struct PodFeed {
    shared: Arc<Shared>,
}

impl PodFeed {
    /// No mapping yet; one is used until it is `keep_for` old.
    #[must_use]
    pub fn new(keep_for: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                latest: Mutex::new(None),
                failures: AtomicU64::new(0),
                keep_for,
            }),
        }
    }

    fn latest(&self) -> MutexGuard<'_, Option<Published>> {
        self.shared
            .latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the mapping with `attribution`, had at `at`.
    pub fn publish(&self, attribution: Attribution, at: Instant) {
        *self.latest() = Some(Published {
            at,
            attribution: Arc::new(attribution),
        });
    }

    /// Counts a call that failed (the mapping stays until it is too old).
    pub fn failed(&self) {
        self.shared.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// The mapping to use at `now`: the latest, unless there is none or it is too old.
    #[must_use]
    pub fn current(&self, now: Instant) -> Option<Arc<Attribution>> {
        self.latest()
            .as_ref()
            .filter(|latest| now.saturating_duration_since(latest.at) <= self.shared.keep_for)
            .map(|latest| Arc::clone(&latest.attribution))
    }

    /// Calls that failed so far.
    #[must_use]
    pub fn failures(&self) -> u64 {
        self.shared.failures.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_is_used_until_it_is_too_old_and_failures_are_counted() {
        let t0 = Instant::now();
        let feed = PodFeed::new(Duration::from_secs(30));
        assert_eq!(feed.current(t0), None, "nothing published yet");
        let reader = feed.clone();
        feed.publish(Attribution::default(), t0);
        assert_eq!(reader.current(t0).as_deref(), Some(&Attribution::default()));
        // Reading twice is the same mapping (the same allocation): reads change nothing.
        let (one, two) = (reader.current(t0).unwrap(), reader.current(t0).unwrap());
        assert!(Arc::ptr_eq(&one, &two));
        feed.failed();
        feed.failed();
        assert_eq!(reader.failures(), 2);
        let at_bound = t0 + Duration::from_secs(30);
        assert!(reader.current(at_bound).is_some(), "kept through failures");
        assert_eq!(reader.current(at_bound + Duration::from_millis(1)), None);
        // A new mapping is used again.
        feed.publish(Attribution::default(), at_bound);
        assert!(reader.current(at_bound + Duration::from_secs(1)).is_some());
    }
}
