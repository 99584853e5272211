//! Pod attribution: the `pod`, `namespace` and `container` labels of a slab's series, from the
//! kubelet's PodResources API (`--pod-resources-socket`).
//!
//! A thread of `nds-podresources` asks the kubelet on its own schedule and publishes the
//! latest mapping ([`PodFeed`]); the exporter reads whatever was published last, so neither
//! the sampling loop nor a scrape ever waits for the kubelet. A mapping older than the feed's
//! bound (the kubelet unreachable for a while) is no longer used: the series then carry no
//! pod.
//!
//! What each slab's series carry ([`SlabPods`], see [`nds_podresources::Attribution`]): its
//! per-process series the container of its process (the holder of its device, or of the
//! cores it counts on), its per-core series the holder of each core. A series of no container
//! has no such labels at all, as dcgm-exporter leaves them off a GPU no pod holds. A device
//! allocated through DRA also names its ResourceClaim (`claim_name`, `claim_namespace`). A
//! pod that is gone from the kubelet's list is still named by its UID ([`uids`]), which the
//! cgroup path of each of its processes carries.

pub mod uids;

use std::collections::BTreeMap;
use std::sync::Arc;

use nds::CounterSnapshot;
use nds_abi::ledger::TenureRecord;
use nds_document::groups::CoreIndexing;
use nds_metric_table::PodNames;
pub use nds_podresources::PodFeed;
use nds_podresources::{Attribution, Container};

/// The pod labels' values naming `holder` (and its claim).
#[must_use]
pub fn names(holder: &Container) -> PodNames<'_> {
    PodNames {
        pod: &holder.pod,
        namespace: &holder.namespace,
        container: &holder.container,
        claim: holder
            .claim
            .as_ref()
            .map(|claim| (claim.name.as_str(), claim.namespace.as_str())),
    }
}

/// The containers a slab's series are labelled with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlabPods {
    /// Of its per-process series.
    pub process: Option<Arc<Container>>,
    /// Of its per-core series, by instance-wide core key (`neuroncore`); cores of no holder
    /// are absent.
    pub cores: BTreeMap<String, Arc<Container>>,
}

impl SlabPods {
    /// The pod labels of the slab's per-process series.
    #[must_use]
    pub fn process_names(&self) -> Option<PodNames<'_>> {
        self.process.as_deref().map(names)
    }

    /// The pod labels of the slab's series on core `key` (instance-wide).
    #[must_use]
    pub fn core_names(&self, key: &str) -> Option<PodNames<'_>> {
        self.cores.get(key).map(|holder| names(holder))
    }
}

/// The containers of a slab on `indexing`'s device that has counted on the cores in `counted`
/// (a bit per core of the device), as `attribution` says.
#[must_use]
pub fn resolve(attribution: &Attribution, indexing: CoreIndexing, counted: u64) -> SlabPods {
    let CoreIndexing { device, per_device } = indexing;
    let counted_cores = (0..per_device.min(64)).filter(|&core| counted & (1 << core) != 0);
    let cores = (0..per_device)
        .filter_map(|core| {
            let holder = attribution.core(device, per_device, core)?;
            Some((indexing.key(core)?, Arc::clone(holder)))
        })
        .collect();
    SlabPods {
        process: attribution
            .slab(device, per_device, counted_cores)
            .map(Arc::clone),
        cores,
    }
}

/// The cores of the device a ledger record says its tenure counted on, a bit each, as
/// [`counted_cores`] says of a reading.
#[must_use]
pub fn recorded_cores(record: &TenureRecord, per_device: usize) -> u64 {
    record
        .counters
        .iter()
        .take(per_device.min(usize::from(record.core_count)).min(64))
        .enumerate()
        .filter(|(_, values)| values.iter().any(|&value| value != 0))
        .fold(0, |bits, (core, _)| bits | 1 << core)
}

/// The cores of the device a slab has counted on (any counter not zero), a bit each.
#[must_use]
pub fn counted_cores(snapshot: &CounterSnapshot, per_device: usize) -> u64 {
    snapshot
        .nc
        .iter()
        .take(per_device.min(64))
        .enumerate()
        .filter(|(_, values)| values.iter().any(|&value| value != 0))
        .fold(0, |bits, (core, _)| bits | 1 << core)
}

/// A slab's [`SlabPods`], worked out again only when the mapping, the device's numbering or
/// the cores it counted on change (not at every tick).
#[derive(Debug, Default)]
pub struct SlabAttribution {
    basis: Option<(Arc<Attribution>, CoreIndexing, u64)>,
    pods: SlabPods,
}

impl SlabAttribution {
    /// The containers now: from `attribution` (none when there is no mapping) for a slab on
    /// `indexing`'s device that counted on `counted`.
    pub fn update(
        &mut self,
        attribution: Option<&Arc<Attribution>>,
        indexing: CoreIndexing,
        counted: u64,
    ) -> &SlabPods {
        let Some(attribution) = attribution else {
            self.basis = None;
            self.pods = SlabPods::default();
            return &self.pods;
        };
        let same = self.basis.as_ref().is_some_and(|(basis, at, bits)| {
            Arc::ptr_eq(basis, attribution) && *at == indexing && *bits == counted
        });
        if !same {
            self.pods = resolve(attribution, indexing, counted);
            self.basis = Some((Arc::clone(attribution), indexing, counted));
        }
        &self.pods
    }

    /// The containers as last worked out.
    #[must_use]
    pub fn pods(&self) -> &SlabPods {
        &self.pods
    }
}

#[cfg(test)]
mod tests {
    use nds_podresources::v1::{
        ClaimResource, ContainerDevices, ContainerResources, DynamicResource,
        ListPodResourcesResponse, PodResources,
    };

