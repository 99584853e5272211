//! An HA pair of real Prometheus servers (Debian's `prometheus`) scraping one `nds-monitor
//! serve` at different intervals for a minute, while a third client scrapes every 100 ms and
//! producers of shared tags write known counts, end, join and reuse a slab.
//!
//! What is compared, precisely:
//!
//! - **Same report, same values.** Every exposition carries `nds_monitor_reports_total`, the
//!   number of the report it renders. From each server's raw samples (a range selector over
//!   every series of the job) the test groups the samples by scrape timestamp and takes that
//!   counter as the scrape's report number. For every report number both servers scraped,
//!   the two scrapes must hold the same series with the same values (every series of the
//!   exposition; Prometheus's own `up` and `scrape_*` series are left out, they describe the
//!   scrape). Two scrapes of one report by the same server, or by the 100 ms loop, must be
//!   identical too, and the loop's counters must equal the servers' for the same report.
//! - **Exact counts.** For every `execution_status_total` and `execution_errors_total` series,
//!   the first raw sample equals what the producers wrote before the monitor started, the last
//!   equals everything they wrote, so last minus first is exactly what they wrote during the
//!   minute; `x - x offset d` evaluated by each server says the same. `increase()` is not used:
//!   it extrapolates the first-to-last difference to the window's edges, so its value is that
//!   difference times a ratio of durations, not an integer count.
//! - **No resets.** `resets()` over every counter and histogram series is 0 on both servers.
//!
//! This fails on a serve whose scrapes change state (the old one ran a report per request,
//! moving every baseline): there, each request makes a report of its own, so no report number
//! is ever scraped by both servers (the pair check finds no common report), the number grows
//! with the 100 ms loop's requests instead of once per period (the schedule check), and a
//! utilization or latency window differs between the servers. A counter summed only over the
//! processes the monitor still knows fails the exact counts and `resets()` when a process of a
//! shared tag ends.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::prometheus::PrometheusServer;
use common::written::{counter_key, CounterKey, Labels, Written};
use common::*;
use nds_sysfs::TimeInUseUnit;
use serde_json::Value;

/// The monitor's period: twice the fast server's interval, so that it scrapes every report.
const PERIOD: Duration = Duration::from_secs(2);
const FAST_INTERVAL: &str = "1s";
const SLOW_INTERVAL: &str = "2500ms";
const MINUTE: Duration = Duration::from_secs(60);
const REPORTS: &str = "nds_monitor_reports_total";

/// A producer process, as the slab file's name and its tag show it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Process {
    device: u32,
    pid: i32,
    tag: &'static str,
}

const A: Process = Process {
    device: 0,
    pid: 8801,
    tag: "pair-shared",
};
const B: Process = Process {
    device: 0,
    pid: 8802,
    tag: "pair-shared",
};
const C: Process = Process {
    device: 1,
    pid: 8803,
    tag: "pair-solo",
};
/// Joins A and B's tag from another device.
const D: Process = Process {
    device: 1,
    pid: 8804,
    tag: "pair-shared",
};

/// One server's scrapes: scrape timestamp (ms) → every series of it → its value as stored.
type Scrapes = BTreeMap<i64, BTreeMap<Labels, String>>;

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Every raw sample `server` holds for the job up to `at`, by scrape.
fn scrapes(server: &PrometheusServer, at: f64) -> Scrapes {
    let mut scrapes = Scrapes::new();
    for series in server.query(r#"{job="nds-monitor"}[10m]"#, Some(at)) {
        let labels: Labels = series["metric"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, value)| (name.clone(), value.as_str().unwrap().to_owned()))
            .collect();
        let name = &labels["__name__"];
        if name == "up" || name.starts_with("scrape_") {
            continue;
        }
        for point in series["values"].as_array().unwrap() {
            let millis = (point[0].as_f64().unwrap() * 1000.0).round() as i64;
            scrapes
                .entry(millis)
                .or_default()
                .insert(labels.clone(), point[1].as_str().unwrap().to_owned());
        }
    }
    scrapes
}

/// The report number a scrape shows.
fn report_number(scrape: &BTreeMap<Labels, String>) -> u64 {
    scrape
        .iter()
        .find(|(labels, _)| labels["__name__"] == REPORTS)
        .map(|(_, value)| value.parse().unwrap())
        .expect("every scrape has the report counter")
}

