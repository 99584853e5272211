//! `list` against a fake kubelet on a unix socket: what it answers (device plugin and DRA
//! allocations), its error statuses, a socket that is not there, and one that never answers;
//! and the DRA messages' wire format at upstream's field numbers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nds_podresources::tonic::{self, Request, Response, Status};
use nds_podresources::v1::pod_resources_lister_server::PodResourcesLister;
use nds_podresources::v1::{
    CdiDevice, ClaimResource, ContainerDevices, ContainerResources, DynamicResource,
    ListPodResourcesRequest, ListPodResourcesResponse, PodResources,
};
use nds_podresources::{list, serve, Attribution, Error};
use prost::Message;
use tokio::net::UnixListener;

/// A directory of its own for each test's socket, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("nds-podresources-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn socket(&self) -> PathBuf {
        self.0.join("kubelet.sock")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Answers `List` with `answer`, and keeps the `grpc-timeout` of every request it got.
#[derive(Clone)]
struct Fake {
    answer: Result<ListPodResourcesResponse, Status>,
    timeouts: Arc<Mutex<Vec<Option<String>>>>,
}

#[tonic::async_trait]
impl PodResourcesLister for Fake {
    async fn list(
        &self,
        request: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        let timeout = request
            .metadata()
            .get("grpc-timeout")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        self.timeouts.lock().unwrap().push(timeout);
        self.answer.clone().map(Response::new)
    }
}

fn start(socket: &Path, fake: Fake) {
    let listener = UnixListener::bind(socket).unwrap();
    tokio::spawn(serve(listener, fake));
}

fn response() -> ListPodResourcesResponse {
    ListPodResourcesResponse {
        pod_resources: vec![PodResources {
            name: "trainer-0".to_owned(),
            namespace: "ml".to_owned(),
            containers: vec![ContainerResources {
                name: "main".to_owned(),
                devices: vec![
                    ContainerDevices {
                        resource_name: "aws.amazon.com/neuron".to_owned(),
                        device_ids: vec!["1".to_owned()],
                    },
                    ContainerDevices {
                        resource_name: "aws.amazon.com/neuroncore".to_owned(),
                        device_ids: vec!["0".to_owned()],
                    },
                ],
                dynamic_resources: vec![DynamicResource {
                    claim_name: "trainer-0-neurons-zdk76".to_owned(),
                    claim_namespace: "ml".to_owned(),
                    claim_resources: vec![ClaimResource {
                        cdi_devices: vec![CdiDevice {
                            name: "neuron.aws.com/device=neurondevice2".to_owned(),
                        }],
                        driver_name: "neuron.aws.com".to_owned(),
                        pool_name: "ip-10-0-0-1.ec2.internal".to_owned(),
                        device_name: "neurondevice2".to_owned(),
                        share_id: Some("0".to_owned()),
                    }],
                }],
            }],
        }],
    }
}

#[tokio::test]
async fn list_answers_what_the_kubelet_serves_and_sends_the_deadline() {
    let scratch = Scratch::new("answers");
    let fake = Fake {
        answer: Ok(response()),
        timeouts: Arc::default(),
    };
    start(&scratch.socket(), fake.clone());
    let answer = list(&scratch.socket(), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(answer, response());
    let attribution = Attribution::from_list(&answer);
    let holder = |found: Option<&Arc<nds_podresources::Container>>| found.map(ToString::to_string);
    assert_eq!(
        holder(attribution.device(1)).as_deref(),
        Some("ml/trainer-0/main")
    );
    assert_eq!(
        holder(attribution.core(0, 2, 0)).as_deref(),
        Some("ml/trainer-0/main")
    );
    assert_eq!(
        holder(attribution.device(2)).as_deref(),
        Some("ml/trainer-0/main (claim ml/trainer-0-neurons-zdk76)")
    );
    // A second call is a connection of its own, answered the same.
    assert_eq!(
        list(&scratch.socket(), Duration::from_secs(5))
            .await
            .unwrap(),
        answer
    );
    let timeouts = fake.timeouts.lock().unwrap().clone();
    assert_eq!(timeouts.len(), 2);
    assert!(timeouts.iter().all(Option::is_some), "{timeouts:?}");
}

#[tokio::test]
async fn an_error_status_is_a_list_error() {
    let scratch = Scratch::new("status");
    let fake = Fake {
        answer: Err(Status::unavailable("kubelet starting")),
        timeouts: Arc::default(),
    };
    start(&scratch.socket(), fake);
    let error = list(&scratch.socket(), Duration::from_secs(5))
        .await
        .unwrap_err();
    let Error::List { source, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(source.code(), tonic::Code::Unavailable);
    assert!(error.to_string().contains("kubelet starting"), "{error}");
}

/// `error` and every source under it, one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        text += &format!(": {source}");
        next = source.source();
    }
    text
}

