//! The containers a slab's series are labelled with: what the exporter's pod attribution
//! resolved for the slab, carried with its process's entry (neuron-monitor's JSON shows none).

use std::collections::BTreeMap;
use std::sync::Arc;

use nds_podresources::Container;

/// The containers a slab's series are labelled with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlabPods {
    /// Of its per-process series.
    pub process: Option<Arc<Container>>,
    /// Of its per-core series, by instance-wide core key (`neuroncore`); cores of no holder
    /// are absent.
    pub cores: BTreeMap<String, Arc<Container>>,
}
