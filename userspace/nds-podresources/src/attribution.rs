//! Which container holds each Neuron device and NeuronCore, from a `List` answer.
//!
//! A node allocates Neuron devices through the Neuron device plugin or through the Neuron DRA
//! driver, never both (AWS's documentation says the two cannot share a node). Both are read
//! unless [`Allocator`] names one; [`Attribution::allocators`] says which the answer used.
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
//! Through DRA, a container's claims list the devices allocated to each; those of driver
//! `neuron.aws.com` are Neuron devices held whole, named `neurondevice<index>` ([`crate::dra`]).
//! Their holder is the container with the claim ([`Container::claim`]).
//!
//! Anything else is left alone: resources of other device plugins and devices of other DRA
//! drivers silently, and a Neuron id that is not a decimal index, a DRA device whose name
//! carries none (or a device already held by another container) as a [`Skip`], kept so that
//! the caller can say so.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use crate::dra::{self, Claim, NEURON_DRA_DRIVER};
use crate::index::index;
use crate::v1::{ContainerResources, ListPodResourcesResponse};

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

/// How a node hands Neuron devices to containers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Allocator {
    /// The Neuron device plugin's extended resources (`aws.amazon.com/neuron*`).
    DevicePlugin,
    /// ResourceClaims of the Neuron DRA driver (`neuron.aws.com`).
    Dra,
}

impl fmt::Display for Allocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DevicePlugin => "the device plugin",
            Self::Dra => "DRA claims",
        })
    }
}

/// A container of a pod, as the kubelet names it, with the claim its devices came through.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Container {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name in the pod.
    pub container: String,
    /// The ResourceClaim that allocated the devices, for devices allocated through DRA.
    pub claim: Option<Claim>,
}

impl fmt::Display for Container {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.pod, self.container)?;
        match &self.claim {
            Some(claim) => write!(f, " (claim {claim})"),
            None => Ok(()),
        }
    }
}

/// Why an allocation of a Neuron resource was left out of the mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The id is not a decimal index.
    NotAnIndex,
    /// The DRA device's name is not `neurondevice<index>`.
    NotADeviceName,
    /// Another container was listed with the same device or core first.
    AlreadyHeld(Arc<Container>),
}

