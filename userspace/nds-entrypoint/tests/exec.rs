//! The entrypoint binary against a stand-in monitor (a script that prints its pid, arguments
//! and capability sets): the monitor replaces the entrypoint (same pid), gets the daemonset's
//! options as `nds-monitor serve` options, and holds `CAP_PERFMON` exactly when the entrypoint
//! was permitted it.

use std::path::PathBuf;
use std::process::{Command, Output};

/// A scratch directory with the stand-in monitor in it.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("nds-entrypoint-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let monitor = dir.join("nds-monitor");
        std::fs::write(
            &monitor,
            "#!/bin/sh\necho \"pid $$\"\nfor arg in \"$@\"; do echo \"arg $arg\"; done\ngrep -E '^Cap(Prm|Eff|Amb):' /proc/self/status\n",
        )
        .unwrap();
        let mut permissions = std::fs::metadata(&monitor).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&monitor, permissions).unwrap();
        Self(dir)
    }

    fn monitor(&self) -> PathBuf {
        self.0.join("nds-monitor")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn entrypoint(args: &[&str]) -> (u32, Output) {
    let child = Command::new(env!("CARGO_BIN_EXE_nds-entrypoint"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (pid, child.wait_with_output().unwrap())
}

fn lines(output: &Output, prefix: &str) -> Vec<String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix(prefix).map(str::to_owned))
        .collect()
}

/// Bit `CAP_PERFMON` (38) of a `/proc/<pid>/status` capability mask.
fn has_perfmon(mask: &str) -> bool {
    u64::from_str_radix(mask.trim(), 16).unwrap() & (1 << 38) != 0
}

fn own_mask(name: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")).map(str::to_owned))
        .unwrap()
}

#[test]
fn the_monitor_replaces_the_entrypoint_with_the_daemonset_options() {
    let scratch = Scratch::new("daemonset");
    let monitor = scratch.monitor();
    let (pid, output) = entrypoint(&[
        "--port",
        "8000",
        "--neuron-monitor-config",
        "/opt/aws/neuron/bin/neuron-monitor.conf",
        "--cert-file",
        "/etc/certs/tls.crt",
        "--key-file",
        "/etc/certs/tls.key",
        "--otlp-endpoint",
        "http://collector:4318/v1/metrics",
        "--otlp-period",
        "30s",
        "--monitor",
        monitor.to_str().unwrap(),
        "--",
        "--slab-dir",
        "/slabs",
    ]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        lines(&output, "pid "),
        [pid.to_string()],
        "exec, not a child"
    );
    assert_eq!(
        lines(&output, "arg "),
        [
            "-c",
            "/opt/aws/neuron/bin/neuron-monitor.conf",
            "--slab-dir",
            "/slabs",
            "serve",
            "--listen",
            "[::]:8000",
            "--cert-file",
            "/etc/certs/tls.crt",
            "--key-file",
            "/etc/certs/tls.key",
            "--otlp-endpoint",
            "http://collector:4318/v1/metrics",
            "--otlp-period",
            "30s"
        ]
    );
}

#[test]
fn perfmon_reaches_the_monitor_exactly_when_the_entrypoint_holds_it() {
    let scratch = Scratch::new("perfmon");
    let monitor = scratch.monitor();
    let (_, output) = entrypoint(&["--monitor", monitor.to_str().unwrap()]);
    assert!(output.status.success(), "{output:?}");
    let permitted = has_perfmon(&own_mask("CapPrm"));
    let ambient = lines(&output, "CapAmb:");
    let effective = lines(&output, "CapEff:");
    assert_eq!(has_perfmon(&ambient[0]), permitted, "{output:?}");
    assert_eq!(has_perfmon(&effective[0]), permitted, "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.contains("CAP_PERFMON is not permitted"),
        !permitted,
        "{stderr}"
    );
}

#[test]
fn a_certificate_without_its_key_is_refused_before_anything_starts() {
    let scratch = Scratch::new("half-tls");
    let monitor = scratch.monitor();
    let (_, output) = entrypoint(&[
        "--cert-file",
        "/etc/certs/tls.crt",
        "--monitor",
        monitor.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(lines(&output, "pid ").is_empty(), "the monitor ran");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--key-file"));
}

#[test]
fn a_push_period_without_a_collector_is_refused_before_anything_starts() {
    let scratch = Scratch::new("half-otlp");
    let monitor = scratch.monitor();
    let (_, output) = entrypoint(&[
        "--otlp-period",
        "30s",
        "--monitor",
        monitor.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(lines(&output, "pid ").is_empty(), "the monitor ran");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--otlp-endpoint"));
}

#[test]
fn a_monitor_that_cannot_start_fails_the_entrypoint_with_its_path() {
    let (_, output) = entrypoint(&["--monitor", "/nonexistent/nds-monitor"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("entrypoint.sh: starting /nonexistent/nds-monitor: "),
        "{stderr}"
    );
}

/// The pids of `parent`'s children.
fn children(parent: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|pid| pid.parse().unwrap())
        .collect()
}

#[test]
fn as_process_one_it_stays_init_and_passes_sigterm_on() {
    let scratch = Scratch::new("init");
    let monitor = scratch.0.join("sleeping-monitor");
    std::fs::write(&monitor, "#!/bin/sh\necho \"pid $$\"\nexec sleep 60\n").unwrap();
    let mut permissions = std::fs::metadata(&monitor).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&monitor, permissions).unwrap();
    // A pid namespace of its own (a user namespace too, so that no privilege is needed), in
    // which the entrypoint is process 1, as in a container.
    let mut unshare = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--pid",
            "--fork",
            "--kill-child",
        ])
        .arg(env!("CARGO_BIN_EXE_nds-entrypoint"))
        .arg("--monitor")
        .arg(&monitor)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(unshare.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    // The monitor is the entrypoint's child: process 2, not 1.
    assert_eq!(line.trim(), "pid 2");
    let entrypoint = children(unshare.id());
    assert_eq!(entrypoint.len(), 1, "{entrypoint:?}");
    let started = std::time::Instant::now();
    // SAFETY: kill reads no memory of ours. The pid cannot name another process: it is
    // unshare's child, which unshare has not reaped yet (it is waiting for it).
    let signalled = unsafe { libc::kill(entrypoint[0] as i32, libc::SIGTERM) };
    assert_eq!(signalled, 0);
    let status = unshare.wait().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // unshare ends as its child did: 128 + SIGTERM, the monitor's end.
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
}
