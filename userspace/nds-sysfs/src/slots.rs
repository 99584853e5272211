//! The datastore slot table, `neuron<N>/datastore/slots`.

use std::path::Path;

use crate::error::{Error, Result};

/// The header line the module prints first.
const HEADER: &str = "slot pid clear_tick generation";

/// One slab of a device as the slot table shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotRow {
    /// Slot index, 0..16.
    pub slot: usize,
    /// The owner's pid in the reader's pid namespace; 0 when the slot is free (or the owner is
    /// not visible from the reader's namespace).
    pub pid: i32,
    /// LRU clock value stamped at the last clear; 0 if never used.
    pub clear_tick: u64,
    /// Slab generation: odd while owned, bumped on every assignment and clear.
    pub generation: u64,
}

impl SlotRow {
    /// Whether a process owns the slot.
    #[must_use]
    pub fn is_owned(&self) -> bool {
        self.pid != 0
    }
}

/// Parses the text of a slot table read from `path` (used only in error messages).
///
/// # Errors
///
/// [`Error::Parse`] if the header is missing or a row does not hold four decimal fields.
pub fn parse_slot_table(path: &Path, text: &str) -> Result<Vec<SlotRow>> {
    let mut lines = text.lines();
    let parse_error = |text: &str, reason| Error::Parse {
        path: path.to_path_buf(),
        text: text.to_owned(),
        reason,
    };
    match lines.next() {
        Some(header) if header.trim() == HEADER => {}
        other => {
            return Err(parse_error(
                other.unwrap_or(""),
                "missing slot table header",
            ))
        }
    }
    lines
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [slot, pid, clear_tick, generation] = fields.as_slice() else {
                return Err(parse_error(line, "expected four fields"));
            };
            let number = || parse_error(line, "expected decimal numbers");
            Ok(SlotRow {
                slot: slot.parse().map_err(|_| number())?,
                pid: pid.parse().map_err(|_| number())?,
                clear_tick: clear_tick.parse().map_err(|_| number())?,
                generation: generation.parse().map_err(|_| number())?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_module_format() {
        let text = "slot pid clear_tick generation\n0 0 0 0\n1 4242 3 7\n";
        let rows = parse_slot_table(Path::new("slots"), text).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(!rows[0].is_owned());
        assert_eq!(
            rows[1],
            SlotRow {
                slot: 1,
                pid: 4242,
                clear_tick: 3,
                generation: 7
            }
        );
    }

    #[test]
    fn rejects_malformed_tables() {
        for text in ["", "0 0 0 0\n", "slot pid clear_tick generation\n1 2 3\n"] {
            assert!(
                parse_slot_table(Path::new("slots"), text).is_err(),
                "{text:?}"
            );
        }
        let text = "slot pid clear_tick generation\n1 x 3 4\n";
        let error = parse_slot_table(Path::new("slots"), text).unwrap_err();
        assert!(error.to_string().contains("decimal"), "{error}");
    }
}
