//! The top view in an 80×24 terminal (ratatui's test backend) over slab files written by
//! in-process producers, and the keys that move through it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nds::{Backend, Producer};
use nds_document::{MonitorDocument, Plan};
use nds_host::HostSource;
use nds_loadgen::spec::{ProducerSpec, SlabSource as LoadgenSource, StreamLength};
use nds_loadgen::workload::Workload;
use nds_loadgen::{Recorder, StatusMix, Tally};
use nds_sampler::{Monitor, Source};
use nds_slabs::SlabSource;
use nds_sysfs::{SysfsRoot, TimeInUseUnit};
use nds_top::{render_text, App};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn produce(dir: &Path, device: u32, pid: i32, tag: &str, count: u64) {
    let path = dir.join(format!("neuron{device}-{pid}.slab"));
    let store = Producer::open(&Backend::file(&path)).unwrap();
    let tally = Tally::new();
    let spec = ProducerSpec {
        tag: tag.to_owned(),
        device,
        source: LoadgenSource::Directory(dir.to_path_buf()),
        cores: 2,
        length: StreamLength::Count(count),
        rate: 0,
        mix: nds_loadgen::mix::DEFAULT_MIX.to_owned(),
        time_in_use_unit_ps: TimeInUseUnit::PICOSECOND.ps_per_unit(),
        seed: 3,
        crash: false,
        hold: false,
        explicit_release: true,
        report: dir.join("unused.json"),
    };
    let mut workload = Workload::start(
        Recorder::new(&store, &tally),
        &tally,
        &spec,
        StatusMix::default(),
        pid,
    )
    .unwrap();
    workload.run(spec.length, 0, false).unwrap();
}

/// A report of two processes on device 0, the second one mid-stream during the period.
fn document() -> (Scratch, MonitorDocument) {
    document_on(0, 1)
}

/// The same on device `device` of `devices` devices with two cores each (a sysfs tree says so).
fn document_on(device: u32, devices: u32) -> (Scratch, MonitorDocument) {
    // One directory per call: the tests of this binary run in parallel threads.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let scratch =
        Scratch(std::env::temp_dir().join(format!("nds-top-{}-{call}", std::process::id())));
    let _ = std::fs::remove_dir_all(&scratch.0);
    std::fs::create_dir_all(&scratch.0).unwrap();
    produce(&scratch.0, device, 6001, "serving-a", 120);
    let sys = scratch.0.join("sys");
    for index in 0..devices {
        for path in ["datastore", "neuron_core0", "neuron_core1"] {
            std::fs::create_dir_all(sys.join(format!("neuron{index}/{path}"))).unwrap();
        }
    }
    let source = Source {
        slabs: SlabSource::Files {
            dir: scratch.0.clone(),
        },
        sysfs: SysfsRoot::new(sys),
        host: HostSource {
            // A `/proc` of its own, empty: the producers' pids name no process, whatever
            // processes the machine runs.
            proc_root: scratch.0.join("no-proc"),
            hardware: nds_host::hardware::HardwareTree::new(scratch.0.join("no-driver")),
            ..HostSource::default()
        },
        time_in_use_unit: Some(TimeInUseUnit::PICOSECOND),
    };
    let t0 = Instant::now();
    let mut monitor = Monitor::new(source, Plan::everything(Duration::from_secs(1)), t0);
    let _ = monitor.poll(t0);
    produce(&scratch.0, device, 6002, "batch-b", 300);
    let document = monitor.report_all(t0 + Duration::from_secs(1));
    (scratch, document)
}

fn screen(app: &App) -> String {
    let text = render_text(app, 80, 24);
    assert_eq!(text.lines().count(), 24);
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line}");
    }
    text
}

#[test]
fn renders_every_section_in_80_by_24() {
    let (_scratch, document) = document();
    let app = App::new(document);
    let text = screen(&app);
    for expected in [
        "nds-top",
        "2 processes",
        "NeuronCore utilization",
        "Executions",
        "Memory",
        "Models",
        "host total",
        "device total",
        "1:all",
        "2:batch-b",
        "3:serving-a",
        "nc0 nd0 6001",
        "nc1 nd0 6002",
        "instance unknown",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from\n{text}");
    }
}

