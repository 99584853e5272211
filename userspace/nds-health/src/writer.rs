//! The event stream's writing side ([`EventLog`]): events wait in a batch until the report
//! that ends their period, then are numbered, the state they leave is saved (when there is a
//! state directory), and only then are they published to the ring the HTTP side answers from.
//! What a client could have seen is thus always in the saved state; what the exporter saw
//! after the last save is seen again, from its source, by the next exporter.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::errors::{error_nodes, node_named, ErrorValues};
use crate::events::{line, Event, EventRing};
use crate::state::{
    new_stream_id, LedgerPosition, SavedState, SavedTenure, StateDir, TenureIdentity,
};

/// What a resumed stream took over from the saved state and has not settled yet.
#[derive(Debug)]
pub struct Restored {
    /// Tenures live at the last save, with their counters as last evented.
    pub tenures: BTreeMap<TenureIdentity, ErrorValues>,
    /// Where each device's ledger had been read to.
    pub positions: BTreeMap<u32, LedgerPosition>,
}

/// The writing side of the stream.
#[derive(Debug)]
pub struct EventLog {
    stream: String,
    next_seq: u64,
    pending: Vec<Event>,
    ledgers: BTreeMap<u32, LedgerPosition>,
    state_dir: Option<StateDir>,
    restored: Option<Restored>,
    ring: Arc<Mutex<EventRing>>,
    /// Whether the state changed since it was saved.
    dirty: bool,
    /// Whether the last save failed (said once, until one succeeds).
    failing: bool,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

impl EventLog {
    /// A stream kept in `state_dir` (resumed if it holds one; a new stream otherwise, or
    /// without a directory), its ring holding at most `capacity` events.
    #[must_use]
    pub fn new(state_dir: Option<StateDir>, capacity: usize) -> Self {
        let saved = state_dir.as_ref().and_then(|dir| match dir.load() {
            Ok(saved) => saved,
            Err(error) => {
                log::warn!("{error}: starting a new event stream");
                None
            }
        });
        let (stream, next_seq, restored) = match saved {
            Some(saved) => {
                let tenures = saved
                    .tenures
                    .into_iter()
                    .map(|tenure| {
                        let triples = tenure.errors.iter().filter_map(|(core, name, value)| {
                            Some((*core, node_named(name)?, *value))
                        });
                        (tenure.identity, ErrorValues::from_triples(triples))
                    })
                    .collect();
                log::info!(
                    "event stream {} resumed at {} from the state directory",
                    saved.stream,
                    saved.next_seq
                );
                let restored = Restored {
                    tenures,
                    positions: saved.ledgers,
                };
                (saved.stream, saved.next_seq, Some(restored))
            }
            None => (new_stream_id(), 1, None),
        };
        let ledgers = restored
            .as_ref()
            .map(|restored| restored.positions.clone())
            .unwrap_or_default();
        Self {
            ring: Arc::new(Mutex::new(EventRing::new(&stream, next_seq, capacity))),
            stream,
            next_seq,
            pending: Vec::new(),
            ledgers,
            state_dir,
            restored,
            dirty: true,
            failing: false,
        }
    }

    /// The ring the HTTP side answers from.
    #[must_use]
    pub fn ring(&self) -> Arc<Mutex<EventRing>> {
        Arc::clone(&self.ring)
    }

    /// What was taken over from the saved state and is not settled yet; `None` for a new
    /// stream.
    pub fn restored(&mut self) -> Option<&mut Restored> {
        self.restored.as_mut()
    }

    /// Forgets what the saved state still held of tenures that never came back.
    pub fn settle_restored(&mut self) {
        if let Some(restored) = &mut self.restored {
            if !restored.tenures.is_empty() {
                log::info!(
                    "{} tenures of the saved event state neither came back nor left a ledger \
                     record: what they counted after the last save is not in the stream",
                    restored.tenures.len()
                );
                restored.tenures.clear();
                self.dirty = true;
            }
        }
    }

    /// Adds `event` to the batch.
    pub fn push(&mut self, event: Event) {
        self.pending.push(event);
    }

    /// A record of `device`'s ledger numbered `seq`, of a tenure that ended at `ended_ns`, was
    /// read.
    pub fn read_record(&mut self, device: u32, seq: u64, ended_ns: u64) {
        self.ledgers
            .insert(device, LedgerPosition { seq, ended_ns });
        self.dirty = true;
    }

    /// Numbers the batch, saves the state `live` tenures leave (each with its counters as
    /// evented), and publishes the batch.
    pub fn flush<'a>(&mut self, live: impl Iterator<Item = (&'a TenureIdentity, &'a ErrorValues)>) {
        if self.pending.is_empty() && !self.dirty {
            return;
        }
        let time = unix_now();
        let first = self.next_seq;
        let lines: Vec<(u64, String)> = self
            .pending
            .drain(..)
            .zip(first..)
            .map(|(event, seq)| (seq, line(seq, &self.stream, time, &event)))
            .collect();
        self.next_seq = first + lines.len() as u64;
        if let Some(dir) = &self.state_dir {
            let saved_of = |(identity, values): (&TenureIdentity, &ErrorValues)| SavedTenure {
                identity: identity.clone(),
                errors: values
                    .triples()
                    .filter_map(|(core, node, value)| {
                        let name = error_nodes().find(|(index, _)| *index == node)?.1.name;
                        Some((core, name.to_owned(), value))
                    })
                    .collect(),
            };
            let mut tenures: Vec<SavedTenure> = live.map(saved_of).collect();
            if let Some(restored) = &self.restored {
                tenures.extend(restored.tenures.iter().map(saved_of));
            }
            let state = SavedState {
                stream: self.stream.clone(),
                next_seq: self.next_seq,
                ledgers: self.ledgers.clone(),
                tenures,
            };
            match dir.save(&state) {
                Ok(()) if self.failing => {
                    log::info!("the event stream's state is saved again");
                    self.failing = false;
                }
                Ok(()) => {}
                Err(error) if !self.failing => {
                    log::warn!(
                        "{error}: the event stream's state is not saved; a restart now may \
                         event again what was evented since the last save"
                    );
                    self.failing = true;
                }
                Err(_) => {}
            }
        }
        self.dirty = false;
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .publish(lines);
    }

    /// Whether the stream was resumed from a saved state.
    #[must_use]
    pub fn is_resumed(&self) -> bool {
        self.restored.is_some()
    }

    /// Marks the saved state out of date (a tenure began: the state must name it).
    pub fn touch(&mut self) {
        self.dirty = true;
    }

    /// The stream's id.
    #[must_use]
    pub fn stream(&self) -> &str {
        &self.stream
    }
}
