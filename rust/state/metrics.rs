// SPDX-License-Identifier: GPL-2.0

//! The metrics path: per-period posts keyed by CloudWatch metric id.
//!
//! For counter metrics the posted value is `current + freed - previous`: `current` sums every
//! slab owned at posting time over the device's cores, `freed` sums what each slab released
//! since the last post held at its release, and `previous` is the last post's `current`.
//! Values of zero or less are not posted. Then `previous = current` and `freed = 0`. A count
//! is therefore posted once: while its slab is owned through `current`, and after a release
//! through `freed`, which exactly replaces the part that left `current`.
//!
//! Utilization posts the same delta of `NC_COUNTER_TIME_IN_USE` as a percentage of the period
//! over the device's cores, in the unit the `time_in_use_unit_ps` parameter names (picoseconds
//! by default, as the original driver's formula takes them).

use crate::{
    abi::{
        counters::{
            NcCounter,
            NdCounter, //
        },
        metrics::{
            MetricKind,
            MetricPost,
            VersionField,
            VersionRank,
            VersionWord,
            METRIC_COUNT,
            METRIC_DEFS, //
        },
        sysfs::CounterSource,
    },
    state::{
        core_index::CoreIndex,
        nc_index::{
            nc_index,
            NcIndex, //
        },
        post_ring::PostRing,
        post_value::PostValue,
        slab_values::SlabValues,
        version_history::VersionHistory, //
    },
};
use kernel::prelude::*;

/// Picoseconds in a microsecond.
const PS_PER_US: u64 = 1_000_000;

/// The three ND version counters, in `VersionHistory` order.
const VERSION_SOURCES: [NdCounter; 3] = [
    NdCounter::RuntimeVersion,
    NdCounter::FrameworkVersion,
    NdCounter::FalVersion,
];

/// Per metric, the counter summed over the cores for a counter or utilization metric
/// (`METRIC_DEFS[metric].kind`); `None` for the others.
const METRIC_SOURCES: [Option<NcIndex>; METRIC_COUNT] = {
    let mut sources = [None; METRIC_COUNT];
    let mut metric = 0;
    while metric < METRIC_COUNT {
        sources[metric] = match METRIC_DEFS[metric].kind {
            MetricKind::Counter(source) => Some(nc_index(source)),
            MetricKind::Utilization => Some(nc_index(CounterSource::Nc(NcCounter::TimeInUse))),
            _ => None,
        };
        metric += 1;
    }
    sources
};

/// The metrics state of one device, guarded by the device mutex.
pub(crate) struct MetricsState {
    device: u32,
    core_count: usize,
    /// Picoseconds per unit of `NC_COUNTER_TIME_IN_USE`.
    time_unit_ps: u64,
    period: u64,
    previous: [u64; METRIC_COUNT],
    freed: [u64; METRIC_COUNT],
    versions: [VersionHistory; 3],
    /// Bitmap and constant metrics: what the period's slabs showed, by metric index.
    seen: [Option<u64>; METRIC_COUNT],
    ring: PostRing,
    /// Periodic posting is paused (`METRICS_CTRL`): periods end without posting.
    paused: bool,
    /// Microseconds of the periods that ended while paused, which the next post covers.
    held_us: u64,
}

impl MetricsState {
    /// A device's state before its first period.
    pub(crate) fn new(device: u32, core_count: usize, time_unit_ps: u32) -> Result<Self> {
        Ok(Self {
            device,
            core_count,
            time_unit_ps: u64::from(time_unit_ps.max(1)),
            period: 0,
            previous: [0; METRIC_COUNT],
            freed: [0; METRIC_COUNT],
            versions: Default::default(),
            seen: [None; METRIC_COUNT],
            ring: PostRing::new()?,
            paused: false,
            held_us: 0,
        })
    }

    /// Pauses (`true`) or resumes periodic posting. While paused, periods end without posting
    /// and nothing is lost: the first post after resuming covers every period since the last
    /// post, as one longer period.
    pub(crate) fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// The posts, for `read()` on the device.
    pub(crate) fn ring(&self) -> &PostRing {
        &self.ring
    }

    /// Counter `source` of `slab`, summed over the device's cores.
    fn sample(&self, source: NcIndex, slab: &dyn SlabValues) -> u64 {
        let cores = CoreIndex::first(self.core_count);
        cores.fold(0u64, |sum, core| sum.wrapping_add(slab.nc(core, source)))
    }

