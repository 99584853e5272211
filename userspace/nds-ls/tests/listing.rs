//! The listing over slab files and a scratch sysfs tree: exactly the slot tables' owners, with
//! what their slabs and `/proc` say, in neuron-ls's JSON shape and in the table; owners whose
//! slab cannot be read are listed with the reason, and nothing from a slab reaches the
//! terminal unescaped.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::{
    assert_neuron_ls_shape, processes_of, write, Holder, Host, FRAMEWORK_TYPE, FRAMEWORK_VERSION,
    RUNTIME_VERSION,
};
use nds::{Backend, Producer};
use nds_ls::{list, render_json, render_table};
use nds_slabs::SlabSource;
use serde_json::Value;

fn json_of(host: &Host) -> Value {
    let text = render_json(&list(&host.source()).unwrap()).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn pids(processes: &[Value]) -> BTreeSet<i64> {
    processes
        .iter()
        .map(|process| process["pid"].as_i64().unwrap())
        .collect()
}

/// Whether `text` holds a character a terminal would act on (a line break aside).
fn has_raw_control(text: &str) -> bool {
    text.chars()
        .any(|c| c != '\n' && nds_terminal::is_unsafe(c))
}

#[test]
fn a_two_device_load_lists_exactly_the_slab_holders_with_their_fields() {
    let host = Host::new("load");
    let serving = Holder::start("serving-runtime");
    let batch = Holder::start("batch-runtime");
    let both = Holder::start("two-device-runtime");
    host.produce(0, serving.pid(), "serving-a", 40);
    host.produce(0, batch.pid(), "batch-b", 60);
    host.produce(0, both.pid(), "wide-c", 20);
    host.produce(1, both.pid(), "wide-c", 20);
    // A slab file nobody holds any more (its pid is in no slot table) is not listed.
    host.produce(1, 999_999, "stale", 5);
    host.device(
        0,
        2,
        &[
            (0, serving.pid(), 1),
            (3, batch.pid(), 7),
            (5, both.pid(), 3),
        ],
    );
    host.device(1, 2, &[(2, both.pid(), 9)]);

    let json = json_of(&host);
    assert_neuron_ls_shape(&json);
    let devices = json.as_array().unwrap();
    assert_eq!(devices.len(), 2);
    for (device, ids) in devices.iter().zip([[0, 1], [2, 3]]) {
        assert_eq!(device["nc_count"], 2);
        assert_eq!(device["neuroncore_ids"], serde_json::json!(ids));
        assert_eq!(device["error"], "");
        // What only the hardware knows, typed as neuron-ls types it.
        assert_eq!(device["bdf"], "");
        assert_eq!(device["cpu_affinity"], "");
        assert_eq!(device["numa_node"], "-1");
        assert_eq!(device["connected_to"], Value::Null);
        assert_eq!(device["memory_size"], 0);
        assert_eq!(device["logical_neuroncore_config"], 0);
    }
    let on_0 = processes_of(&json, 0);
    let on_1 = processes_of(&json, 1);
    assert_eq!(
        pids(&on_0),
        BTreeSet::from([serving.pid(), batch.pid(), both.pid()].map(i64::from))
    );
    assert_eq!(pids(&on_1), BTreeSet::from([i64::from(both.pid())]));
    // By pid.
    let order: Vec<i64> = on_0.iter().map(|p| p["pid"].as_i64().unwrap()).collect();
    assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{order:?}");

    let expected = [
        (&on_0, &serving, "serving-runtime", "serving-a", 0, 1),
        (&on_0, &batch, "batch-runtime", "batch-b", 3, 7),
        (&on_0, &both, "two-device-runtime", "wide-c", 5, 3),
        (&on_1, &both, "two-device-runtime", "wide-c", 2, 9),
    ];
    for (processes, holder, name, tag, slot, generation) in expected {
        let process = processes.iter().find(|p| p["pid"] == holder.pid()).unwrap();
        assert_eq!(process["command"], holder.command(name), "{process}");
        assert_eq!(process["neuron_runtime_version"], RUNTIME_VERSION);
        assert_eq!(process["framework_version"], FRAMEWORK_VERSION);
        assert_eq!(process["framework_type"], FRAMEWORK_TYPE);
        assert_eq!(process["neuron_runtime_tag"], tag);
        assert_eq!(process["slot"], slot);
        assert_eq!(process["generation"], generation);
        assert_eq!(process["error"], "", "{process}");
    }
}

#[test]
fn the_table_shows_each_device_once_and_a_row_per_process() {
    let host = Host::new("table");
    let first = Holder::start("runtime-one");
    let second = Holder::start("runtime-two");
    host.produce(0, first.pid(), "tag-one", 10);
    host.produce(0, second.pid(), "tag-two", 10);
    host.device(0, 2, &[(1, first.pid(), 1), (4, second.pid(), 5)]);
    // A device without processes still gets its row.
    host.device(1, 2, &[]);
    let table = render_table(&list(&host.source()).unwrap(), false);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 9, "{table}");
    let width = lines[0].chars().count();
    assert!(
        lines.iter().all(|line| line.chars().count() == width),
        "{table}"
    );
    assert!(lines[0].starts_with("+--------+") && lines[0].ends_with('+'));
    for title in [
        "NEURON",
        "PID",
        "COMMAND",
        "RUNTIME",
        "FRAMEWORK",
        "TAG",
        "SLOT",
        "GENERATION",
    ] {
        assert!(lines[1].contains(title), "{title} in {}", lines[1]);
    }
    assert!(lines[2].contains("DEVICE") && lines[2].contains("CORE IDS"));
    let cells = |line: &str| -> Vec<String> {
        line.trim_matches('|')
            .split('|')
            .map(|cell| cell.trim().to_owned())
            .collect()
    };
    let (low, high) = if first.pid() < second.pid() {
        (&first, &second)
    } else {
        (&second, &first)
    };
    let row = cells(lines[4]);
    assert_eq!(&row[..4], ["0", "2", "0-1", &low.pid().to_string()]);
    assert_eq!(&row[5..7], [RUNTIME_VERSION, FRAMEWORK_VERSION]);
    let row = cells(lines[5]);
    assert_eq!(&row[..4], ["", "", "", &high.pid().to_string()]);
    assert_eq!(lines[6], lines[0], "a rule after each device");
    let row = cells(lines[7]);
    assert_eq!(&row[..4], ["1", "2", "2-3", ""]);
    assert_eq!(lines[8], lines[0]);
    // Long commands are cut, whole ones printed with `wide`.
    let long_name = "a-runtime-whose-command-line-goes-on-and-on-and-on";
    let long = Holder::start(long_name);
    host.produce(1, long.pid(), "long", 5);
    host.device(1, 2, &[(0, long.pid(), 1)]);
    let devices = list(&host.source()).unwrap();
    let narrow = render_table(&devices, false);
    assert!(
        narrow.contains("a-runtime-whose-command-line-goes-on-..."),
        "{narrow}"
    );
    assert!(!narrow.contains(long_name));
    assert!(render_table(&devices, true).contains(&long.command(long_name)));
}

