//! What producers wrote to the per-tag counter families, kept as the exposition names them
//! (`execution_status_total`, `execution_errors_total` by `runtime_tag` and type), to compare
//! with what a Prometheus server stored.

use std::collections::BTreeMap;

use nds_abi::counters::NcCounter;
use nds_loadgen::ProducerReport;

/// `status_type` of `execution_status_total` and the slab counter behind it (the companion
/// exporter's names, Documentation/userspace.rst).
const STATUS_TYPES: [(&str, NcCounter); 6] = [
    ("completed", NcCounter::InferCompleted),
    ("completed_with_err", NcCounter::InferCompletedWithErr),
    (
        "completed_with_num_err",
        NcCounter::InferCompletedWithNumErr,
    ),
    ("timed_out", NcCounter::InferTimedOut),
    ("incorrect_input", NcCounter::InferIncorrectInput),
    ("failed_to_queue", NcCounter::InferFailedToQueue),
];

/// `error_type` of `execution_errors_total` and its slab counter.
const ERROR_TYPES: [(&str, NcCounter); 6] = [
    ("generic", NcCounter::ErrGeneric),
    ("numerical", NcCounter::ErrNumerical),
    ("transient", NcCounter::ErrTransient),
    ("model", NcCounter::ErrModel),
    ("runtime", NcCounter::ErrRt),
    ("hardware", NcCounter::ErrHw),
];

/// A tag's counter series: family, `runtime_tag`, and its `status_type` or `error_type`.
pub type CounterKey = (String, String, String);

/// What producers wrote, per counter series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Written(pub BTreeMap<CounterKey, u64>);

impl Written {
    /// Adds what one producer run wrote.
    pub fn add(&mut self, report: &ProducerReport) {
        for (family, types) in [
            ("execution_status_total", &STATUS_TYPES),
            ("execution_errors_total", &ERROR_TYPES),
        ] {
            for (label, counter) in types {
                let value: u64 = (0..2).map(|core| report.nc(core, counter.name())).sum();
                *self
                    .0
                    .entry((family.into(), report.tag.clone(), (*label).into()))
                    .or_default() += value;
            }
        }
    }

    /// Both sums together.
    pub fn plus(&self, other: &Self) -> Self {
        let mut sum = self.clone();
        for (key, value) in &other.0 {
            *sum.0.entry(key.clone()).or_default() += value;
        }
        sum
    }
}

/// Labels of a stored series (with `__name__`).
pub type Labels = BTreeMap<String, String>;

/// The tag counter a stored series is, if it is one.
pub fn counter_key(labels: &Labels) -> Option<CounterKey> {
    let name = labels.get("__name__")?;
    let kind = match name.as_str() {
        "execution_status_total" => labels.get("status_type")?,
        "execution_errors_total" => labels.get("error_type")?,
        _ => return None,
    };
    Some((
        name.clone(),
        labels.get("runtime_tag")?.clone(),
        kind.clone(),
    ))
}