    use super::*;

    /// Pods named after their container, each holding `(resource, ids)`.
    fn attribution(pods: &[(&str, &str, &[&str])]) -> Arc<Attribution> {
        let pod_resources = pods
            .iter()
            .map(|&(name, resource, ids)| PodResources {
                name: name.to_owned(),
                namespace: "ns".to_owned(),
                containers: vec![ContainerResources {
                    name: format!("{name}-c"),
                    devices: vec![ContainerDevices {
                        resource_name: resource.to_owned(),
                        device_ids: ids.iter().map(|&id| id.to_owned()).collect(),
                    }],
                    dynamic_resources: Vec::new(),
                }],
            })
            .collect();
        Arc::new(Attribution::from_list(&ListPodResourcesResponse {
            pod_resources,
        }))
    }

    fn pod_of<'a>(names: Option<PodNames<'a>>) -> Option<&'a str> {
        names.map(|names| names.pod)
    }

    const DEVICE_1: CoreIndexing = CoreIndexing {
        device: 1,
        per_device: 2,
    };

    #[test]
    fn process_and_core_labels_follow_the_holders() {
        let map = attribution(&[
            ("a", "aws.amazon.com/neuroncore", &["2"]),
            ("b", "aws.amazon.com/neuroncore", &["3"]),
        ]);
        // Device 1's cores are instance-wide 2 and 3.
        let pods = resolve(&map, DEVICE_1, 0b10);
        assert_eq!(pod_of(pods.process_names()), Some("b"));
        assert_eq!(pod_of(pods.core_names("2")), Some("a"));
        assert_eq!(pod_of(pods.core_names("3")), Some("b"));
        assert!(pods.core_names("4").is_none());
        assert_eq!(
            pods.process_names(),
            Some(PodNames {
                pod: "b",
                namespace: "ns",
                container: "b-c",
                claim: None,
            })
        );
        // Counted on both: the process is neither's; its cores still are.
        let both = resolve(&map, DEVICE_1, 0b11);
        assert!(both.process_names().is_none());
        assert_eq!(pod_of(both.core_names("2")), Some("a"));
        assert_eq!(
            resolve(&map, DEVICE_1, 0b01).process,
            pods.cores.get("2").cloned()
        );
    }

    #[test]
    fn a_claimed_device_names_its_claim_on_process_and_core_series() {
        let claimed = Arc::new(Attribution::from_list(&ListPodResourcesResponse {
            pod_resources: vec![PodResources {
                name: "p".to_owned(),
                namespace: "ns".to_owned(),
                containers: vec![ContainerResources {
                    name: "c".to_owned(),
                    devices: Vec::new(),
                    dynamic_resources: vec![DynamicResource {
                        claim_name: "p-neurons-4tq".to_owned(),
                        claim_namespace: "ns".to_owned(),
                        claim_resources: vec![ClaimResource {
                            driver_name: "neuron.aws.com".to_owned(),
                            device_name: "neurondevice1".to_owned(),
                            ..ClaimResource::default()
                        }],
                    }],
                }],
            }],
        }));
        let pods = resolve(&claimed, DEVICE_1, 0);
        let expected = Some(PodNames {
            pod: "p",
            namespace: "ns",
            container: "c",
            claim: Some(("p-neurons-4tq", "ns")),
        });
        assert_eq!(pods.process_names(), expected);
        assert_eq!(pods.core_names("2"), expected);
        assert_eq!(pods.core_names("3"), expected);
        // Device 0 is nobody's: no label at all.
        let device_0 = CoreIndexing {
            device: 0,
            per_device: 2,
        };
        assert!(resolve(&claimed, device_0, 0).process_names().is_none());
    }

    #[test]
    fn counted_cores_are_those_with_any_count() {
        let mut snapshot = CounterSnapshot::new();
        assert_eq!(counted_cores(&snapshot, 16), 0);
        snapshot.nc[1][3] = 5;
        snapshot.nc[4][0] = 1;
        assert_eq!(counted_cores(&snapshot, 16), 0b1_0010);
        // Beyond the device's cores: not its.
        assert_eq!(counted_cores(&snapshot, 2), 0b10);
    }

    #[test]
    fn the_slab_attribution_is_worked_out_again_only_on_a_change() {
        let mut slab = SlabAttribution::default();
        let first = attribution(&[("a", "aws.amazon.com/neuron", &["1"])]);
        assert_eq!(
            pod_of(slab.update(Some(&first), DEVICE_1, 0).process_names()),
            Some("a")
        );
        // The same mapping again is not looked at again (its basis is kept as is).
        let basis = slab.basis.as_ref().map(|(map, _, _)| Arc::as_ptr(map));
        slab.update(Some(&first), DEVICE_1, 0);
        assert_eq!(
            slab.basis.as_ref().map(|(map, _, _)| Arc::as_ptr(map)),
            basis
        );
        // A new mapping without the pod: no labels; no mapping at all: none either.
        let second = attribution(&[("b", "aws.amazon.com/neuron", &["0"])]);
        assert!(slab
            .update(Some(&second), DEVICE_1, 0)
            .process_names()
            .is_none());
        let third = attribution(&[("c", "aws.amazon.com/neuroncore", &["3"])]);
        assert!(slab
            .update(Some(&third), DEVICE_1, 0b01)
            .process_names()
            .is_none());
        assert_eq!(
            pod_of(slab.update(Some(&third), DEVICE_1, 0b10).process_names()),
            Some("c")
        );
        assert_eq!(slab.update(None, DEVICE_1, 0b10), &SlabPods::default());
        assert_eq!(slab.pods(), &SlabPods::default());
    }
}
