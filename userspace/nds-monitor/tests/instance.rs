//! `instance_info` from EC2 instance metadata: a fake IMDSv2 service on loopback fills every
//! field (token first, then one GET per field with the token); a missing, refusing or silent
//! service leaves the fields empty with an `error`, and never holds a report back. Nothing
//! here sends a packet off this machine.

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use nds_document::document::InstanceInfo;
use nds_document::{MonitorDocument, Plan};
use nds_host::imds::MetadataSetting;
use nds_sampler::Monitor;

const SECOND: Duration = Duration::from_secs(1);

fn monitor_with(scratch: &Scratch, setting: MetadataSetting) -> (Monitor, Instant) {
    let mut source = scratch.source();
    source.host.instance_metadata = setting;
    let t0 = Instant::now();
    (Monitor::new(source, Plan::everything(SECOND), t0), t0)
}

/// The report due one period after `t0`, from another thread: a report that waited for the
/// metadata service would not come back (bounded wait, so a regression fails instead of
/// hanging).
fn report_within_the_period(monitor: Monitor, t0: Instant) -> MonitorDocument {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut monitor = monitor;
        let _ = sender.send(monitor.poll(t0 + SECOND));
    });
    receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("the report waited for the metadata service")
        .expect("every group is due after one period")
}

fn assert_empty_fields(info: &InstanceInfo) {
    let fields = [
        &info.instance_name,
        &info.instance_id,
        &info.instance_type,
        &info.instance_availability_zone,
        &info.instance_availability_zone_id,
        &info.instance_region,
        &info.ami_id,
        &info.subnet_id,
    ];
    assert!(fields.iter().all(|f| f.is_empty()), "{info:?}");
    assert!(!info.error.is_empty(), "an empty instance_info says why");
}

#[test]
fn a_metadata_service_on_loopback_fills_every_field_over_imdsv2() {
    let scratch = Scratch::new("imds-fake");
    let imds = FakeImds::start(false);
    let (monitor, _) = monitor_with(&scratch, MetadataSetting::Endpoint(imds.url.clone()));
    let mut waited = 0;
    while monitor.instance_info().instance_id.is_empty() {
        assert!(waited < 400, "{:?}", monitor.instance_info());
        std::thread::sleep(Duration::from_millis(25));
        waited += 1;
    }
    let fake = fake_instance();
    let info = monitor.instance_info();
    assert_eq!(
        info,
        InstanceInfo {
            instance_name: fake["tags/instance/Name"].to_owned(),
            instance_id: fake["instance-id"].to_owned(),
            instance_type: fake["instance-type"].to_owned(),
            instance_availability_zone: fake["placement/availability-zone"].to_owned(),
            instance_availability_zone_id: fake["placement/availability-zone-id"].to_owned(),
            instance_region: fake["placement/region"].to_owned(),
            ami_id: fake["ami-id"].to_owned(),
            subnet_id: fake["network/interfaces/macs/0a:1b:2c:3d:4e:5f/subnet-id"].to_owned(),
            error: String::new(),
        }
    );
    let requests = imds.requests.lock().unwrap().clone();
    assert_eq!(
        requests[0],
        ("PUT /latest/api/token HTTP/1.1".to_owned(), None),
        "IMDSv2 starts with a session token"
    );
    assert_eq!(requests.len(), 10, "{requests:?}");
    for (request, token) in &requests[1..] {
        assert!(request.starts_with("GET /latest/meta-data/"), "{request}");
        assert_eq!(token.as_deref(), Some(FAKE_TOKEN), "{request}");
    }
    // Cached: later reports do not query again.
    let (mut monitor, t0) = (monitor, Instant::now());
    let document = monitor.poll(t0 + 2 * SECOND).unwrap();
    assert_eq!(document.instance_info, info);
    assert_eq!(imds.requests.lock().unwrap().len(), 10);
}

