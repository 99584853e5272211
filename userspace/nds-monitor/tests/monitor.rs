//! The monitor over slab files written by in-process producers: lifetime totals equal what
//! the producers wrote, deltas follow the periods, a slab whose generation moves is reported
//! instead of mixed in, tag filters and per-group periods apply, and the system section holds
//! the kernel's totals.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use common::*;
use nds_abi::layout::SLAB_GENERATION_OFFSET;
use nds_document::config::{ConfigFile, SystemGroup};
use nds_document::document::RuntimeEntry;
use nds_document::{MonitorDocument, Plan};
use nds_exporter::Exporter;
use nds_sampler::Monitor;
use nds_sysfs::TimeInUseUnit;
use regex::Regex;

const SECOND: Duration = Duration::from_secs(1);

fn entry(document: &MonitorDocument, pid: i32) -> &RuntimeEntry {
    document
        .neuron_runtime_data
        .iter()
        .find(|entry| entry.pid == pid)
        .unwrap_or_else(|| panic!("no entry for pid {pid} in {document:#?}"))
}

/// Every counter of the report appears in `nds_counters` with the same total, and nothing else;
/// the report counts per core of its device, the monitor by instance-wide index, which starts
/// at `first_core` for the report's device.
fn assert_totals_equal(
    entry: &RuntimeEntry,
    report: &nds_loadgen::ProducerReport,
    first_core: usize,
) {
    assert_eq!(entry.error, "");
    let counters = entry.report.nds_counters.as_ref().expect("nds_counters");
    for (core, values) in &report.nc_counters {
        let key = (core.parse::<usize>().unwrap() + first_core).to_string();
        for (name, &value) in values {
            let seen = counters.neuroncores.get(&key).and_then(|c| c.get(name));
            assert_eq!(seen.map_or(0, |v| v.total), value, "core {key} {name}");
        }
    }
    for (key, values) in &counters.neuroncores {
        let core = key.parse::<usize>().unwrap() - first_core;
        for (name, value) in values {
            assert_eq!(value.total, report.nc(core, name), "{name}");
        }
    }
    for (name, value) in &counters.neuron_device {
        assert_eq!(Some(&value.total), report.nd_counters.get(name), "{name}");
    }
    assert_eq!(
        counters.neuron_device.len(),
        report.nd_counters.values().filter(|&&v| v != 0).count()
    );
}

#[test]
fn lifetime_totals_equal_the_producers_reports() {
    let scratch = Scratch::new("totals");
    // Two devices of two cores: device 1's cores are NeuronCores 2 and 3.
    scratch.sysfs(2, 2, 0, 0);
    let t0 = Instant::now();
    let mut monitor = scratch.monitor(t0);
    let first = produce(&scratch.slabs(), 0, 4001, "alpha", 300);
    let second = produce(
        &scratch.slabs(),
        1,
        4002,
        "beta-with-a-tag-longer-than-31-bytes",
        500,
    );
    assert!(
        monitor.poll(t0 + SECOND / 2).is_none(),
        "nothing is due yet"
    );
    let document = monitor.poll(t0 + SECOND).expect("every group is due");
    assert_eq!(document.neuron_runtime_data.len(), 2);
    let alpha = entry(&document, 4001);
    assert_eq!(alpha.neuron_runtime_tag, "alpha");
    assert_totals_equal(alpha, &first, 0);
    let beta = entry(&document, 4002);
    assert_eq!(
        beta.neuron_runtime_tag,
        "beta-with-a-tag-longer-than-31-bytes"
    );
    assert_eq!(beta.neuron_device_index, 1);
    assert_totals_equal(beta, &second, 2);

    let stats = alpha.report.execution_stats.as_ref().unwrap();
    assert_eq!(
        stats.lifetime.execution_summary.completed,
        first.statuses["NRT_SUCCESS"]
    );
    let memory = alpha.report.memory_used.as_ref().unwrap();
    assert_eq!(memory.loaded_models.len(), first.loaded_models.len());
    let info = beta.report.process_info.as_ref().unwrap();
    assert_eq!(info.tag.len(), 31, "process-info keeps 31 bytes of the tag");
    assert_eq!(info.runtime_version, "2.31.24");

    // Nothing was written during the next period: deltas are zero, totals unchanged.
    let document = monitor.poll(t0 + 2 * SECOND).unwrap();
    let alpha = entry(&document, 4001);
    assert_totals_equal(alpha, &first, 0);
    let counters = alpha.report.nds_counters.as_ref().unwrap();
    assert!(counters
        .neuroncores
        .values()
        .flat_map(|c| c.values())
        .all(|v| v.delta == 0));
    assert_eq!(alpha.report.execution_stats.as_ref().unwrap().period, 1.0);
}

