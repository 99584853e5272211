//! The nds-ls program: its options, its two output formats and its exit status.

mod common;

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Output, Stdio};

use common::{assert_neuron_ls_shape, write, Holder, Host, RUNTIME_VERSION};
use serde_json::Value;

/// nds-ls over the slab files and sysfs tree of `host`.
fn command(host: &Host, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nds-ls"));
    command
        .arg("--sysfs-root")
        .arg(host.sys())
        .arg("--slab-dir")
        .arg(host.slabs())
        .args(args);
    command
}

fn nds_ls(host: &Host, args: &[&str]) -> Output {
    command(host, args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn json_by_either_spelling_and_a_table_by_default() {
    let host = Host::new("cli-formats");
    let holder = Holder::start("cli-runtime");
    host.produce(0, holder.pid(), "cli-tag", 10);
    host.device(0, 2, &[(6, holder.pid(), 11)]);
    let json = stdout(&nds_ls(&host, &["--output-format", "json"]));
    for older in ["-j", "--json-output"] {
        assert_eq!(stdout(&nds_ls(&host, &[older])), json);
    }
    let parsed: Value = serde_json::from_str(&json).unwrap();
    assert_neuron_ls_shape(&parsed);
    let process = &parsed[0]["neuron_processes"][0];
    assert_eq!(process["pid"], holder.pid());
    assert_eq!(process["command"], holder.command("cli-runtime"));
    assert_eq!(process["neuron_runtime_version"], RUNTIME_VERSION);
    assert_eq!(
        (process["slot"].clone(), process["generation"].clone()),
        (6.into(), 11.into())
    );

    let table = stdout(&nds_ls(&host, &[]));
    assert_eq!(table, stdout(&nds_ls(&host, &["--output-format", "table"])));
    assert!(table.starts_with("+--------+"), "{table}");
    assert!(table.contains(" cli-tag "), "{table}");
    assert!(table.contains(&holder.command("cli-runtime")), "{table}");
}

#[test]
fn the_two_spellings_cannot_disagree() {
    let host = Host::new("cli-conflict");
    let output = nds_ls(&host, &["-j", "--output-format", "table"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot be used with"));
}

#[test]
fn commands_come_from_the_proc_root() {
    let host = Host::new("cli-proc");
    host.produce(0, 4321, "proc-tag", 5);
    host.produce(0, 4322, "named-tag", 5);
    host.device(0, 2, &[(0, 4321, 1), (1, 4322, 1)]);
    let proc_root = host.0.join("proc");
    write(&proc_root.join("4321/cmdline"), "python3\0serve.py\0");
    write(&proc_root.join("4322/cmdline"), "");
    write(&proc_root.join("4322/comm"), "zombie-runtime\n");
    let root = proc_root.to_str().unwrap();
    let json: Value =
        serde_json::from_str(&stdout(&nds_ls(&host, &["-j", "--proc-root", root]))).unwrap();
    let processes = json[0]["neuron_processes"].as_array().unwrap();
    assert_eq!(processes[0]["command"], "python3 serve.py");
    assert_eq!(processes[1]["command"], "zombie-runtime");
}

#[test]
fn no_device_is_an_empty_list_and_an_unreadable_root_a_failure() {
    let host = Host::new("cli-empty");
    let output = nds_ls(&host, &["-j"]);
    assert_eq!(stdout(&output), "[]\n");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("no Neuron device"), "{said}");

    let not_a_directory = host.0.join("file");
    write(&not_a_directory, "");
    let output = Command::new(env!("CARGO_BIN_EXE_nds-ls"))
        .arg("--sysfs-root")
        .arg(&not_a_directory)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("nds-ls: listing the devices: "));
    assert!(output.stdout.is_empty());
}

#[test]
fn device_nodes_are_looked_for_in_the_dev_dir() {
    let host = Host::new("cli-dev");
    let holder = Holder::start("dev-runtime");
    host.device(0, 2, &[(0, holder.pid(), 1)]);
    let output = Command::new(env!("CARGO_BIN_EXE_nds-ls"))
        .arg("--sysfs-root")
        .arg(host.sys())
        .arg("--dev-dir")
        .arg(host.0.join("no-dev"))
        .arg("-j")
        .output()
        .unwrap();
    let json: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let error = json[0]["neuron_processes"][0]["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.contains(&format!("{}/neuron0", host.0.join("no-dev").display())),
        "{error}"
    );
}

#[test]
fn a_reader_gone_early_is_no_failure_and_a_full_disk_is_one() {
    let host = Host::new("cli-output");
    host.produce(0, 77, "tag", 5);
    host.device(0, 2, &[(0, 77, 1)]);
    let run = |stdout: Stdio| command(&host, &[]).stdout(stdout).output().unwrap();
    // `nds-ls | head` whose head has exited: the write fails with EPIPE.
    let (ours, theirs) = UnixStream::pair().unwrap();
    drop(theirs);
    let output = run(Stdio::from(OwnedFd::from(ours)));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.stderr.is_empty());

    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let output = run(Stdio::from(full));
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("nds-ls: writing the output: "));
}
