//! The export: the latest exposition the monitor published, sent to the collector every
//! period by the OpenTelemetry SDK's OTLP exporter (HTTP, protobuf), from a thread of its own.
//!
//! Each period the thread takes the latest exposition, updates what the instruments report
//! and asks the SDK to collect and export at once, so that every request carries one sample
//! whole. Gauges and counters are asynchronous instruments whose callbacks report that
//! sample's values: a counter's value is the monitor's own total, exported with cumulative
//! temporality, so the collector sees exactly what `/metrics` shows; a series that left the
//! exposition is no longer reported. Histograms are the SDK's, fed with each period's new
//! observations ([`crate::replay`]); the SDK keeps a histogram series for the life of the
//! process, so the series of an ended process stays at its last value. Names, help texts and
//! labels are the exposition's; the resource carries the settings' attributes.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use opentelemetry::metrics::{Histogram, Meter, MeterProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_otlp::{MetricExporter, WithExportConfig};
use opentelemetry_sdk::metrics::{
    Aggregation, Instrument, InstrumentKind, PeriodicReader, SdkMeterProvider, Stream, Temporality,
};
use opentelemetry_sdk::Resource;

use crate::error::Error;
use crate::exposition::{self, Buckets, Family, Kind, Labels};
use crate::replay::new_observations;

/// How often the SDK's own reader would export: never in practice; the export thread asks it
/// to at every period instead, right after it updated the instruments.
const READER_INTERVAL: Duration = Duration::from_secs(365 * 24 * 3600);

/// Where and how to export.
#[derive(Clone, Debug)]
pub struct OtlpSettings {
    /// The collector's OTLP/HTTP metrics URL (`http://HOST:4318/v1/metrics`).
    pub endpoint: String,
    /// How often to export the latest exposition.
    pub period: Duration,
    /// How long one export may take.
    pub timeout: Duration,
    /// The resource's attributes (`host.name`, `k8s.node.name`, …), beside `service.name`.
    pub resource: Vec<(String, String)>,
}

/// The values the asynchronous instruments report, by family.
type Values = HashMap<String, Vec<(Vec<KeyValue>, f64)>>;

/// What the export thread keeps between periods.
struct Instruments {
    meter: Meter,
    values: Arc<Mutex<Values>>,
    /// Families with an instrument, and the histograms with their last series.
    registered: HashMap<String, Kind>,
    histograms: HashMap<String, (Histogram<f64>, HashMap<Labels, Buckets>)>,
    /// Bounds of each histogram, for the view that sets its buckets.
    bounds: Arc<Mutex<HashMap<String, Vec<f64>>>>,
}

fn attributes(labels: &Labels) -> Vec<KeyValue> {
    labels
        .iter()
        .map(|(name, value)| KeyValue::new(name.clone(), value.clone()))
        .collect()
}

/// The unit a family's name spells, in UCUM as OTLP writes units.
fn unit(name: &str) -> &'static str {
    let words: Vec<&str> = name.split('_').collect();
    if words.contains(&"seconds") {
        "s"
    } else if words.contains(&"bytes") {
        "By"
    } else if words.contains(&"ratio") {
        "1"
    } else {
        ""
    }
}

impl Instruments {
    /// An instrument for `family`, made the first time it appears.
    fn register(&mut self, family: &Family) {
        if self.registered.get(&family.name) == Some(&family.kind) {
            return;
        }
        let name = family.name.clone();
        let values = Arc::clone(&self.values);
        let reported = name.clone();
        let report = move |observe: &dyn Fn(f64, &[KeyValue])| {
            let values = values.lock().unwrap_or_else(PoisonError::into_inner);
            for (attributes, value) in values.get(&reported).into_iter().flatten() {
                observe(*value, attributes);
            }
        };
        match &family.kind {
            Kind::Gauge => {
                self.meter
                    .f64_observable_gauge(name.clone())
                    .with_description(family.help.clone())
                    .with_unit(unit(&name))
                    .with_callback(move |gauge| report(&|value, kv| gauge.observe(value, kv)))
                    .build();
            }
            Kind::Counter => {
                self.meter
                    .f64_observable_counter(name.clone())
                    .with_description(family.help.clone())
                    .with_unit(unit(&name))
                    .with_callback(move |counter| {
                        report(&|value, kv| counter.observe(value, kv));
                    })
                    .build();
            }
            Kind::Histogram(bounds) => {
                self.bounds
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(name.clone(), bounds.clone());
                let histogram = self
                    .meter
                    .f64_histogram(name.clone())
                    .with_description(family.help.clone())
                    .with_unit(unit(&name))
                    .with_boundaries(bounds.clone())
                    .build();
                self.histograms
                    .insert(name.clone(), (histogram, HashMap::new()));
            }
        }
        self.registered.insert(name, family.kind.clone());
    }