/// An allocation left out of the mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip {
    /// Who it was allocated to (with the claim, through DRA).
    pub container: Container,
    /// The resource (through DRA, the driver).
    pub resource: String,
    /// The id as the kubelet listed it (through DRA, the device's name).
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
            SkipReason::NotADeviceName => write!(f, "is not named neurondevice<index>"),
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
    /// The allocators whose allocations the answer listed.
    allocators: BTreeSet<Allocator>,
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
    /// The mapping of `response` from both allocators: every Neuron allocation whose id is an
    /// index; the rest of the Neuron allocations in [`Attribution::skipped`].
    #[must_use]
    pub fn from_list(response: &ListPodResourcesResponse) -> Self {
        Self::from_list_of(response, None)
    }

    /// The mapping of `response` from `only` that allocator's allocations (both with `None`;
    /// the other one's are then ignored, as other resources are).
    #[must_use]
    pub fn from_list_of(response: &ListPodResourcesResponse, only: Option<Allocator>) -> Self {
        let reads = |allocator| only.is_none_or(|only| only == allocator);
        let mut attribution = Self::default();
        for pod in &response.pod_resources {
            for container in &pod.containers {
                let holder = Container {
                    namespace: pod.namespace.clone(),
                    pod: pod.name.clone(),
                    container: container.name.clone(),
                    claim: None,
                };
                attribution.detect(container);
                if reads(Allocator::DevicePlugin) {
                    attribution.add_device_plugin(container, &Arc::new(holder.clone()));
                }
                if reads(Allocator::Dra) {
                    attribution.add_claims(container, &holder);
                }
            }
        }
        attribution
    }

    /// Notes the allocators whose Neuron allocations `container` lists.
    fn detect(&mut self, container: &ContainerResources) {
        let plugin = container.devices.iter().any(|devices| {
            RESOURCES
                .iter()
                .any(|(name, _)| *name == devices.resource_name)
        });
        let claimed = container
            .dynamic_resources
            .iter()
            .flat_map(|claim| &claim.claim_resources)
            .any(|device| device.driver_name == NEURON_DRA_DRIVER);
        for (listed, allocator) in [(plugin, Allocator::DevicePlugin), (claimed, Allocator::Dra)] {
            if listed {
                self.allocators.insert(allocator);
            }
        }
    }

    /// The device plugin's allocations to `container`.
    fn add_device_plugin(&mut self, container: &ContainerResources, holder: &Arc<Container>) {
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
                        hold(&mut self.devices, d, holder)
                    }),
                    Unit::Core => index(id).map_or(Some(SkipReason::NotAnIndex), |c| {
                        hold(&mut self.cores, c, holder)
                    }),
                };
                if let Some(reason) = refused {
                    self.skipped.push(Skip {
                        container: (**holder).clone(),
                        resource: devices.resource_name.clone(),
                        device_id: id.clone(),
                        reason,
                    });
                }
            }
        }
    }

    /// The Neuron DRA driver's devices in `container`'s claims, each held by `container` with
    /// its claim.
    fn add_claims(&mut self, container: &ContainerResources, container_name: &Container) {
        for claim in &container.dynamic_resources {
            let holder = Arc::new(Container {
                claim: Some(Claim {
                    namespace: claim.claim_namespace.clone(),
                    name: claim.claim_name.clone(),
                }),
                ..container_name.clone()
            });
            for device in &claim.claim_resources {
                if device.driver_name != NEURON_DRA_DRIVER {
                    continue;
                }
                let refused = dra::device_index(&device.device_name)
                    .map_or(Some(SkipReason::NotADeviceName), |d| {
                        hold(&mut self.devices, d, &holder)
                    });
                if let Some(reason) = refused {
                    self.skipped.push(Skip {
                        container: (*holder).clone(),
                        resource: device.driver_name.clone(),
                        device_id: device.device_name.clone(),
                        reason,
                    });
                }
            }
        }
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

    /// The allocators the answer listed Neuron allocations of (read or not): none on a node
    /// whose Neuron devices nobody holds, one on a node as it should be, both on a node that
    /// runs the device plugin beside the DRA driver.
    #[must_use]
    pub fn allocators(&self) -> &BTreeSet<Allocator> {
        &self.allocators
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{ClaimResource, ContainerDevices, DynamicResource, PodResources};

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
                    dynamic_resources: Vec::new(),
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
                claim: None,
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

    /// A claim `name` of namespace `ml` with `(driver, device name)` each.
    fn claim(name: &str, devices: &[(&str, &str)]) -> DynamicResource {
        DynamicResource {
            claim_name: name.to_owned(),
            claim_namespace: "ml".to_owned(),
            claim_resources: devices
                .iter()
                .map(|&(driver, device)| ClaimResource {
                    cdi_devices: Vec::new(),
                    driver_name: driver.to_owned(),
                    pool_name: "ip-10-0-0-1.ec2.internal".to_owned(),
                    device_name: device.to_owned(),
                    share_id: None,
                })
                .collect(),
        }
    }

    /// A pod in namespace `ml` whose container `container` has `claims`.
    fn claiming(name: &str, container: &str, claims: Vec<DynamicResource>) -> PodResources {
        let mut pod = pod(name, &[(container, &[])]);
        pod.containers[0].dynamic_resources = claims;
        pod
    }

    #[test]
    fn the_neuron_drivers_claimed_devices_are_held_whole_with_their_claim() {
        let map = attribution(vec![
            claiming(
                "trainer",
                "main",
                vec![
                    claim(
                        "trainer-neurons-x7k2p",
                        &[
                            ("neuron.aws.com", "neurondevice2"),
                            ("neuron.aws.com", "neurondevice3"),
                        ],
                    ),
                    // Another driver's devices in another claim of the same container.
                    claim("trainer-efa-q9w", &[("efa.networking.k8s.aws", "efa0")]),
                ],
            ),
            claiming(
                "ultra",
                "leader",
                vec![claim("one-node", &[("neuron.aws.com", "neuron_node0")])],
            ),
        ]);
        let held = "ml/trainer/main (claim ml/trainer-neurons-x7k2p)";
        assert_eq!(who(map.device(2)).as_deref(), Some(held));
        assert_eq!(who(map.device(3)).as_deref(), Some(held));
        assert_eq!(map.device(0), None);
        // Every core of a claimed device, counted or not, is the claim's.
        assert_eq!(who(map.core(3, 8, 7)).as_deref(), Some(held));
        assert_eq!(who(map.slab(2, 8, [])).as_deref(), Some(held));
        let claim = map.device(2).and_then(|holder| holder.claim.clone());
        assert_eq!(
            claim,
            Some(Claim {
                namespace: "ml".to_owned(),
                name: "trainer-neurons-x7k2p".to_owned(),
            })
        );
        assert_eq!((map.held_devices(), map.held_cores()), (2, 0));
        // A node device names no device index.
        let [skip] = map.skipped() else {
            panic!("{:?}", map.skipped());
        };
        assert_eq!(skip.reason, SkipReason::NotADeviceName);
        assert_eq!(
            skip.to_string(),
            "ml/ultra/leader (claim ml/one-node): neuron.aws.com id \"neuron_node0\" is not \
             named neurondevice<index>"
        );
        assert_eq!(
            map.allocators().iter().copied().collect::<Vec<_>>(),
            [Allocator::Dra]
        );
    }

    #[test]
    fn a_claimed_device_listed_twice_stays_the_first_claims() {
        // A claim shared by two pods lists its devices under both.
        let shared = || claim("shared", &[("neuron.aws.com", "neurondevice0")]);
        let map = attribution(vec![
            claiming("a", "main", vec![shared()]),
            claiming("b", "main", vec![shared()]),
        ]);
        assert_eq!(
            who(map.device(0)).as_deref(),
            Some("ml/a/main (claim ml/shared)")
        );
        let [skip] = map.skipped() else {
            panic!("{:?}", map.skipped());
        };
        assert_eq!(
            skip.to_string(),
            "ml/b/main (claim ml/shared): neuron.aws.com id \"neurondevice0\" is already held \
             by ml/a/main (claim ml/shared)"
        );
    }

    #[test]
    fn both_allocators_are_detected_and_a_named_one_is_read_alone() {
        let mut both = pod("plugin", &[("main", &[("aws.amazon.com/neuron", &["0"])])]);
        both.containers[0].dynamic_resources =
            vec![claim("c", &[("neuron.aws.com", "neurondevice1")])];
        let response = ListPodResourcesResponse {
            pod_resources: vec![both],
        };
        let all = Attribution::from_list(&response);
        assert_eq!(who(all.device(0)).as_deref(), Some("ml/plugin/main"));
        assert_eq!(
            who(all.device(1)).as_deref(),
            Some("ml/plugin/main (claim ml/c)")
        );
        for only in [Allocator::DevicePlugin, Allocator::Dra] {
            let map = Attribution::from_list_of(&response, Some(only));
            // What the node lists is detected whatever is read.
            assert_eq!(map.allocators(), all.allocators());
            assert_eq!(map.allocators().len(), 2);
            assert_eq!(map.held_devices(), 1, "{only}");
            let read = if only == Allocator::Dra { 1 } else { 0 };
            assert!(map.device(read).is_some() && map.device(1 - read).is_none());
        }
        // Nothing of either: nothing detected.
        let idle = attribution(vec![pod("gpu", &[("main", &[("nvidia.com/gpu", &["0"])])])]);
        assert!(idle.allocators().is_empty());
    }
}
