//! What one tenure feeds into the exporter's [`Counters`]: its outcomes and error classes
//! under its tag and under its container, every status and usage node of each of its
//! NeuronCores under its pid, and the latencies sampled from it.
//!
//! The series are taken when the tenure's labels are first known and taken again when they
//! change (a process may publish its tag after the monitor attached): what a tag's series
//! counted stays in it and the new tag's series counts only what comes after, while the
//! per-process series start over under the new labels with the process's whole count. The
//! same goes for the pod labels of the per-process series ([`crate::pods`]). The per-pod
//! series keep the container the process was first found in (a process does not change pods;
//! its pod leaving the kubelet's list means the pod is going, and what its processes count
//! until they end is still the pod's), and start at the same point as the tag's.
//!
//! A tenure's end ([`SlabFeeds::end`]) feeds its final values, when the kernel's ledger
//! recorded them ([`CounterValues`] of a [`TenureRecord`]): only increases over the last
//! reading count then, since a record carries only the counters a sysfs node reads, on the
//! device's cores. The per-process series are retired (still shown a while, with the final
//! value), the others released with it.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use nds::CounterSnapshot;
use nds_abi::counters::NcCounter;
use nds_abi::layout::NDS_TOTAL_NEURONCORE_COUNT;
use nds_abi::ledger::TenureRecord;
use nds_abi::sysfs::{CounterSource, SysfsCounter, SysfsGroup, SYSFS_COUNTERS};
use nds_document::groups::CoreIndexing;
use nds_metric_table::{LabelSet, LATENCY_BUCKETS_SECONDS};
use nds_podresources::Container;
use nds_sampler::stream::{recorded_value, Wants};
use nds_sysfs::TimeInUseUnit;

use crate::counters::{Counters, Family, Sample, SeriesId, Tracked};
use crate::encoder::render_labels;
use crate::families::{
    self, EXECUTION_ERRORS, EXECUTION_STATUS, POD_ERRORS, POD_STATUS, RUNTIME_LATENCY,
    RUNTIME_STATUS,
};
use crate::pods::{names, SlabPods};

/// `status_type` values of `execution_status_total`, with their counters.
pub const STATUS_TYPES: [(&str, NcCounter); 6] = [
    ("completed", NcCounter::InferCompleted),
    ("completed_with_err", NcCounter::InferCompletedWithErr),
    (
        "completed_with_num_err",
        NcCounter::InferCompletedWithNumErr,
    ),
    ("timed_out", NcCounter::InferTimedOut),
    ("incorrect_input", NcCounter::InferIncorrectInput),
    ("failed_to_queue", NcCounter::InferFailedToQueue),
];

/// `error_type` values of `execution_errors_total`, with their counters.
pub const ERROR_TYPES: [(&str, NcCounter); 6] = [
    ("generic", NcCounter::ErrGeneric),
    ("numerical", NcCounter::ErrNumerical),
    ("transient", NcCounter::ErrTransient),
    ("model", NcCounter::ErrModel),
    ("runtime", NcCounter::ErrRt),
    ("hardware", NcCounter::ErrHw),
];

/// The outcomes then the error classes: the series of a tag (and of a pod), with their
/// families and the counter each sums over the cores.
fn ecosystem() -> impl Iterator<Item = (&'static Family, &'static Family, &'static str, NcCounter)>
{
    STATUS_TYPES
        .iter()
        .map(|&(name, counter)| (&EXECUTION_STATUS, &POD_STATUS, name, counter))
        .chain(
            ERROR_TYPES
                .iter()
                .map(|&(name, counter)| (&EXECUTION_ERRORS, &POD_ERRORS, name, counter)),
        )
}

/// The counters of one look at a slab.
pub trait CounterValues {
    /// Per-core counter `source` of core `core`, if known.
    fn value(&self, core: usize, source: CounterSource) -> Option<u64>;

    /// `source` summed over every core, if known.
    fn total(&self, source: CounterSource) -> Option<u64>;

    /// Whether any counter of core `core` is not zero.
    fn counted_on(&self, core: usize) -> bool;

    /// Whether these are a tenure's final values: then only an increase over the last reading
    /// counts (a smaller value is no restart of the counter, only one the values leave out).
    fn is_final(&self) -> bool;
}

impl CounterValues for CounterSnapshot {
    fn value(&self, core: usize, source: CounterSource) -> Option<u64> {
        self.nc.get(core)?.get(source.index()).copied()
    }

    fn total(&self, source: CounterSource) -> Option<u64> {
        Some(
            (0..NDS_TOTAL_NEURONCORE_COUNT)
                .filter_map(|core| self.value(core, source))
                .fold(0u64, u64::wrapping_add),
        )
    }

    fn counted_on(&self, core: usize) -> bool {
        self.nc
            .get(core)
            .is_some_and(|values| values.iter().any(|&value| value != 0))
    }

    fn is_final(&self) -> bool {
        false
    }
}

/// A ledger record's final values: the counters a sysfs node reads, on the device's cores.
impl CounterValues for TenureRecord {
    fn value(&self, core: usize, source: CounterSource) -> Option<u64> {
        recorded_value(self, core, source)
    }

    fn total(&self, source: CounterSource) -> Option<u64> {
        source.sysfs_node()?;
        Some(
            (0..usize::from(self.core_count))
                .filter_map(|core| self.value(core, source))
                .fold(0u64, u64::wrapping_add),
        )
    }

    fn counted_on(&self, core: usize) -> bool {
        core < usize::from(self.core_count)
            && self
                .counters
                .get(core)
                .is_some_and(|values| values.iter().any(|&value| value != 0))
    }

    fn is_final(&self) -> bool {
        true
    }
}

/// Who a tenure's series are about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabLabels<'a> {
    /// The process tag.
    pub tag: &'a str,
    /// The owner.
    pub pid: i32,
    /// How its cores are numbered instance-wide (its device, cores per device).
    pub indexing: CoreIndexing,
    /// The containers of its per-process and per-core series (none without pod attribution).
    pub pods: &'a SlabPods,
    /// The container its per-pod series count for, if it is known.
    pub pod: Option<&'a Arc<Container>>,
}

