//! The monitor's own series (`nds_monitor_*`): its reports, the slabs it stopped reading, the
//! slabs it could not attach, the kubelet calls that failed, and the tenure ledger records it
//! read or lost.

use nds_sampler::stream::{AttachFailure, EndReason, Notice, RecordOutcome};

use crate::counters::{Counters, Sample, SeriesId};
use crate::encoder::render_labels;
use crate::families::{
    MONITOR_ATTACH_FAILURES, MONITOR_LEDGER_LOST, MONITOR_LEDGER_RECORDS,
    MONITOR_POD_RESOURCES_ERRORS, MONITOR_REPORTS, MONITOR_SLABS_ENDED,
};
use crate::pods::PodFeed;

/// The ledger's series, kept once the monitor follows a ledger.
#[derive(Debug)]
struct LedgerSeries {
    records: [(RecordOutcome, SeriesId); RecordOutcome::ALL.len()],
    lost: SeriesId,
}

/// The monitor's own series.
#[derive(Debug)]
pub struct OwnSeries {
    reports: SeriesId,
    ended: [(EndReason, SeriesId); EndReason::ALL.len()],
    attach_failures: [(AttachFailure, SeriesId); AttachFailure::ALL.len()],
    /// With pod attribution: its failures' series, and the feed's count it has added so far.
    pod_failures: Option<(SeriesId, u64)>,
    ledger: Option<LedgerSeries>,
}

impl OwnSeries {
    /// Every series the monitor always shows, at zero.
    #[must_use]
    pub fn new(counters: &mut Counters) -> Self {
        let reports = counters.acquire(&MONITOR_REPORTS, Sample::Total, String::new());
        let ended = EndReason::ALL.map(|reason| {
            let labels = MONITOR_SLABS_ENDED.metric.label_set(&[reason.name()]);
            let id = counters.acquire(&MONITOR_SLABS_ENDED, Sample::Total, render_labels(&labels));
            (reason, id)
        });
        let attach_failures = AttachFailure::ALL.map(|reason| {
            let labels = MONITOR_ATTACH_FAILURES.metric.label_set(&[reason.name()]);
            let id = counters.acquire(
                &MONITOR_ATTACH_FAILURES,
                Sample::Total,
                render_labels(&labels),
            );
            (reason, id)
        });
        Self {
            reports,
            ended,
            attach_failures,
            pod_failures: None,
            ledger: None,
        }
    }

    /// Keeps `nds_monitor_pod_resources_errors_total` from now on (once).
    pub fn count_pod_failures(&mut self, counters: &mut Counters) {
        if self.pod_failures.is_none() {
            let series =
                counters.acquire(&MONITOR_POD_RESOURCES_ERRORS, Sample::Total, String::new());
            self.pod_failures = Some((series, 0));
        }
    }

    /// Adds the failures `feed` counted since the last time.
    pub fn sync_pod_failures(&mut self, counters: &mut Counters, feed: &PodFeed) {
        if let Some((series, added)) = self.pod_failures.as_mut() {
            let now = feed.failures();
            counters.add(*series, now.saturating_sub(*added) as f64);
            *added = now;
        }
    }

    /// A report was made.
    pub fn reported(&self, counters: &mut Counters) {
        counters.add(self.reports, 1.0);
    }

    /// A slab stopped being read, for `reason`.
    pub fn ended(&self, counters: &mut Counters, reason: EndReason) {
        if let Some(&(_, id)) = self.ended.iter().find(|(r, _)| *r == reason) {
            counters.add(id, 1.0);
        }
    }

    /// The monitor noticed `notice`.
    pub fn noticed(&mut self, counters: &mut Counters, notice: &Notice) {
        match *notice {
            Notice::AttachFailed(reason) => {
                if let Some(&(_, id)) = self.attach_failures.iter().find(|(r, _)| *r == reason) {
                    counters.add(id, 1.0);
                }
            }
            Notice::LedgerFollowed => {
                self.ledger_series(counters);
            }
            Notice::LedgerRecord(outcome) => {
                let ledger = self.ledger_series(counters);
                if let Some(&(_, id)) = ledger.records.iter().find(|(o, _)| *o == outcome) {
                    counters.add(id, 1.0);
                }
            }
            Notice::LedgerLost { first, last, .. } => {
                let lost = self.ledger_series(counters).lost;
                counters.add(lost, last.saturating_sub(first).saturating_add(1) as f64);
            }
        }
    }

    /// The ledger's series, taken at the first need.
    fn ledger_series(&mut self, counters: &mut Counters) -> &LedgerSeries {
        self.ledger.get_or_insert_with(|| LedgerSeries {
            records: RecordOutcome::ALL.map(|outcome| {
                let labels = MONITOR_LEDGER_RECORDS.metric.label_set(&[outcome.name()]);
                let id = counters.acquire(
                    &MONITOR_LEDGER_RECORDS,
                    Sample::Total,
                    render_labels(&labels),
                );
                (outcome, id)
            }),
            lost: counters.acquire(&MONITOR_LEDGER_LOST, Sample::Total, String::new()),
        })
    }
}
