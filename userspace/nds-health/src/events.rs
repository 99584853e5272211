//! The event stream: what health saw happen ([`Event`]), numbered without a hole in one
//! stream, and the ring of the latest events that `GET /api/v1/events?since=SEQ` answers from
//! ([`EventRing`]), one JSON object a line.
//!
//! A client asks for what follows the last number it saw. What the ring no longer holds is
//! answered with a `gap` record saying how many events are gone; a client of another stream (a
//! number this stream has not reached, or another stream's id) gets a `reset` record, then the
//! whole ring.

use std::collections::VecDeque;

use nds_document::health::{Action, HealthState, Reason};
use serde::Serialize;

/// Events the ring holds by default: an hour of a busy node's errors at a few a second, about
/// a megabyte.
pub const DEFAULT_CAPACITY: usize = 4096;

/// Something health saw happen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// An error counter of a tenure rose, or (without an owner) the kernel's total of a
    /// counter rose by more than the tenures' events account for: it counted in a slab this
    /// monitor could not read.
    Counter {
        /// The device.
        neuron_device_index: u32,
        /// The core, instance-wide.
        neuroncore_index: usize,
        /// The sysfs node that sums the counter (`hw_hbm_ue_error`).
        counter: &'static str,
        /// By how much.
        delta: u64,
        /// The owner (0: outside the monitor's pid namespace); none when the rise is not
        /// attributed to a tenure.
        #[serde(skip_serializing_if = "Option::is_none")]
        pid: Option<i32>,
        /// The process tag; none when the rise is not attributed to a tenure.
        #[serde(skip_serializing_if = "Option::is_none")]
        runtime_tag: Option<String>,
        /// The owner's pod, by the UID its cgroup path names.
        #[serde(skip_serializing_if = "Option::is_none")]
        pod_uid: Option<String>,
        /// Whether the rise was read from the tenure's final values (its ledger record).
        #[serde(rename = "final")]
        from_final_values: bool,
    },
    /// A driver ECC counter of a device rose.
    Ecc {
        /// The device.
        neuron_device_index: u32,
        /// The driver's counter (`mem_ecc_uncorrected`).
        counter: &'static str,
        /// By how much.
        delta: u64,
    },
    /// A tenure ended.
    TenureEnd {
        /// The device.
        neuron_device_index: u32,
        /// The slot (none for a slab file).
        #[serde(skip_serializing_if = "Option::is_none")]
        slot: Option<usize>,
        /// The owner.
        pid: i32,
        /// The process tag.
        runtime_tag: String,
        /// The owner's pod, by the UID its cgroup path names.
        #[serde(skip_serializing_if = "Option::is_none")]
        pod_uid: Option<String>,
        /// `released`, `reused` or `truncated`.
        end: &'static str,
        /// The sequence number of its ledger record, when its final values came from one.
        #[serde(skip_serializing_if = "Option::is_none")]
        ledger_seq: Option<u64>,
    },
    /// A device's ledger dropped records before the monitor read them: what their tenures
    /// counted after their last reading is not in the stream.
    LedgerLost {
        /// The device.
        neuron_device_index: u32,
        /// The first record lost.
        first: u64,
        /// The last record lost.
        last: u64,
    },
    /// A verdict changed (or was first given).
    Verdict {
        /// The device.
        neuron_device_index: u32,
        /// The core, instance-wide; none for the device's own verdict.
        #[serde(skip_serializing_if = "Option::is_none")]
        neuroncore_index: Option<usize>,
        /// The new state.
        state: HealthState,
        /// Why.
        reason: Reason,
        /// What to do.
        action: Action,
        /// The state before (none for the first verdict).
        previous: Option<HealthState>,
        /// One line for a person.
        message: String,
    },
    /// The module was loaded or unloaded.
    Module {
        /// Whether it is loaded now.
        loaded: bool,
        /// One line for a person.
        message: String,
    },
}

/// An event with its number, as a line of the stream.
#[derive(Serialize)]
struct Numbered<'a> {
    seq: u64,
    stream: &'a str,
    time: f64,
    #[serde(flatten)]
    event: &'a Event,
}

/// Events lost to a client: numbers `first..=last`.
#[derive(Serialize)]
#[serde(tag = "kind", rename = "gap")]
struct Gap<'a> {
    stream: &'a str,
    first: u64,
    last: u64,
    lost: u64,
}

/// The client's numbers are not this stream's.
#[derive(Serialize)]
#[serde(tag = "kind", rename = "reset")]
struct Reset<'a> {
    stream: &'a str,
    /// The first number the ring holds.
    first: u64,
    message: String,
}

