//! The JSON output: neuron-ls's array of device objects.

use nds_terminal::escape_json_text;
use serde::Serialize;
use serde_json::ser::PrettyFormatter;

use crate::error::Result;
use crate::listing::DeviceEntry;

/// `devices` as neuron-ls's JSON prints them (an array, four-space indentation), with no
/// character that a terminal would act on (see [`escape_json_text`]), ending in a newline.
///
/// # Errors
///
/// [`Error::Json`](crate::Error::Json) if serialization fails.
pub fn render_json(devices: &[DeviceEntry]) -> Result<String> {
    let mut bytes = Vec::new();
    let mut serializer =
        serde_json::Serializer::with_formatter(&mut bytes, PrettyFormatter::with_indent(b"    "));
    devices.serialize(&mut serializer)?;
    // serde_json writes UTF-8 only.
    let text = String::from_utf8_lossy(&bytes);
    let mut json = escape_json_text(&text);
    json.push('\n');
    Ok(json)
}
