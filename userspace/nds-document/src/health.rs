//! Health verdicts: the words (Neuron Observer's three states and four recovery actions), the
//! closed set of reasons a verdict gives, the rules that turn the hardware errors counted
//! within a window into a verdict ([`HealthRules::judge`]), their configuration (the `health`
//! key of the configuration file, which neuron-monitor's own parser does not know and an
//! unchanged neuron-monitor setup does not have), and the document's `neuron_health` group.
//!
//! ```json
//! { "health": { "window": "15m",
//!               "rules": { "collectives_errors": { "state": "healthy", "action": "monitor" },
//!                          "nc_uncorrectable_errors": { "threshold": 3 } } } }
//! ```
//!
//! A device (or NeuronCore) is `unknown` while what it is judged from cannot be read (its
//! module is not loaded, its sysfs totals or one of its slabs cannot be read): never
//! `healthy` for want of numbers. Otherwise each reason whose counters rose at least its
//! threshold within the window applies; the worst state wins, then the strongest action.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The window errors are counted in, by default: long enough for a node-problem-detector
/// check or an alert evaluated every minute to see an error more than once.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(15 * 60);

/// The longest window: a week of counts per report is still little memory.
pub const MAX_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// A health state, in Observer's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    /// No error that makes it unhealthy within the window, and everything could be read.
    Healthy,
    /// What it is judged from could not be read.
    Unknown,
    /// An error that makes it unhealthy within the window.
    Unhealthy,
}

impl HealthState {
    /// Every state, in the order of the one-hot families.
    pub const ALL: [Self; 3] = [Self::Healthy, Self::Unhealthy, Self::Unknown];

    /// The state's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Unhealthy => "unhealthy",
            Self::Unknown => "unknown",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.name() == text)
    }
}

/// A recovery action, in Observer's words, from the mildest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Keep watching; nothing to do now.
    Monitor,
    /// Update the driver, the module or the runtime.
    UpdateSoftware,
    /// Reset the device (reload the driver).
    Reset,
    /// Take the instance out of service and replace it.
    Terminate,
}

impl Action {
    /// Every action.
    pub const ALL: [Self; 4] = [
        Self::Monitor,
        Self::UpdateSoftware,
        Self::Reset,
        Self::Terminate,
    ];

    /// The action's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Monitor => "monitor",
            Self::UpdateSoftware => "update_software",
            Self::Reset => "reset",
            Self::Terminate => "terminate",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|action| action.name() == text)
    }
}

/// Why a verdict is what it is: a closed set, so that it can be a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Nothing counted within the window.
    NoErrors,
    /// Repairable HBM uncorrectable errors (`hw_repairable_hbm_ue_error`).
    RepairableHbmErrors,
    /// HBM uncorrectable errors (`hw_hbm_ue_error`).
    HbmUncorrectableErrors,
    /// NeuronCore uncorrectable errors (`hw_nc_ue_error`).
    NcUncorrectableErrors,
    /// DMA aborts (`hw_dma_abort_error`).
    DmaAborts,
    /// Collectives hardware errors (`hw_collectives_error`).
    CollectivesErrors,
    /// The driver's uncorrected ECC events (`mem_ecc_uncorrected`, `sram_ecc_uncorrected`).
    EccUncorrectableErrors,
    /// Its sysfs totals or one of its slabs could not be read.
    Unreadable,
    /// The module is not loaded.
    ModuleUnloaded,
}

impl Reason {
    /// Every reason.
    pub const ALL: [Self; 9] = [
        Self::NoErrors,
        Self::RepairableHbmErrors,
        Self::HbmUncorrectableErrors,
        Self::NcUncorrectableErrors,
        Self::DmaAborts,
        Self::CollectivesErrors,
        Self::EccUncorrectableErrors,
        Self::Unreadable,
        Self::ModuleUnloaded,
    ];