#[test]
fn the_cli_queries_the_endpoint_it_is_given() {
    let scratch = Scratch::new("imds-cli");
    let imds = FakeImds::start(false);
    let mut child = Command::new(env!("CARGO_BIN_EXE_nds-monitor"))
        .arg("--slab-dir")
        .arg(scratch.slabs())
        .arg("--sysfs-root")
        .arg(scratch.sys())
        .args(["--period", "100ms"])
        .env("NDS_MONITOR_INSTANCE_METADATA", &imds.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = 0;
    for line in lines {
        let document: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        seen += 1;
        if document["instance_info"]["instance_type"] == "trn1.32xlarge" {
            assert_eq!(document["instance_info"]["error"], "");
            break;
        }
        assert!(seen < 100, "no document had the instance: {document}");
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn no_service_leaves_the_fields_empty_with_an_error_and_the_report_on_time() {
    let scratch = Scratch::new("imds-none");
    // Not an EC2 instance by DMI: nothing is queried.
    std::fs::create_dir_all(scratch.0.join("dmi")).unwrap();
    std::fs::write(scratch.0.join("dmi/sys_vendor"), "QEMU\n").unwrap();
    let (monitor, t0) = monitor_with(&scratch, MetadataSetting::Auto);
    let document = report_within_the_period(monitor, t0);
    assert_empty_fields(&document.instance_info);
    assert!(
        document.instance_info.error.contains("not an EC2 instance")
            && document.instance_info.error.contains("\"QEMU\""),
        "{}",
        document.instance_info.error
    );

    // An endpoint that accepts and never answers: the report does not wait for it.
    let silent = FakeImds::start(true);
    let (monitor, t0) = monitor_with(&scratch, MetadataSetting::Endpoint(silent.url.clone()));
    let document = report_within_the_period(monitor, t0);
    assert_empty_fields(&document.instance_info);

    // Nothing listening: the error names the endpoint, once the query has failed.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (monitor, t0) = monitor_with(&scratch, MetadataSetting::Endpoint(url.clone()));
    let mut waited = 0;
    while !monitor.instance_info().error.contains("retrying") {
        assert!(waited < 400, "{:?}", monitor.instance_info());
        std::thread::sleep(Duration::from_millis(25));
        waited += 1;
    }
    let document = report_within_the_period(monitor, t0);
    assert_empty_fields(&document.instance_info);
    assert!(
        document.instance_info.error.contains(&url),
        "{}",
        document.instance_info.error
    );
}

#[test]
fn off_means_off_and_a_bad_endpoint_is_refused() {
    let scratch = Scratch::new("imds-off");
    let (monitor, t0) = monitor_with(&scratch, MetadataSetting::Off);
    let document = report_within_the_period(monitor, t0);
    assert_empty_fields(&document.instance_info);
    let output = Command::new(env!("CARGO_BIN_EXE_nds-monitor"))
        .args([
            "--instance-metadata",
            "https://169.254.169.254",
            "--count",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("http://host[:port]"), "{stderr}");
}

#[test]
fn a_required_field_that_failed_is_queried_again_until_it_comes() {
    let scratch = Scratch::new("imds-retry");
    let failures = Failures::default();
    failures.lock().unwrap().insert("instance-id".to_owned(), 2);
    let imds = FakeImds::start_failing(false, failures.clone());
    let (monitor, _) = monitor_with(&scratch, MetadataSetting::Endpoint(imds.url.clone()));
    // The first answer lacks the id and says so; the rest of it is there meanwhile.
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        let info = monitor.instance_info();
        if !info.instance_type.is_empty() {
            break info;
        }
        assert!(Instant::now() < deadline, "{info:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(first.instance_id, "");
    assert!(first.error.contains("instance-id (HTTP 500)"), "{first:?}");
    assert!(first.error.contains("retrying in 1 s"), "{first:?}");
    // Retried (after 1 s, then 2 s): the id arrives and the error goes.
    let deadline = Instant::now() + Duration::from_secs(15);
    while monitor.instance_info().instance_id.is_empty() {
        assert!(Instant::now() < deadline, "{:?}", monitor.instance_info());
        std::thread::sleep(Duration::from_millis(50));
    }
    let info = monitor.instance_info();
    assert_eq!(info.instance_id, fake_instance()["instance-id"]);
    assert_eq!(info.error, "");
    assert_eq!(failures.lock().unwrap()["instance-id"], 0);
    let tokens = imds
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|(line, _)| line.starts_with("PUT /latest/api/token"))
        .count();
    assert_eq!(tokens, 3, "one query per attempt, each with a fresh token");
}
