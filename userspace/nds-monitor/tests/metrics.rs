//! The exposition carries exactly the families `nds_metric_table` declares: rendered from
//! an input with every group, a latency histogram, ECC events, pod attribution and every
//! reason, each family is declared with the type, help and labels it is rendered with, and
//! each declared family is rendered.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use nds_document::health::HealthRules;
use nds_document::Plan;
use nds_exporter::prometheus::instance_labels;
use nds_exporter::Exporter;
use nds_health::{exposition, Health};
use nds_metric_table::{
    MetricFamily, MetricType, CLAIM_LABELS, FAMILIES, INSTANCE_LABELS, POD_LABELS,
};
use nds_podresources::v1::{
    ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources,
};
use nds_podresources::Attribution;
use nds_sampler::Monitor;

const SECOND: Duration = Duration::from_secs(1);

/// The served exposition of a monitor with everything to show: a process of this test's pid
/// (shown in the scratch `/proc`, which then has its CPU use) whose two cores a pod holds,
/// executing between ticks so that latencies are sampled, the kernel's totals, a driver tree
/// with ECC counters, a kubelet call that failed, and a tenure ledger followed.
fn rich_exposition(scratch: &Scratch) -> String {
    scratch.sysfs(1, 2, 7, 1);
    scratch.hardware(1, 3);
    let pid = own_pid();
    scratch.show_process(pid);
    produce(&scratch.slabs(), 0, pid, "everything", 200);
    let feed = nds_podresources::PodFeed::new(Duration::from_secs(3600));
    let t0 = Instant::now();
    feed.publish(
        Attribution::from_list(&ListPodResourcesResponse {
            pod_resources: vec![PodResources {
                name: "trainer".to_owned(),
                namespace: "jobs".to_owned(),
                containers: vec![ContainerResources {
                    name: "main".to_owned(),
                    devices: vec![ContainerDevices {
                        resource_name: "aws.amazon.com/neuroncore".to_owned(),
                        device_ids: vec!["0".to_owned(), "1".to_owned()],
                    }],
                    dynamic_resources: Vec::new(),
                }],
            }],
        }),
        t0,
    );
    feed.failed();
    let ledger = common::ledger::TestLedger::following(&[0]);
    let mut monitor = Monitor::new(scratch.source(), Plan::everything(SECOND), t0)
        .with_ledger(Some(Box::new(ledger)))
        .with_consumer((
            Exporter::new().with_pod_attribution(feed),
            Health::new(HealthRules::default(), t0),
        ));
    assert!(monitor.poll(t0).is_none(), "attaches first");
    for tick in 1..=3 {
        produce_more(&scratch.slabs(), 0, pid, "everything", 20);
        monitor.tick(t0 + tick * SECOND / 10);
    }
    assert!(monitor.poll(t0 + SECOND).is_some(), "a report is due");
    // As serve writes it: the exporter's exposition, then the verdicts' families.
    let (exporter, health) = monitor.consumer();
    let instance = instance_labels(&exporter.latest().document().instance_info);
    exporter.exposition() + &exposition::encode(health.group(), health.rules(), &instance)
}

/// One family as the exposition renders it.
#[derive(Debug)]
struct Rendered {
    help: String,
    metric_type: String,
    /// Each sample's suffix to the family name (`_bucket` …) and labels.
    samples: Vec<(String, BTreeMap<String, String>)>,
}

/// The labels of a sample, `a="1",b="x\"y"`, unescaped.
fn labels_of(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while let Some((name, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next().expect("a closing quote") {
                (at, '"') => break at,
                (_, '\\') => match chars.next().expect("an escaped character").1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, other) => value.push(other),
            }
        };
        labels.insert(name.trim_start_matches(',').to_owned(), value);
        rest = &after[end + 1..];
    }
    labels
}

