//! The monitor's Prometheus text exposition (format 0.0.4, as nds-exporter writes it) read
//! back into families: what the HTTP side serves is what the OTLP side sends.

use std::collections::BTreeMap;

/// Label names with their values, in the order the exposition wrote them.
pub type Labels = Vec<(String, String)>;

/// What a family is.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A value per label set, of the latest report.
    Gauge,
    /// A monotonic total per label set.
    Counter,
    /// Cumulative bucket counts at these upper bounds (and `+Inf`), a sum and a count.
    Histogram(Vec<f64>),
}

/// One histogram series: cumulative counts per bound (the last one `+Inf`), sum and count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    /// `le` counts, cumulative, in the order of the family's bounds, then `+Inf`.
    pub cumulative: Vec<u64>,
    /// The `_sum` sample.
    pub sum: f64,
    /// The `_count` sample.
    pub count: u64,
}

/// A family and its series.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// Its name (a histogram's without the `_bucket`, `_sum` and `_count` suffixes).
    pub name: String,
    /// Its `# HELP` text.
    pub help: String,
    /// Its `# TYPE`.
    pub kind: Kind,
    /// The values of a gauge or counter, by label set.
    pub values: Vec<(Labels, f64)>,
    /// The series of a histogram, by label set without `le`.
    pub histograms: Vec<(Labels, Buckets)>,
}

/// Why a text is not an exposition this reader knows.
#[derive(Debug, thiserror::Error)]
#[error("exposition line {line}: {reason}")]
pub struct ParseError {
    /// The 1-based line.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

/// A sample line: name, labels, value.
fn sample(line: &str) -> Result<(&str, Labels, f64), String> {
    let open = line.find('{').ok_or("no label set")?;
    let name = &line[..open];
    let mut labels = Vec::new();
    let mut rest = &line[open + 1..];
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            rest = after;
            break;
        }
        let equals = rest.find("=\"").ok_or("a label without a quoted value")?;
        let label = rest[..equals].to_owned();
        let mut value = String::new();
        let mut chars = rest[equals + 2..].char_indices();
        let end = loop {
            match chars.next().ok_or("an unterminated label value")? {
                (at, '"') => break at,
                (_, '\\') => match chars.next().ok_or("a dangling escape")?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, other) => value.push(other),
            }
        };
        labels.push((label, value));
        rest = &rest[equals + 2 + end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    let value = rest.trim();
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        number => number
            .parse()
            .map_err(|_| format!("value {number:?} is not a number"))?,
    };
    Ok((name, labels, value))
}

/// A bucket bound as `le` writes it.
fn bound(le: &str) -> Option<f64> {
    match le {
        "+Inf" => Some(f64::INFINITY),
        number => number.parse().ok(),
    }
}

