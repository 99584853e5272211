//! The exporter's counters: every `*_total` series (and histogram) it renders, monotonic for
//! the life of the monitor.
//!
//! A series is one family and label set. Whatever feeds it (an attached slab, a device's
//! sysfs totals, the monitor's own latency sampling) holds a [`SeriesId`] and adds only
//! increases: a slab counter is followed by a [`Tracked`] value, whose first reading adds the
//! whole value (what the process counted before the monitor saw it), or nothing for a source
//! another monitor may have exposed already ([`Tracked::from_first_reading`]), and each later
//! one the increase since the one before, while a value that went down (its source restarted
//! from zero) adds itself. So processes sharing a tag add up, a process that ends leaves its last value
//! in the series, a reused slab or a new process under the same labels continues the series,
//! and nothing a scrape does moves anything.
//!
//! Memory is bounded: a series nothing feeds any more is idle; the oldest idle series beyond
//! [`Counters::max_idle`] *of their kind* are forgotten (a later source under the same labels
//! then starts a new series, with a new `_created`). The two kinds are bounded apart, so that
//! the churn of one cannot push out the other: per-process series leave the exposition with
//! their process (once it ended, after a while: [`Counters::retire`], so that a scraper sees
//! their final values) and are kept only to continue if the same process comes back, so
//! forgetting them is invisible; per-tag, per-pod and per-device series stay in the exposition
//! while idle (the tag's totals do not vanish with its last process) and are forgotten only
//! when more than
//! `max_idle` distinct label sets of them are idle at once (tags are chosen by whoever owns a
//! slab, so they cannot be kept without a bound): only then does a scraper see a reset.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use nds_metric_table::MetricFamily;

/// A metric family of counters.
#[derive(Debug, PartialEq)]
pub struct Family {
    /// Its declaration: name, help, counter or histogram, and whether `_created` follows it.
    pub metric: &'static MetricFamily,
    /// Whether an idle series stays in the exposition (per tag, pod or device) or leaves it
    /// with its process (per process).
    pub outlives_sources: bool,
}

/// Which sample of a series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sample {
    /// A counter's value.
    Total,
    /// A histogram's cumulative count at bound `n` (`n == bounds.len()`: `+Inf`).
    Bucket(usize),
    /// A histogram's sum of observations.
    Sum,
    /// A histogram's number of observations.
    Count,
}

/// A series' place; valid until the last holder releases it and it is forgotten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesId(usize);

/// A series as the exposition shows it.
#[derive(Clone, Copy, Debug)]
pub struct SeriesView<'a> {
    /// Its family.
    pub family: &'static Family,
    /// Which sample.
    pub sample: Sample,
    /// Its labels, rendered (without the instance labels and `le`).
    pub labels: &'a str,
    /// Its value.
    pub value: f64,
    /// When the monitor created it, seconds since the Unix epoch.
    pub created: f64,
}

type Key = (&'static str, String, Sample);

#[derive(Debug)]
struct Series {
    family: &'static Family,
    key: Key,
    value: f64,
    created: f64,
    holders: u32,
    /// Bumped whenever the series goes idle, so that stale entries of the idle queue are
    /// recognised.
    idle_epoch: u64,
    /// When its last source ended, while it is still shown for that ([`Counters::retire`]).
    retired: Option<Instant>,
}

/// Every series, with the idle ones in the order they went idle.
#[derive(Debug)]
pub struct Counters {
    slots: Vec<Option<Series>>,
    free: Vec<usize>,
    index: BTreeMap<Key, usize>,
    /// Per kind (index [`Kind::of`]): the idle series in the order they went idle.
    idle: [VecDeque<(usize, u64)>; 2],
    idle_count: [usize; 2],
    max_idle: usize,
}

/// The two kinds of series the idle bound keeps apart.
struct Kind;

impl Kind {
    /// 0 for a series that leaves the exposition with its sources, 1 for one that stays.
    fn of(family: &Family) -> usize {
        usize::from(family.outlives_sources)
    }
}

/// Idle series kept by default, of each kind: a few thousand label sets, well under a megabyte.
pub const DEFAULT_MAX_IDLE: usize = 8192;

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Default for Counters {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_IDLE)
    }
}

