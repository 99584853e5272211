//! The exporter as a view of the sampler's stream ([`Exporter`]): every reading of a tenure
//! feeds its series, with the containers pod attribution says hold it; a tenure's end feeds
//! its final values (the kernel's ledger record of it) and retires its per-process series; a
//! report feeds the device series and replaces the gauges' latest groups; and what the monitor
//! notices about itself feeds its own series.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use nds_document::document::MonitorDocument;
use nds_podresources::Container;
use nds_sampler::stream::{Consumer, Ending, Notice, Reading, Report, Tenure, TenureId, Wants};

use crate::counters::Counters;
use crate::devices::DeviceSeries;
use crate::feeds::{SlabFeeds, SlabLabels};
use crate::own::OwnSeries;
use crate::pods::uids::PodUids;
use crate::pods::{counted_cores, recorded_cores, PodFeed, SlabAttribution};
use crate::prometheus::{exposition, render, LatestReport, PodsByAddress};

/// How long the per-process series of a tenure that ended stay in the exposition, with their
/// final values: longer than any common scrape interval, as long as Prometheus looks back for
/// a series by default.
pub const DEFAULT_LINGER: Duration = Duration::from_secs(300);

/// What the exporter keeps of one tenure.
#[derive(Debug)]
struct TenureSeries {
    address: String,
    feeds: SlabFeeds,
    attribution: SlabAttribution,
    /// The container its cgroup's pod was last learnt as.
    learnt: Option<Arc<Container>>,
}

/// The exporter: the series of everything the monitor observes, and the latest report's
/// gauges.
#[derive(Debug)]
pub struct Exporter {
    counters: Counters,
    own: OwnSeries,
    devices: DeviceSeries,
    tenures: BTreeMap<TenureId, TenureSeries>,
    pods: Option<PodFeed>,
    uids: PodUids,
    latest: LatestReport,
    linger: Duration,
}

impl Default for Exporter {
    fn default() -> Self {
        Self::new()
    }
}

impl Exporter {
    /// An exporter with no series but the monitor's own, without pod attribution.
    #[must_use]
    pub fn new() -> Self {
        let mut counters = Counters::default();
        let own = OwnSeries::new(&mut counters);
        Self {
            counters,
            own,
            devices: DeviceSeries::default(),
            tenures: BTreeMap::new(),
            pods: None,
            uids: PodUids::default(),
            latest: LatestReport::default(),
            linger: DEFAULT_LINGER,
        }
    }

    /// Labels the series with the containers `feed` says hold each slab's device and cores
    /// ([`crate::pods`]), and counts the feed's failures.
    #[must_use]
    pub fn with_pod_attribution(mut self, feed: PodFeed) -> Self {
        self.own.count_pod_failures(&mut self.counters);
        self.pods = Some(feed);
        self
    }

    /// Keeps the per-process series of an ended tenure in the exposition for `linger` after
    /// its end (default [`DEFAULT_LINGER`]).
    #[must_use]
    pub fn with_linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// The counters.
    #[must_use]
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The latest value of every group.
    #[must_use]
    pub fn latest(&self) -> &LatestReport {
        &self.latest
    }

    /// The containers of each live tenure's series, by its slab's address.
    fn pods_by_address(&self) -> PodsByAddress<'_> {
        self.tenures
            .values()
            .map(|series| (series.address.as_str(), series.attribution.pods()))
            .collect::<HashMap<_, _>>()
    }

    /// `document`'s gauges and every series, without the monitor's process metrics.
    #[must_use]
    pub fn render(&self, document: &MonitorDocument) -> String {
        render(document, Some(&self.counters), &self.pods_by_address())
    }

    /// The exposition to serve: the latest groups' gauges, every series, and the monitor's
    /// process metrics.
    #[must_use]
    pub fn exposition(&self) -> String {
        exposition(&self.latest, Some(&self.counters), &self.pods_by_address())
    }
}

impl Consumer for Exporter {
    fn follows_counters(&self) -> bool {
        true
    }

