//! The configuration file, in neuron-monitor's shape, and the schedule it resolves to.
//!
//! ```json
//! { "period": "1s",
//!   "neuron_runtimes": [ { "tag_filter": "^loadgen-", "metrics": [
//!       { "type": "neuroncore_counters" }, { "type": "execution_stats" },
//!       { "type": "memory_used", "period": "2s" }, { "type": "nds_counters" } ] } ],
//!   "system_metrics": [ { "type": "neuron_counters", "period": "5s" }, { "type": "vcpu_usage" } ] }
//! ```
//!
//! `period` may be set at the root, on a runtime entry or on a group; the nearest one wins
//! (default 5 s). A runtime is reported by the first entry whose `tag_filter` matches its tag
//! (no filter matches everything). Every group type of neuron-monitor is collected, plus this
//! monitor's `nds_counters`, `process_info` and `neuron_counters`.

use std::path::Path;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::health::{HealthConfig, HealthRules};

/// neuron-monitor's default period.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(5);

/// The file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Root period, e.g. `"1s"`.
    pub period: Option<String>,
    /// Runtime entries.
    pub neuron_runtimes: Option<Vec<RuntimeConfig>>,
    /// System groups.
    pub system_metrics: Option<Vec<GroupConfig>>,
    /// Health rules (this monitor's extension, [`crate::health`]).
    pub health: Option<HealthConfig>,
}

/// One `neuron_runtimes` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Regular expression over the runtime tag.
    pub tag_filter: Option<String>,
    /// Period for this entry's groups.
    pub period: Option<String>,
    /// Groups to collect.
    pub metrics: Option<Vec<GroupConfig>>,
}

/// One metric group.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    /// Group type name.
    #[serde(rename = "type")]
    pub kind: String,
    /// Period for this group.
    pub period: Option<String>,
}

/// Per-runtime groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuntimeGroup {
    /// `neuroncore_counters`: utilization and FLOPs per core.
    NeuroncoreCounters,
    /// `execution_stats`: outcomes, error classes, latency percentiles.
    ExecutionStats,
    /// `memory_used`: host and device memory, loaded models.
    MemoryUsed,
    /// `neuron_runtime_vcpu_usage`: the process's CPU time, from `/proc/<pid>/stat`.
    NeuronRuntimeVcpuUsage,
    /// `nds_counters`: every non-zero datastore counter by its C name (this monitor's
    /// extension).
    NdsCounters,
    /// `process_info`: the process records and version counters (this monitor's extension).
    ProcessInfo,
}

impl RuntimeGroup {
    /// Every runtime group.
    pub const ALL: [Self; 6] = [
        Self::NeuroncoreCounters,
        Self::ExecutionStats,
        Self::MemoryUsed,
        Self::NeuronRuntimeVcpuUsage,
        Self::NdsCounters,
        Self::ProcessInfo,
    ];

    /// The name used in configuration and output.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::NeuroncoreCounters => "neuroncore_counters",
            Self::ExecutionStats => "execution_stats",
            Self::MemoryUsed => "memory_used",
            Self::NeuronRuntimeVcpuUsage => "neuron_runtime_vcpu_usage",
            Self::NdsCounters => "nds_counters",
            Self::ProcessInfo => "process_info",
        }
    }
}

/// System groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SystemGroup {
    /// `neuron_hw_counters`: ECC events per device, from the Neuron driver's sysfs.
    NeuronHwCounters,
    /// `vcpu_usage`: the host's vCPUs, from `/proc/stat`.
    VcpuUsage,
    /// `memory_info`: the host's memory, from `/proc/meminfo`.
    MemoryInfo,
    /// `neuron_counters`: the kernel's aggregated per-core totals from sysfs (this monitor's
    /// extension).
    NeuronCounters,
}

impl SystemGroup {
    /// Every system group.
    pub const ALL: [Self; 4] = [
        Self::NeuronHwCounters,
        Self::VcpuUsage,
        Self::MemoryInfo,
        Self::NeuronCounters,
    ];

    /// The name used in configuration and output.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::NeuronHwCounters => "neuron_hw_counters",
            Self::VcpuUsage => "vcpu_usage",
            Self::MemoryInfo => "memory_info",
            Self::NeuronCounters => "neuron_counters",
        }
    }
}

/// A runtime entry, resolved.
#[derive(Clone, Debug)]
pub struct RuntimeRule {
    /// Tag filter; `None` matches every tag.
    pub tag_filter: Option<Regex>,
    /// Groups with their periods.
    pub groups: Vec<(RuntimeGroup, Duration)>,
}

/// What to collect and how often.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Runtime rules, first match wins.
    pub runtimes: Vec<RuntimeRule>,
    /// System groups with their periods.
    pub system: Vec<(SystemGroup, Duration)>,
    /// A filter every reported tag must match as well (`--tag-filter`).
    pub tag_filter: Option<Regex>,
    /// The health rules.
    pub health: HealthRules,
}

impl Plan {
    /// Every group for every runtime and the system, all at `period`.
    #[must_use]
    pub fn everything(period: Duration) -> Self {
        Self {
            runtimes: vec![RuntimeRule {
                tag_filter: None,
                groups: RuntimeGroup::ALL.iter().map(|&g| (g, period)).collect(),
            }],
            system: SystemGroup::ALL.iter().map(|&g| (g, period)).collect(),
            tag_filter: None,
            health: HealthRules::default(),
        }
    }