impl Counters {
    /// No series yet; at most `max_idle` idle ones of each kind kept.
    #[must_use]
    pub fn new(max_idle: usize) -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            index: BTreeMap::new(),
            idle: [VecDeque::new(), VecDeque::new()],
            idle_count: [0, 0],
            max_idle,
        }
    }

    /// The bound on idle series of each kind.
    #[must_use]
    pub fn max_idle(&self) -> usize {
        self.max_idle
    }

    /// Series held now, idle ones included.
    #[must_use]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there is no series.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Idle series held now.
    #[must_use]
    pub fn idle_len(&self) -> usize {
        self.idle_count.iter().sum()
    }

    /// The series of `family`, `sample` and `labels` (rendered), created at zero if new, with
    /// one more holder.
    pub fn acquire(&mut self, family: &'static Family, sample: Sample, labels: String) -> SeriesId {
        let key = (family.metric.name, labels, sample);
        if let Some(&slot) = self.index.get(&key) {
            if let Some(series) = self.slots.get_mut(slot).and_then(Option::as_mut) {
                if series.holders == 0 {
                    self.idle_count[Kind::of(series.family)] -= 1;
                }
                series.holders += 1;
                series.retired = None;
            }
            return SeriesId(slot);
        }
        let series = Series {
            family,
            key: key.clone(),
            value: 0.0,
            created: unix_now(),
            holders: 1,
            idle_epoch: 0,
            retired: None,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                if let Some(place) = self.slots.get_mut(slot) {
                    *place = Some(series);
                }
                slot
            }
            None => {
                self.slots.push(Some(series));
                self.slots.len() - 1
            }
        };
        self.index.insert(key, slot);
        SeriesId(slot)
    }

    /// One holder of `id` fewer; the series goes idle with its last holder.
    pub fn release(&mut self, id: SeriesId) {
        let Some(series) = self.slots.get_mut(id.0).and_then(Option::as_mut) else {
            return;
        };
        series.holders = series.holders.saturating_sub(1);
        if series.holders > 0 {
            return;
        }
        series.idle_epoch += 1;
        let kind = Kind::of(series.family);
        self.idle[kind].push_back((id.0, series.idle_epoch));
        self.idle_count[kind] += 1;
        self.forget_beyond_bound(kind);
    }

    /// One holder of `id` fewer because its source ended at `at`: as [`Counters::release`],
    /// but a series that leaves the exposition with its sources stays in it until
    /// [`Counters::expire`] says its time is up, so that a scraper sees the final value.
    pub fn retire(&mut self, id: SeriesId, at: Instant) {
        self.release(id);
        if let Some(series) = self.slots.get_mut(id.0).and_then(Option::as_mut) {
            if series.holders == 0 && !series.family.outlives_sources {
                series.retired = Some(at);
            }
        }
    }

    /// Takes out of the exposition the retired series whose source ended before `before`.
    pub fn expire(&mut self, before: Instant) {
        for series in self.slots.iter_mut().flatten() {
            if series.retired.is_some_and(|at| at < before) {
                series.retired = None;
            }
        }
    }

    /// Adds `amount` (a count, or seconds) to `id`; nothing else changes a series.
    pub fn add(&mut self, id: SeriesId, amount: f64) {
        if let Some(series) = self.slots.get_mut(id.0).and_then(Option::as_mut) {
            // Only increases: a NaN or a negative amount would make the series go down.
            if amount > 0.0 {
                series.value += amount;
            }
        }
    }

    /// The value of `id`.
    #[must_use]
    pub fn value(&self, id: SeriesId) -> f64 {
        self.slots
            .get(id.0)
            .and_then(Option::as_ref)
            .map_or(0.0, |series| series.value)
    }

    /// The series the exposition shows, by family, labels and sample.
    pub fn exported(&self) -> impl Iterator<Item = SeriesView<'_>> {
        self.index
            .values()
            .filter_map(|&slot| self.slots.get(slot).and_then(Option::as_ref))
            .filter(|series| {
                series.holders > 0 || series.family.outlives_sources || series.retired.is_some()
            })
            .map(|series| SeriesView {
                family: series.family,
                sample: series.key.2,
                labels: &series.key.1,
                value: series.value,
                created: series.created,
            })
    }

    fn forget_beyond_bound(&mut self, kind: usize) {
        while self.idle_count[kind] > self.max_idle {
            let Some((slot, epoch)) = self.idle[kind].pop_front() else {
                break;
            };
            let still_idle = self
                .slots
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|series| series.holders == 0 && series.idle_epoch == epoch);
            if still_idle {
                if let Some(series) = self.slots.get_mut(slot).and_then(Option::take) {
                    self.index.remove(&series.key);
                    self.free.push(slot);
                    self.idle_count[kind] -= 1;
                }
            }
        }
        // Entries of series that were taken up again before their turn came.
        if self.idle[kind].len() > 2 * self.max_idle.max(16) {
            let slots = &self.slots;
            self.idle[kind].retain(|&(slot, epoch)| {
                slots
                    .get(slot)
                    .and_then(Option::as_ref)
                    .is_some_and(|series| series.holders == 0 && series.idle_epoch == epoch)
            });
        }
    }
}

