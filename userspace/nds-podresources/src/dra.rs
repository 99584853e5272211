//! The Neuron DRA driver's devices as the kubelet lists them in a container's
//! `dynamic_resources`.
//!
//! The driver (`neuron.aws.com`, EKS's recommendation from Kubernetes 1.34) publishes each
//! Neuron device of a node as a ResourceSlice device named `neurondevice<index>`, in a pool
//! named after the node; a ResourceClaim's allocation lists them by that name (`device:
//! neurondevice2`, `driver: neuron.aws.com`, `pool: ip-….compute.internal` in the example of
//! aws-neuron/aws-neuron-sdk `deploy/eks/dra.rst`, commit
//! 3afa0fdf40b9a7eb12d8d4b1ebfd924372465851). The index is the device's `/dev/neuron<index>`,
//! which the slice also publishes as the device's `deviceId` attribute; PodResources carries
//! names, not attributes, so the index is read from the name. The driver hands out whole
//! devices (its NeuronCore setting, LNC, is a claim parameter, not a per-core allocation), so
//! every core of a claimed device is its claim's. UltraServer node devices (`resourceType`
//! `neuron_node`) name no device and are left out.

use std::fmt;

/// The Neuron DRA driver's name, as `ClaimResource.driver_name` carries it.
pub const NEURON_DRA_DRIVER: &str = "neuron.aws.com";

/// The prefix of the driver's device names; the device's index follows it.
const DEVICE_NAME_PREFIX: &str = "neurondevice";

/// A ResourceClaim, as the kubelet names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Claim {
    /// The claim's namespace (the pod's).
    pub namespace: String,
    /// The claim's name (for a claim made from a template, the name the control plane gave it).
    pub name: String,
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The index of the driver's device `name` (`neurondevice<index>`, ASCII digits only).
#[must_use]
pub fn device_index(name: &str) -> Option<u32> {
    crate::index::index(name.strip_prefix(DEVICE_NAME_PREFIX)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_carry_the_index() {
        assert_eq!(device_index("neurondevice0"), Some(0));
        assert_eq!(device_index("neurondevice15"), Some(15));
        assert_eq!(device_index("neurondevice4294967295"), Some(u32::MAX));
        for other in [
            "neurondevice",
            "neurondevice-1",
            "neurondevice+1",
            "neurondevice1a",
            "neurondevice4294967296",
            "Neurondevice1",
            "neuron_node0",
            "neuroncore3",
            "0",
            "",
        ] {
            assert_eq!(device_index(other), None, "{other}");
        }
    }
}
