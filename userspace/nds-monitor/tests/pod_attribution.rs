//! Pod attribution against a fake kubelet: a PodResources server (the generated service of
//! the kubelet's `api.proto`) on a unix socket, `nds-monitor serve` on slab files the load
//! generator keeps writing, and pods that come and go meanwhile. Every per-process and
//! per-core series of a slab carries the pod of the container holding its device or cores,
//! allocated by the device plugin or claimed through DRA (then with the claim); a pod that
//! leaves the list labels no new series; a kubelet that is missing or never answers stalls no
//! scrape and is counted.

mod common;

use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use nds_podresources::refresh;
use nds_podresources::tonic::{self, Request, Response, Status};
use nds_podresources::v1::pod_resources_lister_server::PodResourcesLister;
use nds_podresources::v1::{
    ClaimResource, ContainerDevices, ContainerResources, DynamicResource, ListPodResourcesRequest,
    ListPodResourcesResponse, PodResources,
};

/// What the fake kubelet lists, changed by the test while it serves.
#[derive(Clone, Default)]
struct Pods(Arc<Mutex<Vec<PodResources>>>);

impl Pods {
    fn set(&self, pods: Vec<PodResources>) {
        *self.0.lock().unwrap() = pods;
    }
}

#[tonic::async_trait]
impl PodResourcesLister for Pods {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        let pod_resources = self.0.lock().unwrap().clone();
        Ok(Response::new(ListPodResourcesResponse { pod_resources }))
    }
}

/// Serves `pods` on `socket` from a thread of its own for the rest of the test process.
fn fake_kubelet(socket: &Path, pods: impl PodResourcesLister) {
    let listener = StdUnixListener::bind(socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::UnixListener::from_std(listener).unwrap();
            let _ = nds_podresources::serve(listener, pods).await;
        });
    });
}

/// A pod of one container holding `(resource, ids)` each.
fn pod(namespace: &str, name: &str, container: &str, held: &[(&str, &[&str])]) -> PodResources {
    PodResources {
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        containers: vec![ContainerResources {
            name: container.to_owned(),
            devices: held
                .iter()
                .map(|&(resource, ids)| ContainerDevices {
                    resource_name: resource.to_owned(),
                    device_ids: ids.iter().map(|&id| id.to_owned()).collect(),
                })
                .collect(),
            dynamic_resources: Vec::new(),
        }],
    }
}

