//! The configuration file, in neuron-monitor's shape, and the schedule it resolves to.
//!
//! ```json
//! { "period": "1s",
//!   "neuron_runtimes": [ { "tag_filter": "^loadgen-", "metrics": [
//!       { "type": "neuroncore_counters" }, { "type": "execution_stats" },
//!       { "type": "memory_used", "period": "2s" }, { "type": "nds_counters" } ] } ],
//!   "system_metrics": [ { "type": "neuron_counters", "period": "5s" } ] }
//! ```
//!
//! `period` may be set at the root, on a runtime entry or on a group; the nearest one wins
//! (default 5 s). A runtime is reported by the first entry whose `tag_filter` matches its tag
//! (no filter matches everything). neuron-monitor group types this monitor does not collect
//! (vCPU usage, host memory info, hardware ECC counters) are accepted and listed in
//! [`Plan::ignored`].

use std::path::Path;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;

use crate::error::{Error, Result};

/// neuron-monitor's default period.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(5);

/// Group types of neuron-monitor that have no datastore source.
const FOREIGN_GROUPS: [&str; 4] = [
    "neuron_runtime_vcpu_usage",
    "vcpu_usage",
    "memory_info",
    "neuron_hw_counters",
];

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
    /// `nds_counters`: every non-zero datastore counter by its C name (this monitor's
    /// extension).
    NdsCounters,
    /// `process_info`: the process records and version counters (this monitor's extension).
    ProcessInfo,
}

impl RuntimeGroup {
    /// Every runtime group.
    pub const ALL: [Self; 5] = [
        Self::NeuroncoreCounters,
        Self::ExecutionStats,
        Self::MemoryUsed,
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
            Self::NdsCounters => "nds_counters",
            Self::ProcessInfo => "process_info",
        }
    }
}

/// System groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SystemGroup {
    /// `neuron_counters`: the kernel's aggregated per-core totals from sysfs.
    NeuronCounters,
}

impl SystemGroup {
    /// The name used in configuration and output.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
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
    /// Group types that were configured but are not collected.
    pub ignored: Vec<String>,
    /// A filter every reported tag must match as well (`--tag-filter`).
    pub tag_filter: Option<Regex>,
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
            system: vec![(SystemGroup::NeuronCounters, period)],
            ignored: Vec::new(),
            tag_filter: None,
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
        let mut ignored = Vec::new();
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
                            match RuntimeGroup::ALL.iter().find(|g| g.name() == metric.kind) {
                                Some(&group) => groups.push((group, group_period)),
                                None => ignored.push(check_foreign(&metric.kind)?),
                            }
                        }
                        groups
                    }
                };
                Ok(RuntimeRule { tag_filter, groups })
            })
            .collect::<Result<Vec<_>>>()?;
        let system = match &config.system_metrics {
            None => vec![(SystemGroup::NeuronCounters, root)],
            Some(metrics) => {
                let mut system = Vec::new();
                for metric in metrics {
                    if metric.kind == SystemGroup::NeuronCounters.name() {
                        let period = parse_period(metric.period.as_deref(), root)?;
                        system.push((SystemGroup::NeuronCounters, period));
                    } else {
                        ignored.push(check_foreign(&metric.kind)?);
                    }
                }
                system
            }
        };
        Ok(Self {
            runtimes,
            system,
            ignored,
            tag_filter: None,
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

/// Accepts a neuron-monitor group this monitor does not collect; rejects unknown names.
fn check_foreign(kind: &str) -> Result<String> {
    if FOREIGN_GROUPS.contains(&kind) {
        Ok(kind.to_owned())
    } else {
        Err(Error::Config(format!("unknown metric group type {kind:?}")))
    }
}

/// Parses a period such as `"1s"` or `"500ms"`; `None` gives `default`.
///
/// # Errors
///
/// [`Error::Config`] for unparsable or zero periods.
pub fn parse_period(text: Option<&str>, default: Duration) -> Result<Duration> {
    let Some(text) = text else {
        return Ok(default);
    };
    let period = humantime::parse_duration(text)
        .map_err(|e| Error::Config(format!("period {text:?}: {e}")))?;
    if period.is_zero() {
        return Err(Error::Config(format!("period {text:?} must be positive")));
    }
    Ok(period)
}