/// A scrape's tag counters.
fn tag_counters(scrape: &BTreeMap<Labels, String>) -> BTreeMap<CounterKey, f64> {
    scrape
        .iter()
        .filter_map(|(labels, value)| Some((counter_key(labels)?, value.parse().ok()?)))
        .collect()
}

/// One answer of the 100 ms loop: its report number and tag counters.
struct LoopScrape {
    report: u64,
    counters: BTreeMap<CounterKey, f64>,
}

/// The labels and value of an exposition sample line.
fn parse_line(line: &str) -> Option<(&str, BTreeMap<&str, &str>, f64)> {
    let (name, rest) = line.split_once('{')?;
    let (labels, value) = rest.rsplit_once("} ")?;
    let labels = labels
        .split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            Some((key, value.trim_matches('"')))
        })
        .collect();
    Some((name, labels, value.parse().ok()?))
}

/// The report number and tag counters of an exposition.
fn parse_exposition(body: &str) -> LoopScrape {
    let mut scrape = LoopScrape {
        report: 0,
        counters: BTreeMap::new(),
    };
    for (name, labels, value) in body.lines().filter_map(parse_line) {
        let kind = match name {
            REPORTS => {
                scrape.report = value as u64;
                continue;
            }
            "execution_status_total" => labels.get("status_type"),
            "execution_errors_total" => labels.get("error_type"),
            _ => continue,
        };
        if let (Some(kind), Some(tag)) = (kind, labels.get("runtime_tag")) {
            scrape
                .counters
                .insert((name.into(), (*tag).into(), (*kind).into()), value);
        }
    }
    scrape
}

/// Scrapes `address` every 100 ms until `stop`, counting its scrapes in `count`: every
/// answer parsed, and the first body of each report number with the report numbers whose
/// later bodies differed from it.
fn scrape_loop(
    address: &str,
    stop: &AtomicBool,
    count: &AtomicUsize,
) -> (Vec<LoopScrape>, Vec<u64>) {
    let mut seen = Vec::new();
    let mut bodies: BTreeMap<u64, String> = BTreeMap::new();
    let mut differing = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let response = request(address, "GET", "/metrics").unwrap();
        assert!(response.status.contains(" 200 "), "{response:?}");
        let scrape = parse_exposition(&response.body);
        match bodies.get(&scrape.report) {
            Some(first) if *first != response.body => differing.push(scrape.report),
            Some(_) => {}
            None => {
                bodies.insert(scrape.report, response.body);
            }
        }
        seen.push(scrape);
        count.fetch_add(1, Ordering::Relaxed);
        // A scraper's pace (not synchronisation): the loop runs until the test stops it.
        std::thread::sleep(Duration::from_millis(100));
    }
    (seen, differing)
}

/// The monitor's current report number, read from its exposition.
fn current_report(served: &Served) -> u64 {
    parse_exposition(&served.get("/metrics").body).report
}