impl SlabLabels<'_> {
    fn pid(&self) -> String {
        self.pid.to_string()
    }

    fn device(&self) -> String {
        self.indexing.device.to_string()
    }
}

/// The labels and wants the series were taken for.
#[derive(Debug, PartialEq, Eq)]
struct TakenFor {
    tag: String,
    pid: i32,
    indexing: CoreIndexing,
    pods: SlabPods,
    wants: Wants,
}

impl TakenFor {
    fn matches(&self, who: &SlabLabels<'_>, wants: Wants) -> bool {
        self.tag == who.tag
            && self.pid == who.pid
            && self.indexing == who.indexing
            && self.pods == *who.pods
            && self.wants == wants
    }
}

/// One latency kind's histogram series.
#[derive(Debug)]
struct HistogramFeed {
    buckets: Vec<SeriesId>,
    sum: SeriesId,
    count: SeriesId,
}

impl HistogramFeed {
    fn acquire(counters: &mut Counters, labels: &str) -> Self {
        let buckets = (0..=LATENCY_BUCKETS_SECONDS.len())
            .map(|bound| counters.acquire(&RUNTIME_LATENCY, Sample::Bucket(bound), labels.into()))
            .collect();
        Self {
            buckets,
            sum: counters.acquire(&RUNTIME_LATENCY, Sample::Sum, labels.into()),
            count: counters.acquire(&RUNTIME_LATENCY, Sample::Count, labels.into()),
        }
    }

    fn observe(&self, counters: &mut Counters, microseconds: u64) {
        let seconds = microseconds as f64 / 1e6;
        let first = LATENCY_BUCKETS_SECONDS
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(LATENCY_BUCKETS_SECONDS.len());
        for &bucket in self.buckets.iter().skip(first) {
            counters.add(bucket, 1.0);
        }
        counters.add(self.sum, seconds);
        counters.add(self.count, 1.0);
    }

    fn ids(self) -> impl Iterator<Item = SeriesId> {
        self.buckets.into_iter().chain([self.sum, self.count])
    }
}

/// The per-pod series of a tenure.
#[derive(Debug)]
struct PodSeries {
    holder: Arc<Container>,
    /// Outcomes then error classes.
    tracked: Vec<Tracked>,
}

impl PodSeries {
    /// The series of `holder`, counting from `baseline`.
    fn acquire(counters: &mut Counters, holder: &Arc<Container>, baseline: &[u64]) -> Self {
        let tracked = ecosystem()
            .zip(Self::series(counters, holder))
            .enumerate()
            .map(|(index, (_, id))| {
                Tracked::starting_at(id, baseline.get(index).copied().unwrap_or(0))
            })
            .collect();
        Self {
            holder: Arc::clone(holder),
            tracked,
        }
    }

    fn series(counters: &mut Counters, holder: &Container) -> Vec<SeriesId> {
        ecosystem()
            .map(|(_, pod_family, value, _)| {
                let labels = pod_family
                    .metric
                    .label_set(&[value])
                    .with_pod(Some(names(holder)));
                counters.acquire(pod_family, Sample::Total, render_labels(&labels))
            })
            .collect()
    }

    /// Counts for `holder` from now on.
    fn redirect(&mut self, counters: &mut Counters, holder: &Arc<Container>) {
        for (tracked, id) in self.tracked.iter_mut().zip(Self::series(counters, holder)) {
            counters.release(tracked.series);
            tracked.redirect(id);
        }
        self.holder = Arc::clone(holder);
    }

