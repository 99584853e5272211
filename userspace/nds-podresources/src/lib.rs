//! The kubelet's PodResources API for the Neuron DataStore's monitor.
//!
//! [`v1`] is the API as the kubelet serves it on `/var/lib/kubelet/pod-resources/kubelet.sock`
//! (gRPC service `v1.PodResourcesLister`), generated at build time from `proto/api.proto`.
//! [`list`] asks it which devices each container of each pod holds (with the `client`
//! feature), and [`Attribution`] turns the answer into which container holds Neuron device `d`
//! and NeuronCore `c`, from the Neuron device plugin's resources or the Neuron DRA driver's
//! claims ([`dra`]); [`refresh`] asks on a schedule of its own, from a thread of its own, and
//! publishes the latest mapping to a [`PodFeed`] its readers look at without waiting.
//! [`serve`] answers as the kubelet does, for fakes of it (with the `server` feature).

#![warn(missing_docs)]

// Floor 0: the generated messages, errors, indexes.
#[cfg(feature = "client")]
mod error;
mod index;
pub mod v1;
// Floor 1: the DRA driver's device names.
pub mod dra;
// Floor 2: the mapping, the client and the server.
mod attribution;
#[cfg(feature = "client")]
mod client;
#[cfg(feature = "server")]
mod server;
// Floor 3: the latest mapping, and the thread that keeps it.
mod feed;
#[cfg(feature = "client")]
pub mod refresh;

pub use attribution::{Allocator, Attribution, Container, Skip, SkipReason};
#[cfg(feature = "client")]
pub use client::list;
pub use dra::{Claim, NEURON_DRA_DRIVER};
#[cfg(feature = "client")]
pub use error::Error;
pub use feed::PodFeed;
#[cfg(feature = "server")]
pub use server::serve;
/// The gRPC crate the server trait's signatures come from, for its implementers.
#[cfg(feature = "server")]
pub use tonic;