/// Producers that keep adding to their slabs until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Load {
    /// Keeps writing `(device, pid, tag)`'s slab each (created here) in `dir`.
    fn start(dir: &Path, slabs: &[(u32, i32, &str)]) -> Self {
        for &(device, pid, tag) in slabs {
            produce(dir, device, pid, tag, 20);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (dir, stopping) = (dir.to_path_buf(), Arc::clone(&stop));
        let slabs: Vec<(u32, i32, String)> = slabs
            .iter()
            .map(|&(device, pid, tag)| (device, pid, tag.to_owned()))
            .collect();
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                for (device, pid, tag) in &slabs {
                    produce_more(&dir, *device, *pid, tag, 5);
                }
                // The producers' pace (not synchronisation): they run while the test does.
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `nds-monitor serve` on `scratch` asking the kubelet at `socket` every 200 ms.
fn serve_with_kubelet(scratch: &Scratch, socket: &Path) -> Served {
    Served::start(
        scratch
            .monitor_command("200ms")
            .arg("--pod-resources-socket")
            .arg(socket)
            .args(["--pod-resources-period", "200ms"])
            .args(["serve", "--listen", "127.0.0.1:0"]),
    )
}

/// The sample lines of process `pid`.
fn lines_of(body: &str, pid: i32) -> Vec<&str> {
    let label = format!("pid=\"{pid}\"");
    body.lines()
        .filter(|line| !line.starts_with('#') && line.contains(&label))
        .collect()
}

/// The `pod`, `namespace` and `container` labels naming a container.
fn labels_of(namespace: &str, pod: &str, container: &str) -> [String; 3] {
    [
        format!("pod=\"{pod}\""),
        format!("namespace=\"{namespace}\""),
        format!("container=\"{container}\""),
    ]
}

/// Whether process `pid` has series, and every one names the container (`Some`) or none
/// (`None`).
fn all_labelled(body: &str, pid: i32, holder: Option<&[String; 3]>) -> bool {
    let lines = lines_of(body, pid);
    !lines.is_empty()
        && lines.iter().all(|line| match holder {
            Some(labels) => labels.iter().all(|label| line.contains(label.as_str())),
            None => !line.contains("pod=") && !line.contains("container="),
        })
}

/// The exposition but the per-pod families' lines, which name a pod for good.
fn without_pod_families(body: &str) -> String {
    body.lines()
        .filter(|line| !line.starts_with("nds_pod_") && !line.starts_with("# HELP nds_pod_"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of the first sample line starting with `prefix`.
fn sample(body: &str, prefix: &str) -> Option<f64> {
    body.lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

// Slab files without a device tree: 16 NeuronCore slots per device, so device 1's cores 0 and
// 1 (the producers count on two) are instance-wide 16 and 17.
const WHOLE: (u32, i32, &str) = (0, 7001, "whole-device");
const CORES: (u32, i32, &str) = (1, 7002, "two-cores");
const LATER: (u32, i32, &str) = (2, 7003, "no-pod-yet");
const AFTER: (u32, i32, &str) = (0, 7004, "after-the-pod");

#[test]
fn every_series_of_a_slab_carries_its_containers_pod_while_pods_come_and_go() {
    let scratch = Scratch::new("pods-load");
    let socket = scratch.0.join("kubelet.sock");
    let pods = Pods::default();
    pods.set(vec![
        pod(
            "ml",
            "trainer-0",
            "main",
            &[("aws.amazon.com/neuron", &["0"])],
        ),
        pod(
            "serving",
            "server-0",
            "infer",
            // An id that is no index is left out; the others still count.
            &[("aws.amazon.com/neuroncore", &["16", "17", "nc-9"])],
        ),
        pod(
            "gpu",
            "cuda-0",
            "main",
            &[("nvidia.com/gpu", &["GPU-0a1b"])],
        ),
    ]);
    fake_kubelet(&socket, pods.clone());
    let load = Load::start(&scratch.slabs(), &[WHOLE, CORES, LATER]);
    let served = serve_with_kubelet(&scratch, &socket);

    let trainer = labels_of("ml", "trainer-0", "main");
    let server = labels_of("serving", "server-0", "infer");
    let first = served.scrape_until(|body| {
        all_labelled(body, WHOLE.1, Some(&trainer))
            && all_labelled(body, CORES.1, Some(&server))
            && lines_of(body, CORES.1)
                .iter()
                .any(|line| line.starts_with("nds_runtime_status_total{"))
            && body.contains("neuroncore_utilization_ratio{")
    });
    // Every per-process series of each slab, gauges, counters and histograms alike.
    for (pid, holder) in [
        (WHOLE.1, Some(&trainer)),
        (CORES.1, Some(&server)),
        (LATER.1, None),
    ] {
        let lines = lines_of(&first, pid);
        for family in [
            "nds_runtime_info{",
            "nds_runtime_status_total{",
            "nds_runtime_latency_seconds_bucket{",
        ] {
            assert!(
                lines.iter().any(|line| line.starts_with(family)),
                "pid {pid} has no {family}:\n{first}"
            );
        }
        assert!(all_labelled(&first, pid, holder), "pid {pid}:\n{first}");
    }
    // Per-core series of the ecosystem's families carry the core's holder.
    for line in first
        .lines()
        .filter(|line| line.starts_with("neuroncore_utilization_ratio{"))
    {
        let core16 = line.contains("neuroncore=\"16\"") || line.contains("neuroncore=\"17\"");
        let core0 = line.contains("neuroncore=\"0\"") || line.contains("neuroncore=\"1\"");
        let expected = match (core16, core0) {
            (true, _) => Some(&server),
            (_, true) => Some(&trainer),
            _ => None,
        };
        match expected {
            Some(labels) => assert!(labels.iter().all(|l| line.contains(l.as_str())), "{line}"),
            None => assert!(!line.contains("pod="), "{line}"),
        }
    }
    // Per-tag and per-device series name no pod.
    for line in first.lines().filter(|line| {
        line.starts_with("execution_status_total{") || line.starts_with("nds_device_")
    }) {
        assert!(!line.contains("pod="), "{line}");
    }
    assert_eq!(
        sample(&first, "nds_monitor_pod_resources_errors_total{"),
        Some(0.0)
    );

    // The trainer's pod leaves; a new pod takes device 2 whole.
    let batch = labels_of("batch", "batch-0", "job");
    pods.set(vec![
        pod(
            "serving",
            "server-0",
            "infer",
            &[("aws.amazon.com/neuroncore", &["16", "17"])],
        ),
        pod(
            "batch",
            "batch-0",
            "job",
            &[("aws.amazon.com/neuron", &["2"])],
        ),
    ]);
    let moved = served.scrape_until(|body| {
        all_labelled(body, WHOLE.1, None) && all_labelled(body, LATER.1, Some(&batch))
    });
    // No series of a process names the pod that left; the pod's own series keep what its
    // processes counted (a process does not change pods: what the one still running counts
    // is still its pod's).
    assert!(
        !without_pod_families(&moved).contains("pod=\"trainer-0\""),
        "{moved}"
    );
    let trainer_completed = |body: &str| {
        body.lines()
            .find(|line| {
                line.starts_with("nds_pod_execution_status_total{")
                    && line.contains("pod=\"trainer-0\"")
                    && line.contains("status_type=\"completed\"")
            })
            .and_then(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
    };
    let kept = trainer_completed(&moved).expect("the pod's series stay");
    assert!(kept > 0.0, "{moved}");
    assert!(all_labelled(&moved, CORES.1, Some(&server)), "{moved}");

    // A process that starts on the device after the pod left is nobody's either.
    let _after = Load::start(&scratch.slabs(), &[AFTER]);
    let later = served.scrape_until(|body| {
        lines_of(body, AFTER.1)
            .iter()
            .any(|line| line.starts_with("nds_runtime_status_total{"))
    });
    assert!(all_labelled(&later, AFTER.1, None), "{later}");
    assert!(
        !without_pod_families(&later).contains("pod=\"trainer-0\""),
        "{later}"
    );
    assert!(trainer_completed(&later) >= Some(kept), "{later}");
    assert_eq!(
        sample(&later, "nds_monitor_pod_resources_errors_total{"),
        Some(0.0)
    );
    drop(load);
    let status = served.stop_with(libc::SIGTERM);
    assert!(status.success(), "{status}");
}

/// Scrapes `served` until its exposition satisfies `until` (bounded), and returns that one:
/// each answer must come well within a kubelet call's deadline (a scrape that waited for the
/// kubelet would take up to that), and `/healthz` stay 200.
fn scrape_steadily_until(served: &Served, until: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let started = Instant::now();
        let metrics = served.get("/metrics");
        let health = served.get("/healthz");
        let took = started.elapsed();
        assert!(took < refresh::DEADLINE / 2, "a scrape took {took:?}");
        assert!(metrics.status.contains(" 200 "), "{metrics:?}");
        assert!(health.status.contains(" 200 "), "{health:?}");
        if until(&metrics.body) {
            return metrics.body;
        }
        assert!(Instant::now() < deadline, "never there:\n{}", metrics.body);
        // A scraper's pace (not synchronisation): the loop ends on what the exposition shows.
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The kubelet errors an exposition counted.
fn kubelet_errors(body: &str) -> Option<f64> {
    sample(body, "nds_monitor_pod_resources_errors_total{")
}

#[test]
fn a_missing_socket_or_a_silent_kubelet_stalls_no_scrape_and_is_counted() {
    let scratch = Scratch::new("pods-unreachable");
    produce(&scratch.slabs(), 0, 7101, "alone", 20);

    // No socket at all: every refresh fails at once, each counted.
    let missing = scratch.0.join("no-kubelet.sock");
    let served = serve_with_kubelet(&scratch, &missing);
    let body = scrape_steadily_until(&served, |body| {
        kubelet_errors(body).is_some_and(|errors| errors >= 2.0)
    });
    assert!(all_labelled(&body, 7101, None), "{body}");
    drop(served);

    // A kubelet that accepts and never answers: each call ends at its deadline, and scrapes
    // go on meanwhile.
    let silent: PathBuf = scratch.0.join("silent.sock");
    let listener = StdUnixListener::bind(&silent).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let started = Instant::now();
    let served = serve_with_kubelet(&scratch, &silent);
    let body = scrape_steadily_until(&served, |body| {
        kubelet_errors(body).is_some_and(|errors| errors > 0.0)
    });
    assert!(all_labelled(&body, 7101, None), "{body}");
    // The first call counted, at its deadline: the next one has its own deadline to go.
    assert_eq!(kubelet_errors(&body), Some(1.0), "{body}");
    assert!(
        started.elapsed() >= refresh::DEADLINE,
        "a call failed after {:?}, before its deadline",
        started.elapsed()
    );
    drop(served);
}

#[test]
fn pod_attribution_is_for_the_exposition_only() {
    let scratch = Scratch::new("pods-json");
    let output = Command::new(nds_monitor())
        .args([
            "--pod-resources-socket",
            "/nonexistent.sock",
            "--count",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--pod-resources-socket labels the Prometheus exposition"),
        "{stderr}"
    );
    // The period alone means nothing.
    let output = scratch
        .monitor_command("1s")
        .args(["--pod-resources-period", "5s", "--count", "1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "a usage error");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--pod-resources-socket"),
        "{output:?}"
    );
}

/// A kubelet's list that says which of its versions each call was answered with, so that a
/// test can wait until the monitor has had a version.
#[derive(Default)]
struct Versions {
    pods: Vec<PodResources>,
    version: u64,
    /// The version each call was answered with, in order.
    answered: Vec<u64>,
}

#[derive(Clone, Default)]
struct VersionedPods(Arc<(Mutex<Versions>, Condvar)>);

impl VersionedPods {
    /// Lists `pods` from now on; their version.
    fn set(&self, pods: Vec<PodResources>) -> u64 {
        let mut versions = self.0 .0.lock().unwrap();
        versions.pods = pods;
        versions.version += 1;
        versions.version
    }

    /// Waits until a call was answered with `version` and the monitor asked again: its
    /// refresher publishes each answer before it makes the next call.
    fn wait_until_published(&self, version: u64) {
        let (versions, answered) = &*self.0;
        let (_versions, timeout) = answered
            .wait_timeout_while(
                versions.lock().unwrap(),
                Duration::from_secs(60),
                |versions| {
                    let first = versions.answered.iter().position(|&v| v == version);
                    first.is_none_or(|at| versions.answered.len() <= at + 1)
                },
            )
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "the monitor never had version {version}"
        );
    }
}

#[tonic::async_trait]
impl PodResourcesLister for VersionedPods {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        let (versions, answered) = &*self.0;
        let mut versions = versions.lock().unwrap();
        let answer = ListPodResourcesResponse {
            pod_resources: versions.pods.clone(),
        };
        let version = versions.version;
        versions.answered.push(version);
        answered.notify_all();
        Ok(Response::new(answer))
    }
}

/// A pod of one container with `claims`: `(claim, [(driver, device name)])` each.
fn claiming(
    namespace: &str,
    name: &str,
    container: &str,
    claims: &[(&str, &[(&str, &str)])],
) -> PodResources {
    let mut pod = pod(namespace, name, container, &[]);
    pod.containers[0].dynamic_resources = claims
        .iter()
        .map(|&(claim, devices)| DynamicResource {
            claim_name: claim.to_owned(),
            claim_namespace: namespace.to_owned(),
            claim_resources: devices
                .iter()
                .map(|&(driver, device)| ClaimResource {
                    driver_name: driver.to_owned(),
                    pool_name: "ip-10-0-0-1.ec2.internal".to_owned(),
                    device_name: device.to_owned(),
                    ..ClaimResource::default()
                })
                .collect(),
        })
        .collect();
    pod
}

/// The value of label `name` in a sample line.
fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line
        .find(&format!("{{{name}=\""))
        .or_else(|| line.find(&format!(",{name}=\"")))?;
    let value = &line[start + name.len() + 3..];
    value.split('"').next()
}

/// Who a sample line names: `(pod, namespace, container, claim_name, claim_namespace)`.
type Named<'a> = [Option<&'a str>; 5];

fn named(line: &str) -> Named<'_> {
    [
        "pod",
        "namespace",
        "container",
        "claim_name",
        "claim_namespace",
    ]
    .map(|name| label(line, name))
}

/// A claim's holder as [`named`] reads it.
fn holder<'a>(namespace: &'a str, pod: &'a str, container: &'a str, claim: &'a str) -> Named<'a> {
    [
        Some(pod),
        Some(namespace),
        Some(container),
        Some(claim),
        Some(namespace),
    ]
}

const NOBODY: Named<'static> = [None; 5];

/// The reports the exposition counted.
fn reports(body: &str) -> f64 {
    sample(body, "nds_monitor_reports_total{").unwrap_or(0.0)
}

/// The exposition of the second report after now: both began after anything the monitor had
/// published before this call.
fn two_reports_on(served: &Served) -> String {
    let now = reports(&served.get("/metrics").body);
    served.scrape_until(|body| reports(body) >= now + 2.0)
}

/// Checks that every per-process series (`pid`) and every per-core series (`neuroncore`, but
/// the kernel's `nds_device_*` totals) of each device names its holder in `expected` (by
/// device index, 16 cores each in slab files), that every listed process has series, and that
/// the per-tag series name nobody.
fn check_holders(body: &str, processes: &[(u32, i32)], expected: &dyn Fn(u32) -> Named<'static>) {
    for &(device, pid) in processes {
        let lines = lines_of(body, pid);
        assert!(
            lines
                .iter()
                .any(|line| line.starts_with("nds_runtime_status_total{")),
            "process {pid} has no counters:\n{body}"
        );
        for line in lines {
            assert_eq!(named(line), expected(device), "{line}");
        }
    }
    let per_core = body.lines().filter(|line| {
        !line.starts_with('#') && !line.starts_with("nds_device_") && line.contains("neuroncore=")
    });
    let mut devices_seen = std::collections::BTreeSet::new();
    for line in per_core {
        let core: u32 = label(line, "neuroncore").unwrap().parse().unwrap();
        devices_seen.insert(core / 16);
        assert_eq!(named(line), expected(core / 16), "{line}");
    }
    for &(device, _) in processes {
        assert!(
            devices_seen.contains(&device),
            "no core of device {device}:\n{body}"
        );
    }
    for line in body
        .lines()
        .filter(|line| line.starts_with("execution_status_total{"))
    {
        assert_eq!(named(line), NOBODY, "{line}");
    }
}

const CLAIMED: (u32, i32, &str) = (0, 7201, "claimed");
const TWO_CLAIMS: (u32, i32, &str) = (1, 7202, "two-claims");
const UNCLAIMED: (u32, i32, &str) = (2, 7203, "unclaimed");

#[test]
fn dra_claims_label_every_series_of_their_devices_within_one_refresh_while_pods_come_and_go() {
    let scratch = Scratch::new("pods-dra");
    let socket = scratch.0.join("kubelet.sock");
    let kubelet = VersionedPods::default();
    let neuron = "neuron.aws.com";
    let first = kubelet.set(vec![
        claiming(
            "ml",
            "trainer-0",
            "main",
            &[("trainer-0-neurons-zdk76", &[(neuron, "neurondevice0")])],
        ),
        claiming(
            "serving",
            "server-0",
            "infer",
            &[
                // Another driver's claim of the same container is not a Neuron device.
                ("server-0-efa-8kq2n", &[("efa.networking.k8s.aws", "efa1")]),
                ("server-0-neurons-m4x9c", &[(neuron, "neurondevice1")]),
            ],
        ),
        // An UltraServer node device names no device: left out, and device 2 stays unclaimed.
        claiming(
            "ml",
            "leader-0",
            "main",
            &[("one-node", &[(neuron, "neuron_node0")])],
        ),
    ]);
    fake_kubelet(&socket, kubelet.clone());
    let slabs = [CLAIMED, TWO_CLAIMS, UNCLAIMED];
    let processes: Vec<(u32, i32)> = slabs.iter().map(|&(d, pid, _)| (d, pid)).collect();
    let load = Load::start(&scratch.slabs(), &slabs);
    let served = Served::start(
        scratch
            .monitor_command("200ms")
            .arg("--pod-resources-socket")
            .arg(&socket)
            .args(["--pod-resources-period", "200ms"])
            .args(["--pod-resources-allocator", "dra"])
            .args(["serve", "--listen", "127.0.0.1:0"]),
    );

    kubelet.wait_until_published(first);
    let body = two_reports_on(&served);
    let trainer = holder("ml", "trainer-0", "main", "trainer-0-neurons-zdk76");
    let server = holder("serving", "server-0", "infer", "server-0-neurons-m4x9c");
    check_holders(&body, &processes, &|device| match device {
        0 => trainer,
        1 => server,
        _ => NOBODY,
    });
    assert_eq!(
        sample(&body, "nds_monitor_pod_resources_errors_total{"),
        Some(0.0)
    );

    // The trainer's pod leaves; a new pod claims device 2.
    let second = kubelet.set(vec![
        claiming(
            "serving",
            "server-0",
            "infer",
            &[("server-0-neurons-m4x9c", &[(neuron, "neurondevice1")])],
        ),
        claiming(
            "batch",
            "batch-0",
            "job",
            &[("batch-0-neurons-p2v7d", &[(neuron, "neurondevice2")])],
        ),
    ]);
    kubelet.wait_until_published(second);
    let body = two_reports_on(&served);
    let batch = holder("batch", "batch-0", "job", "batch-0-neurons-p2v7d");
    check_holders(&body, &processes, &|device| match device {
        1 => server,
        2 => batch,
        _ => NOBODY,
    });
    // No series of a process names the pod that left (its per-pod series keep its totals).
    assert!(!without_pod_families(&body).contains("trainer-0"), "{body}");
    assert!(
        body.lines()
            .any(|line| line.starts_with("nds_pod_") && line.contains("pod=\"trainer-0\"")),
        "{body}"
    );

    // Every pod leaves: every device's series stay, with no pod.
    let third = kubelet.set(Vec::new());
    kubelet.wait_until_published(third);
    let body = two_reports_on(&served);
    check_holders(&body, &processes, &|_| NOBODY);
    drop(load);
    let status = served.stop_with(libc::SIGTERM);
    assert!(status.success(), "{status}");
}