    /// The reasons that count errors, each with its counters: the module's status nodes (per
    /// NeuronCore) and the driver's ECC counters (per device).
    pub const COUNTED: [(Self, &'static [&'static str]); 6] = [
        (Self::RepairableHbmErrors, &["hw_repairable_hbm_ue_error"]),
        (Self::HbmUncorrectableErrors, &["hw_hbm_ue_error"]),
        (Self::NcUncorrectableErrors, &["hw_nc_ue_error"]),
        (Self::DmaAborts, &["hw_dma_abort_error"]),
        (Self::CollectivesErrors, &["hw_collectives_error"]),
        (
            Self::EccUncorrectableErrors,
            &["mem_ecc_uncorrected", "sram_ecc_uncorrected"],
        ),
    ];

    /// The reason's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::NoErrors => "no_errors",
            Self::RepairableHbmErrors => "repairable_hbm_errors",
            Self::HbmUncorrectableErrors => "hbm_uncorrectable_errors",
            Self::NcUncorrectableErrors => "nc_uncorrectable_errors",
            Self::DmaAborts => "dma_aborts",
            Self::CollectivesErrors => "collectives_errors",
            Self::EccUncorrectableErrors => "ecc_uncorrectable_errors",
            Self::Unreadable => "unreadable",
            Self::ModuleUnloaded => "module_unloaded",
        }
    }

    /// The reason counter `name` (a status node or an ECC counter) counts for, if any.
    #[must_use]
    pub fn of_counter(name: &str) -> Option<Self> {
        Self::COUNTED
            .iter()
            .find(|(_, counters)| counters.contains(&name))
            .map(|&(reason, _)| reason)
    }
}

/// What a reason's errors make of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The state (healthy: counted and warned about only).
    pub state: HealthState,
    /// The recommended action.
    pub action: Action,
    /// Errors within the window that it takes.
    pub threshold: u64,
}

/// A verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The state.
    pub state: HealthState,
    /// Why.
    pub reason: Reason,
    /// What to do.
    pub action: Action,
    /// One line for a person.
    pub message: String,
}

/// What a device or NeuronCore is judged from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Evidence {
    /// Errors within the window, by counter name.
    pub errors: BTreeMap<String, u64>,
    /// Why it cannot be judged from numbers, if it cannot (the reason is
    /// [`Reason::Unreadable`] or [`Reason::ModuleUnloaded`]).
    pub unreadable: Option<(Reason, String)>,
}

/// The rules in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthRules {
    /// The window errors are counted in.
    pub window: Duration,
    /// The rule of each counted reason, in [`Reason::COUNTED`]'s order.
    rules: Vec<(Reason, Rule)>,
}

impl Default for HealthRules {
    fn default() -> Self {
        let rule = |state, action| Rule {
            state,
            action,
            threshold: 1,
        };
        let unhealthy = HealthState::Unhealthy;
        Self {
            window: DEFAULT_WINDOW,
            rules: vec![
                (
                    Reason::RepairableHbmErrors,
                    rule(HealthState::Healthy, Action::Monitor),
                ),
                (
                    Reason::HbmUncorrectableErrors,
                    rule(unhealthy, Action::Terminate),
                ),
                (
                    Reason::NcUncorrectableErrors,
                    rule(unhealthy, Action::Reset),
                ),
                (Reason::DmaAborts, rule(unhealthy, Action::Reset)),
                (Reason::CollectivesErrors, rule(unhealthy, Action::Reset)),
                (
                    Reason::EccUncorrectableErrors,
                    rule(unhealthy, Action::Terminate),
                ),
            ],
        }
    }
}

/// The `health` key of the configuration file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// The window, e.g. `"15m"`.
    pub window: Option<String>,
    /// Rules by reason name; what a rule leaves out keeps its default.
    pub rules: Option<BTreeMap<String, RuleConfig>>,
}

/// One rule as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// `healthy` or `unhealthy`.
    pub state: Option<String>,
    /// One of the four actions.
    pub action: Option<String>,
    /// Errors within the window that it takes (at least 1).
    pub threshold: Option<u64>,
}

