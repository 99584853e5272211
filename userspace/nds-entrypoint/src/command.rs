//! The `nds-monitor` command line the entrypoint's options stand for, and the `exec` into it.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// The port of AWS's DaemonSet and of `neuron-monitor-prometheus.py`.
pub const DEFAULT_PORT: u16 = 8000;

/// Every address of the pod, IPv6 and IPv4 (`[::]`, which takes IPv4 connections too unless
/// `net.ipv6.bindv6only` is set; `nds-monitor` falls back to `0.0.0.0` where the kernel has no
/// IPv6): a probe or a scrape comes from outside the container, over IPv6 on an IPv6 cluster.
pub const DEFAULT_ADDRESS: IpAddr = IpAddr::V6(Ipv6Addr::UNSPECIFIED);

/// A certificate and its private key, both PEM files, for serving HTTPS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tls {
    /// The certificate chain.
    pub cert_file: PathBuf,
    /// The private key.
    pub key_file: PathBuf,
}

/// Where `serve` pushes its exposition by OTLP/HTTP, and how often.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Otlp {
    /// The collector's metrics URL (`http://COLLECTOR:4318/v1/metrics`), passed as given.
    pub endpoint: OsString,
    /// The push period as `nds-monitor` reads it (`60s`); none: its default.
    pub period: Option<OsString>,
}

/// `nds-monitor [-c CONFIG] [MONITOR_ARGS...] serve --listen ADDRESS:PORT [--cert-file F
/// --key-file K] [--otlp-endpoint URL [--otlp-period P]] [--state-dir DIR]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeCommand {
    /// The `nds-monitor` program.
    pub monitor: PathBuf,
    /// Its configuration, in neuron-monitor's format (none: every group every 5 s).
    pub config: Option<PathBuf>,
    /// Address to listen on.
    pub address: IpAddr,
    /// Port to listen on.
    pub port: u16,
    /// Serve HTTPS with these files instead of HTTP.
    pub tls: Option<Tls>,
    /// Also push the exposition to an OpenTelemetry collector.
    pub otlp: Option<Otlp>,
    /// Where the event stream's state is kept.
    pub state_dir: Option<PathBuf>,
    /// Options of `nds-monitor` itself (before `serve`), e.g. `--slab-dir DIR`.
    pub monitor_args: Vec<OsString>,
}

impl ServeCommand {
    /// The monitor's arguments (without the program name).
    #[must_use]
    pub fn args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        if let Some(config) = &self.config {
            args.push("-c".into());
            args.push(config.into());
        }
        args.extend(self.monitor_args.iter().cloned());
        args.push("serve".into());
        args.push("--listen".into());
        args.push(self.listen().to_string().into());
        if let Some(tls) = &self.tls {
            args.push("--cert-file".into());
            args.push((&tls.cert_file).into());
            args.push("--key-file".into());
            args.push((&tls.key_file).into());
        }
        if let Some(otlp) = &self.otlp {
            args.push("--otlp-endpoint".into());
            args.push(otlp.endpoint.clone());
            if let Some(period) = &otlp.period {
                args.push("--otlp-period".into());
                args.push(period.clone());
            }
        }
        if let Some(dir) = &self.state_dir {
            args.push("--state-dir".into());
            args.push(dir.into());
        }
        args
    }

    /// The socket address `serve` listens on.
    #[must_use]
    pub fn listen(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.port)
    }

    /// The monitor's command.
    #[must_use]
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.monitor);
        command.args(self.args());
        command
    }

    /// Replaces this process with the monitor (same pid); returns only if that failed.
    #[must_use]
    pub fn exec(&self) -> Error {
        let source = self.command().exec();
        Error::Exec {
            monitor: self.monitor.clone(),
            source,
        }
    }
}

/// `nds-monitor` in the directory of the program `own_path` (`/opt/bin/` in the image).
#[must_use]
pub fn monitor_next_to(own_path: &Path) -> PathBuf {
    own_path.with_file_name("nds-monitor")
}

