//! The module's parameters, each under both settings, and the original sysfs location. Tests
//! that reload the module put it back with the harness's parameters before they end.

use nds_abi::{
    metrics::MetricPost,
    sysfs::{SysfsCounter, SYSFS_COUNTERS},
};
use neuron_ds_guest_tests::{
    module_control::{harness_params, reload_with, run, Restore},
    posts::{posts_through_a_period_end, posts_until},
    *,
};
use std::{fs, process::Command};

/// The CloudWatch id of NeuronCore utilization.
const UTILIZATION: u8 = 90;
/// The CloudWatch id of the successes' metric (`NERR_OK`).
const SUCCESSES: u8 = 200;

/// The successes among `posts`.
fn successes_in(posts: &[MetricPost]) -> u64 {
    posts
        .iter()
        .filter(|post| post.cw_id == SUCCESSES)
        .map(|post| -> u64 {
            std::str::from_utf8(post.value_bytes())
                .unwrap()
                .parse()
                .unwrap()
        })
        .sum()
}

/// A value of the module's parameter as userspace sees it.
fn parameter(name: &str) -> String {
    fs::read_to_string(format!("/sys/module/neuron_ds/parameters/{name}"))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn a_readers_writable_request_is_mapped_read_only_by_default_and_refused_when_strict() {
    let producer = Producer::start(DEVICE, &[(0, 1, 5)]).unwrap();
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, producer.pid).unwrap();
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let view = Mapping::new(&file, SLAB_SIZE, rw, info.mmap_offset).unwrap();
    assert_eq!(view.permissions(), "r--s", "granted, but read-only");
    assert_eq!(view.read_u64(nc_offset(0, 1)), 5);
    assert_eq!(errno(view.protect(rw)), libc::EACCES);
    // Writing through it faults (in a child, which maps it itself: mappings are not inherited).
    let status = in_child(
        || match Mapping::new(&file, SLAB_SIZE, rw, info.mmap_offset) {
            Ok(child_view) => {
                child_view.write_u64(nc_offset(0, 1), 666);
                4
            }
            Err(_) => 3,
        },
    );
    assert!(libc::WIFSIGNALED(status), "status {status:#x}");
    assert_eq!(libc::WTERMSIG(status), libc::SIGSEGV);
    assert_eq!(view.read_u64(nc_offset(0, 1)), 5);
    drop((view, file));
    producer.exit();

    let _restore = Restore;
    reload_with(&["strict_reader_mappings=1"]);
    let producer = Producer::start(DEVICE, &[]).unwrap();
    let file = open_device(DEVICE).unwrap();
    let info = acquire(&file, producer.pid).unwrap();
    assert_eq!(
        errno(Mapping::new(&file, SLAB_SIZE, rw, info.mmap_offset)),
        libc::EPERM
    );
    let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset).unwrap();
    assert_eq!(view.permissions(), "r--s");
    drop((view, file));
    producer.exit();
}

/// The utilization posts (cw 90) of `stream`'s device made so far, oldest first.
fn utilization_posts(stream: &mut fs::File) -> Vec<u64> {
    utilization_values(&read_available_posts(stream))
}

/// The first utilization posted on `stream`'s device from now on: that of the first period to
/// see a change of busy time.
fn first_utilization(stream: &mut fs::File) -> u64 {
    let posts = posts_until(stream, "a utilization post", |posts| {
        posts.iter().any(|post| post.cw_id == UTILIZATION)
    });
    utilization_values(&posts)[0]
}