impl HealthRules {
    /// The rules `config` writes over the defaults.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a window that is no duration, a reason that counts nothing, a
    /// state other than healthy or unhealthy, an unknown action or a zero threshold.
    pub fn from_config(config: &HealthConfig) -> Result<Self> {
        let mut rules = Self::default();
        if let Some(window) = &config.window {
            rules.window = humantime::parse_duration(window)
                .ok()
                .filter(|window| (Duration::from_secs(1)..=MAX_WINDOW).contains(window))
                .ok_or_else(|| {
                    Error::Config(format!(
                        "health.window: {window:?} is no duration from 1s to {}",
                        humantime::format_duration(MAX_WINDOW)
                    ))
                })?;
        }
        for (name, written) in config.rules.iter().flatten() {
            let Some((_, rule)) = rules
                .rules
                .iter_mut()
                .find(|(reason, _)| reason.name() == name)
            else {
                let known: Vec<&str> = Reason::COUNTED.iter().map(|(r, _)| r.name()).collect();
                return Err(Error::Config(format!(
                    "health.rules: {name:?} is none of {}",
                    known.join(", ")
                )));
            };
            if let Some(state) = &written.state {
                rule.state = HealthState::parse(state)
                    .filter(|&state| state != HealthState::Unknown)
                    .ok_or_else(|| {
                        Error::Config(format!(
                            "health.rules.{name}.state: {state:?} is neither healthy nor unhealthy"
                        ))
                    })?;
            }
            if let Some(action) = &written.action {
                rule.action = Action::parse(action).ok_or_else(|| {
                    let known: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
                    Error::Config(format!(
                        "health.rules.{name}.action: {action:?} is none of {}",
                        known.join(", ")
                    ))
                })?;
            }
            if let Some(threshold) = written.threshold {
                if threshold == 0 {
                    return Err(Error::Config(format!(
                        "health.rules.{name}.threshold: at least 1"
                    )));
                }
                rule.threshold = threshold;
            }
        }
        Ok(rules)
    }

    /// The rule of counted reason `reason`.
    #[must_use]
    pub fn rule(&self, reason: Reason) -> Option<Rule> {
        self.rules
            .iter()
            .find(|(counted, _)| *counted == reason)
            .map(|&(_, rule)| rule)
    }

    /// The verdict on `evidence`.
    #[must_use]
    pub fn judge(&self, evidence: &Evidence) -> Verdict {
        let window = humantime::format_duration(self.window);
        let mut applying: Vec<(Reason, Rule, u64)> = self
            .rules
            .iter()
            .filter_map(|&(reason, rule)| {
                let counters = Reason::COUNTED
                    .iter()
                    .find(|(counted, _)| *counted == reason)
                    .map_or(&[][..], |(_, counters)| counters);
                let count: u64 = counters
                    .iter()
                    .filter_map(|counter| evidence.errors.get(*counter))
                    .sum();
                (count >= rule.threshold).then_some((reason, rule, count))
            })
            .collect();
        // The worst state first, then the strongest action.
        applying.sort_by_key(|(_, rule, _)| std::cmp::Reverse((rule.state, rule.action)));
        let unhealthy = applying
            .iter()
            .find(|(_, rule, _)| rule.state == HealthState::Unhealthy);
        if let Some(&(reason, rule, count)) = unhealthy {
            return Verdict {
                state: rule.state,
                reason,
                action: rule.action,
                message: format!("{count} {} within {window}", reason.name()),
            };
        }
        if let Some((reason, why)) = &evidence.unreadable {
            return Verdict {
                state: HealthState::Unknown,
                reason: *reason,
                action: Action::Monitor,
                message: why.clone(),
            };
        }
        match applying.first() {
            Some(&(reason, rule, count)) => Verdict {
                state: rule.state,
                reason,
                action: rule.action,
                message: format!("{count} {} within {window} (warning)", reason.name()),
            },
            None => Verdict {
                state: HealthState::Healthy,
                reason: Reason::NoErrors,
                action: Action::Monitor,
                message: format!("no hardware errors within {window}"),
            },
        }
    }
}

/// A verdict with what it was judged from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Judged {
    /// The verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Errors within the window, by counter name.
    pub errors: BTreeMap<String, u64>,
}

/// One NeuronCore's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CoreHealth {
    /// The core's index instance-wide, as `neuroncore_counters` keys it.
    pub neuroncore_index: usize,
    /// The verdict.
    #[serde(flatten)]
    pub judged: Judged,
}

/// One device's verdict, and its NeuronCores'.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceHealth {
    /// The device.
    pub neuron_device_index: u32,
    /// The verdict on the device (its cores' errors and its driver's ECC events).
    #[serde(flatten)]
    pub judged: Judged,
    /// Each NeuronCore's verdict (on its own errors).
    pub neuroncores: Vec<CoreHealth>,
}