#[test]
fn cores_are_numbered_instance_wide_and_the_title_names_the_instance() {
    // Two devices of two cores: device 1's cores are NeuronCores 2 and 3.
    let (_scratch, mut document) = document_on(1, 2);
    document.instance_info.instance_id = "i-0123456789abcdef0".to_owned();
    document.instance_info.instance_type = "trn1.32xlarge".to_owned();
    let mut app = App::new(document);
    let text = screen(&app);
    for expected in [
        "i-0123456789abcdef0 (trn1.32xlarge)",
        "2 devices x 2 cores",
        "nc2 nd1 6001",
        "nc3 nd1 6002",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from\n{text}");
    }
    assert!(!text.contains("nc0 ") && !text.contains("nc1 "), "{text}");
    app.handle_key(KeyCode::Char('2'));
    app.handle_key(KeyCode::Char('x'));
    let text = screen(&app);
    assert!(
        text.contains("sg_00 nc2") || text.contains("sg_00 nc3"),
        "{text}"
    );
}

#[test]
fn keys_switch_tabs_and_fold_the_tree() {
    let (_scratch, document) = document();
    let mut app = App::new(document);
    app.handle_key(KeyCode::Char('3'));
    assert_eq!(app.tab, 2);
    let text = screen(&app);
    assert!(text.contains("nc0 nd0") && !text.contains("6001"), "{text}");
    app.handle_key(KeyCode::Char('d'));
    assert_eq!(app.tab, 0, "d wraps to the all tab");
    app.handle_key(KeyCode::Char('a'));
    assert_eq!(app.tab, 2, "a wraps back to the last tab");
    app.handle_key(KeyCode::Char('a'));
    assert_eq!(app.tab, 1);
    app.handle_key(KeyCode::Char('9'));
    assert_eq!(app.tab, 1, "no ninth tab");

    assert!(!screen(&app).contains("sg_00"));
    app.handle_key(KeyCode::Char('x'));
    assert!(screen(&app).contains("sg_00"), "x unfolds every model");
    app.handle_key(KeyCode::Down);
    app.handle_key(KeyCode::Left);
    assert_eq!(app.selected, 0, "folding moves back to the model line");
    app.handle_key(KeyCode::Char('x'));
    app.handle_key(KeyCode::Char('x'));
    assert!(!screen(&app).contains("sg_00"), "x folds everything back");
    app.handle_key(KeyCode::Right);
    assert!(
        screen(&app).contains("sg_00"),
        "right unfolds the selected model"
    );

    app.handle_key(KeyCode::Char('f'));
    assert!(screen(&app).contains("TFLOP/s"));
    assert!(!app.quit);
    app.handle_key(KeyCode::Char('q'));
    assert!(app.quit);
}

#[test]
fn a_new_report_keeps_the_selected_process() {
    let (_scratch, document) = document();
    let mut app = App::new(document.clone());
    app.handle_key(KeyCode::Char('3'));
    let mut reordered = document;
    reordered.neuron_runtime_data.reverse();
    app.update(reordered);
    assert_eq!(app.tabs()[app.tab].title, "serving-a");
}

#[test]
fn ctrl_c_quits_and_c_alone_does_not() {
    let (_scratch, document) = document();
    let mut app = App::new(document);
    app.handle_event(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::NONE));
    assert!(!app.quit);
    app.handle_event(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.quit, "Ctrl-C quits (a raw terminal sends no SIGINT)");
}

#[test]
fn control_characters_from_a_slab_never_reach_the_screen() {
    let (_scratch, mut document) = document();
    let evil = "tag\x1b]0;owned\x07\x1b[2J\u{202e}desrever";
    for entry in &mut document.neuron_runtime_data {
        entry.neuron_runtime_tag = evil.to_owned();
        if let Some(memory) = entry.report.memory_used.as_mut() {
            for model in &mut memory.loaded_models {
                model.name = "model\x1b[31mred".to_owned();
            }
        }
    }
    let mut app = App::new(document);
    app.handle_key(KeyCode::Char('x'));
    let text = screen(&app);
    assert!(
        !text.contains(|c: char| c != '\n' && nds_terminal::is_unsafe(c)),
        "{text:?}"
    );
    assert!(text.contains("tag\\x1b"), "{text}");
    assert!(text.contains("\\u{202e}desrever"), "{text}");
    assert!(text.contains("model\\x1b[31mred"), "{text}");
}
