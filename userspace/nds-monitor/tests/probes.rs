//! What a node acts on: `/readyz` (503 until the first sampling cycle has read every source
//! and listed enough devices, 503 again while no device is listed, 200 otherwise) and
//! `nds-monitor health`, the node-problem-detector check (exit 0, 1 or 2 and the reason on
//! its first line), against a stand-in server for each answer and against a real `serve`.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Output;
use std::thread::JoinHandle;

use common::*;

fn serve(scratch: &Scratch, extra: &[&str]) -> Served {
    let mut command = scratch.monitor_command("100ms");
    command
        .args(extra)
        .args(["serve", "--listen", "127.0.0.1:0"]);
    Served::start(&mut command)
}

fn status(response: &Response) -> &str {
    response
        .status
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
}

#[test]
fn readyz_waits_for_every_source_and_enough_devices() {
    let scratch = Scratch::new("probes-readyz");
    scratch.sysfs(1, 2, 0, 0);
    // One group an hour apart: the first cycle that reads every source is an hour away.
    let config = scratch.0.join("hourly.json");
    write(
        &config,
        r#"{"period": "100ms", "system_metrics": [{"type": "neuron_counters"},
            {"type": "memory_info", "period": "1h"}]}"#,
    );
    // The command line's --period would set every group's period: none here.
    let mut command = std::process::Command::new(nds_monitor());
    command
        .arg("--slab-dir")
        .arg(scratch.slabs())
        .arg("--sysfs-root")
        .arg(scratch.sys())
        .arg("--proc-root")
        .arg(scratch.proc_root())
        .args(["--instance-metadata", "off", "--config-file"])
        .arg(&config)
        .args(["serve", "--listen", "127.0.0.1:0"]);
    let waiting = Served::start(&mut command);
    waiting.two_more_reports();
    let response = waiting.get("/readyz");
    assert_eq!(status(&response), "503", "{response:?}");
    assert!(response.body.contains("every source"), "{response:?}");
    assert_eq!(
        status(&waiting.get("/healthz")),
        "200",
        "alive all the same"
    );
    drop(waiting);

    let served = serve(&scratch, &[]);
    let ready = served.get_until("/readyz", |r| status(r) == "200");
    assert_eq!(ready.body, "ready\n");
    // The device leaves the module's sysfs tree: not ready, alive.
    std::fs::remove_dir_all(scratch.sys().join("neuron0")).unwrap();
    let gone = served.get_until("/readyz", |r| status(r) == "503");
    assert!(gone.body.contains("0 Neuron device(s) listed"), "{gone:?}");
    assert_eq!(status(&served.get("/healthz")), "200");
    scratch.sysfs(1, 2, 0, 0);
    served.get_until("/readyz", |r| status(r) == "200");
    drop(served);

    let mut command = scratch.monitor_command("100ms");
    command.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--ready-min-devices",
        "2",
    ]);
    let wanting = Served::start(&mut command);
    wanting.two_more_reports();
    let response = wanting.get("/readyz");
    assert_eq!(status(&response), "503");
    assert!(
        response
            .body
            .contains("1 Neuron device(s) listed, at least 2 wanted"),
        "{response:?}"
    );
}

/// A stand-in exporter answering every request with `status` and `body`, for `answers`
/// connections.
fn stand_in(status: &'static str, body: String, answers: usize) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let thread = std::thread::spawn(move || {
        for stream in listener.incoming().take(answers) {
            let mut stream = stream.unwrap();
            let mut request = [0u8; 4096];
            let read = stream.read(&mut request).unwrap();
            let request = String::from_utf8_lossy(&request[..read]).into_owned();
            assert!(
                request.starts_with("GET /api/v1/devices HTTP/1.1\r\n"),
                "{request}"
            );
            write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
    });
    (url, thread)
}

fn check(url: &str) -> Output {
    std::process::Command::new(nds_monitor())
        .args(["health", "--url", url])
        .output()
        .unwrap()
}

/// The exit code and the first line of `output`.
fn verdict(output: &Output) -> (Option<i32>, String) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    (
        output.status.code(),
        stdout.lines().next().unwrap_or_default().to_owned(),
    )
}

