//! `list` against a fake kubelet on a unix socket: what it answers, its error statuses, a
//! socket that is not there, and one that never answers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nds_podresources::tonic::{self, Request, Response, Status};
use nds_podresources::v1::pod_resources_lister_server::PodResourcesLister;
use nds_podresources::v1::{
    ContainerDevices, ContainerResources, ListPodResourcesRequest, ListPodResourcesResponse,
    PodResources,
};
use nds_podresources::{list, serve, Attribution, Error};
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
