//! The `nds-top` binary on bad input and without a terminal, and in a real terminal (tmux):
//! Ctrl-C quits. tests/run.sh runs these against the release binary as shipped too
//! (`NDS_TOOLS_BIN_DIR`).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn nds_top() -> PathBuf {
    match std::env::var_os("NDS_TOOLS_BIN_DIR") {
        Some(dir) => PathBuf::from(dir).join("nds-top"),
        None => PathBuf::from(env!("CARGO_BIN_EXE_nds-top")),
    }
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("nds-top-in-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn top(&self) -> Command {
        let mut command = Command::new(nds_top());
        command
            .arg("--slab-dir")
            .arg(&self.0)
            .arg("--sysfs-root")
            .arg(self.0.join("sys"))
            .arg("--module-dir")
            .arg(self.0.join("module"))
            .args(["--instance-metadata", "off"]);
        command
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn periods_out_of_range_are_refused_with_a_message() {
    let scratch = Scratch::new("period");
    for period in ["400000000000y", "0s", "2days"] {
        let output = scratch
            .top()
            .args(["--once", "--period", period])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{period}: {stderr}");
        assert!(
            stderr.contains("--period") && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
}

#[test]
fn without_a_terminal_it_says_so_and_once_still_works() {
    let scratch = Scratch::new("no-tty");
    let output = scratch.top().stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("needs a terminal") && stderr.contains("--once"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let output = scratch
        .top()
        .args(["--once", "--period", "50ms"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("nds-top"));
}

/// Runs `tmux` with `args`, its output.
fn tmux(args: &[&str]) -> String {
    let output = Command::new("tmux")
        .args(args)
        .output()
        .expect("tmux (qemu/deps.sh installs it)");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn ctrl_c_quits_in_a_real_terminal() {
    let scratch = Scratch::new("tmux");
    let session = format!("nds-top-ctrl-c-{}", std::process::id());
    let done = scratch.0.join("exit-status");
    let command = format!(
        "{} --slab-dir {} --sysfs-root {} --module-dir {} --instance-metadata off \
         --period 100ms; echo $? > {}",
        nds_top().display(),
        scratch.0.display(),
        scratch.0.join("sys").display(),
        scratch.0.join("module").display(),
        done.display()
    );
    let socket = scratch.0.join("tmux.sock");
    let socket = socket.to_str().unwrap();
    tmux(&[
        "-S",
        socket,
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "100",
        "-y",
        "30",
        &command,
    ]);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !tmux(&["-S", socket, "capture-pane", "-p", "-t", &session]).contains("NeuronCore") {
        assert!(Instant::now() < deadline, "nds-top never drew its screen");
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux(&["-S", socket, "send-keys", "-t", &session, "C-c"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        // The shell's redirect creates the file before it writes the status into it.
        match std::fs::read_to_string(&done) {
            Ok(status) if status.ends_with('\n') => break status,
            _ => {}
        }
        assert!(Instant::now() < deadline, "Ctrl-C did not end nds-top");
        std::thread::sleep(Duration::from_millis(50));
    };
    tmux(&["-S", socket, "kill-server"]);
    assert_eq!(status.trim(), "0", "a clean exit after Ctrl-C");
}