    /// What the instruments report from now on: `families`, one sample of the exposition.
    fn update(&mut self, families: &[Family]) {
        let mut values = Values::new();
        for family in families {
            self.register(family);
            match &family.kind {
                Kind::Gauge | Kind::Counter => {
                    let series = family
                        .values
                        .iter()
                        .map(|(labels, value)| (attributes(labels), *value))
                        .collect();
                    values.insert(family.name.clone(), series);
                }
                Kind::Histogram(bounds) => {
                    let Some((histogram, last)) = self.histograms.get_mut(&family.name) else {
                        continue;
                    };
                    let mut now = HashMap::new();
                    for (labels, buckets) in &family.histograms {
                        let attributes = attributes(labels);
                        for (value, count) in new_observations(bounds, last.get(labels), buckets) {
                            for _ in 0..count {
                                histogram.record(value, &attributes);
                            }
                        }
                        now.insert(labels.clone(), buckets.clone());
                    }
                    *last = now;
                }
            }
        }
        *self.values.lock().unwrap_or_else(PoisonError::into_inner) = values;
    }
}

/// The latest exposition, and whether to stop.
#[derive(Default)]
struct Pending {
    latest: Option<String>,
    stop: bool,
}

type Shared = Arc<(Mutex<Pending>, Condvar)>;

/// OTLP export running on its own thread; dropping it exports once more and stops.
pub struct OtlpExport {
    shared: Shared,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for OtlpExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OtlpExport")
    }
}

impl OtlpExport {
    /// Starts exporting to `settings.endpoint`; nothing is sent before the first
    /// [`publish`](OtlpExport::publish).
    ///
    /// # Errors
    ///
    /// The exporter could not be built, or the thread not started.
    pub fn start(settings: &OtlpSettings) -> Result<Self, Error> {
        let exporter = MetricExporter::builder()
            .with_http()
            .with_endpoint(settings.endpoint.clone())
            .with_timeout(settings.timeout)
            .with_temporality(Temporality::Cumulative)
            .build()
            .map_err(|source| Error::Exporter {
                endpoint: settings.endpoint.clone(),
                source,
            })?;
        let reader = PeriodicReader::builder(exporter)
            .with_interval(READER_INTERVAL)
            .build();
        let bounds: Arc<Mutex<HashMap<String, Vec<f64>>>> = Arc::default();
        let view_bounds = Arc::clone(&bounds);
        // A histogram's buckets are the exposition's, and its minimum and maximum are not
        // recorded: the replayed measurements are not the observations.
        let view = move |instrument: &Instrument| {
            if instrument.kind() != InstrumentKind::Histogram {
                return None;
            }
            let boundaries = view_bounds
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(instrument.name())?
                .clone();
            Stream::builder()
                .with_aggregation(Aggregation::ExplicitBucketHistogram {
                    boundaries,
                    record_min_max: false,
                })
                .build()
                .ok()
        };
        let resource = Resource::builder_empty()
            .with_service_name("nds-monitor")
            .with_attributes(
                settings
                    .resource
                    .iter()
                    .map(|(key, value)| KeyValue::new(key.clone(), value.clone())),
            )
            .build();
        let provider = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(reader)
            .with_view(view)
            .build();
        let instruments = Instruments {
            meter: provider.meter("nds-monitor"),
            values: Arc::default(),
            registered: HashMap::new(),
            histograms: HashMap::new(),
            bounds,
        };
        let shared: Shared = Arc::default();
        let thread = {
            let shared = Arc::clone(&shared);
            let period = settings.period;
            let endpoint = settings.endpoint.clone();
            std::thread::Builder::new()
                .name("otlp".into())
                .spawn(move || export(&shared, period, &endpoint, instruments, &provider))
                .map_err(Error::Thread)?
        };
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Hands over the exposition just published; the next export sends the latest one.
    pub fn publish(&self, exposition: &str) {
        let (pending, wake) = &*self.shared;
        pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .latest = Some(exposition.to_owned());
        wake.notify_all();
    }
}

impl Drop for OtlpExport {
    fn drop(&mut self) {
        let (pending, wake) = &*self.shared;
        pending.lock().unwrap_or_else(PoisonError::into_inner).stop = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The export thread: every `period`, the latest exposition (if a new one came), exported.
fn export(
    shared: &Shared,
    period: Duration,
    endpoint: &str,
    mut instruments: Instruments,
    provider: &SdkMeterProvider,
) {
    let (pending, wake) = &**shared;
    let mut failing = false;
    loop {
        let (text, stopping) = {
            let guard = pending.lock().unwrap_or_else(PoisonError::into_inner);
            let mut guard = wake
                .wait_while(guard, |pending| pending.latest.is_none() && !pending.stop)
                .unwrap_or_else(PoisonError::into_inner);
            (guard.latest.take(), guard.stop)
        };
        if let Some(text) = text {
            match exposition::parse(&text) {
                Ok(families) => instruments.update(&families),
                Err(error) => log::warn!("OTLP export: the exposition is unreadable: {error}"),
            }
            match provider.force_flush() {
                Ok(()) if failing => {
                    log::info!("OTLP export to {endpoint} works again");
                    failing = false;
                }
                Ok(()) => {}
                Err(error) if !failing => {
                    log::warn!("OTLP export to {endpoint}: {error}");
                    failing = true;
                }
                Err(error) => log::debug!("OTLP export to {endpoint}: {error}"),
            }
        }
        if stopping {
            let _ = provider.shutdown();
            return;
        }
        // The pace of exports: the next one a period later, or at once when stopping.
        let guard = pending.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = wake
            .wait_timeout_while(guard, period, |pending| !pending.stop)
            .unwrap_or_else(PoisonError::into_inner);
    }
}
