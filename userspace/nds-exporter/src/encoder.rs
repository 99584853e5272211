//! The one text encoder of the exposition (format 0.0.4): every line of it, `# HELP`,
//! `# TYPE` and sample, is written here, and every label set rendered here.
//!
//! The encoder is this crate's own, not a crate's: the shape to match is what the companion
//! exporter's Python client writes, with `_created` as a gauge family of its own beside the
//! counter family (`# TYPE execution_status_created gauge`), which the original's scrapers
//! already see. The Rust crates' encoders write the families of their own registries;
//! `prometheus-client` was built for OpenMetrics, where `_created` is a sample inside the
//! counter's family, not a family.

use std::fmt::{Display, Write};

use nds_metric_table::LabelSet;

/// The media type of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Escapes a label value: backslash, double quote and line feed.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `a="1",b="2"`, sorted by name (so one label set has one text).
#[must_use]
pub fn render_labels(labels: &LabelSet) -> String {
    let mut sorted: Vec<&(&str, String)> = labels.pairs().iter().collect();
    sorted.sort_by_key(|(name, _)| *name);
    sorted
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Two rendered label sets as one (either may be empty).
fn join(first: &str, second: &str) -> String {
    match (first.is_empty(), second.is_empty()) {
        (true, _) => second.to_owned(),
        (_, true) => first.to_owned(),
        _ => format!("{first},{second}"),
    }
}

/// A sample's value: integers without a fraction, everything else as Rust prints it.
fn number(value: f64) -> String {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

/// Writes an exposition into a string, every sample with the instance labels first.
#[derive(Debug)]
pub struct Encoder {
    text: String,
    instance: String,
}

impl Encoder {
    /// An empty exposition whose samples carry `instance`.
    #[must_use]
    pub fn new(instance: &LabelSet) -> Self {
        Self {
            text: String::new(),
            instance: render_labels(instance),
        }
    }

    /// Starts family `name`: its `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, help: &str, kind: impl Display) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    /// One sample `name{instance,labels[,le]} value`; `labels` as [`render_labels`] wrote
    /// them, `le` a histogram bucket's bound.
    pub fn sample(&mut self, name: &str, labels: &str, le: Option<f64>, value: f64) {
        let mut all = join(&self.instance, labels);
        if let Some(bound) = le {
            let bound = if bound.is_finite() {
                bound.to_string()
            } else {
                "+Inf".to_owned()
            };
            all = join(&all, &format!("le=\"{bound}\""));
        }
        let _ = writeln!(self.text, "{name}{{{all}}} {}", number(value));
    }

    /// The exposition written.
    #[must_use]
    pub fn finish(self) -> String {
        self.text
    }
}

#[cfg(test)]
mod tests {
    use nds_metric_table::{EXECUTION_STATUS_TOTAL, NDS_RUNTIME_LATENCY_SECONDS};

    use super::*;

    #[test]
    fn labels_are_sorted_escaped_and_follow_the_instance() {
        let labels = EXECUTION_STATUS_TOTAL.label_set(&["x\"y\\\n", "completed"]);
        assert_eq!(
            render_labels(&labels),
            r#"runtime_tag="x\"y\\\n",status_type="completed""#
        );
        let instance = LabelSet::instance(["n", "i", "t", "z", "r", "s"]);
        let mut encoder = Encoder::new(&instance);
        encoder.family(
            "execution_status_total",
            "Execution status total",
            "counter",
        );
        encoder.sample("execution_status_total", &render_labels(&labels), None, 3.0);
        let bucket = NDS_RUNTIME_LATENCY_SECONDS.label_set(&["t", "1", "0", "total"]);
        encoder.sample(
            "h_bucket",
            &render_labels(&bucket),
            Some(f64::INFINITY),
            0.5,
        );
        let text = encoder.finish();
        assert_eq!(
            text,
            "# HELP execution_status_total Execution status total\n\
             # TYPE execution_status_total counter\n\
             execution_status_total{availability_zone=\"z\",instance_id=\"i\",instance_name=\"n\",\
             instance_type=\"t\",region=\"r\",subnet_id=\"s\",runtime_tag=\"x\\\"y\\\\\\n\",\
             status_type=\"completed\"} 3\n\
             h_bucket{availability_zone=\"z\",instance_id=\"i\",instance_name=\"n\",\
             instance_type=\"t\",region=\"r\",subnet_id=\"s\",kind=\"total\",\
             neuron_device_index=\"0\",pid=\"1\",runtime_tag=\"t\",le=\"+Inf\"} 0.5\n"
        );
        let mut bare = Encoder::new(&LabelSet::default());
        bare.sample("process_open_fds", "", None, 7.0);
        assert_eq!(bare.finish(), "process_open_fds{} 7\n");
    }
}