/// The families of `text`, in its order.
///
/// # Errors
///
/// A line that is neither a comment nor a sample, a sample of no declared family, or a
/// histogram sample of another shape.
pub fn parse(text: &str) -> Result<Vec<Family>, ParseError> {
    let mut families: Vec<Family> = Vec::new();
    let mut helps: BTreeMap<&str, &str> = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let failed = |reason: String| ParseError {
            line: index + 1,
            reason,
        };
        if line.is_empty() {
            continue;
        }
        if let Some(help) = line.strip_prefix("# HELP ") {
            let (name, text) = help.split_once(' ').unwrap_or((help, ""));
            helps.insert(name, text);
            continue;
        }
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let (name, kind) = declared
                .split_once(' ')
                .ok_or_else(|| failed("a TYPE without a type".to_owned()))?;
            let kind = match kind {
                "gauge" => Kind::Gauge,
                "counter" => Kind::Counter,
                "histogram" => Kind::Histogram(Vec::new()),
                other => return Err(failed(format!("type {other:?}"))),
            };
            families.push(Family {
                name: name.to_owned(),
                help: helps.get(name).copied().unwrap_or_default().to_owned(),
                kind,
                values: Vec::new(),
                histograms: Vec::new(),
            });
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (name, mut labels, value) = sample(line).map_err(failed)?;
        let family = families
            .last_mut()
            .ok_or_else(|| failed(format!("{name} before any TYPE")))?;
        match &mut family.kind {
            Kind::Gauge | Kind::Counter if name == family.name => {
                family.values.push((labels, value));
            }
            Kind::Histogram(bounds) => {
                let suffix = name
                    .strip_prefix(family.name.as_str())
                    .ok_or_else(|| failed(format!("{name} in family {}", family.name)))?;
                let le = labels
                    .iter()
                    .position(|(label, _)| label == "le")
                    .map(|at| labels.remove(at).1);
                let at = match family.histograms.iter().position(|(l, _)| *l == labels) {
                    Some(at) => at,
                    None => {
                        family.histograms.push((labels, Buckets::default()));
                        family.histograms.len() - 1
                    }
                };
                let series = &mut family.histograms[at].1;
                // Counts are whole numbers, written without a fraction.
                let count = value as u64;
                match (suffix, le.as_deref().and_then(bound)) {
                    ("_bucket", Some(le)) => {
                        if at == 0 && le.is_finite() {
                            bounds.push(le);
                        }
                        series.cumulative.push(count);
                    }
                    ("_sum", None) => series.sum = value,
                    ("_count", None) => series.count = count,
                    _ => return Err(failed(format!("{name} is no histogram sample"))),
                }
            }
            _ => return Err(failed(format!("{name} in family {}", family.name))),
        }
    }
    Ok(families)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|&(name, value)| (name.to_owned(), value.to_owned()))
            .collect()
    }

    #[test]
    fn gauges_counters_and_histograms_with_escaped_labels() {
        let text = "\
# HELP up_ratio A \"gauge\".
# TYPE up_ratio gauge
up_ratio{a=\"x\\\"y\\\\z\\n\",b=\"\"} 0.25
up_ratio{} 1
# HELP done_total Done.
# TYPE done_total counter
done_total{tag=\"t\"} 12345678901234
# HELP lat_seconds Latency.
# TYPE lat_seconds histogram
lat_seconds_bucket{pid=\"1\",le=\"0.001\"} 2
lat_seconds_bucket{pid=\"1\",le=\"0.01\"} 3
lat_seconds_bucket{pid=\"1\",le=\"+Inf\"} 4
lat_seconds_sum{pid=\"1\"} 1.5
lat_seconds_count{pid=\"1\"} 4
lat_seconds_bucket{pid=\"2\",le=\"0.001\"} 0
lat_seconds_bucket{pid=\"2\",le=\"0.01\"} 0
lat_seconds_bucket{pid=\"2\",le=\"+Inf\"} 0
lat_seconds_sum{pid=\"2\"} 0
lat_seconds_count{pid=\"2\"} 0
";
        let families = parse(text).unwrap();
        assert_eq!(families.len(), 3);
        assert_eq!(families[0].help, "A \"gauge\".");
        assert_eq!(
            families[0].values,
            [
                (labels(&[("a", "x\"y\\z\n"), ("b", "")]), 0.25),
                (Vec::new(), 1.0)
            ]
        );
        assert_eq!(families[1].kind, Kind::Counter);
        assert_eq!(families[1].values[0].1, 12_345_678_901_234.0);
        assert_eq!(families[2].kind, Kind::Histogram(vec![0.001, 0.01]));
        assert_eq!(
            families[2].histograms[0],
            (
                labels(&[("pid", "1")]),
                Buckets {
                    cumulative: vec![2, 3, 4],
                    sum: 1.5,
                    count: 4
                }
            )
        );
        assert_eq!(families[2].histograms.len(), 2);
    }

    #[test]
    fn what_is_no_exposition_is_refused_with_its_line() {
        for (text, line) in [
            ("x{} 1\n", 1),
            ("# TYPE x gauge\nx{a=\"1} 1\n", 2),
            ("# TYPE x gauge\ny{} 1\n", 2),
            ("# TYPE x gauge\nx{} one\n", 2),
            ("# TYPE x summary\n", 1),
            ("# TYPE h histogram\nh_bucket{} 1\n", 2),
        ] {
            assert_eq!(parse(text).unwrap_err().line, line, "{text}");
        }
    }
}
