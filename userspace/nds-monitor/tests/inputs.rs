//! Bad and hostile input to the `nds-monitor` binary: each gives a clear error or is handled,
//! and loses nothing else. tests/run.sh runs these against the release binaries as shipped
//! too (`NDS_TOOLS_BIN_DIR`), whose dependencies are built without the test-only features.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use common::*;

fn monitor(scratch: &Scratch) -> Command {
    let mut command = Command::new(nds_monitor());
    command
        .arg("--slab-dir")
        .arg(scratch.slabs())
        .arg("--sysfs-root")
        .arg(scratch.sys())
        .arg("--module-dir")
        .arg(scratch.0.join("module"))
        .arg("--proc-root")
        .arg(scratch.proc_root())
        .args(["--instance-metadata", "off"]);
    command
}

#[test]
fn a_slab_file_truncated_under_serve_ends_that_slab_only() {
    let scratch = Scratch::new("inputs-truncate");
    produce(&scratch.slabs(), 0, 8001, "victim", 100);
    produce(&scratch.slabs(), 0, 8002, "bystander", 100);
    let served = Served::start(monitor(&scratch).args([
        "--period",
        "100ms",
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]));
    served.scrape_until(|body| body.contains("runtime_tag=\"victim\""));
    // Someone who may write the file truncates it while the monitor reads it.
    std::fs::OpenOptions::new()
        .write(true)
        .open(slab_path(&scratch.slabs(), 0, 8001))
        .unwrap()
        .set_len(0)
        .unwrap();
    let body = served.scrape_until(|body| {
        body.contains("nds_monitor_slabs_ended_total{")
            && !body
                .lines()
                .any(|line| line.starts_with("nds_runtime_info{") && line.contains("victim"))
    });
    assert!(body
        .lines()
        .any(|line| line.starts_with("nds_runtime_info{") && line.contains("bystander")));
    let ended: f64 = body
        .lines()
        .filter(|line| line.starts_with("nds_monitor_slabs_ended_total{"))
        .filter(|line| {
            line.contains("reason=\"truncated\"") || line.contains("reason=\"released\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(ended, 1.0, "{body}");
    // The victim's counts stay in its tag's total.
    assert!(body
        .lines()
        .any(|line| line.starts_with("execution_status_total{") && line.contains("victim")));
    assert!(served.get("/healthz").status.contains(" 200 "));
    assert!(served.stop_with(libc::SIGTERM).success());
}

#[test]
fn periods_out_of_range_are_refused_with_a_message() {
    let scratch = Scratch::new("inputs-period");
    for period in ["400000000000y", "0s", "25h", "10us", "soon"] {
        let output = monitor(&scratch)
            .args(["--period", period, "--count", "1"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{period}: {stderr}");
        assert!(
            stderr.contains("--period") && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
    let config = scratch.0.join("long.json");
    write(&config, r#"{"period": "400000000000y"}"#);
    let output = monitor(&scratch)
        .arg("--config-file")
        .arg(&config)
        .args(["--count", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("400000000000y") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

#[test]
fn tag_filters_have_every_regex_feature() {
    let scratch = Scratch::new("inputs-regex");
    produce(&scratch.slabs(), 0, 8101, "Other-ünïcode", 20);
    produce(&scratch.slabs(), 0, 8102, "kept-out", 20);
    for filter in ["(?i)OTHER", r"^\p{Lu}\w+-\p{L}+$", "(?i)ÜNÏ"] {
        let output = monitor(&scratch)
            .args(["--period", "100ms", "--count", "1", "--tag-filter", filter])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{filter}: {stderr}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let document: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        let tags: Vec<&str> = document["neuron_runtime_data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| entry["neuron_runtime_tag"].as_str().unwrap())
            .collect();
        assert_eq!(tags, ["Other-ünïcode"], "{filter}");
    }
}

#[test]
fn a_closed_pipe_ends_the_stream_as_unix_tools_do() {
    let scratch = Scratch::new("inputs-pipe");
    produce(&scratch.slabs(), 0, 8201, "piped", 20);
    let mut child = monitor(&scratch)
        .args(["--period", "50ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.starts_with('{'), "{line}");
    drop(stdout); // `| head -n 1`
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status}: {stderr}");
    assert_eq!(stderr, "", "nothing said about it");
}

#[test]
fn neuron_monitors_options_and_leveled_messages() {
    let scratch = Scratch::new("inputs-options");
    produce(&scratch.slabs(), 0, 8301, "opts", 20);
    let config = scratch.0.join("monitor.json");
    write(
        &config,
        r#"{"period": "100ms", "neuron_runtimes": [{"tag_filter": ".*", "metrics": [
            {"type": "neuroncore_counters"}, {"type": "execution_stats"}]}]}"#,
    );
    let config = config.to_str().unwrap().to_owned();
    let documents = |args: &[&str]| {
        let output = monitor(&scratch)
            .args(args)
            .args(["--count", "2"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{args:?}: {stderr}");
        let stdout = String::from_utf8(output.stdout).unwrap();
        (stdout.lines().count(), stderr)
    };
    let equals = format!("--config-file={config}");
    for args in [
        vec!["-c", &config],
        vec!["--config-file", &config],
        vec![&equals],
        vec!["--config", &config],
    ] {
        let (count, stderr) = documents(&args);
        assert_eq!(count, 2, "{args:?}");
        assert_eq!(stderr, "", "--verbose 0 says nothing when all is well");
    }
    let (_, info) = documents(&["-c", &config, "--verbose", "1"]);
    assert!(
        info.contains("nds-monitor: info: attached pid 8301"),
        "{info}"
    );
    assert!(!info.contains("debug:"), "{info}");
    let (_, debug) = documents(&["-c", &config, "--verbose=2"]);
    assert!(debug.contains("nds-monitor: debug: report:"), "{debug}");
    let (_, trace) = documents(&["-c", &config, "--verbose", "4"]);
    assert!(trace.contains("debug: report:"), "{trace}");
    for bad in ["5", "-1", "loud"] {
        let output = monitor(&scratch)
            .args(["--verbose", bad, "--count", "1"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "--verbose {bad}");
    }
}

#[test]
fn control_characters_of_a_tag_never_reach_the_terminal() {
    let scratch = Scratch::new("inputs-escape");
    produce(&scratch.slabs(), 0, 8401, "evil\x1b]0;owned\x07\x1b[2J", 20);
    let output = monitor(&scratch)
        .args(["--period", "100ms", "--count", "1", "--verbose", "3"])
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(
        !output.stderr.iter().any(|&b| b == 0x1b || b == 0x07),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("evil\\x1b]0;owned\\x07"));
    // The JSON escapes them as JSON does.
    assert!(!output.stdout.contains(&0x1b));
}
