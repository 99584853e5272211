//! The table output, laid out like neuron-ls's: one row per process, the device's columns on
//! its first row, a rule between devices; then one line per error.

use nds_terminal::{escape, escape_within};

use crate::listing::{DeviceEntry, ProcessEntry};

/// The widest a command or tag is printed without `wide` (neuron-ls cuts commands there).
const NARROW_TEXT: usize = 40;

/// What a version cell says when the version is unknown (as neuron-ls does).
const NO_VERSION: &str = "NA";

/// The column titles, each on two lines.
const TITLES: [(&str, &str); 10] = [
    ("NEURON", "DEVICE"),
    ("NEURON", "CORES"),
    ("NEURON", "CORE IDS"),
    ("PID", ""),
    ("COMMAND", ""),
    ("RUNTIME", "VERSION"),
    ("FRAMEWORK", "VERSION"),
    ("TAG", ""),
    ("SLOT", ""),
    ("GENERATION", ""),
];

type Row = [String; TITLES.len()];

/// `devices` as a plain-text table, then one line per device or process error. Commands and
/// tags longer than 40 characters are cut unless `wide`; every text from a slab or `/proc`
/// is escaped (see [`nds_terminal`]).
#[must_use]
pub fn render_table(devices: &[DeviceEntry], wide: bool) -> String {
    let limit = if wide { usize::MAX } else { NARROW_TEXT };
    let groups: Vec<Vec<Row>> = devices
        .iter()
        .map(|device| device_rows(device, limit))
        .collect();
    let mut widths = TITLES.map(|(top, bottom)| top.len().max(bottom.len()));
    for row in groups.iter().flatten() {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let rule = rule(&widths);
    let mut out = String::new();
    out.push_str(&rule);
    out.push_str(&line(&widths, &TITLES.map(|(top, _)| top.to_owned()), true));
    out.push_str(&line(
        &widths,
        &TITLES.map(|(_, bottom)| bottom.to_owned()),
        true,
    ));
    out.push_str(&rule);
    for rows in &groups {
        for row in rows {
            out.push_str(&line(&widths, row, false));
        }
        out.push_str(&rule);
    }
    for device in devices {
        out.push_str(&errors(device));
    }
    out
}

/// The rows of one device: its columns on the first, one row per process (one row when it
/// has none).
fn device_rows(device: &DeviceEntry, limit: usize) -> Vec<Row> {
    let device_cells = [
        device.neuron_device.to_string(),
        device.nc_count.to_string(),
        core_ids(&device.neuroncore_ids),
    ];
    let mut rows: Vec<Row> = device
        .neuron_processes
        .iter()
        .map(|process| process_row(process, limit))
        .collect();
    if rows.is_empty() {
        rows.push(Row::default());
    }
    for (cell, value) in rows[0].iter_mut().zip(device_cells) {
        *cell = value;
    }
    rows
}

/// A process's row, its device's columns empty.
fn process_row(process: &ProcessEntry, limit: usize) -> Row {
    let version = |text: &str| {
        if text.is_empty() {
            NO_VERSION.to_owned()
        } else {
            escape(text)
        }
    };
    [
        String::new(),
        String::new(),
        String::new(),
        process.pid.to_string(),
        escape_within(&process.command, limit),
        version(&process.neuron_runtime_version),
        version(&process.framework_version),
        escape_within(&process.neuron_runtime_tag, limit),
        process.slot.to_string(),
        process.generation.to_string(),
    ]
}

/// Instance-wide core ids as neuron-ls prints them: `first-last` (they are consecutive).
fn core_ids(ids: &[usize]) -> String {
    match ids {
        [] => String::new(),
        [only] => only.to_string(),
        [first, .., last] => format!("{first}-{last}"),
    }
}

fn rule(widths: &[usize]) -> String {
    let mut text = String::from("+");
    for width in widths {
        text.push_str(&"-".repeat(width + 2));
        text.push('+');
    }
    text.push('\n');
    text
}

/// One table line; titles are centred, values left-aligned.
fn line(widths: &[usize], cells: &Row, centred: bool) -> String {
    let mut text = String::from("|");
    for (width, cell) in widths.iter().zip(cells) {
        let pad = width.saturating_sub(cell.chars().count());
        let before = if centred { pad / 2 } else { 0 };
        text.push(' ');
        text.push_str(&" ".repeat(before));
        text.push_str(cell);
        text.push_str(&" ".repeat(pad - before));
        text.push_str(" |");
    }
    text.push('\n');
    text
}

/// The error lines of a device and its processes.
fn errors(device: &DeviceEntry) -> String {
    let mut text = String::new();
    if !device.error.is_empty() {
        text.push_str(&format!(
            "device {}: {}\n",
            device.neuron_device,
            escape(&device.error)
        ));
    }
    for process in &device.neuron_processes {
        if !process.error.is_empty() {
            text.push_str(&format!(
                "device {} pid {} (slot {}): {}\n",
                device.neuron_device,
                process.pid,
                process.slot,
                escape(&process.error)
            ));
        }
    }
    text
}