    fn release(self, counters: &mut Counters) {
        for tracked in self.tracked {
            counters.release(tracked.series);
        }
    }
}

/// The series one tenure feeds.
#[derive(Debug, Default)]
pub struct SlabFeeds {
    /// Whether the tenure's process ran before this monitor started, so that another monitor
    /// (this one before a restart) may have exposed its counts in the per-tag series already:
    /// those then follow it from its first reading.
    ran_before_monitor: bool,
    taken_for: Option<TakenFor>,
    /// Outcomes then error classes, summed over the cores.
    ecosystem: Vec<Tracked>,
    /// Where the tag's (and the pod's) series count from: the first reading's sums for a
    /// process that ran before the monitor, zero otherwise.
    baseline: Option<Vec<u64>>,
    pod: Option<PodSeries>,
    /// Per core in use: every node of [`SYSFS_COUNTERS`] (by its index there).
    cores: BTreeMap<usize, Vec<(usize, Tracked)>>,
    /// Total and device latency histograms, while the tenure's rule samples latencies.
    latency: Option<[HistogramFeed; 2]>,
}

fn family_of(node: &SysfsCounter) -> Option<&'static Family> {
    match node.group {
        SysfsGroup::Status => Some(&RUNTIME_STATUS),
        SysfsGroup::OtherInfo => families::runtime_other(node),
    }
}

/// The labels of `node`'s series on core `key` of the process `who`.
fn node_labels(
    family: &'static Family,
    who: &SlabLabels<'_>,
    key: &str,
    node: &SysfsCounter,
) -> String {
    let (tag, pid, device) = (who.tag, who.pid(), who.device());
    let labels = match node.group {
        SysfsGroup::Status => family
            .metric
            .label_set(&[tag, &pid, &device, key, node.name]),
        SysfsGroup::OtherInfo => family.metric.label_set(&[tag, &pid, &device, key]),
    };
    render_labels(&labels.with_pod(who.pods.core_names(key)))
}

/// Feeds `tracked` the value `value`, a final one only by its increase.
fn feed(tracked: &mut Tracked, counters: &mut Counters, value: u64, scale: f64, last: bool) {
    if last {
        tracked.observe_final(counters, value, scale);
    } else {
        tracked.observe(counters, value, scale);
    }
}

impl SlabFeeds {
    /// The feeds of a tenure whose process ran before this monitor started, or not
    /// (`ran_before_monitor`): the per-tag and per-pod series then count from its first
    /// reading, so that a restart of the monitor is a reset of each, to no more than the new
    /// monitor saw. The per-process series count its whole life either way: a process is a
    /// series of its own, which a restart does not double.
    #[must_use]
    pub fn new(ran_before_monitor: bool) -> Self {
        Self {
            ran_before_monitor,
            ..Self::default()
        }
    }

    /// Feeds the tenure's counters now, `values`, into `counters` under `who`, those `wants`
    /// selects; `unit` is what one unit of busy time is worth.
    pub fn observe(
        &mut self,
        counters: &mut Counters,
        values: &impl CounterValues,
        who: &SlabLabels<'_>,
        unit: TimeInUseUnit,
        wants: Wants,
    ) {
        if !self
            .taken_for
            .as_ref()
            .is_some_and(|taken| taken.matches(who, wants))
        {
            self.relabel(counters, who, wants);
        }
        let last = values.is_final();
        let sums: Vec<Option<u64>> = ecosystem()
            .map(|(_, _, _, counter)| values.total(CounterSource::Nc(counter)))
            .collect();
        let ran_before = self.ran_before_monitor;
        let baseline = self.baseline.get_or_insert_with(|| {
            sums.iter()
                .map(|sum| if ran_before { sum.unwrap_or(0) } else { 0 })
                .collect()
        });
        if wants.execution {
            match (&mut self.pod, who.pod) {
                (None, Some(holder)) => {
                    self.pod = Some(PodSeries::acquire(counters, holder, baseline));
                }
                (Some(pod), Some(holder)) if pod.holder != *holder => {
                    pod.redirect(counters, holder);
                }
                _ => {}
            }
        }
        for (index, tracked) in self.ecosystem.iter_mut().enumerate() {
            if let Some(&Some(sum)) = sums.get(index) {
                feed(tracked, counters, sum, 1.0, last);
            }
        }
        if let Some(pod) = self.pod.as_mut() {
            for (index, tracked) in pod.tracked.iter_mut().enumerate() {
                if let Some(&Some(sum)) = sums.get(index) {
                    feed(tracked, counters, sum, 1.0, last);
                }
            }
        }
        if wants.nds {
            self.observe_cores(counters, values, who, unit);
        }
    }

