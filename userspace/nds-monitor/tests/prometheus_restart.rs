//! The exporter restarted under a real Prometheus server (Debian's `prometheus`), as a
//! DaemonSet's pod is on an upgrade or a failed probe: processes of one tag end and start,
//! the exporter restarts twice, and what Prometheus stored still counts exactly what the
//! producers wrote while it watched.
//!
//! Counted as Prometheus counts (without `increase()`, whose extrapolation makes any value
//! a ratio of durations): over a series' raw samples, each rise adds its difference and each
//! fall (a reset) adds the new value whole. That rule is exact only if a restart resets a
//! series to no more than what the new exporter itself saw increase; an exporter that starts
//! each series at a live process's whole lifetime counts that process's earlier work twice,
//! and the sums below come out too large.

mod common;

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::prometheus::{free_port, PrometheusServer};
use common::written::{counter_key, CounterKey, Labels, Written};
use common::*;
use nds_sysfs::TimeInUseUnit;

const TAG: &str = "restart-shared";
const REPORTS: &str = "nds_monitor_reports_total";

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A real process, so that its slab file names a pid whose start time the monitor can read
/// (in the scratch `/proc`, which shows it).
struct Owner(Child);

impl Owner {
    fn start(scratch: &Scratch) -> Self {
        let owner = Self(Command::new("sleep").arg("600").spawn().unwrap());
        scratch.show_process(owner.pid());
        owner
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.0.id()).unwrap()
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The report number the exporter shows now.
fn report_number(served: &Served) -> u64 {
    served
        .get("/metrics")
        .body
        .lines()
        .find_map(|line| {
            line.strip_prefix(&format!("{REPORTS}{{"))?
                .rsplit(' ')
                .next()
        })
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

/// Waits until the exporter published two more reports (the second read every write made
/// before this call), then until Prometheus stored a scrape taken after that.
fn settle(served: &Served, prometheus: &PrometheusServer) {
    let target = report_number(served) + 2;
    let deadline = Instant::now() + Duration::from_secs(20);
    while report_number(served) < target {
        assert!(Instant::now() < deadline, "the exporter stopped reporting");
        std::thread::sleep(Duration::from_millis(50));
    }
    prometheus.scraped_after(unix_now());
}

/// Every raw sample Prometheus holds of the tag's counter series, oldest first.
fn raw_samples(prometheus: &PrometheusServer) -> BTreeMap<CounterKey, Vec<f64>> {
    let mut samples = BTreeMap::new();
    for family in ["execution_status_total", "execution_errors_total"] {
        let query = format!("{family}{{runtime_tag=\"{TAG}\"}}[10m]");
        for series in prometheus.query(&query, None) {
            let labels: Labels = series["metric"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(name, value)| (name.clone(), value.as_str().unwrap().to_owned()))
                .collect();
            let values = series["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|point| point[1].as_str().unwrap().parse().unwrap())
                .collect();
            samples.insert(counter_key(&labels).unwrap(), values);
        }
    }
    samples
}

/// What Prometheus counts over `samples`: rises add their difference, a fall its new value.
fn counted(samples: &[f64]) -> f64 {
    samples
        .windows(2)
        .map(|pair| {
            if pair[1] >= pair[0] {
                pair[1] - pair[0]
            } else {
                pair[1]
            }
        })
        .sum()
}

#[test]
fn counts_stay_exact_across_two_exporter_restarts() {
    let scratch = Scratch::new("prometheus-restart");
    scratch.sysfs(2, 2, 3, 0);
    let slabs = scratch.slabs();
    let address = format!("127.0.0.1:{}", free_port());
    let start_exporter = || {
        Served::start(
            scratch
                .monitor_command("500ms")
                .args(["serve", "--listen", &address]),
        )
    };
    let write = |owner: &Owner, count: u64, written: &mut Written| {
        written.add(&produce_in_unit(
            &slabs,
            0,
            owner.pid(),
            TAG,
            count,
            TimeInUseUnit::default(),
        ));
    };
    let mut written = Written::default();

    // X worked before any exporter: that is no exporter's to count.
    let x = Owner::start(&scratch);
    write(&x, 300, &mut Written::default());
    let exporter = start_exporter();
    let prometheus = PrometheusServer::start(&scratch.0.join("prometheus"), &address, "1s");
    settle(&exporter, &prometheus);
    write(&x, 50, &mut written);
    settle(&exporter, &prometheus);
    // X ends; Y, of the same tag, runs.
    std::fs::remove_file(slab_path(&slabs, 0, x.pid())).unwrap();
    drop(x);
    let y = Owner::start(&scratch);
    write(&y, 70, &mut written);
    settle(&exporter, &prometheus);

    // The first restart, while Y runs; nothing is written until Prometheus saw the new one.
    assert!(exporter.stop_with(libc::SIGTERM).success());
    let exporter = start_exporter();
    settle(&exporter, &prometheus);
    write(&y, 30, &mut written);
    settle(&exporter, &prometheus);

    // The second restart; then Y works on and Z, started after the exporter, joins the tag.
    assert!(exporter.stop_with(libc::SIGTERM).success());
    let exporter = start_exporter();
    settle(&exporter, &prometheus);
    write(&y, 20, &mut written);
    // The exporter started two reports ago (settle): Z starts after it.
    let z = Owner::start(&scratch);
    write(&z, 10, &mut written);
    settle(&exporter, &prometheus);

    let samples = raw_samples(&prometheus);
    let completed = (
        "execution_status_total".to_owned(),
        TAG.to_owned(),
        "completed".to_owned(),
    );
    let falls = samples[&completed]
        .windows(2)
        .filter(|pair| pair[1] < pair[0])
        .count();
    assert_eq!(
        falls, 2,
        "each restart is one reset: {:?}",
        samples[&completed]
    );
    let counted: BTreeMap<CounterKey, f64> = samples
        .iter()
        .map(|(key, values)| (key.clone(), counted(values)))
        .collect();
    let expected: BTreeMap<CounterKey, f64> = written
        .0
        .iter()
        .map(|(key, value)| (key.clone(), *value as f64))
        .collect();
    println!(
        "completed: {:?} raw samples, counted {} of {} written",
        samples[&completed].len(),
        counted[&completed],
        expected[&completed]
    );
    assert_eq!(counted, expected);
    drop((y, z));
}
