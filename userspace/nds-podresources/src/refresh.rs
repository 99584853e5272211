//! The refresher: a thread with a single-threaded tokio runtime that asks the kubelet every
//! period which containers hold which devices, and publishes the mapping to a [`PodFeed`].
//!
//! Each call has [`DEADLINE`] (connecting included). A failed call is counted in the feed
//! (`nds_monitor_pod_resources_errors_total`) and logged when it is new (a kubelet that stays
//! away is said once, and its return too); the last mapping stays in use for
//! [`keep_for`] after it was had, so a kubelet restart does not unlabel every series, while a
//! kubelet gone for longer does not leave series named after pods that may have left.

use std::error::Error as _;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::time::MissedTickBehavior;

use crate::attribution::{Allocator, Attribution, Skip};
use crate::client::list;
use crate::error::Error;
use crate::feed::PodFeed;

/// How long one `List` call may take, connecting included (dcgm-exporter allows 10 s; the
/// kubelet answers from memory).
pub const DEADLINE: Duration = Duration::from_secs(5);

/// How long a mapping is used after it was had: three periods, the last of which may have
/// taken its whole deadline (35 s at the default 10 s period).
#[must_use]
pub fn keep_for(period: Duration) -> Duration {
    period.saturating_mul(3).saturating_add(DEADLINE)
}

/// Starts asking the kubelet at `socket` every `period`; the mapping, of `only` that
/// allocator's allocations (both with `None`), is published to the feed returned (empty
/// until the first answer).
///
/// # Errors
///
/// The runtime or the thread could not be made.
pub fn start(socket: PathBuf, period: Duration, only: Option<Allocator>) -> io::Result<PodFeed> {
    let feed = PodFeed::new(keep_for(period));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let publisher = feed.clone();
    // The thread lives as long as the process: nothing waits for it to end.
    std::thread::Builder::new()
        .name("pod-resources".into())
        .spawn(move || runtime.block_on(refresh(socket, period, only, publisher)))?;
    Ok(feed)
}

async fn refresh(socket: PathBuf, period: Duration, only: Option<Allocator>, feed: PodFeed) {
    let mut ticks = tokio::time::interval(period);
    // A slow call delays the next one instead of causing a burst after it.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut said = Said::default();
    loop {
        ticks.tick().await;
        match list(&socket, DEADLINE).await {
            Ok(response) => {
                let attribution = Attribution::from_list_of(&response, only);
                said.answered(&attribution);
                feed.publish(attribution, Instant::now());
            }
            Err(error) => {
                feed.failed();
                said.failed(&error);
            }
        }
    }
}

/// What was last logged, so that a steady state is said once.
#[derive(Debug, Default)]
struct Said {
    /// The last failure, while the kubelet keeps failing.
    failure: Option<String>,
    /// Whether any answer came yet.
    answered: bool,
    skipped: Vec<Skip>,
    /// The allocators the last answer listed.
    allocators: Vec<Allocator>,
}

/// Which allocators a node's answer listed, for the log.
fn allocated_through(allocators: &[Allocator]) -> String {
    match allocators {
        [] => "no Neuron allocation listed".to_owned(),
        [one] => format!("allocated through {one}"),
        _ => {
            let all: Vec<String> = allocators.iter().map(ToString::to_string).collect();
            format!(
                "allocated through {} at once (a node should run one of them)",
                all.join(" and ")
            )
        }
    }
}

/// `error` and every source under it, one line.
fn chain(error: &Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        text = format!("{text}: {source}");
        next = source.source();
    }
    text
}

impl Said {
    fn failed(&mut self, error: &Error) {
        let text = chain(error);
        if self.failure.as_ref() == Some(&text) {
            log::debug!("pod attribution: {text}");
        } else {
            log::warn!("pod attribution: {text} (the last mapping is kept for a while)");
            self.failure = Some(text);
        }
    }

    fn answered(&mut self, attribution: &Attribution) {
        let summary = format!(
            "{} device(s) and {} NeuronCore(s) held by containers",
            attribution.held_devices(),
            attribution.held_cores()
        );
        if self.failure.take().is_some() {
            log::info!("pod attribution: the kubelet answers again: {summary}");
        } else if !self.answered {
            log::info!("pod attribution: {summary}");
        } else {
            log::debug!("pod attribution: {summary}");
        }
        self.answered = true;
        let allocators: Vec<Allocator> = attribution.allocators().iter().copied().collect();
        if allocators != self.allocators {
            let through = allocated_through(&allocators);
            if allocators.len() > 1 {
                log::warn!("pod attribution: {through}");
            } else {
                log::info!("pod attribution: {through}");
            }
            self.allocators = allocators;
        }
        if attribution.skipped() != self.skipped.as_slice() {
            for skip in attribution.skipped() {
                log::warn!("pod attribution: left out: {skip}");
            }
            self.skipped = attribution.skipped().to_vec();
        }
    }
}