/// The line of `event` numbered `seq` in `stream`, at `time` (seconds since the epoch).
#[must_use]
pub fn line(seq: u64, stream: &str, time: f64, event: &Event) -> String {
    let numbered = Numbered {
        seq,
        stream,
        time,
        event,
    };
    // Plain structs of strings and numbers always serialize.
    serde_json::to_string(&numbered).unwrap_or_default() + "\n"
}

/// The latest events of one stream, as lines.
#[derive(Debug)]
pub struct EventRing {
    stream: String,
    capacity: usize,
    lines: VecDeque<(u64, String)>,
    /// The number the next event will have.
    next: u64,
}

impl EventRing {
    /// An empty ring of stream `stream` whose next event is numbered `next`, keeping at most
    /// `capacity` events.
    #[must_use]
    pub fn new(stream: &str, next: u64, capacity: usize) -> Self {
        Self {
            stream: stream.to_owned(),
            capacity: capacity.max(1),
            lines: VecDeque::new(),
            next,
        }
    }

    /// The stream's id.
    #[must_use]
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The number of the last event published (0: none yet).
    #[must_use]
    pub fn last(&self) -> u64 {
        self.next.saturating_sub(1)
    }

    /// Adds numbered lines, numbered from the next number on without a hole.
    pub fn publish(&mut self, lines: impl IntoIterator<Item = (u64, String)>) {
        for (seq, line) in lines {
            debug_assert_eq!(seq, self.next, "events are numbered without a hole");
            if self.lines.len() == self.capacity {
                self.lines.pop_front();
            }
            self.lines.push_back((seq, line));
            self.next = seq + 1;
        }
    }

    /// The answer to a client that saw every event up to `since` of stream `stream` (any
    /// stream if none is named): a `reset` or `gap` record if it needs one, then every event
    /// after `since` the ring holds.
    #[must_use]
    pub fn since(&self, since: u64, stream: Option<&str>) -> String {
        let first = self.lines.front().map_or(self.next, |(seq, _)| *seq);
        let mut out = String::new();
        let foreign = stream.is_some_and(|stream| stream != self.stream);
        let from = if foreign || since > self.last() {
            let message = if foreign {
                format!("stream {:?} is not this one", stream.unwrap_or_default())
            } else {
                format!("{since} is past this stream's last event, {}", self.last())
            };
            let reset = Reset {
                stream: &self.stream,
                first,
                message,
            };
            out += &(serde_json::to_string(&reset).unwrap_or_default() + "\n");
            0
        } else {
            if since + 1 < first {
                let gap = Gap {
                    stream: &self.stream,
                    first: since + 1,
                    last: first - 1,
                    lost: first - 1 - since,
                };
                out += &(serde_json::to_string(&gap).unwrap_or_default() + "\n");
            }
            since
        };
        for (_, line) in self.lines.iter().filter(|(seq, _)| *seq > from) {
            out += line;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(loaded: bool) -> Event {
        Event::Module {
            loaded,
            message: String::new(),
        }
    }

    fn seqs(answer: &str) -> Vec<serde_json::Value> {
        answer
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn a_client_gets_what_follows_its_number_and_a_gap_for_what_is_gone() {
        let mut ring = EventRing::new("s1", 1, 3);
        ring.publish((1..=5).map(|seq| (seq, line(seq, "s1", 0.0, &module(seq % 2 == 0)))));
        assert_eq!(ring.last(), 5);
        let answer = seqs(&ring.since(3, Some("s1")));
        let numbers: Vec<u64> = answer.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
        assert_eq!(numbers, [4, 5]);
        assert_eq!(answer[0]["kind"], "module");
        assert!(ring.since(5, None).is_empty(), "nothing new");
        let answer = seqs(&ring.since(0, None));
        assert_eq!(answer[0]["kind"], "gap");
        assert_eq!(
            (&answer[0]["first"], &answer[0]["last"], &answer[0]["lost"]),
            (&1.into(), &2.into(), &2.into())
        );
        assert_eq!(answer.len(), 4);
    }

    #[test]
    fn another_streams_client_is_reset_and_gets_the_whole_ring() {
        let mut ring = EventRing::new("s2", 41, 8);
        ring.publish([(41, line(41, "s2", 0.0, &module(true)))]);
        for answer in [ring.since(3, Some("s1")), ring.since(99, None)] {
            let answer = seqs(&answer);
            assert_eq!(answer[0]["kind"], "reset");
            assert_eq!(answer[0]["stream"], "s2");
            assert_eq!(answer[0]["first"], 41);
            assert_eq!(answer[1]["seq"], 41);
        }
        // A restart that kept the stream: what was published before it is a declared gap.
        let answer = seqs(&ring.since(30, Some("s2")));
        assert_eq!(answer[0]["kind"], "gap");
        assert_eq!(answer[0]["lost"], 10);
    }
}
