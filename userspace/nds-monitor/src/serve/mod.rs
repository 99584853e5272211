//! `serve`: the monitor as a Prometheus exporter over HTTP or HTTPS.
//!
//! The calling thread runs the monitor on its own schedule, exactly as the JSON mode does:
//! it ticks, reports whenever a group is due (its [`Exporter`] merges the report into the
//! latest of every group) and publishes the rendered exposition. A thread of its own serves
//! HTTP ([`http`]) and only ever hands out the last published exposition, so any number of
//! scrapers see the same windows, and no request changes anything. `/healthz` answers 200
//! while the sampling loop has ticked within two of the plan's shortest periods and, when it
//! reads the kernel, the module was loaded at its last tick (a module being reloaded makes it
//! 503 until the module is back). `/readyz` answers 200 once the sampling loop has reported
//! every group of its plan (read every source) with at least the wanted number of devices
//! listed, and 503 again while the module is gone or too few devices are listed. The health
//! view's verdicts (`/api/v1/devices`) and events (`/api/v1/events`) are published with each
//! report, as the exposition is.

mod admission;
mod deadline;
pub mod http;
pub mod tls;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use nds_exporter::prometheus::instance_labels;
use nds_exporter::Exporter;
use nds_health::api::{DevicesBody, StreamPosition};
use nds_health::events::EventRing;
use nds_health::{exposition, Health};
use nds_otlp::OtlpExport;
use nds_sampler::Monitor;
use tokio_rustls::TlsAcceptor;

pub use tls::{TlsError, TlsFiles};

/// The monitor `serve` runs: the exporter and the health view, each a view of the stream.
pub type Served = Monitor<(Exporter, Health)>;

/// What the sampling loop publishes for the HTTP side.
#[derive(Debug)]
pub struct Published {
    exposition: Mutex<Bytes>,
    /// The body of `/api/v1/devices`.
    devices: Mutex<Bytes>,
    /// The event stream, if one is served.
    events: Option<Arc<Mutex<EventRing>>>,
    /// Why `/readyz` says 503, as of the last report (`Ok`: ready).
    readiness: Mutex<Result<(), String>>,
    started: Instant,
    /// Milliseconds after `started` of the last tick.
    last_tick: AtomicU64,
    /// How stale the last tick may be for `/healthz` to answer 200.
    healthy_within: Duration,
    /// What the last tick found wrong with its source (the module is not loaded).
    source_problem: Mutex<Option<String>>,
}

impl Published {
    fn new(healthy_within: Duration, events: Option<Arc<Mutex<EventRing>>>) -> Self {
        Self {
            exposition: Mutex::new(Bytes::new()),
            devices: Mutex::new(Bytes::new()),
            events,
            readiness: Mutex::new(Err("the first sampling cycle has not ended".to_owned())),
            started: Instant::now(),
            last_tick: AtomicU64::new(0),
            healthy_within,
            source_problem: Mutex::new(None),
        }
    }

    /// The last published exposition (a reference-counted copy).
    #[must_use]
    pub fn exposition(&self) -> Bytes {
        lock(&self.exposition).clone()
    }

    fn publish(&self, text: String) {
        *lock(&self.exposition) = Bytes::from(text);
    }

    /// The body of `/api/v1/devices` as last published.
    #[must_use]
    pub fn devices(&self) -> Bytes {
        lock(&self.devices).clone()
    }

    /// The event stream's answer to a client that saw up to `since` of `stream`; `None`
    /// when no event stream is served.
    #[must_use]
    pub fn events_since(&self, since: u64, stream: Option<&str>) -> Option<String> {
        let ring = self.events.as_ref()?;
        Some(lock(ring).since(since, stream))
    }

    /// `Ok` once the sampling loop has read every source and listed enough devices, and
    /// while its source is there; why not otherwise.
    ///
    /// # Errors
    ///
    /// Why the monitor is not ready.
    pub fn readiness(&self) -> Result<(), String> {
        if let Some(problem) = lock(&self.source_problem).clone() {
            return Err(problem);
        }
        lock(&self.readiness).clone()
    }

    /// Publishes what a report left: the exposition (returned, for the OTLP push), the
    /// verdicts, whether it is ready.
    fn reported(&self, monitor: &Served, min_devices: usize) -> String {
        let (exporter, health) = monitor.consumer();
        let instance = instance_labels(&exporter.latest().document().instance_info);
        let text =
            exporter.exposition() + &exposition::encode(health.group(), health.rules(), &instance);
        self.publish(text.clone());
        let events = self.events.as_ref().map(|ring| {
            let ring = lock(ring);
            StreamPosition {
                stream: ring.stream().to_owned(),
                last_seq: ring.last(),
            }
        });
        let body = DevicesBody {
            timestamp: exporter.latest().document().timestamp,
            window: health.group().window,
            devices: &health.group().devices,
            events,
        };
        if let Ok(json) = serde_json::to_vec(&body) {
            *lock(&self.devices) = Bytes::from(json);
        }
        *lock(&self.readiness) = readiness(monitor, min_devices);
        text
    }