#[test]
fn owners_whose_slab_cannot_be_read_are_listed_with_the_reason() {
    let host = Host::new("unreadable");
    let missing = Holder::start("no-slab-file");
    let corrupt = Holder::start("corrupt-slab");
    let short = Holder::start("short-slab");
    let fresh = Holder::start("no-records-yet");
    std::fs::write(host.slab(0, corrupt.pid()), vec![0x5a; 256 * 1024]).unwrap();
    std::fs::write(host.slab(0, short.pid()), vec![0; 4096]).unwrap();
    // A slab opened but nothing published yet: a header, no process records.
    drop(Producer::open(&Backend::file(host.slab(0, fresh.pid()))).unwrap());
    host.device(
        0,
        2,
        &[
            (0, missing.pid(), 1),
            (1, corrupt.pid(), 1),
            (2, short.pid(), 1),
            (3, fresh.pid(), 1),
        ],
    );
    let json = json_of(&host);
    assert_neuron_ls_shape(&json);
    let processes = processes_of(&json, 0);
    assert_eq!(processes.len(), 4);
    let entry = |holder: &Holder| {
        processes
            .iter()
            .find(|p| p["pid"] == holder.pid())
            .unwrap()
            .clone()
    };
    for (holder, name, reason) in [
        (&missing, "no-slab-file", "slab gone: "),
        (&missing, "no-slab-file", "No such file"),
        (&corrupt, "corrupt-slab", "slab header"),
        (&short, "short-slab", "smaller than"),
        (&fresh, "no-records-yet", "no process-info record"),
    ] {
        let process = entry(holder);
        let error = process["error"].as_str().unwrap();
        assert!(error.contains(reason), "{reason:?} in {error:?}");
        assert_eq!(process["command"], holder.command(name));
        assert_eq!(process["neuron_runtime_version"], "");
        assert_eq!(process["framework_version"], "");
        assert_eq!(process["neuron_runtime_tag"], holder.pid().to_string());
    }
    // The table says NA and lists every reason after it.
    let table = render_table(&list(&host.source()).unwrap(), false);
    assert!(table.contains(" NA "), "{table}");
    for holder in [&missing, &corrupt, &short, &fresh] {
        assert!(
            table.contains(&format!("device 0 pid {} (slot", holder.pid())),
            "{table}"
        );
    }
}

