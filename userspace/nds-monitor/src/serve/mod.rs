//! `serve`: the monitor as a Prometheus exporter over HTTP or HTTPS.
//!
//! The calling thread runs the monitor on its own schedule, exactly as the JSON mode does:
//! it ticks, reports whenever a group is due (its [`Exporter`] merges the report into the
//! latest of every group) and publishes the rendered exposition. A thread of its own serves
//! HTTP ([`http`]) and only ever hands out the last published exposition, so any number of
//! scrapers see the same windows, and no request changes anything. `/healthz` answers 200
//! while the sampling loop has ticked within two of the plan's shortest periods and, when it
//! reads the kernel, the module was loaded at its last tick (a module being reloaded makes it
//! 503 until the module is back).

mod admission;
mod deadline;
pub mod http;
pub mod tls;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use nds_exporter::Exporter;
use nds_otlp::OtlpExport;
use nds_sampler::Monitor;
use tokio_rustls::TlsAcceptor;

pub use tls::{TlsError, TlsFiles};

/// What the sampling loop publishes for the HTTP side.
#[derive(Debug)]
pub struct Published {
    exposition: Mutex<Bytes>,
    started: Instant,
    /// Milliseconds after `started` of the last tick.
    last_tick: AtomicU64,
    /// How stale the last tick may be for `/healthz` to answer 200.
    healthy_within: Duration,
    /// What the last tick found wrong with its source (the module is not loaded).
    source_problem: Mutex<Option<String>>,
}

impl Published {
    fn new(text: String, healthy_within: Duration) -> Self {
        Self {
            exposition: Mutex::new(Bytes::from(text)),
            started: Instant::now(),
            last_tick: AtomicU64::new(0),
            healthy_within,
            source_problem: Mutex::new(None),
        }
    }

    /// The last published exposition (a reference-counted copy).
    #[must_use]
    pub fn exposition(&self) -> Bytes {
        match self.exposition.lock() {
            Ok(text) => text.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn publish(&self, text: String) {
        let text = Bytes::from(text);
        match self.exposition.lock() {
            Ok(mut slot) => *slot = text,
            Err(poisoned) => *poisoned.into_inner() = text,
        }
    }

    fn ticked(&self, source_problem: Option<String>) {
        let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_tick.store(elapsed, Ordering::Relaxed);
        *self
            .source_problem
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = source_problem;
    }

    /// `Ok` while the sampling loop ticked recently enough and its source was there; why not
    /// otherwise.
    ///
    /// # Errors
    ///
    /// How long ago the last tick was, when that is too long; what the last tick found
    /// missing.
    pub fn health(&self) -> Result<(), String> {
        if let Some(problem) = self
            .source_problem
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        {
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
    mut monitor: Monitor<Exporter>,
    tls: Option<TlsAcceptor>,
    max_requests: Option<usize>,
    otlp: Option<OtlpExport>,
) -> std::io::Result<()> {
    monitor.report_processes(Instant::now());
    let healthy_within = 2 * monitor.plan().shortest_period();
    let first = monitor.consumer().exposition();
    if let Some(otlp) = &otlp {
        otlp.publish(&first);
    }
    let published = Arc::new(Published::new(first, healthy_within));
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
        let text = monitor.consumer().exposition();
        if let Some(otlp) = &otlp {
            otlp.publish(&text);
        }
        published.publish(text);
    }
    // The last exposition is pushed before the process ends.
    drop(otlp);
    server
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the HTTP thread panicked")))
}