    /// Feeds every node of every core the process counted on.
    fn observe_cores(
        &mut self,
        counters: &mut Counters,
        values: &impl CounterValues,
        who: &SlabLabels<'_>,
        unit: TimeInUseUnit,
    ) {
        let last = values.is_final();
        let cores = who.indexing.per_device.min(NDS_TOTAL_NEURONCORE_COUNT);
        for core in 0..cores {
            let tracked = match self.cores.entry(core) {
                Entry::Occupied(tracked) => tracked.into_mut(),
                Entry::Vacant(place) => {
                    // A core the process never counted on has no series.
                    let Some(key) = who.indexing.key(core) else {
                        continue;
                    };
                    if !values.counted_on(core) {
                        continue;
                    }
                    let tracked = SYSFS_COUNTERS
                        .iter()
                        .enumerate()
                        .filter_map(|(index, node)| {
                            let family = family_of(node)?;
                            let labels = node_labels(family, who, &key, node);
                            let series = counters.acquire(family, Sample::Total, labels);
                            Some((index, Tracked::new(series)))
                        })
                        .collect();
                    place.insert(tracked)
                }
            };
            for (index, tracked) in tracked.iter_mut() {
                let Some(node) = SYSFS_COUNTERS.get(*index) else {
                    continue;
                };
                let Some(raw) = values.value(core, node.source) else {
                    continue;
                };
                let scale = if families::counts_time(node) {
                    unit.seconds(1)
                } else {
                    node.scale as f64
                };
                feed(tracked, counters, raw, scale, last);
            }
        }
    }

    /// Adds one sampled `(total, device)` latency, in microseconds.
    pub fn observe_latency(&self, counters: &mut Counters, (total, device): (u64, u64)) {
        if let Some([total_feed, device_feed]) = &self.latency {
            total_feed.observe(counters, total);
            device_feed.observe(counters, device);
        }
    }

    /// Moves every series to the labels of `who` and the selection of `wants`, keeping the
    /// last readings of the tag's series.
    fn relabel(&mut self, counters: &mut Counters, who: &SlabLabels<'_>, wants: Wants) {
        if wants.execution {
            let fresh: Vec<SeriesId> = ecosystem()
                .map(|(family, _, value, _)| {
                    let labels = family.metric.label_set(&[who.tag, value]);
                    counters.acquire(family, Sample::Total, render_labels(&labels))
                })
                .collect();
            if self.ecosystem.is_empty() {
                let follow = if self.ran_before_monitor {
                    Tracked::from_first_reading
                } else {
                    Tracked::new
                };
                self.ecosystem = fresh.into_iter().map(follow).collect();
            } else {
                for (tracked, id) in self.ecosystem.iter_mut().zip(fresh) {
                    counters.release(tracked.series);
                    tracked.redirect(id);
                }
            }
        } else {
            for tracked in std::mem::take(&mut self.ecosystem) {
                counters.release(tracked.series);
            }
            if let Some(pod) = self.pod.take() {
                pod.release(counters);
            }
        }
        // Per-process series start again under the new labels, from the whole count.
        for (_, tracked) in std::mem::take(&mut self.cores).into_values().flatten() {
            counters.release(tracked.series);
        }
        if let Some(feeds) = self.latency.take() {
            feeds
                .into_iter()
                .flat_map(HistogramFeed::ids)
                .for_each(|id| counters.release(id));
        }
        if wants.execution {
            let (pid, device) = (who.pid(), who.device());
            let histogram = |kind: &str, counters: &mut Counters| {
                let labels: LabelSet = RUNTIME_LATENCY
                    .metric
                    .label_set(&[who.tag, &pid, &device, kind])
                    .with_pod(who.pods.process_names());
                HistogramFeed::acquire(counters, &render_labels(&labels))
            };
            self.latency = Some([histogram("total", counters), histogram("device", counters)]);
        }
        self.taken_for = Some(TakenFor {
            tag: who.tag.to_owned(),
            pid: who.pid,
            indexing: who.indexing,
            pods: who.pods.clone(),
            wants,
        });
    }

    /// The tenure ended at `at`: the per-tag and per-pod series keep what it counted, the
    /// per-process ones are retired (shown with their final value until they expire).
    pub fn end(self, counters: &mut Counters, at: Instant) {
        for tracked in self.ecosystem {
            counters.release(tracked.series);
        }
        if let Some(pod) = self.pod {
            pod.release(counters);
        }
        let cores = self
            .cores
            .into_values()
            .flatten()
            .map(|(_, tracked)| tracked.series);
        let latency = self
            .latency
            .into_iter()
            .flatten()
            .flat_map(HistogramFeed::ids);
        for id in cores.chain(latency) {
            counters.retire(id, at);
        }
    }
}