/// The `neuron_health` group: every device's verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HealthGroup {
    /// The window errors were counted in, seconds.
    pub window: f64,
    /// Each device seen, by index.
    pub devices: Vec<DeviceHealth>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(pairs: &[(&str, u64)]) -> Evidence {
        Evidence {
            errors: pairs.iter().map(|&(n, v)| (n.to_owned(), v)).collect(),
            unreadable: None,
        }
    }

    #[test]
    fn the_worst_state_then_the_strongest_action_wins() {
        let rules = HealthRules::default();
        let clean = rules.judge(&errors(&[]));
        assert_eq!(
            (clean.state, clean.reason, clean.action),
            (HealthState::Healthy, Reason::NoErrors, Action::Monitor)
        );
        let repairable = rules.judge(&errors(&[("hw_repairable_hbm_ue_error", 2)]));
        assert_eq!(
            (repairable.state, repairable.reason),
            (HealthState::Healthy, Reason::RepairableHbmErrors)
        );
        assert!(repairable.message.contains("warning"), "{repairable:?}");
        let both = rules.judge(&errors(&[
            ("hw_repairable_hbm_ue_error", 2),
            ("hw_nc_ue_error", 1),
            ("hw_hbm_ue_error", 1),
        ]));
        assert_eq!(
            (both.state, both.reason, both.action),
            (
                HealthState::Unhealthy,
                Reason::HbmUncorrectableErrors,
                Action::Terminate
            )
        );
    }

    #[test]
    fn unreadable_is_unknown_unless_an_error_already_says_unhealthy() {
        let rules = HealthRules::default();
        let mut evidence = errors(&[("hw_repairable_hbm_ue_error", 1)]);
        evidence.unreadable = Some((Reason::Unreadable, "neuron0: EIO".to_owned()));
        let verdict = rules.judge(&evidence);
        assert_eq!(
            (verdict.state, verdict.reason),
            (HealthState::Unknown, Reason::Unreadable)
        );
        evidence.errors.insert("hw_dma_abort_error".to_owned(), 1);
        assert_eq!(rules.judge(&evidence).state, HealthState::Unhealthy);
    }

    #[test]
    fn the_configuration_changes_rules_within_the_closed_sets() {
        let config: HealthConfig = serde_json::from_str(
            r#"{"window": "2m", "rules": {"collectives_errors": {"state": "healthy",
                "action": "monitor"}, "nc_uncorrectable_errors": {"threshold": 3}}}"#,
        )
        .unwrap();
        let rules = HealthRules::from_config(&config).unwrap();
        assert_eq!(rules.window, Duration::from_secs(120));
        let collectives = rules.judge(&errors(&[("hw_collectives_error", 5)]));
        assert_eq!(collectives.state, HealthState::Healthy);
        assert_eq!(
            rules.judge(&errors(&[("hw_nc_ue_error", 2)])).state,
            HealthState::Healthy
        );
        assert_eq!(
            rules.judge(&errors(&[("hw_nc_ue_error", 3)])).state,
            HealthState::Unhealthy
        );
        for bad in [
            r#"{"rules": {"unreadable": {"state": "healthy"}}}"#,
            r#"{"rules": {"dma_aborts": {"state": "unknown"}}}"#,
            r#"{"rules": {"dma_aborts": {"action": "reboot"}}}"#,
            r#"{"rules": {"dma_aborts": {"threshold": 0}}}"#,
            r#"{"window": "forever"}"#,
        ] {
            let config: HealthConfig = serde_json::from_str(bad).unwrap();
            assert!(HealthRules::from_config(&config).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_counted_counter_is_a_status_node_or_an_ecc_counter() {
        let ecc = ["mem_ecc_uncorrected", "sram_ecc_uncorrected"];
        for (reason, counters) in Reason::COUNTED {
            for counter in counters {
                let node = nds_abi::sysfs::SYSFS_COUNTERS
                    .iter()
                    .any(|node| node.name == *counter);
                assert!(node || ecc.contains(counter), "{counter}");
                assert_eq!(Reason::of_counter(counter), Some(reason));
            }
            assert!(HealthRules::default().rule(reason).is_some());
        }
    }
}