#[test]
fn a_reused_or_released_slab_is_reported_not_mixed() {
    let scratch = Scratch::new("reuse");
    let t0 = Instant::now();
    let mut monitor = scratch.monitor(t0);
    let path = slab_path(&scratch.slabs(), 0, 4100);
    produce(&scratch.slabs(), 0, 4100, "first-owner", 100);
    produce(&scratch.slabs(), 0, 4200, "other", 100);
    let document = monitor.poll(t0 + SECOND).unwrap();
    assert_eq!(entry(&document, 4100).error, "");

    // The slab's generation moves to an odd value: another process owns it now.
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&7u64.to_le_bytes(), SLAB_GENERATION_OFFSET as u64)
        .unwrap();
    let document = monitor.poll(t0 + 2 * SECOND).unwrap();
    let gone = entry(&document, 4100);
    assert!(gone.error.contains("slab reused"), "{}", gone.error);
    assert!(gone.error.contains("generation 0 -> 7"), "{}", gone.error);
    assert_eq!(
        gone.report,
        Default::default(),
        "no numbers for a reused slab"
    );
    assert_eq!(entry(&document, 4200).error, "");

    // Re-attached with the new generation, it is a process of its own again.
    let document = monitor.poll(t0 + 3 * SECOND).unwrap();
    let again = entry(&document, 4100);
    assert_eq!((again.error.as_str(), again.generation), ("", Some(7)));

    // The file disappears: released.
    std::fs::remove_file(&path).unwrap();
    let document = monitor.poll(t0 + 4 * SECOND).unwrap();
    let released = entry(&document, 4100);
    assert!(released.error.contains("released"), "{}", released.error);
    let document = monitor.poll(t0 + 5 * SECOND).unwrap();
    assert!(document.neuron_runtime_data.iter().all(|e| e.pid != 4100));
}

