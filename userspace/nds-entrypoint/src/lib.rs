//! What the container image runs as `/opt/bin/entrypoint.sh`, the path AWS's neuron-monitor
//! DaemonSet and the CloudWatch add-on's `NeuronMonitor` resource start: it turns their command
//! line (`--port`, `--neuron-monitor-config`, `--cert-file`, `--key-file`) into
//! `nds-monitor serve` and replaces itself with it.
//!
//! A program rather than a shell script, so that the image holds no shell; and the one place
//! where `CAP_PERFMON`, permitted to this program by its file capability, is raised into the
//! ambient set, which is how a monitor running as a non-root user keeps it across `exec`
//! ([`capability`]). As a container's process 1 it stays as the monitor's init, so that the
//! runtime's `SIGTERM` reaches the monitor ([`init`]); otherwise it replaces itself with it.

// Floor 0: errors.
pub mod error;
// Floor 1: the capability, the command and the init.
pub mod capability;
pub mod command;
pub mod init;

pub use capability::{pass_perfmon_on, Perfmon};
pub use command::{Otlp, ServeCommand, Tls};
pub use error::{Error, Result};