fn devices(states: &[(&str, &str, &str)]) -> String {
    let devices: Vec<serde_json::Value> = states
        .iter()
        .enumerate()
        .map(|(index, (state, reason, action))| {
            serde_json::json!({"neuron_device_index": index, "state": state, "reason": reason,
                "action": action, "message": format!("{reason} on {index}"), "errors": {},
                "neuroncores": []})
        })
        .collect();
    let body = serde_json::json!({"timestamp": 1.0, "window": 900.0, "devices": devices});
    validate_with("devices.schema.json", std::slice::from_ref(&body));
    body.to_string()
}

#[test]
fn the_check_exits_0_1_or_2_with_the_reason_first() {
    let healthy = ("healthy", "no_errors", "monitor");
    let cases = [
        (
            devices(&[healthy, healthy]),
            Some(0),
            "2 Neuron devices healthy",
        ),
        (
            devices(&[healthy, ("unhealthy", "dma_aborts", "reset")]),
            Some(1),
            "neuron1 unhealthy: dma_aborts on 1 (action: reset)",
        ),
        (
            devices(&[("unknown", "unreadable", "monitor"), healthy]),
            Some(2),
            "neuron0 unknown: unreadable on 0 (action: monitor)",
        ),
        (devices(&[]), Some(2), "no Neuron device was judged"),
    ];
    for (body, code, first_line) in cases {
        let (url, server) = stand_in("200 OK", body, 1);
        assert_eq!(verdict(&check(&url)), (code, first_line.to_owned()));
        server.join().unwrap();
    }
    let (url, server) = stand_in("503 Service Unavailable", "starting\n".to_owned(), 1);
    let (code, line) = verdict(&check(&url));
    assert_eq!(code, Some(2));
    assert!(line.contains("answered 503: starting"), "{line}");
    server.join().unwrap();
    // Nothing listens there any more.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (code, line) = verdict(&check(&url));
    assert_eq!(code, Some(2));
    assert!(line.starts_with("cannot ask the exporter"), "{line}");
}

#[test]
fn an_exporter_that_does_not_answer_is_unknown_within_the_checks_deadline() {
    // It accepts the connection and reads the request, then keeps it open, silent, until
    // the check has gone (or a minute has passed: a check without a deadline then fails
    // instead of hanging the test).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
    });
    let output = std::process::Command::new(nds_monitor())
        .args(["health", "--url", &url, "--timeout", "300ms"])
        .output()
        .unwrap();
    let (code, line) = verdict(&output);
    assert_eq!(code, Some(2), "{line}");
    assert_eq!(
        line,
        format!("cannot ask the exporter: {url}: no answer within 300ms")
    );
    server.join().unwrap();
}

#[test]
fn the_check_reads_a_real_exporters_verdicts() {
    let scratch = Scratch::new("probes-check");
    scratch.sysfs(1, 2, 0, 0);
    let served = serve(&scratch, &[]);
    served.get_until("/readyz", |r| status(r) == "200");
    let url = format!("http://{}", served.address);
    assert_eq!(
        verdict(&check(&url)),
        (Some(0), "1 Neuron devices healthy".to_owned())
    );
    produce_mix(
        &scratch.slabs(),
        0,
        501,
        "npd",
        200,
        "SUCCESS=4,EXEC_HW_ERR_NC_UE=1",
    );
    served.two_more_reports();
    let (code, line) = verdict(&check(&url));
    assert_eq!(code, Some(1), "{line}");
    assert!(line.starts_with("neuron0 unhealthy: "), "{line}");
    assert!(
        line.ends_with("nc_uncorrectable_errors within 15m (action: reset)"),
        "{line}"
    );
    // Errors already seen keep it unhealthy; an unreadable total would otherwise be unknown.
    let total = scratch
        .sys()
        .join("neuron0/neuron_core1/stats/status/timeout/total");
    write(&total, "garbage\n");
    served.two_more_reports();
    assert_eq!(verdict(&check(&url)).0, Some(1));
    drop(served);
    // A new exporter, without the slab that erred: nothing says unhealthy, and the totals
    // cannot be read.
    std::fs::remove_file(slab_path(&scratch.slabs(), 0, 501)).unwrap();
    let fresh = serve(&scratch, &[]);
    fresh.two_more_reports();
    let (code, line) = verdict(&check(&format!("http://{}", fresh.address)));
    assert_eq!(code, Some(2), "{line}");
    assert!(line.starts_with("neuron0 unknown: "), "{line}");
}