    fn began(&mut self, tenure: &Tenure, _first: &Reading<'_>) {
        self.tenures.insert(
            tenure.id,
            TenureSeries {
                address: tenure.address.clone(),
                feeds: SlabFeeds::new(tenure.ran_before_monitor),
                attribution: SlabAttribution::default(),
                learnt: None,
            },
        );
    }

    fn reading(&mut self, tenure: &Tenure, reading: &Reading<'_>) {
        let attribution = self
            .pods
            .as_ref()
            .and_then(|feed| feed.current(reading.now));
        if let Some(feed) = &self.pods {
            self.own.sync_pod_failures(&mut self.counters, feed);
        }
        let Some(series) = self.tenures.get_mut(&tenure.id) else {
            return;
        };
        if let Some(values) = reading.counters {
            let per_device = reading.indexing.per_device;
            // Only looked at with a mapping to resolve against.
            let counted = attribution
                .as_ref()
                .map_or(0, |_| counted_cores(values, per_device));
            let pods = series
                .attribution
                .update(attribution.as_ref(), reading.indexing, counted);
            if let (Some(cgroup), Some(holder)) = (&tenure.cgroup, &pods.process) {
                if series.learnt.as_ref() != Some(holder) {
                    self.uids.learn(cgroup, holder);
                    series.learnt = Some(Arc::clone(holder));
                }
            }
            let who = SlabLabels {
                tag: reading.tag,
                pid: tenure.pid,
                indexing: reading.indexing,
                pods,
                pod: pods.process.as_ref(),
            };
            series.feeds.observe(
                &mut self.counters,
                values,
                &who,
                reading.time_unit,
                reading.wants,
            );
        }
        for &sample in reading.latencies {
            series.feeds.observe_latency(&mut self.counters, sample);
        }
    }

    fn ended(&mut self, tenure: &Tenure, ending: &Ending<'_>) {
        let (mut feeds, mut attribution) = match self.tenures.remove(&tenure.id) {
            Some(series) => {
                self.own.ended(&mut self.counters, ending.reason);
                (series.feeds, series.attribution)
            }
            // Known from its record alone: counted whole, as a process that began after the
            // monitor.
            None if !ending.seen => (SlabFeeds::new(false), SlabAttribution::default()),
            None => return,
        };
        if let Some(record) = ending.record {
            // The record is the tenure's last reading: its cores name the containers that
            // hold its device now, as a reading's do (a tenure found with its record already
            // written had no reading before it).
            if let Some(current) = self.pods.as_ref().and_then(|feed| feed.current(ending.now)) {
                let counted = recorded_cores(record, ending.indexing.per_device);
                attribution.update(Some(&current), ending.indexing, counted);
            }
            let pods = attribution.pods();
            // The pod of a process never seen in one: the one its cgroup names, if known.
            let by_uid = tenure
                .cgroup
                .as_deref()
                .and_then(|cgroup| self.uids.holder(cgroup));
            let who = SlabLabels {
                tag: ending.tag,
                pid: tenure.pid,
                indexing: ending.indexing,
                pods,
                pod: pods.process.as_ref().or(by_uid),
            };
            // A process outside the monitor's pid namespace has no series of its own.
            let wants = Wants {
                nds: ending.wants.nds && tenure.pid != 0,
                ..ending.wants
            };
            feeds.observe(&mut self.counters, record, &who, ending.time_unit, wants);
        }
        feeds.end(&mut self.counters, ending.now);
    }

    fn reported(&mut self, report: &Report<'_>) {
        self.own.reported(&mut self.counters);
        if let Some(feed) = &self.pods {
            self.own.sync_pod_failures(&mut self.counters, feed);
        }
        if let Some(totals) = report.ecc_totals {
            self.devices.feed_ecc(&mut self.counters, totals);
        }
        if let Some(totals) = report.core_totals {
            self.devices.feed_cores(
                &mut self.counters,
                totals,
                report.per_device,
                report.time_unit,
            );
        }
        if let Some(before) = report.now.checked_sub(self.linger) {
            self.counters.expire(before);
        }
        self.latest.update(report.document);
    }

    fn noticed(&mut self, notice: &Notice) {
        self.own.noticed(&mut self.counters, notice);
    }
}