#[test]
fn slabs_through_device_nodes_that_cannot_be_acquired_are_errors() {
    let host = Host::new("nodes");
    let holder = Holder::start("kernel-runtime");
    host.device(0, 2, &[(0, holder.pid(), 1)]);
    host.device(1, 2, &[(0, holder.pid(), 1)]);
    let nodes = host.0.join("dev");
    // Device 0 has a node that is no Neuron device, device 1 none at all.
    write(&nodes.join("neuron0"), "not a device\n");
    let mut source = host.source();
    source.slabs = SlabSource::Kernel { dev_dir: nodes };
    let devices = list(&source).unwrap();
    let error = |device: usize| devices[device].neuron_processes[0].error.clone();
    assert!(
        error(0).starts_with("slab unreadable: ACQUIRE: "),
        "{}",
        error(0)
    );
    assert!(error(1).starts_with("slab gone: opening "), "{}", error(1));
    assert_eq!(
        devices[0].neuron_processes[0].command,
        holder.command("kernel-runtime")
    );
}

#[test]
fn control_characters_in_tags_and_commands_never_reach_the_terminal() {
    let host = Host::new("escape");
    let tag = "evil\x1b[2J\x07\u{9b}31m\u{202e}gat";
    let name = "runtime\x1b]0;title\x07";
    let holder = Holder::start(name);
    host.produce(0, holder.pid(), tag, 10);
    host.device(0, 2, &[(0, holder.pid(), 1)]);
    let devices = list(&host.source()).unwrap();
    assert_eq!(devices[0].neuron_processes[0].neuron_runtime_tag, tag);

    let json = render_json(&devices).unwrap();
    assert!(!has_raw_control(&json), "{json:?}");
    let parsed: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(parsed[0]["neuron_processes"][0]["neuron_runtime_tag"], tag);
    assert_eq!(
        parsed[0]["neuron_processes"][0]["command"],
        holder.command(name)
    );

    for wide in [false, true] {
        let table = render_table(&devices, wide);
        assert!(!has_raw_control(&table), "{table:?}");
        assert!(
            table.contains("evil\\x1b[2J\\x07\\x9b31m\\u{202e}gat"),
            "{table}"
        );
        assert!(table.contains("runtime\\x1b]0;title\\x07 600"), "{table}");
    }
}

#[test]
fn a_device_whose_files_are_malformed_is_listed_with_an_error() {
    let host = Host::new("malformed");
    host.device(0, 2, &[]);
    host.device(1, 2, &[]);
    host.device(2, 2, &[]);
    write(
        &host.sys().join("neuron0/datastore/slots"),
        "slot pid\n1 2\n",
    );
    write(&host.sys().join("neuron1/core_count"), "two\n");
    std::fs::remove_file(host.sys().join("neuron2/core_count")).unwrap();
    let devices = list(&host.source()).unwrap();
    assert_eq!(devices.len(), 3);
    assert!(
        devices[0].error.contains("slot table header"),
        "{}",
        devices[0].error
    );
    assert!(devices[0].neuron_processes.is_empty());
    // Without a readable core_count, the core directories are counted.
    assert!(
        devices[1].error.contains("core_count"),
        "{}",
        devices[1].error
    );
    assert_eq!(devices[1].nc_count, 2);
    assert_eq!((devices[2].nc_count, devices[2].error.as_str()), (2, ""));
    assert_eq!(devices[2].neuroncore_ids, [4, 5]);
    let table = render_table(&devices, false);
    assert!(table.contains("device 0: "), "{table}");
    assert!(table.contains("device 1: "), "{table}");
}

#[test]
fn an_unlistable_sysfs_root_is_an_error_and_a_missing_one_lists_nothing() {
    let host = Host::new("roots");
    let mut source = host.source();
    source.sysfs = nds_sysfs::SysfsRoot::new(host.0.join("absent"));
    assert!(list(&source).unwrap().is_empty());
    assert_eq!(render_json(&[]).unwrap(), "[]\n");
    let file: PathBuf = host.0.join("a-file");
    write(&file, "");
    source.sysfs = nds_sysfs::SysfsRoot::new(&file);
    let error = list(&source).unwrap_err();
    assert!(error.to_string().contains("a-file"), "{error}");
}
