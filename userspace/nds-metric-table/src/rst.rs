//! The tables of families in `Documentation/userspace.rst`, generated from [`FAMILIES`]:
//! [`table`] writes one as an rst simple table. In that file each stands between the comments
//! `.. metrics-table-begin: companion` (or `ours`) and `.. metrics-table-end`; the test below
//! fails while a table there differs, and with `NDS_UPDATE_DOCS=1` writes it instead.
//!
//! A row's labels read "the same" as the row above's, or "the same and" those added to them,
//! so that the many families of one label set stay short.

use std::fmt::Write;
use std::ptr;

use super::{DocGroup, DocTable, Documented, MetricFamily, MetricType, FAMILIES};

/// Where the last column wraps, unless its heading is wider.
const TEXT_WIDTH: usize = 100;

/// One row of a table: its cells but the last, and the last, which alone wraps.
struct Row {
    cells: Vec<String>,
    wrapped: String,
}

/// The table of `doc_table`, from its top border to its bottom border (with a line feed).
#[must_use]
pub fn table(doc_table: DocTable) -> String {
    let headings = match doc_table {
        DocTable::Companion => Row {
            cells: vec!["family".to_owned()],
            wrapped: "labels beyond the instance ones".to_owned(),
        },
        DocTable::Ours => Row {
            cells: ["family", "type", "unit"].map(str::to_owned).to_vec(),
            wrapped: "labels beyond the instance ones; meaning".to_owned(),
        },
    };
    render(&headings, &rows(doc_table))
}

/// A family's (or a group's) name cell: the name, then what is said after it.
fn named(name: &str, asides: &[&str]) -> String {
    if asides.is_empty() {
        format!("``{name}``")
    } else {
        format!("``{name}`` ({})", asides.join("; "))
    }
}

