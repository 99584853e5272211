//! Which container holds each Neuron device and NeuronCore, from a `List` answer.
//!
//! The Neuron device plugin registers three resources. `aws.amazon.com/neuron` and
//! `aws.amazon.com/neurondevice` (its older name, still served for existing pod specs) hand
//! out whole devices, and their device ids are the devices' indexes in decimal (`"0"`, `"1"`:
//! `/dev/neuron0`, `/dev/neuron1`). `aws.amazon.com/neuroncore` hands out single NeuronCores,
//! and its ids are instance-wide NeuronCore indexes in decimal: device `d`, core `c` is
//! `d * cores_per_device + c`, the numbering neuron-monitor's `neuroncore` label uses. The
//! CloudWatch agent's Container Insights receiver attributes neuron-monitor's metrics by
//! looking up exactly those strings (`neuron_device_index` under the two device resources,
//! `neuroncore` under the core resource), which is what this mapping follows.
//!
//! Anything else is left alone: resources of other device plugins silently, and a Neuron
//! resource's id that is not a decimal index (or a device already held by another container)
//! as a [`Skip`], kept so that the caller can say so.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use crate::v1::ListPodResourcesResponse;

/// What the ids of a Neuron resource name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Device,
    Core,
}

/// The Neuron device plugin's resources, with what their ids name.
const RESOURCES: [(&str, Unit); 3] = [
    ("aws.amazon.com/neuron", Unit::Device),
    ("aws.amazon.com/neurondevice", Unit::Device),
    ("aws.amazon.com/neuroncore", Unit::Core),
];

/// A container of a pod, as the kubelet names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Container {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name in the pod.
    pub container: String,
}

impl fmt::Display for Container {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.pod, self.container)
    }
}

/// Why an allocation of a Neuron resource was left out of the mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The id is not a decimal index.
    NotAnIndex,
    /// Another container was listed with the same device or core first.
    AlreadyHeld(Arc<Container>),
}

/// An allocation left out of the mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip {
    /// Who it was allocated to.
    pub container: Container,
    /// The resource.
    pub resource: String,
    /// The id as the kubelet listed it.
    pub device_id: String,
    /// Why it was left out.
    pub reason: SkipReason,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} id {:?} ",
            self.container, self.resource, self.device_id
        )?;
        match &self.reason {
            SkipReason::NotAnIndex => write!(f, "is not a decimal index"),
            SkipReason::AlreadyHeld(by) => write!(f, "is already held by {by}"),
        }
    }
}

/// Which container holds each Neuron device and NeuronCore.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attribution {
    /// Whole devices, by index.
    devices: BTreeMap<u32, Arc<Container>>,
    /// Single NeuronCores, by instance-wide index.
    cores: BTreeMap<u64, Arc<Container>>,
    skipped: Vec<Skip>,
}