/// The values of the utilization posts among `posts`, oldest first.
fn utilization_values(posts: &[MetricPost]) -> Vec<u64> {
    posts
        .iter()
        .filter(|post| post.cw_id == UTILIZATION)
        .map(|post| {
            std::str::from_utf8(post.value_bytes())
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

/// Drains the posts made so far.
fn drain(stream: &mut fs::File) {
    read_available_posts(stream);
}

#[test]
fn time_in_use_is_read_in_the_unit_the_parameter_names() {
    // One second of busy time, in microseconds, as the sysfs guide describes the counter.
    let busy = [(0, 0, 1_000_000)];
    assert_eq!(parameter("time_in_use_unit_ps"), "1");
    let mut stream = open_posts(DEVICE).unwrap();
    drain(&mut stream);
    let producer = Producer::start(DEVICE, &busy).unwrap();
    let as_picoseconds = first_utilization(&mut stream);
    producer.exit();
    drop(stream);
    // Read as picoseconds, a microsecond count is a millionth of the truth: 0 %.
    assert_eq!(as_picoseconds, 0);

    let _restore = Restore;
    reload_with(&["time_in_use_unit_ps=1000000"]);
    assert_eq!(parameter("time_in_use_unit_ps"), "1000000");
    let mut stream = open_posts(DEVICE).unwrap();
    let producer = Producer::start(DEVICE, &busy).unwrap();
    let value = first_utilization(&mut stream);
    producer.exit();
    // One second busy on one of two cores: 1 % or more of any period shorter than 50 s (over
    // 100 % of the harness's short one, whatever a slow guest stretches it to).
    assert!(value >= 1, "utilization {value} %");
}

/// Device 0's utilization under a steady load from the load generator, in the module's
/// current unit: as the monitor reports it over two seconds (its cores' utilization summed
/// over the processes, over the device's cores), and the module's cw 90 posts meanwhile.
fn monitor_and_module_utilization(tag_prefix: &str) -> (f64, Vec<u64>) {
    let mut stream = open_posts(DEVICE).unwrap();
    // Two producers at 200 executions/s of about 1 ms of device time on two cores: 20 %. Far
    // longer than the test needs on any guest: it is stopped once the monitor has read it.
    let mut load = Command::new(helper_path("nds-loadgen"))
        .args([
            "run",
            "--devices",
            "0",
            "--procs-per-device",
            "2",
            "--cores",
            "2",
        ])
        .args([
            "--duration",
            "600s",
            "--rate",
            "200",
            "--tag-prefix",
            tag_prefix,
        ])
        .args(["--summary", "/dev/null"])
        .spawn()
        .unwrap();
    // The load is on once the module posts its busy time.
    posts_until(&mut stream, "a utilization post under the load", |posts| {
        !utilization_values(posts).is_empty()
    });
    let output = Command::new(helper_path("nds-monitor"))
        .args([
            "--period",
            "2s",
            "--count",
            "1",
            "--instance-metadata",
            "off",
        ])
        .output()
        .unwrap();
    let mut posts = utilization_posts(&mut stream);
    if posts.is_empty() {
        // The monitor's two seconds ended before the module's period: the next post covers it.
        posts = utilization_values(&posts_until(&mut stream, "a utilization post", |posts| {
            !utilization_values(posts).is_empty()
        }));
    }
    // Killed, the load generator's producers get SIGTERM (their parent-death signal), exit,
    // and their slabs are released.
    load.kill().unwrap();
    load.wait().unwrap();
    eventually("the load's producers are gone", || {
        slots().iter().all(|slot| slot.pid == 0)
    });
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut busy = 0.0;
    let mut processes = 0;
    for entry in document["neuron_runtime_data"].as_array().unwrap() {
        let tag = entry["neuron_runtime_tag"].as_str().unwrap();
        if entry["neuron_device_index"] != 0 || !tag.starts_with(tag_prefix) {
            continue;
        }
        processes += 1;
        let counters = &entry["report"]["neuroncore_counters"];
        assert_eq!(counters["error"], "", "{entry}");
        for usage in counters["neuroncores_in_use"].as_object().unwrap().values() {
            busy += usage["neuroncore_utilization"].as_f64().unwrap();
        }
    }
    assert_eq!(processes, 2, "{document}");
    (busy / sysfs_core_count(0) as f64, posts)
}

#[test]
fn the_monitor_and_the_modules_utilization_agree_in_either_unit() {
    let check = |unit: &str| {
        let (monitor, posts) = monitor_and_module_utilization(&format!("unit-{unit}"));
        // The posts are whole percentages, truncated.
        let module = posts.iter().sum::<u64>() as f64 / posts.len() as f64 + 0.5;
        println!("{unit}: monitor {monitor:.2} %, module {module:.2} % (posts {posts:?})");
        assert!(monitor > 5.0, "{unit}: the monitor saw {monitor} %");
        assert!(
            (monitor - module).abs() <= 3.0 + 0.15 * monitor,
            "{unit}: monitor {monitor} %, module {module} % (posts {posts:?})"
        );
    };
    // The tools read the module's parameter: no option here.
    assert_eq!(parameter("time_in_use_unit_ps"), "1");
    check("ps");
    let _restore = Restore;
    reload_with(&["time_in_use_unit_ps=1000000"]);
    check("us");
}

#[test]
fn reading_sysfs_changes_nothing_and_a_dead_owner_is_released_at_the_next_acquire() {
    let _restore = Restore;
    // Without the metrics worker only an ACQUIRE releases a dead owner.
    reload_with(&["metrics_period_ms=0"]);
    let file = open_device(DEVICE).unwrap();
    let status = in_child(|| match acquire(&file, 0) {
        Ok(info) => (offset_slot(info.mmap_offset) + 1) as i32,
        Err(_) => 0,
    });
    assert!(libc::WIFEXITED(status), "status {status:#x}");
    let slot = libc::WEXITSTATUS(status) as usize - 1;
    // The child acquired through a descriptor it inherited, then died: the descriptor (ours)
    // lives on, so no file release tells the module. Reading every file changes nothing.
    let before = slots()[slot];
    assert_eq!(before.generation % 2, 1, "owned by the dead child");
    for _ in 0..3 {
        let _ = sysfs_counter(0, "status", "success", "total");
        let _ = sysfs_counter(0, "status", "success", "present");
        assert_eq!(slots()[slot], before);
    }
    // The next ACQUIRE releases the dead owner's slab first.
    acquire(&file, 0).unwrap();
    assert_eq!(slots()[slot].generation, before.generation + 1);
}

#[test]
fn the_original_sysfs_paths_hold_the_totals() {
    let original = "/sys/devices/virtual/neuron_device/neuron0";
    assert_eq!(
        fs::canonicalize(sysfs_device(0)).unwrap(),
        fs::canonicalize(original).unwrap(),
        "/sys/class/neuron_device/neuron0 is the original's device directory"
    );
    assert_eq!(
        fs::read_to_string(format!("{original}/core_count")).unwrap(),
        "2\n"
    );
    let total = |core: usize, group: &str, name: &str| -> u64 {
        fs::read_to_string(format!(
            "{original}/neuron_core{core}/stats/{group}/{name}/total"
        ))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
    };
    let success = total(1, "status", "success");
    let flops = total(1, "other_info", "flop_count");
    // Core 1: 7 successes, 20 MACs.
    let producer = Producer::start(DEVICE, &[(1, 1, 7), (1, 29, 20)]).unwrap();
    producer.release_and_exit();
    assert_eq!(total(1, "status", "success"), success + 7);
    assert_eq!(total(1, "other_info", "flop_count"), flops + 40);
}

/// `TAINT_TEST`: a test ran in this kernel (a KUnit suite, at a module's load).
const TAINT_TEST: u64 = 1 << 18;

/// The kernel's taint flags now.
fn taint() -> u64 {
    fs::read_to_string("/proc/sys/kernel/tainted")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_production_build_runs_no_test_and_the_harness_build_does() {
    // The guest's init loaded and unloaded the twin, built as DKMS and installs build the
    // module, before anything else, and kept the taint flags around it.
    let record = fs::read_to_string("/tmp/production-module-taint")
        .expect("the guest's init loads the production build first");
    let flags: Vec<u64> = record
        .split_whitespace()
        .map(|flags| flags.parse().unwrap())
        .collect();
    assert_eq!(flags.len(), 2, "{record:?}");
    assert_eq!(
        flags[0] & TAINT_TEST,
        0,
        "tainted by a test before: {record:?}"
    );
    assert_eq!(flags[1] & TAINT_TEST, 0, "the production build ran a test");
    // The build the harness loads afterwards carries its KUnit suites, which ran.
    assert_ne!(
        taint() & TAINT_TEST,
        0,
        "the harness's build ran no KUnit suite"
    );
}

#[test]
fn a_second_instance_with_its_own_class_and_node_name_coexists() {
    // A copy of the module under another name stands in for a second driver.
    let twin = "/work/neuron_ds_twin.ko";
    assert!(fs::metadata(twin).is_ok(), "the harness ships {twin}");
    run(
        "insmod",
        &[
            twin,
            "class_name=nds_twin_class",
            "node_name=nds_twin",
            "devices=1",
        ],
    );
    eventually("the twin's node appears", || {
        fs::metadata("/dev/nds_twin0").is_ok()
    });
    // Both work, each with its own slabs and totals (the second starts from zero).
    let twin_total = || -> u64 {
        fs::read_to_string(
            "/sys/class/nds_twin_class/nds_twin0/neuron_core0/stats/status/success/total",
        )
        .unwrap()
        .trim()
        .parse()
        .unwrap()
    };
    let first_start = sysfs_counter(0, "status", "success", "total");
    let first = Producer::start(DEVICE, &[(0, 1, 3)]).unwrap();
    let second = Producer::start("/dev/nds_twin0", &[(0, 1, 4)]).unwrap();
    assert_eq!(twin_total(), 4);
    assert_eq!(
        sysfs_counter(0, "status", "success", "total"),
        first_start + 3
    );
    second.release_and_exit();
    first.release_and_exit();
    assert_eq!(twin_total(), 4);
    assert_eq!(
        sysfs_counter(0, "status", "success", "total"),
        first_start + 3
    );
    assert_eq!(
        fs::read_to_string("/sys/module/neuron_ds_twin/parameters/class_name")
            .unwrap()
            .trim(),
        "nds_twin_class"
    );
    run("rmmod", &["neuron_ds_twin"]);
    assert!(fs::metadata("/sys/class/nds_twin_class").is_err());
    assert!(fs::metadata("/dev/neuron0").is_ok());
}

#[test]
fn invalid_parameters_are_refused_with_einval_and_leave_nothing_registered() {
    let _restore = Restore;
    run("rmmod", &["neuron_ds"]);
    let too_long = format!("node_name={}", "n".repeat(33));
    let class_too_long = format!("class_name={}", "c".repeat(33));
    let refused = [
        "devices=0",
        "devices=17",
        "cores_per_device=0",
        "cores_per_device=17",
        "devices=many",
        "time_in_use_unit_ps=0",
        "node_name=Neuron",
        "node_name=neuron/0",
        "node_name=",
        too_long.as_str(),
        "class_name=Neuron_Device",
        class_too_long.as_str(),
    ];
    // With KCOV (make coverage), each refused load's points go to a file of their own: the
    // module's code was somewhere else each time (see ds-coverage).
    let mut kcov = kcov::Collector::from_env("parameters");
    for (attempt, params) in refused.into_iter().enumerate() {
        let result = module_control::load_module("/neuron_ds.ko", params);
        if let Some(kcov) = kcov.as_mut() {
            kcov.save_as(&format!("parameters-{attempt}"));
        }
        if result.is_ok() {
            let _ = module_control::unload_module();
        }
        assert_eq!(result, Err(libc::EINVAL), "loading with {params:?}");
        let left = module_control::leftovers();
        assert!(left.is_empty(), "{params:?} was refused but left {left:?}");
    }
    // A name of exactly 32 characters is accepted.
    let mut accepted = harness_params();
    accepted.retain(|p| !p.starts_with("node_name=") && !p.starts_with("class_name="));
    accepted.extend(["node_name=".to_owned() + &"n".repeat(32)]);
    let accepted = accepted.join(" ");
    assert_eq!(
        module_control::load_module("/neuron_ds.ko", &accepted),
        Ok(()),
        "loading with {accepted:?}"
    );
    assert_eq!(module_control::unload_module(), Ok(()));
}

#[test]
fn a_second_load_is_refused_with_eexist_and_leaves_the_loaded_module_as_it_was() {
    let producer = Producer::start(DEVICE, &[(0, 1, 2)]).unwrap();
    // The module is loaded: the loader refuses the same module again before its init runs.
    assert_eq!(
        module_control::load_module("/neuron_ds.ko", ""),
        Err(libc::EEXIST)
    );
    assert_eq!(slots()[offset_slot(producer.offset)].pid, producer.pid);
    producer.exit();
}

#[test]
fn an_unknown_metrics_ctrl_mode_is_einval_unless_the_original_answer_is_asked_for() {
    let _restore = Restore;
    let file = open_device(DEVICE).unwrap();
    assert_eq!(errno(metrics_ctrl(&file, 7)), libc::EINVAL);
    assert_eq!(metrics_ctrl(&file, 0).unwrap(), 0);
    drop(file);
    reload_with(&["metrics_ctrl_accept_unknown=1"]);
    let file = open_device(DEVICE).unwrap();
    assert_eq!(
        metrics_ctrl(&file, 7).unwrap(),
        0,
        "ignored, as the original does"
    );
}

#[test]
fn a_sixteen_core_device_totals_the_counters_of_every_band_of_the_layout() {
    let _restore = Restore;
    reload_with(&["cores_per_device=16"]);
    assert_eq!(sysfs_core_count(0), 16);
    let counter = |name: &str| {
        SYSFS_COUNTERS
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no sysfs counter {name}"))
    };
    let (original, extended) = (counter("success"), counter("hw_collectives_error"));
    // Cores 0 and 3 keep their original counters in the first band and their extended ones
    // in the second; cores 4 and 15 keep both in the third. Each value is distinct, so that
    // a word read from a neighbour's place shows.
    let writes: Vec<(usize, &SysfsCounter, u64)> = [0usize, 3, 4, 15]
        .iter()
        .zip(1u64..)
        .flat_map(|(&core, n)| [(core, original, 10 * n), (core, extended, 10 * n + 1)])
        .collect();
    let spec: Vec<(usize, usize, u64)> = writes
        .iter()
        .map(|&(core, c, value)| (core, c.source.index(), value))
        .collect();
    let read = |core: usize, c: &SysfsCounter, file: &str| {
        sysfs_counter(core, c.group.dir_name(), c.name, file)
    };
    // The metric posts sum the device's sixteen cores too: the successes (CloudWatch id 200)
    // of cores 0, 3, 4 and 15, posted while the slab is live, and not again at its release.
    let expected: u64 = writes
        .iter()
        .filter(|(_, c, _)| c.name == "success")
        .map(|(_, _, value)| value)
        .sum();
    let mut posts = open_posts(DEVICE).unwrap();
    let producer = Producer::start(DEVICE, &spec).unwrap();
    for &(core, c, value) in &writes {
        assert_eq!(read(core, c, "total"), value, "live {c} of core {core}");
        assert_eq!(
            read(core, c, "present"),
            0,
            "{c} of core {core} before a release"
        );
    }
    let live = posts_until(&mut posts, "the live slab's successes posted", |so_far| {
        successes_in(so_far) >= expected
    });
    assert_eq!(
        successes_in(&live),
        expected,
        "successes of the live slab's sixteen cores"
    );
    producer.release_and_exit();
    for &(core, c, value) in &writes {
        assert_eq!(read(core, c, "total"), value, "released {c} of core {core}");
        assert_eq!(
            read(core, c, "present"),
            value,
            "{c} of core {core}'s release"
        );
    }
    for core in [1, 2, 5, 14] {
        for c in [original, extended] {
            assert_eq!(
                read(core, c, "total"),
                0,
                "{c} of core {core}, never written"
            );
        }
    }
    assert_eq!(
        successes_in(&posts_through_a_period_end(DEVICE, &mut posts)),
        0,
        "the release posts nothing that was posted while the slab was live"
    );
}

#[test]
fn an_eleven_core_device_counts_its_last_core_live_released_and_reaped() {
    let _restore = Restore;
    // Eleven: the per-core sums run over a count that is neither 2 nor a multiple of 8.
    reload_with(&["cores_per_device=11"]);
    assert_eq!(sysfs_core_count(0), 11);
    let success = |core: usize, file: &str| sysfs_counter(core, "status", "success", file);
    let mut posts = open_posts(DEVICE).unwrap();
    // Live, then released: core 10's successes and core 0's, posted once.
    let producer = Producer::start(DEVICE, &[(10, 1, 30), (0, 1, 4)]).unwrap();
    assert_eq!(success(10, "total"), 30);
    let live = posts_until(&mut posts, "the live slab's successes posted", |so_far| {
        successes_in(so_far) >= 34
    });
    assert_eq!(
        successes_in(&live),
        34,
        "the live slab's successes over eleven cores"
    );
    producer.release_and_exit();
    assert_eq!((success(10, "total"), success(10, "present")), (30, 30));
    assert_eq!(success(0, "total"), 4);
    // An owner that dies while its descriptor lives on (ours, inherited) is reaped by the
    // next ACQUIRE or metrics period, with what it counted on core 10.
    let file = open_device(DEVICE).unwrap();
    let status = in_child(|| {
        let Ok(info) = acquire(&file, 0) else {
            return 0;
        };
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let Ok(slab) = Mapping::new(&file, SLAB_SIZE, rw, info.mmap_offset) else {
            return 0;
        };
        slab.write_u64(nc_offset(10, 1), 5);
        (offset_slot(info.mmap_offset) + 1) as i32
    });
    assert!(libc::WIFEXITED(status), "status {status:#x}");
    let slot = libc::WEXITSTATUS(status) as usize - 1;
    acquire(&file, 0).unwrap();
    let me = std::process::id() as i32;
    assert!(
        [0, me].contains(&slots()[slot].pid),
        "the dead child's slot is free or ours"
    );
    assert_eq!((success(10, "total"), success(10, "present")), (35, 5));
    assert_eq!(
        successes_in(&posts_through_a_period_end(DEVICE, &mut posts)),
        5,
        "the reaped slab's successes, posted once"
    );
}