#[test]
fn tag_filters_and_per_group_periods() {
    let scratch = Scratch::new("config");
    produce(&scratch.slabs(), 0, 4301, "serving-a", 50);
    produce(&scratch.slabs(), 0, 4302, "batch-b", 50);
    let config: ConfigFile = serde_json::from_str(
        r#"{"period": "1s",
            "neuron_runtimes": [{"tag_filter": "^serving-", "metrics": [
                {"type": "execution_stats"}, {"type": "memory_used", "period": "2s"},
                {"type": "neuron_runtime_vcpu_usage"}]}],
            "system_metrics": [{"type": "neuron_counters", "period": "3s"}, {"type": "vcpu_usage"}]}"#,
    )
    .unwrap();
    let plan = Plan::from_config(&config).unwrap();
    assert_eq!(
        plan.system,
        [
            (SystemGroup::NeuronCounters, 3 * SECOND),
            (SystemGroup::VcpuUsage, SECOND)
        ]
    );
    let t0 = Instant::now();
    let mut monitor = Monitor::new(scratch.source(), plan, t0);
    assert!(monitor.poll(t0).is_none(), "attaches, nothing due");
    let document = monitor.poll(t0 + SECOND).unwrap();
    assert_eq!(
        document.neuron_runtime_data.len(),
        1,
        "batch-b is filtered out"
    );
    let serving = &document.neuron_runtime_data[0].report;
    assert!(serving.execution_stats.is_some() && serving.memory_used.is_none());
    assert!(serving.neuron_runtime_vcpu_usage.is_some());
    assert!(serving.nds_counters.is_none());
    assert!(document.system_data.neuron_counters.is_none());
    assert!(document.system_data.vcpu_usage.is_some());
    assert!(document.system_data.memory_info.is_none());
    let document = monitor.poll(t0 + 2 * SECOND).unwrap();
    let serving = &document.neuron_runtime_data[0].report;
    assert_eq!(serving.memory_used.as_ref().unwrap().period, 2.0);
    let document = monitor.poll(t0 + 3 * SECOND).unwrap();
    assert_eq!(
        document
            .system_data
            .neuron_counters
            .as_ref()
            .unwrap()
            .period,
        3.0
    );

    // --tag-filter narrows further.
    let mut plan = Plan::everything(SECOND);
    plan.tag_filter = Some(Regex::new("-b$").unwrap());
    let mut monitor = Monitor::new(scratch.source(), plan, t0);
    let document = monitor.poll(t0 + SECOND).unwrap();
    let tags: Vec<_> = document
        .neuron_runtime_data
        .iter()
        .map(|e| e.neuron_runtime_tag.as_str())
        .collect();
    assert_eq!(tags, ["batch-b"]);

    for bad in [
        r#"{"period": "soon"}"#,
        r#"{"neuron_runtimes": [{"metrics": [{"type": "bogus"}]}]}"#,
        r#"{"neuron_runtimes": [{"metrics": [{"type": "vcpu_usage"}]}]}"#,
        r#"{"system_metrics": [{"type": "memory_used"}]}"#,
        r#"{"neuron_runtimes": [{"tag_filter": "("}]}"#,
        r#"{"unknown": 1}"#,
    ] {
        let parsed = serde_json::from_str::<ConfigFile>(bad);
        assert!(
            parsed.is_err() || Plan::from_config(&parsed.unwrap()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn the_system_section_holds_the_kernels_totals_and_their_deltas() {
    let scratch = Scratch::new("system");
    scratch.sysfs(2, 2, 40, 3);
    let t0 = Instant::now();
    let mut monitor = scratch.monitor(t0);
    let document = monitor.poll(t0 + SECOND).unwrap();
    assert_eq!(document.neuron_hardware_info.neuron_device_count, 2);
    assert_eq!(document.neuron_hardware_info.neuroncore_per_device_count, 2);
    let system = document.system_data.neuron_counters.as_ref().unwrap();
    assert_eq!(system.error, "");
    assert_eq!(system.neuron_devices.len(), 2);
    assert_eq!(system.neuron_devices[1].slots_owned, 3);
    let core = &system.neuron_devices[0].neuroncores["1"];
    assert_eq!(core.status.len(), 24);
    assert_eq!(core.other_info.len(), 4);
    assert_eq!(core.status["success"].total, 40);
    scratch.sysfs(2, 2, 45, 0);
    let document = monitor.poll(t0 + 2 * SECOND).unwrap();
    let system = document.system_data.neuron_counters.as_ref().unwrap();
    let success = system.neuron_devices[0].neuroncores["1"].status["success"];
    assert_eq!((success.total, success.delta), (45, 5));
}

#[test]
fn documents_validate_against_the_schema() {
    let scratch = Scratch::new("schema");
    scratch.sysfs(1, 2, 7, 1);
    produce(&scratch.slabs(), 0, 4401, "schema-a", 200);
    produce(&scratch.slabs(), 0, 4402, "schema-b", 20);
    let t0 = Instant::now();
    let mut monitor = scratch.monitor(t0);
    let mut documents = vec![monitor.poll(t0 + SECOND).unwrap()];
    std::fs::remove_file(slab_path(&scratch.slabs(), 0, 4402)).unwrap();
    documents.push(monitor.poll(t0 + 2 * SECOND).unwrap());
    assert!(documents[1]
        .neuron_runtime_data
        .iter()
        .any(|e| !e.error.is_empty()));
    let values: Vec<serde_json::Value> = documents
        .iter()
        .map(|d| serde_json::to_value(d).unwrap())
        .collect();
    validate(&values);
}

#[test]
fn a_slab_of_random_bytes_yields_a_valid_document() {
    let scratch = Scratch::new("corrupt");
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut bytes: Vec<u8> = (0..nds_abi::layout::NEURON_DATASTORE_SIZE)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    bytes[..8].copy_from_slice(&nds_abi::records::NDS_HEADER_WORD.to_le_bytes());
    let path = slab_path(&scratch.slabs(), 0, 4501);
    std::fs::write(&path, &bytes).unwrap();
    let t0 = Instant::now();
    let mut monitor = scratch.monitor(t0).with_consumer(Exporter::new());
    assert!(monitor.poll(t0).is_none());
    let document = monitor.poll(t0 + SECOND).unwrap();
    let entry = entry(&document, 4501);
    assert_eq!(entry.error, "");
    assert!(entry.report.nds_counters.is_some());
    let values = vec![serde_json::to_value(&document).unwrap()];
    validate(&values);
    let exposition = monitor.consumer().render(&document);
    assert!(exposition.contains("nds_runtime_status_total"));
}

#[test]
fn host_groups_come_from_proc_and_the_driver_tree() {
    let scratch = Scratch::new("host");
    scratch.sysfs(2, 2, 0, 0);
    scratch.hardware(2, 5);
    // A `/proc` whose every file this test writes (the scratch's own shows the machine's).
    let proc = scratch.0.join("written-proc");
    let stat = |user: u64, idle: u64, ctxt: u64| {
        format!(
            "cpu  {} 0 100 {} 0 0 0 0 0 0\ncpu0 {user} 0 50 {idle} 0 0 0 0 0 0\n\
             cpu1 {user} 0 50 {idle} 0 0 0 0 0 0\nctxt {ctxt}\n",
            2 * user,
            2 * idle
        )
    };
    write(&proc.join("stat"), &stat(100, 900, 5000));
    write(
        &proc.join("meminfo"),
        "MemTotal: 2048 kB\nMemAvailable: 512 kB\nSwapTotal: 100 kB\nSwapFree: 25 kB\n",
    );
    // The producer's /proc/<pid>/stat: utime 200, stime 50 ticks.
    let pid_stat = |utime: u64, stime: u64| {
        format!("4601 (producer) S 1 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 1 1 1\n")
    };
    write(&proc.join("4601/stat"), &pid_stat(200, 50));
    produce(&scratch.slabs(), 1, 4601, "host-groups", 50);
    let mut source = scratch.source();
    source.host.proc_root = proc.clone();
    let t0 = Instant::now();
    let mut monitor = Monitor::new(source, Plan::everything(2 * SECOND), t0);
    assert!(monitor.poll(t0).is_none(), "attaches, reads the baselines");

    // Two seconds later: 100 more user ticks and 100 more idle ticks on each vCPU, 240
    // context switches; the process spent 120 user and 40 system ticks.
    write(&proc.join("stat"), &stat(200, 1000, 5240));
    write(&proc.join("4601/stat"), &pid_stat(320, 90));
    let document = monitor.poll(t0 + 2 * SECOND).unwrap();
    let cpu = document.system_data.vcpu_usage.as_ref().unwrap();
    assert_eq!(cpu.error, "");
    assert_eq!(
        (cpu.average_usage.user, cpu.average_usage.idle),
        (50.0, 50.0)
    );
    assert_eq!(cpu.usage_data.len(), 2);
    assert_eq!(cpu.usage_data["1"].user, 50.0);
    assert_eq!(cpu.context_switch_count, 240);
    assert_eq!(cpu.period, 2.0);
    let memory = document.system_data.memory_info.as_ref().unwrap();
    assert_eq!(
        (memory.memory_total_bytes, memory.memory_used_bytes),
        (2048 * 1024, 1536 * 1024)
    );
    assert_eq!(memory.swap_used_bytes, 75 * 1024);

    let producer = entry(&document, 4601);
    let runtime = producer.report.neuron_runtime_vcpu_usage.as_ref().unwrap();
    assert_eq!(runtime.error, "");
    // Shares of 2 vCPUs over 2 s: ticks / (2 * 2 * ticks per second) * 100.
    let capacity = 4.0 * nds_host::host::clock_ticks_per_second() as f64;
    let expected = |ticks: f64| (ticks * 10_000.0 / capacity).round().min(10_000.0) / 100.0;
    assert_eq!(runtime.vcpu_usage.user, expected(120.0));
    assert_eq!(runtime.vcpu_usage.system, expected(40.0));

    // ECC: the driver's totals, and their change since the monitor started.
    let ecc = document.system_data.neuron_hw_counters.as_ref().unwrap();
    assert_eq!(ecc.lifetime[1].mem_ecc_uncorrected, 15);
    assert_eq!(ecc.neuron_devices[1].mem_ecc_uncorrected, 0);
    assert!(
        ecc.error
            .contains("no mem_ecc_corrected, sram_ecc_uncorrected"),
        "{}",
        ecc.error
    );
    scratch.hardware(2, 8);
    let document = monitor.poll(t0 + 4 * SECOND).unwrap();
    let ecc = document.system_data.neuron_hw_counters.as_ref().unwrap();
    assert_eq!(ecc.neuron_devices[1].mem_ecc_uncorrected, 3);
    assert_eq!(ecc.neuron_devices[0].sram_ecc_corrected, 3);
    let hardware = &document.neuron_hardware_info;
    assert_eq!(hardware.neuron_device_type, "trainium");
    assert_eq!(hardware.neuron_device_version, "v2");
    assert_eq!(hardware.neuron_device_count, 2);
    assert!(
        hardware.error.contains("neuron_device_memory_size"),
        "{}",
        hardware.error
    );

    // The process is gone: its vCPU group says so, with zeros.
    std::fs::remove_dir_all(proc.join("4601")).unwrap();
    let document = monitor.poll(t0 + 6 * SECOND).unwrap();
    let runtime = entry(&document, 4601);
    let cpu = runtime.report.neuron_runtime_vcpu_usage.as_ref().unwrap();
    assert!(cpu.error.contains("4601/stat"), "{}", cpu.error);
    assert_eq!(cpu.vcpu_usage.user, 0.0);
}

/// The monitor's utilization of a producer that writes its busy time in `unit`, with the
/// (scratch) module loaded with that unit: per core, with what the producer wrote in the
/// measured second.
fn utilization_in(unit: TimeInUseUnit, name: &str) -> Vec<(f64, u64)> {
    let scratch = Scratch::new(name);
    scratch.sysfs(1, 2, 0, 0);
    scratch.module_time_unit(unit);
    let t0 = Instant::now();
    let mut monitor = scratch.monitor(t0);
    let pid = 4301;
    produce_in_unit(&scratch.slabs(), 0, pid, "unit", 40, unit);
    assert!(monitor.poll(t0).is_none(), "attaches, nothing due");
    let written = produce_in_unit(&scratch.slabs(), 0, pid, "unit", 300, unit);
    let document = monitor.poll(t0 + SECOND).unwrap();
    let counters = entry(&document, pid)
        .report
        .neuroncore_counters
        .as_ref()
        .unwrap();
    assert_eq!(counters.error, "");
    (0..2)
        .map(|core| {
            let usage = &counters.neuroncores_in_use[&core.to_string()];
            (
                usage.neuroncore_utilization,
                written.nc(core, "NDS_NC_COUNTER_TIME_IN_USE"),
            )
        })
        .collect()
}

#[test]
fn utilization_is_the_same_in_either_unit_when_producer_and_module_agree() {
    let picoseconds = utilization_in(TimeInUseUnit::PICOSECOND, "unit-ps");
    let microseconds = utilization_in(TimeInUseUnit::MICROSECOND, "unit-us");
    for ((ps_utilization, ps_busy), (us_utilization, us_busy)) in
        picoseconds.into_iter().zip(microseconds)
    {
        // The same stream (same seed) of whole-microsecond device times, in each unit.
        assert!(us_busy > 0);
        assert_eq!(ps_busy, us_busy * 1_000_000);
        // Busy microseconds over the one-second period, as a percentage.
        let expected = us_busy as f64 / 1e4;
        assert!(expected > 1.0 && expected < 100.0, "{expected} %");
        for utilization in [ps_utilization, us_utilization] {
            assert!(
                (utilization - expected).abs() < 1e-9,
                "{utilization} % vs {expected} %"
            );
        }
    }
}

/// Latency samples held after `ticks` ticks with an inference (and a latency) before each,
/// and no report, for a monitor following `plan`.
fn latency_samples_after(name: &str, plan: Plan, ticks: u64) -> usize {
    use nds_abi::counters::NcCounter;
    let scratch = Scratch::new(name);
    produce(&scratch.slabs(), 0, 4701, "busy", 10);
    let store =
        nds::Datastore::open(&nds::Backend::file(slab_path(&scratch.slabs(), 0, 4701)), 0).unwrap();
    let t0 = Instant::now();
    let mut monitor = Monitor::new(scratch.source(), plan, t0);
    for tick in 0..ticks {
        store
            .set_nc_counter(0, NcCounter::LatencyTotal.index(), 1_000 + tick)
            .unwrap();
        store
            .increment_nc_counter(0, NcCounter::InferenceCount.index(), 1)
            .unwrap();
        // Never due: the period is a day.
        monitor.tick(t0 + Duration::from_millis(tick));
    }
    monitor.latency_samples_held()
}

#[test]
fn latency_samples_are_bounded_and_kept_only_when_wanted() {
    let day = Duration::from_secs(86_400);
    let held = latency_samples_after("latency-bounded", Plan::everything(day), 3_000);
    assert_eq!(
        held,
        2 * nds_document::latency::RESERVOIR_CAPACITY,
        "total and device"
    );
    let mut without = Plan::everything(day);
    without.runtimes[0]
        .groups
        .retain(|&(group, _)| group != nds_document::config::RuntimeGroup::ExecutionStats);
    assert_eq!(latency_samples_after("latency-unwanted", without, 300), 0);
    let mut filtered = Plan::everything(day);
    filtered.tag_filter = Some(Regex::new("^other$").unwrap());
    assert_eq!(latency_samples_after("latency-filtered", filtered, 300), 0);
}