    /// Records the non-counter metrics of a slab seen this period.
    fn observe(&mut self, slab: &dyn SlabValues) {
        for (history, source) in self.versions.iter_mut().zip(VERSION_SOURCES) {
            history.observe(slab.nd(source));
        }
        for (seen, def) in self.seen.iter_mut().zip(METRIC_DEFS.iter()) {
            match def.kind {
                MetricKind::Bitmap(source) => *seen = Some(seen.unwrap_or(0) | slab.nd(source)),
                MetricKind::Constant(source, _) => *seen = Some(slab.nd(source)),
                _ => {}
            }
        }
    }

    /// A slab is being released: what it counted moves to `freed`.
    pub(crate) fn on_release(&mut self, slab: &dyn SlabValues) {
        let mut freed = self.freed;
        for (freed, source) in freed.iter_mut().zip(METRIC_SOURCES) {
            if let Some(source) = source {
                *freed = freed.wrapping_add(self.sample(source, slab));
            }
        }
        self.freed = freed;
        self.observe(slab);
    }

    /// Ends a period of `elapsed_us` microseconds, taken at `posted_ns` (`CLOCK_MONOTONIC`),
    /// with `owned` the slabs owned now: posts every metric that has something to say into the
    /// ring. Nothing in it can fail (values
    /// are formatted in place), so a period never posts part of its metrics.
    /// While paused, the period only adds to the next post's.
    pub(crate) fn post(
        &mut self,
        owned: impl Iterator<Item = impl SlabValues>,
        elapsed_us: u64,
        posted_ns: u64,
    ) {
        if self.paused {
            self.held_us = self.held_us.saturating_add(elapsed_us);
            return;
        }
        let elapsed_us = elapsed_us.saturating_add(core::mem::take(&mut self.held_us));
        let mut current = [0u64; METRIC_COUNT];
        for slab in owned {
            for (sum, source) in current.iter_mut().zip(METRIC_SOURCES) {
                if let Some(source) = source {
                    *sum = sum.wrapping_add(self.sample(source, &slab));
                }
            }
            self.observe(&slab);
        }
        let cores_ps = elapsed_us
            .saturating_mul(PS_PER_US)
            .saturating_mul(u64::try_from(self.core_count).unwrap_or(u64::MAX));
        self.period += 1;
        for (index, def) in METRIC_DEFS.iter().enumerate() {
            let (now, freed, previous) = (
                current.get(index).copied().unwrap_or(0),
                self.freed.get(index).copied().unwrap_or(0),
                self.previous.get(index).copied().unwrap_or(0),
            );
            // Exact in 128 bits: the sum of two u64 minus a u64 cannot overflow.
            let delta = i128::from(now) + i128::from(freed) - i128::from(previous);
            let text = match def.kind {
                MetricKind::Counter(_) if delta > 0 => Some(PostValue::format(fmt!("{delta}"))),
                MetricKind::Utilization if delta > 0 && cores_ps > 0 => {
                    // No 128-bit division in the kernel: the busy time fits a u64 anyway.
                    let busy_ps = u64::try_from(delta)
                        .unwrap_or(u64::MAX)
                        .saturating_mul(self.time_unit_ps);
                    let percent = busy_ps.saturating_mul(100) / cores_ps;
                    Some(PostValue::format(fmt!("{percent}")))
                }
                MetricKind::Version(source, rank, field) => self.version_text(source, rank, field),
                MetricKind::Bitmap(_) => match self.seen.get(index).copied().flatten() {
                    Some(bits) if bits != 0 => Some(PostValue::format(fmt!("{bits}"))),
                    _ => None,
                },
                MetricKind::Constant(_, skip_zero) => match self.seen.get(index).copied().flatten()
                {
                    Some(value) if !(skip_zero && value == 0) => {
                        Some(PostValue::format(fmt!("{value}")))
                    }
                    _ => None,
                },
                _ => None,
            };
            if let Some(text) = text {
                self.push(def.cw_id, &text, posted_ns);
            }
        }
        self.previous = current;
        self.freed = [0; METRIC_COUNT];
        self.seen = [None; METRIC_COUNT];
        for history in self.versions.iter_mut() {
            history.clear();
        }
    }

    fn version_text(
        &self,
        source: NdCounter,
        rank: VersionRank,
        field: VersionField,
    ) -> Option<PostValue> {
        let history = VERSION_SOURCES
            .iter()
            .position(|s| *s == source)
            .and_then(|i| self.versions.get(i));
        let [first, second] = history?.top_two();
        let word = match rank {
            VersionRank::First => first,
            VersionRank::Second => second,
        };
        let version = VersionWord::from_word(word?);
        Some(match field {
            VersionField::Version => PostValue::format(fmt!(
                "{}.{}.{}",
                version.major,
                version.minor,
                version.build
            )),
            VersionField::FrameworkType => PostValue::format(fmt!("{}", version.reserved % 10)),
        })
    }

