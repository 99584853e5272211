//! Decoding of the metric post stream that `read()` on `/dev/neuronN` returns.
//!
//! The module posts, every period and per CloudWatch metric id, the value the original
//! driver would have sent to firmware (`{cw_id, len, decimal string}`), as fixed-size
//! [`MetricPost`] records with a sequence number. [`Decoder`] turns a byte stream of them into
//! [`Event`]s, noticing when the reader was too slow and the module's ring dropped posts.

// The nds-metrics tool's command line.
#[cfg(feature = "cli")]
pub mod cli;

use nds_abi::metrics::{metric_def, MetricPost, METRIC_POST_SIZE};
use serde_json::{json, Value};
use zerocopy::FromBytes;

/// What the stream said.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// One post.
    Post(MetricPost),
    /// Posts `first..=last` of `device` were dropped before they were read.
    Missed {
        /// The device.
        device: u32,
        /// First missing sequence number.
        first: u64,
        /// Last missing sequence number.
        last: u64,
    },
}

/// Why a stream could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The stream ended inside a post.
    #[error("{0} trailing bytes: the stream holds whole {METRIC_POST_SIZE}-byte posts only")]
    Truncated(usize),
}

/// Decodes posts and tracks sequence numbers across calls.
#[derive(Debug, Default)]
pub struct Decoder {
    next_seq: Option<u64>,
}

impl Decoder {
    /// A decoder that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes `bytes`, which must hold whole posts.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Truncated`] if `bytes` does not end on a post boundary; the whole posts
    /// before the tail are still decoded into `events`.
    pub fn decode(&mut self, bytes: &[u8], events: &mut Vec<Event>) -> Result<(), DecodeError> {
        let mut chunks = bytes.chunks_exact(METRIC_POST_SIZE);
        for chunk in &mut chunks {
            let Ok(post) = MetricPost::read_from_bytes(chunk) else {
                continue;
            };
            if let Some(expected) = self.next_seq {
                if post.seq > expected {
                    events.push(Event::Missed {
                        device: post.device,
                        first: expected,
                        last: post.seq - 1,
                    });
                }
            }
            self.next_seq = Some(post.seq.saturating_add(1));
            events.push(Event::Post(post));
        }
        match chunks.remainder().len() {
            0 => Ok(()),
            tail => Err(DecodeError::Truncated(tail)),
        }
    }
}

impl Event {
    /// The event as one JSON object: `{metric, cw_id, device, value, period, posted_ns, seq}` for a post
    /// (a number when the value is decimal, else the text), `{missed, device, first, last}`
    /// for a gap.
    pub fn to_json(&self) -> Value {
        match self {
            Event::Post(post) => {
                let text = String::from_utf8_lossy(post.value_bytes()).into_owned();
                let value = text.parse::<u64>().map_or(Value::String(text), Value::from);
                json!({
                    "metric": metric_def(post.cw_id).map_or("UNKNOWN", |def| def.name),
                    "cw_id": post.cw_id,
                    "device": post.device,
                    "value": value,
                    "period": post.period,
                    "posted_ns": post.posted_ns,
                    "seq": post.seq,
                })
            }
            Event::Missed {
                device,
                first,
                last,
            } => json!({
                "missed": last - first + 1,
                "device": device,
                "first": first,
                "last": last,
            }),
        }
    }
}