/// Every family of `exposition` by name; panics on a family rendered twice, a `# TYPE`
/// without its `# HELP` or a sample outside its family.
fn families_of(exposition: &str) -> BTreeMap<String, Rendered> {
    let mut families = BTreeMap::new();
    let mut help = None;
    let mut current: Option<String> = None;
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, metric_type) = rest.split_once(' ').unwrap();
            let (helped, help) = help
                .take()
                .unwrap_or_else(|| panic!("{name} has no # HELP"));
            assert_eq!(helped, name, "# HELP before # TYPE");
            let family = Rendered {
                help: help.to_owned(),
                metric_type: metric_type.to_owned(),
                samples: Vec::new(),
            };
            assert!(
                families.insert(name.to_owned(), family).is_none(),
                "{name} rendered twice"
            );
            current = Some(name.to_owned());
        } else {
            let name = current
                .as_deref()
                .unwrap_or_else(|| panic!("{line} before any # TYPE"));
            let (sample, rest) = line.split_once('{').unwrap();
            let suffix = sample
                .strip_prefix(name)
                .unwrap_or_else(|| panic!("{sample} under # TYPE {name}"));
            let labels = labels_of(rest.rsplit_once('}').unwrap().0);
            let family = families.get_mut(name).unwrap();
            family.samples.push((suffix.to_owned(), labels));
        }
    }
    families
}

/// What the table declares by name: each family, and each counter's `_created` gauge (with
/// the counter's help and labels).
fn declared() -> BTreeMap<String, (&'static MetricFamily, String)> {
    let mut declared = BTreeMap::new();
    for &family in &FAMILIES {
        declared.insert(
            family.name.to_owned(),
            (family, family.metric_type.to_string()),
        );
        if let Some(created) = family.created_name() {
            declared.insert(created, (family, "gauge".to_owned()));
        }
    }
    declared
}

#[test]
fn the_exposition_renders_exactly_the_declared_families() {
    let scratch = Scratch::new("metrics-declared");
    let rendered = families_of(&rich_exposition(&scratch));
    let declared = declared();
    let undeclared: Vec<&String> = rendered
        .keys()
        .filter(|name| !declared.contains_key(*name))
        .collect();
    assert!(
        undeclared.is_empty(),
        "rendered, not declared in nds_metric_table::FAMILIES: {undeclared:?}"
    );
    let unrendered: Vec<&String> = declared
        .keys()
        .filter(|name| !rendered.contains_key(*name))
        .collect();
    assert!(
        unrendered.is_empty(),
        "declared, never rendered: {unrendered:?}"
    );
    for (name, (family, metric_type)) in &declared {
        let family_rendered = &rendered[name];
        assert_eq!(&family_rendered.metric_type, metric_type, "{name}");
        assert_eq!(family_rendered.help, family.help, "{name}");
        let suffixes: &[&str] = match family.metric_type {
            MetricType::Histogram(_) if metric_type == "histogram" => {
                &["_bucket", "_sum", "_count"]
            }
            _ => &[""],
        };
        let mut allowed: BTreeSet<&str> = INSTANCE_LABELS.into_iter().collect();
        allowed.extend(family.labels);
        if family.pod_labels {
            allowed.extend(POD_LABELS);
            // A device plugin's node (this one) names no claim; a DRA node's does.
            allowed.extend(CLAIM_LABELS);
        }
        let mut seen = BTreeSet::new();
        for (suffix, labels) in &family_rendered.samples {
            assert!(suffixes.contains(&suffix.as_str()), "{name}{suffix}");
            for label in labels.keys() {
                let bound = suffix == "_bucket" && label == "le";
                assert!(
                    bound || allowed.contains(label.as_str()),
                    "{name}{suffix} has {label}"
                );
            }
            for label in INSTANCE_LABELS {
                assert!(labels.contains_key(label), "{name}{suffix} lacks {label}");
            }
            seen.extend(labels.keys().map(String::as_str));
        }
        for label in family.labels {
            assert!(seen.contains(label), "{name} never has {label}");
        }
        assert_eq!(
            POD_LABELS.iter().all(|label| seen.contains(label)),
            family.pod_labels,
            "{name}: pod labels"
        );
    }
}

#[test]
fn every_reason_rendered_is_the_documented_one() {
    let scratch = Scratch::new("metrics-reasons");
    let rendered = families_of(&rich_exposition(&scratch));
    let with_reasons: Vec<&MetricFamily> = FAMILIES
        .into_iter()
        .filter(|family| family.labels.contains(&"reason"))
        .collect();
    assert!(!with_reasons.is_empty());
    for family in with_reasons {
        let values: BTreeSet<&str> = rendered[family.name]
            .samples
            .iter()
            .map(|(_, labels)| labels["reason"].as_str())
            .collect();
        // The note lists each value as ``value``.
        let note = family.labels_note.unwrap_or_default();
        let documented: BTreeSet<&str> = note.split("``").skip(1).step_by(2).collect();
        assert_eq!(values, documented, "{}", family.name);
    }
}
