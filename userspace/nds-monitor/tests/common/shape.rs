//! The shape of neuron-monitor's documented output, compared with documents of ours.
//!
//! Every key path of the guide's example document (`tests/fixtures/neuron-monitor-guide.json`,
//! written from neuron-monitor's user guide) must exist in ours with the same JSON type, and
//! the objects that consumers walk key by key (the companion exporter turns each key into a
//! series, or builds a fixed record from it) must hold exactly the guide's keys. Index keys
//! (`"0"`, `"sg_00"`) are one path segment `*`; array elements are `[]`.
//!
//! Shared by the host tests and the guest tests (which include this file by path), so it uses
//! nothing but `serde_json`.

#![allow(dead_code)] // Each test binary uses a different subset.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The guide's example, as the fixture holds it.
pub const GUIDE_EXAMPLE: &str = include_str!("../fixtures/neuron-monitor-guide.json");

/// Objects consumers iterate key by key: ours must hold exactly the guide's keys there.
pub const EXACT_OBJECTS: &[&str] = &[
    "instance_info",
    "neuron_hardware_info",
    "neuron_runtime_data[].report.execution_stats.error_summary",
    "neuron_runtime_data[].report.execution_stats.execution_summary",
    "neuron_runtime_data[].report.execution_stats.latency_stats.total_latency",
    "neuron_runtime_data[].report.execution_stats.latency_stats.device_latency",
    "neuron_runtime_data[].report.memory_used.neuron_runtime_used_bytes",
    "neuron_runtime_data[].report.memory_used.neuron_runtime_used_bytes.usage_breakdown.host",
    "neuron_runtime_data[].report.memory_used.neuron_runtime_used_bytes.usage_breakdown.neuroncore_memory_usage.*",
    "neuron_runtime_data[].report.memory_used.loaded_models[].subgraphs.*.memory_used_bytes.usage_breakdown.host",
    "neuron_runtime_data[].report.memory_used.loaded_models[].subgraphs.*.memory_used_bytes.usage_breakdown.neuron_device",
    "neuron_runtime_data[].report.neuron_runtime_vcpu_usage.vcpu_usage",
    "system_data.neuron_hw_counters.neuron_devices[]",
    "system_data.vcpu_usage.average_usage",
    "system_data.vcpu_usage.usage_data.*",
    "system_data.memory_info",
];

/// Values the guide documents as `null` when there is nothing to report (no execution during
/// the period): ours may be `null` there too, as long as some document has the object (so
/// that the keys inside are checked).
pub const NULLABLE: &[&str] = &[
    "neuron_runtime_data[].report.execution_stats.latency_stats.total_latency",
    "neuron_runtime_data[].report.execution_stats.latency_stats.device_latency",
];

/// Key paths with the JSON types seen there, and the key sets of every object by path.
#[derive(Debug, Default)]
pub struct Shape {
    /// Path → JSON type names.
    pub types: BTreeMap<String, BTreeSet<&'static str>>,
    /// Path → the key set of each object found there.
    pub objects: BTreeMap<String, Vec<BTreeSet<String>>>,
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `key` is an index (`"12"`, `"sg_03"`) rather than a field name.
fn is_index(key: &str) -> bool {
    let digits = key.strip_prefix("sg_").unwrap_or(key);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn join(path: &str, segment: &str) -> String {
    if path.is_empty() {
        segment.to_owned()
    } else {
        format!("{path}.{segment}")
    }
}

impl Shape {
    /// The shape of every document in `documents`, merged.
    pub fn of(documents: &[Value]) -> Self {
        let mut shape = Self::default();
        for document in documents {
            shape.walk("", document);
        }
        shape
    }

    fn walk(&mut self, path: &str, value: &Value) {
        if !path.is_empty() {
            self.types
                .entry(path.to_owned())
                .or_default()
                .insert(type_name(value));
        }
        match value {
            Value::Object(map) => {
                self.objects
                    .entry(path.to_owned())
                    .or_default()
                    .push(map.keys().cloned().collect());
                for (key, child) in map {
                    let segment = if is_index(key) { "*" } else { key.as_str() };
                    self.walk(&join(path, segment), child);
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.walk(&format!("{path}[]"), item);
                }
            }
            _ => {}
        }
    }
}

/// Checks `ours` against the guide's example; the number of key paths checked, or every
/// mismatch.
///
/// # Errors
///
/// One line per missing path, path of another type, or fixed-record object whose keys differ.
pub fn check(ours: &[Value]) -> Result<usize, Vec<String>> {
    let guide: Value = serde_json::from_str(GUIDE_EXAMPLE).expect("the fixture is JSON");
    let expected = Shape::of(std::slice::from_ref(&guide));
    let found = Shape::of(ours);
    let mut problems = Vec::new();
    for (path, types) in &expected.types {
        let mut allowed = types.clone();
        if NULLABLE.contains(&path.as_str()) {
            allowed.insert("null");
        }
        match found.types.get(path) {
            None => problems.push(format!("missing {path}")),
            Some(seen) if !seen.is_subset(&allowed) || seen.is_disjoint(types) => {
                problems.push(format!("{path}: {seen:?} where the guide has {types:?}"));
            }
            Some(_) => {}
        }
    }
    for &path in EXACT_OBJECTS {
        let keys = expected
            .objects
            .get(path)
            .and_then(|objects| objects.first())
            .unwrap_or_else(|| panic!("{path} is not an object of the guide's example"));
        for object in found.objects.get(path).into_iter().flatten() {
            if object != keys {
                let extra: Vec<_> = object.difference(keys).collect();
                let missing: Vec<_> = keys.difference(object).collect();
                problems.push(format!("{path}: extra keys {extra:?}, missing {missing:?}"));
            }
        }
    }
    if problems.is_empty() {
        Ok(expected.types.len())
    } else {
        Err(problems)
    }
}