/// `nds-monitor` next to the running program.
///
/// # Errors
///
/// The running program's path cannot be read (`/proc/self/exe`).
pub fn default_monitor() -> Result<PathBuf> {
    std::env::current_exe()
        .map(|own| monitor_next_to(&own))
        .map_err(Error::OwnPath)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn command() -> ServeCommand {
        ServeCommand {
            monitor: "/opt/bin/nds-monitor".into(),
            config: Some("/etc/neuron-monitor-config/monitor.json".into()),
            address: DEFAULT_ADDRESS,
            port: DEFAULT_PORT,
            tls: None,
            otlp: None,
            state_dir: None,
            monitor_args: Vec::new(),
        }
    }

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter()
            .map(|arg| arg.into_string().unwrap())
            .collect()
    }

    #[test]
    fn the_daemonset_command_line_becomes_serve_on_every_address() {
        assert_eq!(
            strings(command().args()),
            [
                "-c",
                "/etc/neuron-monitor-config/monitor.json",
                "serve",
                "--listen",
                "[::]:8000"
            ]
        );
    }

    #[test]
    fn certificates_turn_on_https_and_monitor_options_go_before_serve() {
        let mut command = command();
        command.config = None;
        command.port = 4317;
        command.address = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        command.monitor_args = vec!["--slab-dir".into(), "/slabs".into()];
        command.tls = Some(Tls {
            cert_file: "/etc/certs/tls.crt".into(),
            key_file: "/etc/certs/tls.key".into(),
        });
        assert_eq!(
            strings(command.args()),
            [
                "--slab-dir",
                "/slabs",
                "serve",
                "--listen",
                "0.0.0.0:4317",
                "--cert-file",
                "/etc/certs/tls.crt",
                "--key-file",
                "/etc/certs/tls.key"
            ]
        );
    }

    #[test]
    fn a_collector_adds_the_otlp_options_after_serve_and_its_period_only_when_given() {
        let mut command = command();
        command.otlp = Some(Otlp {
            endpoint: "http://collector:4318/v1/metrics".into(),
            period: None,
        });
        let args = strings(command.args());
        assert_eq!(
            args[args.len() - 2..],
            ["--otlp-endpoint", "http://collector:4318/v1/metrics"]
        );
        command.otlp = Some(Otlp {
            endpoint: "http://collector:4318/v1/metrics".into(),
            period: Some("15s".into()),
        });
        let args = strings(command.args());
        assert_eq!(
            args[args.len() - 4..],
            [
                "--otlp-endpoint",
                "http://collector:4318/v1/metrics",
                "--otlp-period",
                "15s"
            ]
        );
        assert!(
            args.iter().position(|arg| arg == "serve")
                < args.iter().position(|arg| arg == "--otlp-endpoint")
        );
    }

    #[test]
    fn a_state_directory_is_a_serve_option() {
        let mut command = command();
        command.state_dir = Some("/var/lib/nds-monitor".into());
        let args = strings(command.args());
        let serve = args.iter().position(|arg| arg == "serve").unwrap();
        assert_eq!(
            args[serve..]
                .windows(2)
                .find(|pair| pair[0] == "--state-dir"),
            Some(&["--state-dir".to_owned(), "/var/lib/nds-monitor".to_owned()][..])
        );
        command.state_dir = None;
        assert!(!strings(command.args()).contains(&"--state-dir".to_owned()));
    }

    #[test]
    fn the_monitor_is_looked_for_next_to_the_entrypoint() {
        assert_eq!(
            monitor_next_to(Path::new("/opt/bin/entrypoint.sh")),
            Path::new("/opt/bin/nds-monitor")
        );
    }

    #[test]
    fn a_missing_monitor_is_an_error_naming_it() {
        let mut command = command();
        command.monitor = "/nonexistent/nds-monitor".into();
        let error = command.exec();
        let message = error.to_string();
        assert!(
            message.starts_with("starting /nonexistent/nds-monitor: "),
            "{message}"
        );
        assert!(
            matches!(error, Error::Exec { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
        );
    }
}