/// A raw counter of a source followed into a series: what its last reading was.
#[derive(Clone, Copy, Debug)]
pub struct Tracked {
    /// The series it feeds.
    pub series: SeriesId,
    /// The last reading; `None` before the first one of a source that counts from it.
    last: Option<u64>,
}

impl Tracked {
    /// Follows a source into `series` from zero: its first reading adds its whole value (what
    /// it counted before the monitor saw it).
    #[must_use]
    pub fn new(series: SeriesId) -> Self {
        Self {
            series,
            last: Some(0),
        }
    }

    /// Follows a source into `series` from its first reading, which adds nothing: for a source
    /// whose earlier counts another monitor may have exposed already (it ran before this one
    /// started), so that a restart of the monitor is a reset of the series, never a recount.
    #[must_use]
    pub fn from_first_reading(series: SeriesId) -> Self {
        Self { series, last: None }
    }

    /// Follows a source into `series` from `value`, a reading already counted elsewhere: the
    /// next reading adds its increase over it.
    #[must_use]
    pub fn starting_at(series: SeriesId, value: u64) -> Self {
        Self {
            series,
            last: Some(value),
        }
    }

    /// The source's final reading `value`: only its increase over the last reading, times
    /// `scale`, goes into the series (final values may leave out some of what the last
    /// reading counted, which is no restart of the source).
    pub fn observe_final(&mut self, counters: &mut Counters, value: u64, scale: f64) {
        let Some(last) = self.last else {
            return;
        };
        self.last = Some(value.max(last));
        counters.add(self.series, value.saturating_sub(last) as f64 * scale);
    }

    /// Feeds `series` from now on, keeping the last reading (a series change, e.g. a new
    /// tag, moves only what comes after).
    pub fn redirect(&mut self, series: SeriesId) {
        self.series = series;
    }

