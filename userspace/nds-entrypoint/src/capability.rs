//! `CAP_PERFMON` across `exec`: the module lets a reader map another user's slab when it holds
//! `CAP_PERFMON` (`perfmon_capable()`), and the monitor runs as a non-root user.
//!
//! A non-root process loses its permitted capabilities at `execve` unless the new program has
//! file capabilities or the capability is in the ambient set. The image gives this program
//! the file capability `cap_perfmon=p` (permitted, not effective: without `CAP_PERFMON` in the
//! bounding set, as when a pod does not add it, the program still starts, only without it).
//! Here it is raised into the inheritable and ambient sets, so that `nds-monitor`, started
//! by `exec`, holds it permitted and effective. With `no_new_privs` (Kubernetes'
//! `allowPrivilegeEscalation: false`) the file capability still applies, because the runtime
//! already put `CAP_PERFMON` in the permitted set it started this program with.

use caps::{CapSet, Capability};

use crate::error::Result;

/// Whether the monitor gets `CAP_PERFMON`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Perfmon {
    /// Raised into the ambient set: the monitor holds it.
    Passed,
    /// Not permitted to this process (not in the container's capabilities): the monitor may
    /// read only its own user's slabs.
    NotPermitted,
}

/// Raises `CAP_PERFMON` into the inheritable and ambient sets if it is permitted.
///
/// # Errors
///
/// The capability sets cannot be read or changed.
pub fn pass_perfmon_on() -> Result<Perfmon> {
    if !caps::has_cap(None, CapSet::Permitted, Capability::CAP_PERFMON)? {
        return Ok(Perfmon::NotPermitted);
    }
    // The ambient set only takes what is both permitted and inheritable.
    caps::raise(None, CapSet::Inheritable, Capability::CAP_PERFMON)?;
    caps::raise(None, CapSet::Ambient, Capability::CAP_PERFMON)?;
    Ok(Perfmon::Passed)
}