/// Waits until the monitor published two more reports: the second began after everything
/// written before this call (the first may have read the slabs mid-write).
fn settle(served: &Served) {
    let target = current_report(served) + 2;
    let deadline = Instant::now() + 10 * PERIOD;
    while current_report(served) < target {
        assert!(Instant::now() < deadline, "the monitor stopped reporting");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Each report number a server's scrapes show, with the first scrape of it.
fn by_report(stored: &Scrapes) -> BTreeMap<u64, &BTreeMap<Labels, String>> {
    let mut reports: BTreeMap<u64, &BTreeMap<Labels, String>> = BTreeMap::new();
    for scrape in stored.values() {
        reports.entry(report_number(scrape)).or_insert(scrape);
    }
    reports
}

/// How many report numbers both servers stored a scrape of, up to Unix time `at`.
fn reports_scraped_by_both(one: &PrometheusServer, other: &PrometheusServer, at: f64) -> usize {
    let (one, other) = (scrapes(one, at), scrapes(other, at));
    let other = by_report(&other);
    by_report(&one)
        .keys()
        .filter(|number| other.contains_key(number))
        .count()
}

/// The `(key, value)` pairs of an instant query's vector of `family` (arithmetic drops the
/// name from the result's labels).
fn vector_counters(family: &str, result: &[Value]) -> BTreeMap<CounterKey, f64> {
    result
        .iter()
        .filter_map(|sample| {
            let mut labels: Labels = sample["metric"]
                .as_object()?
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect();
            labels.insert("__name__".into(), family.into());
            let value = sample["value"][1].as_str()?.parse().ok()?;
            Some((counter_key(&labels)?, value))
        })
        .collect()
}

fn as_floats(written: &Written) -> BTreeMap<CounterKey, f64> {
    written
        .0
        .iter()
        .map(|(key, value)| (key.clone(), *value as f64))
        .collect()
}

#[test]
fn two_prometheus_servers_and_a_scrape_loop_see_the_same_reports_and_exact_counts() {
    let scratch = Scratch::new("prometheus-pair");
    scratch.sysfs(2, 2, 3, 0);
    let slabs = scratch.slabs();

    // Before the monitor starts: A and B share a tag, C has one of its own.
    let mut before = Written::default();
    for process in [A, B, C] {
        before.add(&produce(
            &slabs,
            process.device,
            process.pid,
            process.tag,
            300,
        ));
    }

    let served =
        Served::start(
            scratch
                .monitor_command("2s")
                .args(["serve", "--listen", "127.0.0.1:0"]),
        );
    let fast = PrometheusServer::start(&scratch.0.join("fast"), &served.address, FAST_INTERVAL);
    let slow = PrometheusServer::start(&scratch.0.join("slow"), &served.address, SLOW_INTERVAL);
    let stop = Arc::new(AtomicBool::new(false));
    let loop_scrapes = Arc::new(AtomicUsize::new(0));
    let scraper = {
        let (address, stop) = (served.address.clone(), Arc::clone(&stop));
        let count = Arc::clone(&loop_scrapes);
        std::thread::spawn(move || scrape_loop(&address, &stop, &count))
    };

    // Both servers hold the state before the minute: the `offset` comparison below reads it
    // at the later of their two scrapes, both taken before the minute's first write.
    let started = unix_now();
    let before_minute = fast
        .scraped_after(started - 60.0)
        .max(slow.scraped_after(started - 60.0));
    let minute_clock = Instant::now();

    // The minute: every step, each live process writes; then the monitor settles (reads the
    // writes) and a process ends, joins, or takes a slab name again.
    let mut during = Written::default();
    let mut live = vec![A, B, C];
    let mut step = 0u64;
    loop {
        for process in &live {
            during.add(&produce_in_unit(
                &slabs,
                process.device,
                process.pid,
                process.tag,
                40 + 7 * step,
                TimeInUseUnit::default(),
            ));
        }
        settle(&served);
        let end = |live: &mut Vec<Process>, process: Process| {
            std::fs::remove_file(slab_path(&slabs, process.device, process.pid)).unwrap();
            live.retain(|other| *other != process);
        };
        match step {
            2 => end(&mut live, A),
            4 | 8 => {
                // D joins the shared tag from device 1; later A's slab name is taken again
                // (a new slab under the same pid, starting from zero).
                let process = if step == 4 { D } else { A };
                during.add(&produce(
                    &slabs,
                    process.device,
                    process.pid,
                    process.tag,
                    120,
                ));
                live.push(process);
            }
            6 => end(&mut live, B),
            10 => end(&mut live, D),
            12 => end(&mut live, C),
            _ => {}
        }
        step += 1;
        if step > 12 && minute_clock.elapsed() >= MINUTE {
            break;
        }
    }
    settle(&served);
    let settled = unix_now();
    fast.scraped_after(settled + 0.5);
    slow.scraped_after(settled + 0.5);
    // What the comparisons below need: reports both servers scraped, and the loop's scrapes.
    let deadline = Instant::now() + 2 * MINUTE;
    while reports_scraped_by_both(&fast, &slow, unix_now()) < 15
        || loop_scrapes.load(Ordering::Relaxed) < 300
    {
        assert!(
            Instant::now() < deadline,
            "{} reports scraped by both servers, {} scrapes of the loop",
            reports_scraped_by_both(&fast, &slow, unix_now()),
            loop_scrapes.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    let (looped, differing) = scraper.join().unwrap();
    // Whole milliseconds, as Prometheus keeps time: the offset below is then exact.
    let at_ms = (unix_now() * 1000.0).round() as i64;
    let at = at_ms as f64 / 1000.0;
    let after = before.plus(&during);

    let fast_scrapes = scrapes(&fast, at);
    let slow_scrapes = scrapes(&slow, at);
    let mut by_report: Vec<BTreeMap<u64, &BTreeMap<Labels, String>>> = Vec::new();
    for (server, stored) in [(&fast, &fast_scrapes), (&slow, &slow_scrapes)] {
        // Report numbers follow the monitor's schedule, not the requests (three clients).
        let numbers: Vec<u64> = stored.values().map(report_number).collect();
        assert!(
            numbers.windows(2).all(|pair| pair[0] <= pair[1]),
            "{numbers:?}"
        );
        let (first_ms, last_ms) = (
            *stored.keys().next().unwrap(),
            *stored.keys().last().unwrap(),
        );
        let span = Duration::from_millis(u64::try_from(last_ms - first_ms).unwrap());
        let reports = numbers.last().unwrap() - numbers[0];
        let scheduled = span.as_secs_f64() / PERIOD.as_secs_f64();
        assert!(
            (reports as f64) <= scheduled + 3.0,
            "{}: {reports} reports in {span:?}, one per {PERIOD:?} would be {scheduled:.1}",
            server.address
        );
        // Two scrapes of one report by one server: the same series and values.
        let mut reports_seen: BTreeMap<u64, &BTreeMap<Labels, String>> = BTreeMap::new();
        for scrape in stored.values() {
            let number = report_number(scrape);
            if let Some(earlier) = reports_seen.get(&number) {
                assert_eq!(*earlier, scrape, "report {number} scraped twice differs");
            } else {
                reports_seen.insert(number, scrape);
            }
        }
        by_report.push(reports_seen);
    }

    // The pair: every report both servers scraped holds the same series and values.
    let (fast_reports, slow_reports) = (&by_report[0], &by_report[1]);
    let common: Vec<u64> = slow_reports
        .keys()
        .filter(|number| fast_reports.contains_key(number))
        .copied()
        .collect();
    let mut compared_series = 0;
    for number in &common {
        let (one, other) = (fast_reports[number], slow_reports[number]);
        let names: BTreeSet<&Labels> = one.keys().chain(other.keys()).collect();
        for labels in names {
            assert_eq!(
                one.get(labels),
                other.get(labels),
                "report {number}, series {labels:?}"
            );
        }
        compared_series += one.len();
    }
    println!(
        "fast server: {} scrapes of {} reports; slow server: {} scrapes of {} reports; \
         {} reports scraped by both, {compared_series} series values compared, all equal",
        fast_scrapes.len(),
        fast_reports.len(),
        slow_scrapes.len(),
        slow_reports.len(),
        common.len()
    );
    // Waited for above: a serve whose requests made reports would have none in common.
    assert!(
        common.len() >= 15,
        "only {} of the slow server's {} reports were also scraped by the fast one",
        common.len(),
        slow_reports.len()
    );

    // The 100 ms loop: one body per report, reports scraped more than once (a serve whose
    // requests made reports would show each report number once), counters never down, and
    // the servers' values.
    assert!(
        differing.is_empty(),
        "reports {differing:?} changed between scrapes"
    );
    let loop_reports: BTreeSet<u64> = looped.iter().map(|scrape| scrape.report).collect();
    assert!(
        loop_reports.len() < looped.len(),
        "{} scrapes of {} reports",
        looped.len(),
        loop_reports.len()
    );
    for pair in looped.windows(2) {
        assert!(pair[0].report <= pair[1].report);
        for (key, value) in &pair[1].counters {
            let earlier = pair[0].counters.get(key).copied().unwrap_or(0.0);
            assert!(*value >= earlier, "{key:?} went from {earlier} to {value}");
        }
    }
    let mut loop_matched = 0;
    let mut matched_reports = BTreeSet::new();
    for scrape in &looped {
        if let Some(stored) = fast_reports.get(&scrape.report) {
            assert_eq!(
                tag_counters(stored),
                scrape.counters,
                "report {}",
                scrape.report
            );
            loop_matched += 1;
            matched_reports.insert(scrape.report);
        }
    }
    // The loop scrapes each report of two seconds many times: it has those the two servers
    // share, at least.
    assert!(
        matched_reports.len() >= 15,
        "the loop's scrapes matched {} reports of the fast server",
        matched_reports.len()
    );
    println!(
        "loop: {} scrapes of {} reports, {loop_matched} scrapes of {} reports the fast server \
         also has",
        looped.len(),
        loop_reports.len(),
        matched_reports.len()
    );

    // Exact counts: first raw sample, last raw sample, and their difference, on both.
    let offset_ms = at_ms - (before_minute * 1000.0).round() as i64;
    for (server, stored) in [(&fast, &fast_scrapes), (&slow, &slow_scrapes)] {
        let first = tag_counters(stored.values().next().unwrap());
        let last = tag_counters(stored.values().last().unwrap());
        assert_eq!(
            first,
            as_floats(&before),
            "{}: first samples",
            server.address
        );
        assert_eq!(last, as_floats(&after), "{}: last samples", server.address);
        let differences: BTreeMap<CounterKey, f64> = last
            .iter()
            .map(|(key, value)| (key.clone(), value - first[key]))
            .collect();
        assert_eq!(differences, as_floats(&during));
        // Every stored sample of every tag counter, in order: never down.
        let mut previous: BTreeMap<CounterKey, f64> = BTreeMap::new();
        for scrape in stored.values() {
            for (key, value) in tag_counters(scrape) {
                let earlier = previous.insert(key.clone(), value).unwrap_or(0.0);
                assert!(value >= earlier, "{key:?}: {earlier} -> {value}");
            }
        }
        // The same through PromQL: the value now minus the value before the minute.
        let mut by_query = BTreeMap::new();
        for family in ["execution_status_total", "execution_errors_total"] {
            by_query.extend(vector_counters(
                family,
                &server.query(
                    &format!("{family} - {family} offset {offset_ms}ms"),
                    Some(at),
                ),
            ));
        }
        assert_eq!(by_query, as_floats(&during), "{}", server.address);
        // Prometheus saw no counter reset in any series of a counter or histogram family
        // (one query per family: `resets()` drops the name, families would collide).
        let families: BTreeSet<&String> = stored
            .values()
            .flat_map(|scrape| scrape.keys().map(|labels| &labels["__name__"]))
            .filter(|name| {
                name.ends_with("_total") || name.ends_with("_bucket") || name.ends_with("_count")
            })
            .collect();
        let mut checked = 0;
        for family in &families {
            let resets = server.query(&format!("resets({family}[10m])"), Some(at));
            checked += resets.len();
            let reset: Vec<&Value> = resets
                .iter()
                .filter(|sample| sample["value"][1] != "0")
                .collect();
            assert!(
                reset.is_empty(),
                "{}: {family} reset {reset:?}",
                server.address
            );
        }
        assert!(checked > 100, "only {checked} series");
        println!(
            "{}: resets() 0 in {checked} series of {} families",
            server.address,
            families.len()
        );
    }
    let completed = |written: &Written, tag: &str| {
        written.0[&(
            "execution_status_total".into(),
            tag.into(),
            "completed".into(),
        )]
    };
    println!(
        "execution_status_total{{status_type=\"completed\"}}: pair-shared {} -> {}, \
         pair-solo {} -> {} (first and last samples on both servers); {} counter series exact",
        completed(&before, "pair-shared"),
        completed(&after, "pair-shared"),
        completed(&before, "pair-solo"),
        completed(&after, "pair-solo"),
        after.0.len()
    );
    let ended = tag_counters(fast_scrapes.values().last().unwrap());
    assert_eq!(ended.len(), after.0.len());
    let released = fast_scrapes
        .values()
        .last()
        .unwrap()
        .iter()
        .find(|(labels, _)| {
            labels["__name__"] == "nds_monitor_slabs_ended_total"
                && labels.get("reason").map(String::as_str) == Some("released")
        })
        .map(|(_, value)| value.clone());
    assert_eq!(
        released.as_deref(),
        Some("4"),
        "A, B, D and C ended, as the monitor saw it"
    );
}