/// The labels of `family`, next to a row with `above`.
fn labels_cell(family: &MetricFamily, above: &[&str]) -> String {
    let listed = |names: &[&str]| {
        names
            .iter()
            .map(|name| format!("``{name}``"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let labels = family.labels;
    let added = labels
        .strip_prefix(above)
        .filter(|added| !above.is_empty() && !added.is_empty());
    let cell = if labels.is_empty() {
        "—".to_owned()
    } else if labels == above && family.labels_note.is_none() {
        "the same".to_owned()
    } else if let Some(added) = added {
        format!("the same and {}", listed(added))
    } else {
        listed(labels)
    };
    match family.labels_note {
        Some(note) => format!("{cell} ({note})"),
        None => cell,
    }
}

/// The rows of `doc_table`: one per family, one per group of the companion's.
fn rows(doc_table: DocTable) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut above: &[&str] = &[];
    let mut group_above: Option<&DocGroup> = None;
    for family in FAMILIES
        .iter()
        .filter(|family| family.doc_table() == doc_table)
    {
        let labels = labels_cell(family, above);
        above = family.labels;
        match family.documented {
            Documented::Companion { aside, group } => {
                let row_above_is_the_groups = group.is_some_and(|group| {
                    group_above.is_some_and(|previous| ptr::eq(previous, group))
                });
                group_above = group;
                if row_above_is_the_groups {
                    continue;
                }
                let name = match group {
                    Some(group) => named(group.pattern, group.aside.as_slice()),
                    None => {
                        let counter =
                            matches!(family.metric_type, MetricType::Counter).then_some("counter");
                        let asides: Vec<&str> = counter.into_iter().chain(aside).collect();
                        named(family.name, &asides)
                    }
                };
                rows.push(Row {
                    cells: vec![name],
                    wrapped: labels,
                });
            }
            Documented::Ours { meaning } => rows.push(Row {
                cells: vec![
                    named(family.name, &[]),
                    family.metric_type.to_string(),
                    family.unit.unwrap_or("—").to_owned(),
                ],
                wrapped: format!("{labels}; {meaning}"),
            }),
        }
    }
    rows
}

/// `text` in lines of at most `width` characters, broken between words.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// Appends `row` to `text`: its cells padded to `widths`, its last one wrapped to `last`.
fn push_row(text: &mut String, row: &Row, widths: &[usize], last: usize) {
    for (index, line) in wrap(&row.wrapped, last).iter().enumerate() {
        for (cell, &width) in row.cells.iter().zip(widths) {
            let cell = if index == 0 { cell.as_str() } else { "" };
            let _ = write!(text, "{cell:<width$}  ");
        }
        text.push_str(line);
        text.push('\n');
    }
}

/// An rst simple table: each column as wide as its widest cell, the last wrapped to what is
/// left of [`TEXT_WIDTH`]; a wrapped cell's further lines leave the other columns blank.
fn render(headings: &Row, rows: &[Row]) -> String {
    let chars = |text: &String| text.chars().count();
    let widths: Vec<usize> = (0..headings.cells.len())
        .map(|column| {
            std::iter::once(headings)
                .chain(rows)
                .filter_map(|row| row.cells.get(column).map(chars))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let start: usize = widths.iter().map(|width| width + 2).sum();
    let last = chars(&headings.wrapped).max(TEXT_WIDTH.saturating_sub(start));
    let mut border = widths
        .iter()
        .chain([&last])
        .map(|&width| "=".repeat(width))
        .collect::<Vec<_>>()
        .join("  ");
    border.push('\n');
    let mut text = border.clone();
    push_row(&mut text, headings, &widths, last);
    text.push_str(&border);
    for row in rows {
        push_row(&mut text, row, &widths, last);
    }
    text.push_str(&border);
    text
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const END: &str = ".. metrics-table-end\n";

    fn begin(doc_table: DocTable) -> &'static str {
        match doc_table {
            DocTable::Companion => ".. metrics-table-begin: companion\n",
            DocTable::Ours => ".. metrics-table-begin: ours\n",
        }
    }

    /// `documentation` with each table between its markers as generated now.
    fn with_generated_tables(documentation: &str) -> String {
        let mut rest = documentation;
        let mut text = String::new();
        for doc_table in [DocTable::Companion, DocTable::Ours] {
            let (before, after) = rest
                .split_once(begin(doc_table))
                .unwrap_or_else(|| panic!("no {:?}", begin(doc_table)));
            let (_, after) = after
                .split_once(END)
                .expect("an end marker after the table");
            text += before;
            text += begin(doc_table);
            text += "\n";
            text += &table(doc_table);
            text += "\n";
            text += END;
            rest = after;
        }
        text + rest
    }

    #[test]
    fn every_family_has_a_row_in_its_table_only() {
        let companion = table(DocTable::Companion);
        let ours = table(DocTable::Ours);
        for family in FAMILIES {
            let row_name = match family.documented {
                Documented::Companion {
                    group: Some(group), ..
                } => group.pattern,
                _ => family.name,
            };
            let (listed, other) = match family.doc_table() {
                DocTable::Companion => (&companion, &ours),
                DocTable::Ours => (&ours, &companion),
            };
            let starts_a_row = |text: &str| {
                text.lines()
                    .filter(|line| line.starts_with(&format!("``{row_name}``")))
                    .count()
            };
            assert_eq!(starts_a_row(listed), 1, "{row_name}");
            assert_eq!(starts_a_row(other), 0, "{row_name}");
        }
    }

    #[test]
    fn the_documentation_has_the_generated_tables() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Documentation/userspace.rst");
        let documentation = std::fs::read_to_string(&path).unwrap();
        let generated = with_generated_tables(&documentation);
        if std::env::var_os("NDS_UPDATE_DOCS").is_some_and(|value| value == "1") {
            std::fs::write(&path, generated).unwrap();
            return;
        }
        let first_difference = documentation
            .lines()
            .zip(generated.lines())
            .position(|(written, wanted)| written != wanted);
        assert!(
            documentation == generated,
            "{} differs from the table of families (first at line {:?}); \
             NDS_UPDATE_DOCS=1 cargo test -p nds-metric-table --lib rst rewrites it",
            path.display(),
            first_difference.map(|index| index + 1)
        );
    }
}
