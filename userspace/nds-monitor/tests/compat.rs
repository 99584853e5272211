//! Drop-in for neuron-monitor: a systemd unit and a pipeline script written for neuron-monitor
//! (tests/fixtures) run against `nds-monitor` installed under neuron-monitor's name, changed
//! in nothing but where the program and its configuration live.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A directory with `neuron-monitor` being the binary under test, as an installer would put it.
fn installed(scratch: &Scratch) -> PathBuf {
    let bin = scratch.0.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(nds_monitor(), bin.join("neuron-monitor")).unwrap();
    bin
}

/// The CloudWatch add-on's monitor configuration, with a short period.
fn configuration(scratch: &Scratch) -> PathBuf {
    let path = scratch.0.join("monitor.json");
    write(
        &path,
        r#"{"period": "200ms", "neuron_runtimes": [{"tag_filter": ".*", "metrics": [
            {"type": "neuroncore_counters"}, {"type": "memory_used"},
            {"type": "execution_stats"}]}],
            "system_metrics": [{"type": "neuron_hw_counters"}]}"#,
    );
    path
}

#[test]
fn a_systemd_unit_for_neuron_monitor_runs_nds_monitor() {
    let scratch = Scratch::new("compat-unit");
    let bin = installed(&scratch);
    let config = configuration(&scratch);
    let unit = std::fs::read_to_string(fixture("neuron-monitor.service")).unwrap();
    let unit = unit
        .replace("/opt/aws/neuron/bin", bin.to_str().unwrap())
        .replace("/etc/neuron-monitor/monitor.json", config.to_str().unwrap());
    let unit_path = scratch.0.join("neuron-monitor.service");
    std::fs::write(&unit_path, &unit).unwrap();
    // systemd accepts it (the program exists, the syntax is right).
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit_path)
        .output()
        .expect("systemd-analyze");
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    // Its ExecStart, run as systemd runs it: no shell, the words as written.
    let exec_start = unit
        .lines()
        .find_map(|line| line.strip_prefix("ExecStart="))
        .unwrap();
    let words: Vec<&str> = exec_start.split_whitespace().collect();
    let mut child = Command::new(words[0])
        .args(&words[1..])
        .env("NDS_MONITOR_INSTANCE_METADATA", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..3 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let document: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert!(document["neuron_hardware_info"].is_object(), "{line}");
        // The configuration given on the unit's command line, not the default one: the one
        // system metric it names, none of the default's others.
        let system: Vec<&String> = document["system_data"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(system, ["neuron_hw_counters"], "{line}");
    }
    // systemctl stop: SIGTERM, which systemd counts as a clean exit.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(
        status.success() || status.signal() == Some(libc::SIGTERM),
        "{status}"
    );
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    // --verbose 2: leveled messages on standard error, debug ones included.
    assert!(stderr.contains("nds-monitor: debug: report:"), "{stderr}");
}

#[test]
fn a_pipeline_script_for_neuron_monitor_runs_nds_monitor() {
    let scratch = Scratch::new("compat-pipeline");
    let bin = installed(&scratch);
    let config = configuration(&scratch);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let output = Command::new("sh")
        .arg(fixture("neuron-monitor-pipeline.sh"))
        .arg(&config)
        .env("PATH", path)
        .env("NDS_MONITOR_INSTANCE_METADATA", "off")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "consumed 2\n");
    // The monitor ended quietly when its reader went away (no panic, no error).
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
}