    fn ticked(&self, source_problem: Option<String>) {
        let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_tick.store(elapsed, Ordering::Relaxed);
        *lock(&self.source_problem) = source_problem;
    }

    /// `Ok` while the sampling loop ticked recently enough and its source was there; why not
    /// otherwise.
    ///
    /// # Errors
    ///
    /// How long ago the last tick was, when that is too long; what the last tick found
    /// missing.
    pub fn health(&self) -> Result<(), String> {
        if let Some(problem) = lock(&self.source_problem).clone() {
            return Err(problem);
        }
        let last = Duration::from_millis(self.last_tick.load(Ordering::Relaxed));
        let since = self.started.elapsed().saturating_sub(last);
        if since <= self.healthy_within {
            Ok(())
        } else {
            Err(format!(
                "the sampling loop last advanced {:.1} s ago (limit {:.1} s)",
                since.as_secs_f64(),
                self.healthy_within.as_secs_f64()
            ))
        }
    }
}

/// Locks `mutex`, whatever a panicking holder left in it (each holder writes whole values).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `monitor` is ready: its plan's every group reported, its module loaded and at
/// least `min_devices` devices listed.
fn readiness(monitor: &Served, min_devices: usize) -> Result<(), String> {
    if let Some(why) = monitor.source().module_missing() {
        return Err(why);
    }
    if !monitor.reported_every_group() {
        return Err("the first sampling cycle has not read every source yet".to_owned());
    }
    match monitor.consumer().1.listed() {
        Err(why) => Err(why.to_owned()),
        Ok(listed) if listed.len() < min_devices => Err(format!(
            "{} Neuron device(s) listed, at least {min_devices} wanted",
            listed.len()
        )),
        Ok(_) => Ok(()),
    }
}

/// How `serve` runs, beside its listener and monitor.
pub struct ServeOptions {
    /// TLS, if it serves HTTPS.
    pub tls: Option<TlsAcceptor>,
    /// Exit after this many requests.
    pub max_requests: Option<usize>,
    /// The OTLP push, if there is one.
    pub otlp: Option<OtlpExport>,
    /// Devices `/readyz` wants listed.
    pub ready_min_devices: usize,
}

/// Sets the flag when dropped: the sampling loop stops with the HTTP side, however it ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// How long the sampling loop has to stop after the HTTP side did (SIGTERM, or the last of
/// `max_requests`) before the process exits without it.
const SAMPLING_STOP_GRACE: Duration = Duration::from_secs(1);

/// Runs `monitor` and serves its exposition on `listener` (over TLS with `tls`) until SIGTERM
/// or SIGINT, or until `max_requests` requests were answered; `otlp` is handed every
/// exposition published, to push.
///
/// # Errors
///
/// The HTTP side could not start (its runtime, its signal handlers or the listener).
pub fn serve(
    listener: TcpListener,
    mut monitor: Served,
    options: ServeOptions,
) -> std::io::Result<()> {
    let ServeOptions {
        tls,
        max_requests,
        otlp,
        ready_min_devices,
    } = options;
    monitor.report_processes(Instant::now());
    let healthy_within = 2 * monitor.plan().shortest_period();
    let events = monitor.consumer().1.events();
    let published = Arc::new(Published::new(healthy_within, events));
    let first = published.reported(&monitor, ready_min_devices);
    if let Some(otlp) = &otlp {
        otlp.publish(&first);
    }
    published.ticked(monitor.source().module_missing());
    let stop = Arc::new(AtomicBool::new(false));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let server = {
        let published = Arc::clone(&published);
        let stop = StopOnDrop(Arc::clone(&stop));
        std::thread::Builder::new()
            .name("http".into())
            .spawn(move || {
                let _stop = stop;
                let served = runtime.block_on(http::run(listener, published, tls, max_requests));
                // The sampling loop stops at its next step once `_stop` is dropped; one stuck
                // in a system call (a read of a hung /proc or sysfs file) must not keep the
                // process alive: it gets `SAMPLING_STOP_GRACE`, then the process exits.
                let code = i32::from(served.is_err());
                let _ = std::thread::Builder::new()
                    .name("stop-watchdog".into())
                    .spawn(move || {
                        std::thread::sleep(SAMPLING_STOP_GRACE);
                        log::warn!("the sampling loop did not stop in time: exiting");
                        std::process::exit(code);
                    });
                served
            })?
    };
    while monitor
        .next_report(&stop, |monitor| {
            published.ticked(monitor.source().module_missing());
        })
        .is_some()
    {
        let text = published.reported(&monitor, ready_min_devices);
        if let Some(otlp) = &otlp {
            otlp.publish(&text);
        }
    }
    // The last exposition is pushed before the process ends.
    drop(otlp);
    server
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the HTTP thread panicked")))
}