#[tokio::test]
async fn a_missing_socket_is_a_connect_error_at_once() {
    let scratch = Scratch::new("missing");
    let started = Instant::now();
    let error = list(&scratch.socket(), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Connect { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    let text = chain(&error);
    assert!(text.contains("kubelet.sock"), "{text}");
    assert!(text.contains("No such file or directory"), "{text}");
}

#[tokio::test]
async fn a_kubelet_that_never_answers_is_a_deadline() {
    let scratch = Scratch::new("silent");
    let listener = UnixListener::bind(scratch.socket()).unwrap();
    // Accepts and holds every connection, saying nothing.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let deadline = Duration::from_millis(300);
    let started = Instant::now();
    let error = list(&scratch.socket(), deadline).await.unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(error, Error::Deadline { .. }), "{error:?}");
    assert!(waited >= deadline && waited < deadline * 5, "{waited:?}");
    assert!(error.to_string().contains("within 300ms"), "{error}");
}

/// A protobuf field: its tag (number and wire type 2, length-delimited) and its bytes.
fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
    let mut encoded = vec![number << 3 | 2, u8::try_from(bytes.len()).unwrap()];
    encoded.extend_from_slice(bytes);
    encoded
}

#[test]
fn dra_fields_are_read_at_the_kubelets_field_numbers() {
    // Written by hand with upstream's numbers: ClaimResource cdi_devices 1, driver_name 2,
    // pool_name 3, device_name 4, share_id 5; DynamicResource claim_name 2, claim_namespace 3,
    // claim_resources 4; ContainerResources name 1, dynamic_resources 5.
    let cdi = field(1, b"neuron.aws.com/device=neurondevice7");
    let device = [
        field(1, &cdi),
        field(2, b"neuron.aws.com"),
        field(3, b"node-a"),
        field(4, b"neurondevice7"),
        field(5, b"s1"),
    ]
    .concat();
    let claim = [field(2, b"c"), field(3, b"ns"), field(4, &device)].concat();
    let container = [field(1, b"main"), field(5, &claim)].concat();
    let decoded = ContainerResources::decode(container.as_slice()).unwrap();
    assert_eq!(
        decoded,
        ContainerResources {
            name: "main".to_owned(),
            devices: Vec::new(),
            dynamic_resources: vec![DynamicResource {
                claim_name: "c".to_owned(),
                claim_namespace: "ns".to_owned(),
                claim_resources: vec![ClaimResource {
                    cdi_devices: vec![CdiDevice {
                        name: "neuron.aws.com/device=neurondevice7".to_owned(),
                    }],
                    driver_name: "neuron.aws.com".to_owned(),
                    pool_name: "node-a".to_owned(),
                    device_name: "neurondevice7".to_owned(),
                    share_id: Some("s1".to_owned()),
                }],
            }],
        }
    );
    // Encoding gives the same bytes back.
    assert_eq!(decoded.encode_to_vec(), container);
}
