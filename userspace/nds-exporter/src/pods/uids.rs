//! Pods by their UID, which the cgroup path of each of their processes carries: the kubelet's
//! PodResources API names a container's pod and namespace but not its UID, so the exporter
//! learns which container a UID is from the processes it saw attributed ([`PodUids::learn`]),
//! and names the pod of a process it never saw attributed by its cgroup path alone
//! ([`PodUids::holder`]), after the pod left the kubelet's list too.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use nds_podresources::Container;

/// Pods remembered at most; the oldest learnt go first.
pub const KEPT: usize = 4096;

/// The pod UID a kubepods cgroup path names: `…/kubepods/<class>/pod<uid>/…` (the cgroupfs
/// driver) or `…/kubepods-<class>-pod<uid with _>.slice/…` (the systemd driver), with dashes.
#[must_use]
pub fn pod_uid(cgroup: &str) -> Option<String> {
    let mut components = cgroup.split('/').skip_while(|c| !c.starts_with("kubepods"));
    components.find_map(|component| {
        let uid = match component.strip_suffix(".slice") {
            Some(slice) => slice.rsplit_once("-pod")?.1.replace('_', "-"),
            None => component.strip_prefix("pod")?.to_owned(),
        };
        let valid = !uid.is_empty() && uid.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        valid.then_some(uid)
    })
}

/// The containers learnt by pod UID.
#[derive(Debug, Default)]
pub struct PodUids {
    by_uid: HashMap<String, Arc<Container>>,
    /// UIDs in the order they were learnt.
    order: VecDeque<String>,
}

impl PodUids {
    /// Remembers that the process in `cgroup` is `holder`'s (if the path names a pod).
    pub fn learn(&mut self, cgroup: &str, holder: &Arc<Container>) {
        let Some(uid) = pod_uid(cgroup) else {
            return;
        };
        // A pod learnt again is the newest learnt.
        if self
            .by_uid
            .insert(uid.clone(), Arc::clone(holder))
            .is_some()
        {
            self.order.retain(|learnt| *learnt != uid);
        }
        self.order.push_back(uid);
        if self.order.len() > KEPT {
            if let Some(oldest) = self.order.pop_front() {
                self.by_uid.remove(&oldest);
            }
        }
    }

    /// The container of the pod `cgroup` names, if it was learnt.
    #[must_use]
    pub fn holder(&self, cgroup: &str) -> Option<&Arc<Container>> {
        self.by_uid.get(&pod_uid(cgroup)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "3f1c9d2e-7a4b-4c1d-9e8f-0123456789ab";

    #[test]
    fn both_drivers_paths_name_the_pod() {
        let cgroupfs = format!("/kubepods/burstable/pod{UID}/0a1b2c3d");
        assert_eq!(pod_uid(&cgroupfs).as_deref(), Some(UID));
        let guaranteed = format!("/kubepods/pod{UID}/0a1b2c3d");
        assert_eq!(pod_uid(&guaranteed).as_deref(), Some(UID));
        let systemd = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/\
             cri-containerd-0a1b.scope",
            UID.replace('-', "_")
        );
        assert_eq!(pod_uid(&systemd).as_deref(), Some(UID));
        for none in [
            "/user.slice/user-1000.slice/session-1.scope",
            "/system.slice/pod-thing.service",
            "/kubepods/burstable",
            "/kubepods/burstable/podnot-hex!/x",
            "",
        ] {
            assert_eq!(pod_uid(none), None, "{none}");
        }
    }

    #[test]
    fn learnt_pods_are_found_by_any_process_path_and_bounded() {
        let holder = Arc::new(Container {
            pod: "trainer-0".into(),
            namespace: "jobs".into(),
            container: "main".into(),
            claim: None,
        });
        let mut uids = PodUids::default();
        uids.learn(&format!("/kubepods/pod{UID}/aaaa"), &holder);
        uids.learn("/not/a/pod", &holder);
        let other_process = format!("/kubepods/pod{UID}/bbbb");
        assert_eq!(uids.holder(&other_process), Some(&holder));
        assert_eq!(uids.holder("/kubepods/pod00ff/x"), None);
        for n in 0..KEPT {
            if n == KEPT / 2 {
                uids.learn(&other_process, &holder);
            }
            uids.learn(&format!("/kubepods/pod{n:x}/c"), &holder);
        }
        assert_eq!(
            uids.holder(&other_process),
            Some(&holder),
            "learnt again: among the newest"
        );
        for n in KEPT..2 * KEPT {
            uids.learn(&format!("/kubepods/pod{n:x}/c"), &holder);
        }
        assert_eq!(uids.holder(&other_process), None, "the oldest went");
        assert_eq!(uids.order.len(), KEPT);
        assert_eq!(uids.by_uid.len(), KEPT);
    }
}
