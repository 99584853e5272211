//! Health a node can act on, as another view of the sampler's stream: a verdict per device and
//! per NeuronCore in Neuron Observer's words, judged by the plan's rules from the hardware
//! errors counted within a window ([`health::Health`]), where the kernel's per-core totals
//! count them whatever slabs the monitor can read ([`totals`]); the verdicts' Prometheus families
//! ([`exposition`]); and an event stream of every error counter's rise, every tenure's end,
//! every verdict change and the module's comings and goings, numbered without a hole and kept
//! across the exporter's restarts in a state directory ([`events`], [`writer`], [`state`]). It
//! imports the stream of `nds-sampler`, the rules and words of `nds-document` and the text
//! encoder of `nds-exporter`; only the tools import it.

#![warn(missing_docs)]

// Floor 0: errors, the error counters, the window, the events and their ring, the totals.
pub mod error;
pub mod errors;
pub mod events;
pub mod totals;
pub mod window;
// Floor 1: the state directory.
pub mod state;
// Floor 2: the stream's writing side.
pub mod writer;
// Floor 3: the view of the stream.
pub mod health;
// Floor 4: the families, the API's bodies.
pub mod api;
pub mod exposition;

pub use health::Health;