    /// Reads and resolves a configuration file.
    ///
    /// # Errors
    ///
    /// [`Error::ConfigRead`], [`Error::ConfigJson`] or [`Error::Config`].
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ConfigRead {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_config(&serde_json::from_str(&text)?)
    }

    /// Resolves a parsed configuration.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid period, regular expression or group type.
    pub fn from_config(config: &ConfigFile) -> Result<Self> {
        let root = parse_period(config.period.as_deref(), DEFAULT_PERIOD)?;
        let default_runtime = [RuntimeConfig::default()];
        let runtimes = config
            .neuron_runtimes
            .as_deref()
            .unwrap_or(&default_runtime)
            .iter()
            .map(|entry| {
                let period = parse_period(entry.period.as_deref(), root)?;
                let tag_filter = entry
                    .tag_filter
                    .as_deref()
                    .map(|filter| {
                        Regex::new(filter).map_err(|e| Error::Config(format!("tag_filter: {e}")))
                    })
                    .transpose()?;
                let groups = match &entry.metrics {
                    None => RuntimeGroup::ALL.iter().map(|&g| (g, period)).collect(),
                    Some(metrics) => {
                        let mut groups = Vec::new();
                        for metric in metrics {
                            let group_period = parse_period(metric.period.as_deref(), period)?;
                            let group = RuntimeGroup::ALL
                                .into_iter()
                                .find(|g| g.name() == metric.kind)
                                .ok_or_else(|| unknown_group(&metric.kind, "runtime"))?;
                            groups.push((group, group_period));
                        }
                        groups
                    }
                };
                Ok(RuntimeRule { tag_filter, groups })
            })
            .collect::<Result<Vec<_>>>()?;
        let system = match &config.system_metrics {
            None => SystemGroup::ALL.iter().map(|&g| (g, root)).collect(),
            Some(metrics) => {
                let mut system = Vec::new();
                for metric in metrics {
                    let group = SystemGroup::ALL
                        .into_iter()
                        .find(|g| g.name() == metric.kind)
                        .ok_or_else(|| unknown_group(&metric.kind, "system"))?;
                    system.push((group, parse_period(metric.period.as_deref(), root)?));
                }
                system
            }
        };
        let health = match &config.health {
            Some(health) => HealthRules::from_config(health)?,
            None => HealthRules::default(),
        };
        Ok(Self {
            runtimes,
            system,
            tag_filter: None,
            health,
        })
    }

    /// Replaces every period with `period`.
    pub fn set_period(&mut self, period: Duration) {
        for rule in &mut self.runtimes {
            for (_, group_period) in &mut rule.groups {
                *group_period = period;
            }
        }
        for (_, group_period) in &mut self.system {
            *group_period = period;
        }
    }

    /// The rule (and its index) that reports a runtime tagged `tag`, or `None` if the runtime
    /// is filtered out.
    #[must_use]
    pub fn rule_for(&self, tag: &str) -> Option<(usize, &RuntimeRule)> {
        if self.tag_filter.as_ref().is_some_and(|f| !f.is_match(tag)) {
            return None;
        }
        self.runtimes
            .iter()
            .enumerate()
            .find(|(_, rule)| rule.tag_filter.as_ref().is_none_or(|f| f.is_match(tag)))
    }

    /// The shortest period of any group (the monitor's tick).
    #[must_use]
    pub fn shortest_period(&self) -> Duration {
        self.runtimes
            .iter()
            .flat_map(|rule| rule.groups.iter().map(|(_, period)| *period))
            .chain(self.system.iter().map(|(_, period)| *period))
            .min()
            .unwrap_or(DEFAULT_PERIOD)
    }
}

/// The error for a group type that does not exist where it was configured.
fn unknown_group(kind: &str, section: &str) -> Error {
    Error::Config(format!("unknown {section} metric group type {kind:?}"))
}

/// The shortest period: the monitor sleeps in milliseconds.
pub const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The longest period: a day (longer ones are surely a typo, and arithmetic on instants stays
/// far from overflowing).
pub const MAX_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);

/// Parses a period such as `"1s"` or `"500ms"`; `None` gives `default`.
///
/// # Errors
///
/// [`Error::Config`] for unparsable periods and those outside [`MIN_PERIOD`]..=[`MAX_PERIOD`].
pub fn parse_period(text: Option<&str>, default: Duration) -> Result<Duration> {
    let Some(text) = text else {
        return Ok(default);
    };
    let period = humantime::parse_duration(text)
        .map_err(|e| Error::Config(format!("period {text:?}: {e}")))?;
    if !(MIN_PERIOD..=MAX_PERIOD).contains(&period) {
        return Err(Error::Config(format!(
            "period {text:?} is not between {} and {}",
            humantime::format_duration(MIN_PERIOD),
            humantime::format_duration(MAX_PERIOD)
        )));
    }
    Ok(period)
}

/// [`parse_period`] for a command-line option (`--period`), as every tool parses it.
///
/// # Errors
///
/// As [`parse_period`].
pub fn period_argument(text: &str) -> Result<Duration> {
    parse_period(Some(text), Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_bounded() {
        assert_eq!(
            period_argument("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(period_argument("1day").unwrap(), MAX_PERIOD);
        for bad in ["0s", "10us", "25h", "400000000000y", "soon", ""] {
            let error = period_argument(bad).unwrap_err().to_string();
            assert!(error.contains(&format!("{bad:?}")), "{bad}: {error}");
        }
    }
}