/// `id` as an index: ASCII digits only (`str::parse` would also take a sign).
fn index<T: std::str::FromStr>(id: &str) -> Option<T> {
    if id.is_empty() || !id.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

/// Puts `holder` at `key`, or says who was there first.
fn hold<K: Ord>(
    map: &mut BTreeMap<K, Arc<Container>>,
    key: K,
    holder: &Arc<Container>,
) -> Option<SkipReason> {
    match map.get(&key) {
        Some(first) if first != holder => Some(SkipReason::AlreadyHeld(Arc::clone(first))),
        Some(_) => None,
        None => {
            map.insert(key, Arc::clone(holder));
            None
        }
    }
}

/// Device `device`'s core `core` as an instance-wide index; `None` beyond the device's cores.
fn global_core(device: u32, per_device: usize, core: usize) -> Option<u64> {
    if core >= per_device {
        return None;
    }
    let per_device = u64::try_from(per_device).ok()?;
    let core = u64::try_from(core).ok()?;
    u64::from(device).checked_mul(per_device)?.checked_add(core)
}

impl Attribution {
    /// The mapping of `response`: every Neuron allocation whose id is an index; the rest of
    /// the Neuron allocations in [`Attribution::skipped`].
    #[must_use]
    pub fn from_list(response: &ListPodResourcesResponse) -> Self {
        let mut attribution = Self::default();
        for pod in &response.pod_resources {
            for container in &pod.containers {
                let holder = Arc::new(Container {
                    namespace: pod.namespace.clone(),
                    pod: pod.name.clone(),
                    container: container.name.clone(),
                });
                for devices in &container.devices {
                    let Some(&(_, unit)) = RESOURCES
                        .iter()
                        .find(|(name, _)| *name == devices.resource_name)
                    else {
                        continue;
                    };
                    for id in &devices.device_ids {
                        let refused = match unit {
                            Unit::Device => index(id).map_or(Some(SkipReason::NotAnIndex), |d| {
                                hold(&mut attribution.devices, d, &holder)
                            }),
                            Unit::Core => index(id).map_or(Some(SkipReason::NotAnIndex), |c| {
                                hold(&mut attribution.cores, c, &holder)
                            }),
                        };
                        if let Some(reason) = refused {
                            attribution.skipped.push(Skip {
                                container: (*holder).clone(),
                                resource: devices.resource_name.clone(),
                                device_id: id.clone(),
                                reason,
                            });
                        }
                    }
                }
            }
        }
        attribution
    }

    /// Who holds device `device` whole.
    #[must_use]
    pub fn device(&self, device: u32) -> Option<&Arc<Container>> {
        self.devices.get(&device)
    }

    /// Who holds core `core` of device `device` (`per_device` cores each): the container it
    /// was allocated to as a NeuronCore, else the one holding its device whole.
    #[must_use]
    pub fn core(&self, device: u32, per_device: usize, core: usize) -> Option<&Arc<Container>> {
        global_core(device, per_device, core)
            .and_then(|global| self.cores.get(&global))
            .or_else(|| self.device(device))
    }

    /// Who a process on device `device` is, from its cores `counted` (the device's cores it
    /// has counted on): the container holding the device whole; else the one container
    /// holding the counted cores; else, before it counted on any, the one container holding
    /// cores of its device. `None` when no container, or more than one, fits.
    #[must_use]
    pub fn slab(
        &self,
        device: u32,
        per_device: usize,
        counted: impl IntoIterator<Item = usize>,
    ) -> Option<&Arc<Container>> {
        if let Some(holder) = self.device(device) {
            return Some(holder);
        }
        let holders = |cores: &mut dyn Iterator<Item = usize>| -> BTreeSet<&Arc<Container>> {
            cores
                .filter_map(|core| global_core(device, per_device, core))
                .filter_map(|global| self.cores.get(&global))
                .collect()
        };
        let mut counted = counted.into_iter().peekable();
        let candidates = if counted.peek().is_some() {
            holders(&mut counted)
        } else {
            holders(&mut (0..per_device))
        };
        let mut candidates = candidates.into_iter();
        match (candidates.next(), candidates.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }

    /// Devices held whole.
    #[must_use]
    pub fn held_devices(&self) -> usize {
        self.devices.len()
    }

    /// NeuronCores held one by one.
    #[must_use]
    pub fn held_cores(&self) -> usize {
        self.cores.len()
    }

    /// The Neuron allocations left out, in the order listed.
    #[must_use]
    pub fn skipped(&self) -> &[Skip] {
        &self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{ContainerDevices, ContainerResources, PodResources};

    /// What one container holds: `(resource, ids)`.
    type Held<'a> = &'a [(&'a str, &'a [&'a str])];

    /// A pod in namespace `ml` with `(container, what it holds)`.
    fn pod(name: &str, containers: &[(&str, Held<'_>)]) -> PodResources {
        PodResources {
            name: name.to_owned(),
            namespace: "ml".to_owned(),
            containers: containers
                .iter()
                .map(|&(container, devices)| ContainerResources {
                    name: container.to_owned(),
                    devices: devices
                        .iter()
                        .map(|&(resource, ids)| ContainerDevices {
                            resource_name: resource.to_owned(),
                            device_ids: ids.iter().map(|&id| id.to_owned()).collect(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    fn attribution(pods: Vec<PodResources>) -> Attribution {
        Attribution::from_list(&ListPodResourcesResponse {
            pod_resources: pods,
        })
    }

    fn who(found: Option<&Arc<Container>>) -> Option<String> {
        found.map(|container| container.to_string())
    }

    #[test]
    fn devices_by_either_name_and_cores_by_instance_wide_index() {
        let map = attribution(vec![
            pod("a", &[("main", &[("aws.amazon.com/neuron", &["0"])])]),
            pod("b", &[("main", &[("aws.amazon.com/neurondevice", &["3"])])]),
            pod("c", &[("main", &[("aws.amazon.com/neuroncore", &["9"])])]),
        ]);
        assert_eq!(who(map.device(0)).as_deref(), Some("ml/a/main"));
        assert_eq!(who(map.device(3)).as_deref(), Some("ml/b/main"));
        assert_eq!(map.device(1), None);
        // Every core of a device held whole is its holder's.
        assert_eq!(who(map.core(0, 8, 7)).as_deref(), Some("ml/a/main"));
        // Core 9 with 8 per device is device 1's core 1.
        assert_eq!(who(map.core(1, 8, 1)).as_deref(), Some("ml/c/main"));
        assert_eq!(map.core(1, 8, 0), None);
        // With 2 per device, core 9 is device 4's core 1.
        assert_eq!(who(map.core(4, 2, 1)).as_deref(), Some("ml/c/main"));
        assert_eq!(map.core(1, 2, 1), None);
        assert_eq!((map.held_devices(), map.held_cores()), (2, 1));
        assert!(map.skipped().is_empty());
    }

    #[test]
    fn ids_that_are_not_indexes_are_skipped_and_the_rest_kept() {
        let bad: &[&str] = &["", "x", "-1", "+1", "1.5", " 1", "1 ", "neuron0", "٣"];
        let too_big = "4294967296"; // beyond u32: not a device index
        let mut devices = bad.to_vec();
        devices.extend([too_big, "2"]);
        let map = attribution(vec![pod(
            "a",
            &[(
                "main",
                &[
                    ("aws.amazon.com/neuron", &devices),
                    ("aws.amazon.com/neuroncore", &["nc3", "4"]),
                ],
            )],
        )]);
        assert_eq!(who(map.device(2)).as_deref(), Some("ml/a/main"));
        assert_eq!(who(map.core(2, 2, 0)).as_deref(), Some("ml/a/main"));
        assert_eq!((map.held_devices(), map.held_cores()), (1, 1));
        let skipped: Vec<&str> = map.skipped().iter().map(|s| s.device_id.as_str()).collect();
        let mut expected = bad.to_vec();
        expected.extend([too_big, "nc3"]);
        assert_eq!(skipped, expected);
        assert!(map
            .skipped()
            .iter()
            .all(|skip| skip.reason == SkipReason::NotAnIndex));
        assert_eq!(
            map.skipped()[1].to_string(),
            "ml/a/main: aws.amazon.com/neuron id \"x\" is not a decimal index"
        );
    }

    #[test]
    fn other_resources_are_ignored() {
        let map = attribution(vec![pod(
            "gpu",
            &[(
                "main",
                &[
                    ("nvidia.com/gpu", &["GPU-0f1e2d3c", "0"]),
                    ("AWS.AMAZON.COM/NEURON", &["0"]),
                    ("aws.amazon.com/neuroncores", &["1"]),
                    ("example.com/neuron", &["0"]),
                ],
            )],
        )]);
        assert_eq!(map, Attribution::default());
    }

    #[test]
    fn a_container_holding_cores_of_two_devices() {
        // Two cores per device: cores 1 and 2 are device 0's core 1 and device 1's core 0.
        let map = attribution(vec![pod(
            "a",
            &[("main", &[("aws.amazon.com/neuroncore", &["1", "2"])])],
        )]);
        assert_eq!(who(map.core(0, 2, 1)).as_deref(), Some("ml/a/main"));
        assert_eq!(who(map.core(1, 2, 0)).as_deref(), Some("ml/a/main"));
        assert_eq!(map.core(0, 2, 0), None);
        assert_eq!(map.core(1, 2, 1), None);
        // A process on either device is the container's, counted or not yet.
        assert_eq!(who(map.slab(0, 2, [1])).as_deref(), Some("ml/a/main"));
        assert_eq!(who(map.slab(1, 2, [0])).as_deref(), Some("ml/a/main"));
        assert_eq!(who(map.slab(0, 2, [])).as_deref(), Some("ml/a/main"));
        // One that counted only on a core nobody holds is nobody's.
        assert_eq!(map.slab(0, 2, [0]), None);
        assert_eq!(map.slab(2, 2, []), None);
    }

    #[test]
    fn a_device_shared_by_two_containers_names_each_process_by_its_cores() {
        let map = attribution(vec![
            pod("a", &[("main", &[("aws.amazon.com/neuroncore", &["0"])])]),
            pod("b", &[("main", &[("aws.amazon.com/neuroncore", &["1"])])]),
        ]);
        assert_eq!(who(map.slab(0, 2, [0])).as_deref(), Some("ml/a/main"));
        assert_eq!(who(map.slab(0, 2, [1])).as_deref(), Some("ml/b/main"));
        // Cores of both, or none counted yet: no single holder.
        assert_eq!(map.slab(0, 2, [0, 1]), None);
        assert_eq!(map.slab(0, 2, []), None);
    }

    #[test]
    fn a_device_listed_for_two_containers_stays_the_first_ones() {
        let map = attribution(vec![
            pod("a", &[("main", &[("aws.amazon.com/neuron", &["0"])])]),
            pod(
                "b",
                &[(
                    "main",
                    &[
                        ("aws.amazon.com/neurondevice", &["0"]),
                        ("aws.amazon.com/neuroncore", &["5", "5"]),
                    ],
                )],
            ),
        ]);
        assert_eq!(who(map.device(0)).as_deref(), Some("ml/a/main"));
        // The same container listing a core twice is no conflict.
        assert_eq!(map.held_cores(), 1);
        let [skip] = map.skipped() else {
            panic!("{:?}", map.skipped());
        };
        assert_eq!(
            skip.reason,
            SkipReason::AlreadyHeld(Arc::new(Container {
                namespace: "ml".to_owned(),
                pod: "a".to_owned(),
                container: "main".to_owned(),
            }))
        );
        assert_eq!(
            skip.to_string(),
            "ml/b/main: aws.amazon.com/neurondevice id \"0\" is already held by ml/a/main"
        );
    }

    #[test]
    fn cores_beyond_the_device_are_nobodys() {
        let map = attribution(vec![pod(
            "a",
            &[(
                "main",
                &[
                    ("aws.amazon.com/neuroncore", &["3", "18446744073709551615"]),
                    ("aws.amazon.com/neuron", &["4294967295"]),
                ],
            )],
        )]);
        assert_eq!(map.core(1, 2, 2), None, "device 1 has cores 0 and 1 only");
        assert_eq!(map.core(0, 0, 0), None, "no core at all");
        assert_eq!(map.slab(1, 0, [0]), None);
        // The largest ids are indexes; an instance-wide index past u64 is no core, not a
        // wrapped one.
        assert_eq!(who(map.device(u32::MAX)).as_deref(), Some("ml/a/main"));
        assert_eq!(map.core(u32::MAX - 1, usize::MAX, usize::MAX - 1), None);
        assert_eq!(map.slab(u32::MAX - 1, usize::MAX, [usize::MAX - 1]), None);
        assert_eq!((map.held_cores(), map.skipped().len()), (2, 0));
    }
}
