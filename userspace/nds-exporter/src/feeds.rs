//! What one attached slab feeds into the exporter's [`Counters`]: its outcomes and error
//! classes under its tag, every status and usage node of each of its NeuronCores under its
//! pid, and the latencies sampled from it.
//!
//! The series are taken when the slab's labels are first known and taken again when they
//! change (a process may publish its tag after the monitor attached): what a tag's series
//! counted stays in it and the new tag's series counts only what comes after, while the
//! per-process series start over under the new labels with the process's whole count. The
//! same goes for the pod labels ([`crate::pods`]): a slab whose container changes (its pod
//! appears, or leaves the kubelet's list) starts its per-process series over under the new
//! ones. Dropping the feeds ([`SlabFeeds::release`]) leaves every series with the slab's last
//! value.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use nds::CounterSnapshot;
use nds_abi::counters::NcCounter;
use nds_abi::layout::NDS_TOTAL_NEURONCORE_COUNT;
use nds_abi::sysfs::{SysfsGroup, SYSFS_COUNTERS};
use nds_document::groups::CoreIndexing;
use nds_document::latency::LATENCY_BUCKETS_SECONDS;
use nds_document::pods::SlabPods;
use nds_sysfs::TimeInUseUnit;

use crate::counters::{Counters, Family, Sample, SeriesId, Tracked};
use crate::families::{self, EXECUTION_ERRORS, EXECUTION_STATUS, RUNTIME_LATENCY, RUNTIME_STATUS};
use crate::labels::{self, Labels};
use crate::pods::PodLabels;

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

/// Who a slab's series are about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabLabels<'a> {
    /// The process tag.
    pub tag: &'a str,
    /// The owner.
    pub pid: i32,
    /// How its cores are numbered instance-wide (its device, cores per device).
    pub indexing: CoreIndexing,
    /// The containers of its series (none without pod attribution).
    pub pods: &'a SlabPods,
}

impl SlabLabels<'_> {
    /// The labels every per-process series has.
    fn base(&self) -> Labels<'static> {
        vec![
            ("runtime_tag", self.tag.to_owned()),
            ("pid", self.pid.to_string()),
            ("neuron_device_index", self.indexing.device.to_string()),
        ]
    }

    /// The labels of the series about the process as a whole.
    fn process(&self) -> Labels<'static> {
        let mut labels = self.base();
        labels.extend(self.pods.process_labels());
        labels
    }
}

/// Which series a slab's rule wants fed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wants {
    /// `execution_stats`: outcomes, error classes and latencies.
    pub execution: bool,
    /// `nds_counters`: every node of every core.
    pub nds: bool,
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

    fn release(self, counters: &mut Counters) {
        for id in self.buckets.into_iter().chain([self.sum, self.count]) {
            counters.release(id);
        }
    }
}

/// The series one slab feeds.
#[derive(Debug, Default)]
pub struct SlabFeeds {
    /// Whether the slab's process ran before this monitor started, so that another monitor
    /// (this one before a restart) may have exposed its counts in the per-tag series already:
    /// those then follow it from its first reading.
    ran_before_monitor: bool,
    taken_for: Option<TakenFor>,
    /// Outcomes then error classes, summed over the cores.
    ecosystem: Vec<Tracked>,
    /// Per core in use: every node of [`SYSFS_COUNTERS`] (by its index there).
    cores: BTreeMap<usize, Vec<(usize, Tracked)>>,
    /// Total and device latency histograms, while the slab's rule samples latencies.
    latency: Option<[HistogramFeed; 2]>,
}

fn family_of(group: SysfsGroup, node: &nds_abi::sysfs::SysfsCounter) -> Option<&'static Family> {
    match group {
        SysfsGroup::Status => Some(&RUNTIME_STATUS),
        SysfsGroup::OtherInfo => families::runtime_other(node),
    }
}

/// The labels of `node`'s series on core `key` of a process (`base` labels), held by the
/// container of `pods`.
fn node_labels(
    base: &Labels<'static>,
    pods: &SlabPods,
    key: &str,
    node: &nds_abi::sysfs::SysfsCounter,
) -> String {
    let mut core = labels::with(base, &[("neuroncore", key)]);
    core.extend(pods.core_labels(key));
    match node.group {
        SysfsGroup::Status => labels::render(&labels::with(&core, &[("status", node.name)])),
        SysfsGroup::OtherInfo => labels::render(&core),
    }
}

