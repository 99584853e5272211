//! A fake kubelet: the PodResources API (the kubelet's own proto, served by
//! `nds-podresources`) on a unix socket, listing what the test says, changed while it serves.

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nds_podresources::tonic::{self, Request, Response, Status};
use nds_podresources::v1::pod_resources_lister_server::PodResourcesLister;
use nds_podresources::v1::{
    ContainerDevices, ContainerResources, ListPodResourcesRequest, ListPodResourcesResponse,
    PodResources,
};

/// The pods the fake kubelet lists, and how many times it was asked.
#[derive(Clone, Default)]
pub struct FakeKubelet {
    pods: Arc<Mutex<Vec<PodResources>>>,
    calls: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl PodResourcesLister for FakeKubelet {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        let pod_resources = self.pods.lock().unwrap().clone();
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(Response::new(ListPodResourcesResponse { pod_resources }))
    }
}

impl FakeKubelet {
    /// Serves on `socket` from a thread of its own, for the rest of the test process.
    pub fn start(socket: &Path) -> Self {
        let kubelet = Self::default();
        let listener = UnixListener::bind(socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let served = kubelet.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::UnixListener::from_std(listener).unwrap();
                let _ = nds_podresources::serve(listener, served).await;
            });
        });
        kubelet
    }

    /// Lists `pods` from now on.
    pub fn set(&self, pods: Vec<PodResources>) {
        *self.pods.lock().unwrap() = pods;
    }

    /// How many `List` calls it answered.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// A pod of one container holding whole devices `devices` through the Neuron device plugin.
pub fn pod_holding(namespace: &str, name: &str, container: &str, devices: &[u32]) -> PodResources {
    PodResources {
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        containers: vec![ContainerResources {
            name: container.to_owned(),
            devices: vec![ContainerDevices {
                resource_name: "aws.amazon.com/neuron".to_owned(),
                device_ids: devices.iter().map(u32::to_string).collect(),
            }],
            dynamic_resources: Vec::new(),
        }],
    }
}
