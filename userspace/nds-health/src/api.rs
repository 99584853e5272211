//! The body of `GET /api/v1/devices`: every device's verdict (and its NeuronCores'), the
//! window they were judged over, and where the event stream stands, so that a client can
//! start following it from there.

use nds_document::health::DeviceHealth;
use serde::Serialize;

/// Where the event stream stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamPosition {
    /// The stream's id.
    pub stream: String,
    /// The number of its last event (0: none yet).
    pub last_seq: u64,
}

/// The body.
#[derive(Debug, Serialize)]
pub struct DevicesBody<'a> {
    /// When the verdicts were judged, seconds since the Unix epoch.
    pub timestamp: f64,
    /// The window errors were counted in, seconds.
    pub window: f64,
    /// Each device, by index.
    pub devices: &'a [DeviceHealth],
    /// Where the event stream stands (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<StreamPosition>,
}