    fn push(&mut self, cw_id: u8, text: &PostValue, posted_ns: u64) {
        self.ring.push(MetricPost {
            seq: 0,
            period: self.period,
            posted_ns,
            device: self.device,
            cw_id,
            len: text.len(),
            reserved: [0; 2],
            value: text.field(),
        });
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_metrics)]
mod tests {
    use super::*;
    use crate::abi::metrics::metric_def;

    /// A synthetic slab: NC counter values by (core, index), ND counters by index.
    #[derive(Clone, Copy, Default)]
    struct Fake {
        nc: [(usize, usize, u64); 4],
        nd: [u64; 14],
    }

    impl SlabValues for Fake {
        fn nc(&self, core: CoreIndex, counter: NcIndex) -> u64 {
            self.nc
                .iter()
                .filter(|(c, i, _)| *c == core.get() && *i == counter.get())
                .map(|(_, _, v)| *v)
                .sum()
        }

        fn nd(&self, counter: NdCounter) -> u64 {
            self.nd.get(counter.index()).copied().unwrap_or(0)
        }
    }

    fn successes(core: usize, count: u64) -> Fake {
        Fake {
            nc: [
                (core, NcCounter::InferCompleted.index(), count),
                (0, 0, 0),
                (0, 0, 0),
                (0, 0, 0),
            ],
            ..Fake::default()
        }
    }

    /// The time every test period is posted at.
    const POSTED_NS: u64 = 123_456_789;

    /// Ends a period and returns the values posted for `cw_id`, checking that each post
    /// carries the period's time.
    fn post_and_read(
        state: &mut MetricsState,
        owned: &[Fake],
        cw_id: u8,
    ) -> Result<KVec<KVec<u8>>> {
        let from = state
            .ring
            .read(0, usize::MAX)?
            .last()
            .map_or(1, |p| p.seq + 1);
        state.post(
            owned.iter().map(|f| f as &dyn SlabValues),
            1_000_000,
            POSTED_NS,
        );
        let mut values = KVec::new();
        for post in state
            .ring
            .read(from, usize::MAX)?
            .iter()
            .filter(|p| p.cw_id == cw_id)
        {
            assert_eq!(post.posted_ns, POSTED_NS);
            let mut value = KVec::new();
            value.extend_from_slice(post.value_bytes(), GFP_KERNEL)?;
            values.push(value, GFP_KERNEL)?;
        }
        Ok(values)
    }

    const OK: u8 = 200;

    #[test]
    fn deltas_are_posted_once_across_releases_between_periods() -> Result {
        let mut state = MetricsState::new(0, 2, 1)?;
        // Period 1: A has 10 on core 0, B 5 on core 1.
        let mut a = successes(0, 10);
        let b = successes(1, 5);
        assert_eq!(&post_and_read(&mut state, &[a, b], OK)?[0][..], b"15");
        // Period 2: A grows to 14 and is released; B grows to 7 and stays; C appears with 1.
        a.nc[0].2 = 14;
        state.on_release(&a);
        let b = successes(1, 7);
        let c = successes(0, 1);
        // 4 more from A, 2 more from B, 1 from C.
        assert_eq!(&post_and_read(&mut state, &[b, c], OK)?[0][..], b"7");
        // Period 3: nothing changes: nothing is posted.
        assert_eq!(post_and_read(&mut state, &[b, c], OK)?.len(), 0);
        // Period 4: both released without counting more: nothing new is posted either.
        state.on_release(&b);
        state.on_release(&c);
        assert_eq!(post_and_read(&mut state, &[], OK)?.len(), 0);
        Ok(())
    }

    #[test]
    fn a_slab_acquired_and_released_within_one_period_is_counted() -> Result {
        let mut state = MetricsState::new(0, 1, 1)?;
        state.on_release(&successes(0, 9));
        assert_eq!(&post_and_read(&mut state, &[], OK)?[0][..], b"9");
        Ok(())
    }

    #[test]
    fn only_the_devices_cores_count() -> Result {
        let mut state = MetricsState::new(0, 2, 1)?;
        assert_eq!(
            &post_and_read(&mut state, &[successes(0, 1), successes(5, 100)], OK)?[0][..],
            b"1"
        );
        Ok(())
    }

