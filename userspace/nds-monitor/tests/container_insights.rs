//! The families CloudWatch Container Insights keeps are all served: its Neuron scraper's
//! filter and relabelling, and the families the agent turns into its metrics, as their
//! sources write them (`tests/container-insights-receiver.json` at the top of the repository,
//! each part with its file and commit), against the monitor's table of families, which
//! `tests/metrics.rs` proves is exactly what the exposition serves.

use std::collections::BTreeSet;

use nds_metric_table::{MetricFamily, FAMILIES, INSTANCE_LABELS};
use regex::Regex;
use serde_json::Value;

fn receiver() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/container-insights-receiver.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item.as_str().unwrap())
        .collect()
}

/// The labels a family's series carry: the instance ones and its own.
fn labels_of(family: &MetricFamily) -> BTreeSet<&'static str> {
    INSTANCE_LABELS
        .iter()
        .chain(family.labels)
        .copied()
        .collect()
}

fn family(name: &str) -> Option<&'static MetricFamily> {
    FAMILIES.iter().copied().find(|family| family.name == name)
}

/// A relabel regex as Prometheus applies it: anchored at both ends.
fn anchored(regex: &str) -> Regex {
    Regex::new(&format!("^(?:{regex})$")).unwrap()
}

#[test]
fn every_family_the_agent_keeps_is_served_with_the_labels_it_relabels() {
    let receiver = receiver();
    let rules = receiver["scraper"]["metric_relabel_configs"]
        .as_array()
        .unwrap();
    // The first rule keeps by name; the rest copy labels.
    let keep = &rules[0];
    assert_eq!(keep["action"], "keep");
    assert_eq!(strings(&keep["source_labels"]), ["__name__"]);
    let kept = anchored(keep["regex"].as_str().unwrap());

    // Every family the agent turns into a Container Insights metric that the filter keeps is
    // served, under the name the companion exporter exposes it by.
    let renamed = &receiver["renamed_families"];
    let mut served = Vec::new();
    let mut dropped = Vec::new();
    for name in strings(&renamed["families"]) {
        let exposed = renamed["exposed_as"][name].as_str().unwrap_or(name);
        if !kept.is_match(exposed) {
            dropped.push(exposed);
            continue;
        }
        let family = family(exposed).unwrap_or_else(|| panic!("{exposed} is not served"));
        served.push(family.name);
    }
    assert!(served.len() >= 11, "{served:?}");
    // instance_info: the agent renames it, but the scraper's filter never lets it through.
    assert_eq!(dropped, ["instance_info"]);

    // The filter keeps every family of the companion exporter's names that we serve but the
    // info and process ones, and none of ours.
    let ours_kept: Vec<&str> = FAMILIES
        .iter()
        .filter(|family| kept.is_match(family.name))
        .map(|family| family.name)
        .collect();
    assert!(ours_kept.iter().all(|name| !name.starts_with("nds_")));
    for name in &served {
        assert!(ours_kept.contains(name), "{name}");
    }

    // Every label a replace rule reads is carried by a kept family, but those the receiver
    // file says we do not serve, which no family carries.
    let not_served: BTreeSet<&str> = receiver["not_served"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let carried: BTreeSet<&str> = ours_kept
        .iter()
        .filter_map(|name| family(name))
        .flat_map(labels_of)
        .collect();
    let everywhere: BTreeSet<&str> = FAMILIES.iter().copied().flat_map(labels_of).collect();
    let mut read = BTreeSet::new();
    for rule in &rules[1..] {
        assert_eq!(rule["action"], "replace", "{rule}");
        for label in strings(&rule["source_labels"]) {
            read.insert(label);
            if not_served.contains(label) {
                assert!(!everywhere.contains(label), "{label} is served now");
            } else {
                assert!(carried.contains(label), "no kept family carries {label}");
            }
        }
    }
    assert!(
        read.is_superset(&not_served),
        "{not_served:?} read by no rule"
    );
    // The labels the receiver attributes pods and devices by, on the families it does that on.
    for name in served.iter().filter(|name| name.starts_with("neuroncore_")) {
        assert!(
            family(name).unwrap().labels.contains(&"neuroncore"),
            "{name}"
        );
    }
    assert!(family("hardware_ecc_events_total")
        .unwrap()
        .labels
        .contains(&"neuron_device_index"));
}
