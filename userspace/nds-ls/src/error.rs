//! The crate's error type: what stops a listing altogether (a process whose slab cannot be
//! read does not; its entry says why).

/// Why nothing could be listed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The sysfs root exists but its devices cannot be listed.
    #[error("listing the devices: {0}")]
    Devices(#[from] nds_sysfs::Error),
    /// The listing could not be turned into JSON.
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