    /// The source reads `value` now: its increase, times `scale`, goes into the series.
    pub fn observe(&mut self, counters: &mut Counters, value: u64, scale: f64) {
        let increase = match self.last {
            None => 0,
            Some(last) if value >= last => value - last,
            Some(_) => value,
        };
        self.last = Some(value);
        counters.add(self.series, increase as f64 * scale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nds_metric_table::{Documented, MetricType};

    const fn counter(name: &'static str) -> MetricFamily {
        MetricFamily {
            name,
            metric_type: MetricType::Counter,
            unit: None,
            help: "h",
            labels: &[],
            labels_note: None,
            pod_labels: false,
            created: false,
            documented: Documented::Ours { meaning: "m" },
        }
    }

    static PER_TAG: Family = Family {
        metric: &counter("tag_total"),
        outlives_sources: true,
    };
    static PER_PROCESS: Family = Family {
        metric: &counter("pid_total"),
        outlives_sources: false,
    };

    #[test]
    fn sources_add_up_and_never_take_back() {
        let mut counters = Counters::new(4);
        let a = counters.acquire(&PER_TAG, Sample::Total, "t=\"x\"".into());
        let b = counters.acquire(&PER_TAG, Sample::Total, "t=\"x\"".into());
        assert_eq!(a, b, "one series per labels");
        let (mut first, mut second) = (Tracked::new(a), Tracked::new(b));
        first.observe(&mut counters, 10, 1.0);
        second.observe(&mut counters, 5, 1.0);
        first.observe(&mut counters, 12, 1.0);
        assert_eq!(counters.value(a), 17.0);
        // The first source ends: its 12 stay.
        counters.release(a);
        second.observe(&mut counters, 6, 1.0);
        assert_eq!(counters.value(b), 18.0);
        // A source restarting from zero adds what it counts again.
        second.observe(&mut counters, 2, 1.0);
        assert_eq!(counters.value(b), 20.0);
        second.observe(&mut counters, 4, 0.5);
        assert_eq!(counters.value(b), 21.0);
        counters.add(b, -5.0);
        counters.add(b, f64::NAN);
        assert_eq!(counters.value(b), 21.0);
    }

    #[test]
    fn a_source_followed_from_its_first_reading_adds_only_what_comes_after() {
        let mut counters = Counters::new(4);
        let series = counters.acquire(&PER_TAG, Sample::Total, "t=\"x\"".into());
        let mut running = Tracked::from_first_reading(series);
        running.observe(&mut counters, 2_275, 1.0);
        assert_eq!(
            counters.value(series),
            0.0,
            "the counts before the monitor are not recounted"
        );
        running.observe(&mut counters, 2_300, 1.0);
        assert_eq!(counters.value(series), 25.0);
        // Restarting from zero after that adds what it counts again.
        running.observe(&mut counters, 4, 1.0);
        assert_eq!(counters.value(series), 29.0);
    }

    #[test]
    fn idle_series_are_bounded_and_per_process_ones_leave_the_exposition() {
        let mut counters = Counters::new(2);
        let tag = counters.acquire(&PER_TAG, Sample::Total, "t=\"x\"".into());
        let pid = counters.acquire(&PER_PROCESS, Sample::Total, "p=\"1\"".into());
        counters.add(tag, 1.0);
        counters.add(pid, 1.0);
        counters.release(tag);
        counters.release(pid);
        let shown: Vec<&str> = counters.exported().map(|s| s.family.metric.name).collect();
        assert_eq!(
            shown,
            ["tag_total"],
            "an idle per-process series is not shown"
        );
        assert_eq!(counters.idle_len(), 2);
        // Taken up again before being forgotten: it continues.
        let pid = counters.acquire(&PER_PROCESS, Sample::Total, "p=\"1\"".into());
        assert_eq!(counters.value(pid), 1.0);
        counters.release(pid);
        // Many processes come and go: their idle series push out older per-process ones,
        // never the tag's totals (which a scraper would see go down).
        for n in 2..10 {
            let id = counters.acquire(&PER_PROCESS, Sample::Total, format!("p=\"{n}\""));
            counters.release(id);
        }
        assert_eq!(counters.idle_len(), 3);
        assert_eq!(
            counters.len(),
            3,
            "the oldest idle per-process series were forgotten"
        );
        let kept = counters.acquire(&PER_TAG, Sample::Total, "t=\"x\"".into());
        assert_eq!(
            counters.value(kept),
            1.0,
            "the tag's total outlived the churn"
        );
        counters.release(kept);
        // Only more idle tags than the bound push out the oldest tag.
        for n in 0..2 {
            let id = counters.acquire(&PER_TAG, Sample::Total, format!("t=\"y{n}\""));
            counters.release(id);
        }
        let again = counters.acquire(&PER_TAG, Sample::Total, "t=\"x\"".into());
        assert_eq!(counters.value(again), 0.0, "a forgotten series starts anew");
    }

    #[test]
    fn a_retired_per_process_series_is_shown_until_it_expires() {
        let mut counters = Counters::new(4);
        let t0 = Instant::now();
        let pid = counters.acquire(&PER_PROCESS, Sample::Total, "p=\"1\"".into());
        counters.add(pid, 5.0);
        counters.retire(pid, t0);
        let shown = |counters: &Counters| counters.exported().map(|s| s.value).collect::<Vec<_>>();
        assert_eq!(shown(&counters), [5.0], "its final value is still shown");
        counters.expire(t0);
        assert_eq!(shown(&counters), [5.0], "not before its time");
        counters.expire(t0 + std::time::Duration::from_secs(1));
        assert!(shown(&counters).is_empty(), "then it leaves");
        // Taken up again by the same process, and retired again: shown again.
        let again = counters.acquire(&PER_PROCESS, Sample::Total, "p=\"1\"".into());
        assert_eq!(counters.value(again), 5.0);
        counters.retire(again, t0);
        assert_eq!(shown(&counters), [5.0]);
        // A lasting series is shown idle anyway, retired or not.
        let tag = counters.acquire(&PER_TAG, Sample::Total, "t=\"x\"".into());
        counters.retire(tag, t0);
        counters.expire(t0 + std::time::Duration::from_secs(1));
        assert_eq!(shown(&counters), [0.0]);
    }

    #[test]
    fn a_final_reading_adds_only_its_increase() {
        let mut counters = Counters::new(4);
        let series = counters.acquire(&PER_TAG, Sample::Total, "t=\"x\"".into());
        let mut tracked = Tracked::new(series);
        tracked.observe(&mut counters, 10, 1.0);
        tracked.observe_final(&mut counters, 14, 1.0);
        assert_eq!(counters.value(series), 14.0);
        // Final values that leave out part of the last reading: no restart, nothing added.
        tracked.observe_final(&mut counters, 3, 1.0);
        assert_eq!(counters.value(series), 14.0);
        // A source never read before, followed from its first reading: nothing to add to.
        let mut unread = Tracked::from_first_reading(series);
        unread.observe_final(&mut counters, 100, 1.0);
        assert_eq!(counters.value(series), 14.0);
        let mut counted = Tracked::starting_at(series, 90);
        counted.observe_final(&mut counters, 100, 0.5);
        assert_eq!(counters.value(series), 19.0);
    }
}