impl SlabFeeds {
    /// The feeds of a slab whose process ran before this monitor started, or not
    /// (`ran_before_monitor`): the per-tag series (the ecosystem's families, summed over a
    /// tag's processes, ended ones included) then count from its first reading, so that a
    /// restart of the monitor is a reset of each, to no more than the new monitor saw. The
    /// per-process series count its whole life either way: a process is a series of its own,
    /// which a restart does not double.
    #[must_use]
    pub fn new(ran_before_monitor: bool) -> Self {
        Self {
            ran_before_monitor,
            ..Self::default()
        }
    }

    /// Feeds the slab's counters now, `snapshot`, into `counters` under `who`, those `wants`
    /// selects; `unit` is what one unit of busy time is worth.
    pub fn observe(
        &mut self,
        counters: &mut Counters,
        snapshot: &CounterSnapshot,
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
        let sum = |counter: NcCounter| {
            snapshot
                .nc
                .iter()
                .map(|core| core.get(counter.index()).copied().unwrap_or(0))
                .fold(0u64, u64::wrapping_add)
        };
        let ecosystem = STATUS_TYPES.iter().chain(ERROR_TYPES.iter());
        for (tracked, (_, counter)) in self.ecosystem.iter_mut().zip(ecosystem) {
            tracked.observe(counters, sum(*counter), 1.0);
        }
        if !wants.nds {
            return;
        }
        let cores = who.indexing.per_device.min(NDS_TOTAL_NEURONCORE_COUNT);
        for (core, values) in snapshot.nc.iter().enumerate().take(cores) {
            let tracked = match self.cores.entry(core) {
                Entry::Occupied(tracked) => tracked.into_mut(),
                Entry::Vacant(place) => {
                    // A core the process never counted on has no series.
                    let Some(key) = who.indexing.key(core) else {
                        continue;
                    };
                    if values.iter().all(|&value| value == 0) {
                        continue;
                    }
                    let base = who.base();
                    let tracked = SYSFS_COUNTERS
                        .iter()
                        .enumerate()
                        .filter_map(|(index, node)| {
                            let family = family_of(node.group, node)?;
                            let labels = node_labels(&base, who.pods, &key, node);
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
                let raw = values.get(node.source.index()).copied().unwrap_or(0);
                let scale = if families::counts_time(node) {
                    unit.seconds(1)
                } else {
                    node.scale as f64
                };
                tracked.observe(counters, raw, scale);
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
            let tag: Labels<'static> = vec![("runtime_tag", who.tag.to_owned())];
            let ecosystem = STATUS_TYPES
                .iter()
                .map(|&(name, _)| (&EXECUTION_STATUS, "status_type", name))
                .chain(
                    ERROR_TYPES
                        .iter()
                        .map(|&(name, _)| (&EXECUTION_ERRORS, "error_type", name)),
                );
            let fresh: Vec<SeriesId> = ecosystem
                .map(|(family, label, value)| {
                    let labels = labels::render(&labels::with(&tag, &[(label, value)]));
                    counters.acquire(family, Sample::Total, labels)
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
        }
        // Per-process series start again under the new labels, from the whole count.
        for (_, tracked) in std::mem::take(&mut self.cores).into_values().flatten() {
            counters.release(tracked.series);
        }
        if let Some(feeds) = self.latency.take() {
            feeds.into_iter().for_each(|feed| feed.release(counters));
        }
        if wants.execution {
            let process = who.process();
            let histogram = |kind: &str, counters: &mut Counters| {
                HistogramFeed::acquire(
                    counters,
                    &labels::render(&labels::with(&process, &[("kind", kind)])),
                )
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

    /// Gives every series up; each keeps the slab's last value.
    pub fn release(self, counters: &mut Counters) {
        let cores = self
            .cores
            .into_values()
            .flatten()
            .map(|(_, tracked)| tracked);
        for tracked in self.ecosystem.into_iter().chain(cores) {
            counters.release(tracked.series);
        }
        if let Some(feeds) = self.latency {
            feeds.into_iter().for_each(|feed| feed.release(counters));
        }
    }
}