    #[test]
    fn versions_post_the_two_most_used_and_the_framework_type() -> Result {
        let mut state = MetricsState::new(0, 1, 1)?;
        let word = |major: u64, minor: u64, build: u64, kind: u64| {
            (kind << 48) | (major << 40) | (minor << 32) | build
        };
        let mut slabs = [Fake::default(); 3];
        slabs[0].nd[1] = word(2, 5, 77, 13);
        slabs[1].nd[1] = word(2, 5, 77, 13);
        slabs[2].nd[1] = word(1, 9, 3, 2);
        assert_eq!(&post_and_read(&mut state, &slabs, 190)?[0][..], b"2.5.77");
        assert_eq!(metric_def(191).map(|d| d.name), Some("FW_TYPE_0"));
        let mut state = MetricsState::new(0, 1, 1)?;
        assert_eq!(&post_and_read(&mut state, &slabs, 191)?[0][..], b"3");
        let mut state = MetricsState::new(0, 1, 1)?;
        assert_eq!(&post_and_read(&mut state, &slabs, 192)?[0][..], b"1.9.3");
        // No slab reported a runtime version: nothing is posted for it.
        let mut state = MetricsState::new(0, 1, 1)?;
        assert_eq!(post_and_read(&mut state, &slabs, 180)?.len(), 0);
        Ok(())
    }

    #[test]
    fn the_feature_bitmap_is_ored_over_owned_and_released_slabs() -> Result {
        let mut state = MetricsState::new(0, 1, 1)?;
        let mut released = Fake::default();
        released.nd[3] = 0b01;
        state.on_release(&released);
        let mut owned = Fake::default();
        owned.nd[3] = 0b10;
        assert_eq!(&post_and_read(&mut state, &[owned], 250)?[0][..], b"3");
        Ok(())
    }

    #[test]
    fn the_cluster_id_skips_zero_and_agg_neff_id_does_not() -> Result {
        let mut state = MetricsState::new(0, 1, 1)?;
        let zero = Fake::default();
        assert_eq!(post_and_read(&mut state, &[zero], 252)?.len(), 0);
        assert_eq!(&post_and_read(&mut state, &[zero], 80)?[0][..], b"0");
        let mut set = Fake::default();
        set.nd[12] = 42;
        assert_eq!(&post_and_read(&mut state, &[set], 252)?[0][..], b"42");
        // With no slab at all in a period, constants are not posted.
        assert_eq!(post_and_read(&mut state, &[], 252)?.len(), 0);
        Ok(())
    }

    #[test]
    fn utilization_is_busy_time_over_the_period_and_the_cores() -> Result {
        // 1 s period, 2 cores: 0.5 s busy on one core is 25 %, in either unit.
        for (unit_ps, busy) in [(1, 500_000_000_000), (1_000_000, 500_000)] {
            let mut state = MetricsState::new(0, 2, unit_ps)?;
            let busy = Fake {
                nc: [
                    (0, NcCounter::TimeInUse.index(), busy),
                    (0, 0, 0),
                    (0, 0, 0),
                    (0, 0, 0),
                ],
                ..Fake::default()
            };
            assert_eq!(&post_and_read(&mut state, &[busy], 90)?[0][..], b"25");
        }
        Ok(())
    }

    #[test]
    fn a_paused_device_posts_nothing_and_then_everything_once() -> Result {
        let mut state = MetricsState::new(0, 2, 1)?;
        assert_eq!(post_and_read(&mut state, &[successes(0, 4)], OK)?.len(), 1);
        state.set_paused(true);
        for _ in 0..3 {
            assert!(post_and_read(&mut state, &[successes(0, 10)], OK)?.is_empty());
        }
        // A slab released while paused counts too, once, after the resume.
        state.on_release(&successes(1, 5));
        state.set_paused(false);
        let values = post_and_read(&mut state, &[successes(0, 10)], OK)?;
        // 6 more on the owned slab, 5 of the released one.
        assert_eq!(values.len(), 1);
        assert_eq!(&values[0][..], b"11");
        assert!(post_and_read(&mut state, &[successes(0, 10)], OK)?.is_empty());
        Ok(())
    }

    #[test]
    fn the_first_post_after_a_pause_spans_the_paused_periods() -> Result {
        // 2 cores, 1 s periods: 2 s busy on one core over 4 s (3 paused periods and the
        // posting one) is 25 %.
        let mut state = MetricsState::new(0, 2, 1_000_000)?;
        let busy = |us| Fake {
            nc: [
                (0, NcCounter::TimeInUse.index(), us),
                (0, 0, 0),
                (0, 0, 0),
                (0, 0, 0),
            ],
            ..Fake::default()
        };
        post_and_read(&mut state, &[busy(0)], 90)?;
        state.set_paused(true);
        for _ in 0..3 {
            post_and_read(&mut state, &[busy(0)], 90)?;
        }
        state.set_paused(false);
        assert_eq!(
            &post_and_read(&mut state, &[busy(2_000_000)], 90)?[0][..],
            b"25"
        );
        Ok(())
    }
}
