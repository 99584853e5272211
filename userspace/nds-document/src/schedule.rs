//! When each metric group is due: the plan's groups with their periods, and when each was
//! last reported (at first: when the monitor started).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::config::{Plan, RuntimeGroup, SystemGroup};

/// A group's identity in the schedule: a runtime group of rule `n`, or a system group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupId {
    /// Group of the `n`th runtime rule.
    Runtime(usize, RuntimeGroup),
    /// A system group.
    System(SystemGroup),
}

/// Every group of a plan with its period and last report.
#[derive(Clone, Debug)]
pub struct Schedule {
    groups: Vec<(GroupId, Duration)>,
    last: HashMap<GroupId, Instant>,
    started: Instant,
}

impl Schedule {
    /// The schedule of `plan`, every group last reported at `started`.
    #[must_use]
    pub fn new(plan: &Plan, started: Instant) -> Self {
        let runtime = plan.runtimes.iter().enumerate().flat_map(|(index, rule)| {
            rule.groups
                .iter()
                .map(move |&(group, period)| (GroupId::Runtime(index, group), period))
        });
        let system = plan
            .system
            .iter()
            .map(|&(group, period)| (GroupId::System(group), period));
        Self {
            groups: runtime.chain(system).collect(),
            last: HashMap::new(),
            started,
        }
    }

    /// When `id` was last reported (the start if never).
    #[must_use]
    pub fn last_reported(&self, id: GroupId) -> Instant {
        self.last.get(&id).copied().unwrap_or(self.started)
    }

    /// The groups due at `now`.
    #[must_use]
    pub fn due(&self, now: Instant) -> Vec<GroupId> {
        self.groups
            .iter()
            .filter(|&&(id, period)| {
                now.saturating_duration_since(self.last_reported(id)) >= period
            })
            .map(|&(id, _)| id)
            .collect()
    }

    /// Every group of the schedule.
    pub fn all(&self) -> impl Iterator<Item = GroupId> + '_ {
        self.groups.iter().map(|&(id, _)| id)
    }

    /// Whether every group has been reported at least once.
    #[must_use]
    pub fn reported_every_group(&self) -> bool {
        self.groups.iter().all(|(id, _)| self.last.contains_key(id))
    }

    /// How long after `now` the next group is due (zero if one is; `fallback` for no group).
    #[must_use]
    pub fn until_due(&self, now: Instant, fallback: Duration) -> Duration {
        self.groups
            .iter()
            .map(|&(id, period)| {
                let next = self.last_reported(id).checked_add(period);
                next.map_or(Duration::MAX, |next| next.saturating_duration_since(now))
            })
            .min()
            .unwrap_or(fallback)
    }

    /// Records that `reported` were reported at `now`.
    pub fn mark(&mut self, reported: &[GroupId], now: Instant) {
        for &id in reported {
            self.last.insert(id, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_fall_due_on_their_own_periods() {
        let second = Duration::from_secs(1);
        let mut plan = Plan::everything(second);
        plan.system = vec![(SystemGroup::VcpuUsage, 3 * second)];
        let t0 = Instant::now();
        let mut schedule = Schedule::new(&plan, t0);
        assert!(schedule.due(t0).is_empty());
        assert_eq!(schedule.until_due(t0, second), second);
        let due = schedule.due(t0 + second);
        assert_eq!(
            due.len(),
            RuntimeGroup::ALL.len(),
            "the runtime groups only"
        );
        schedule.mark(&due, t0 + second);
        assert_eq!(schedule.last_reported(due[0]), t0 + second);
        assert_eq!(schedule.until_due(t0 + second, second), second);
        assert_eq!(
            schedule.due(t0 + 3 * second).len(),
            RuntimeGroup::ALL.len() + 1
        );
        let empty = Schedule::new(
            &Plan {
                runtimes: Vec::new(),
                system: Vec::new(),
                tag_filter: None,
                health: crate::health::HealthRules::default(),
            },
            t0,
        );
        assert_eq!(empty.until_due(t0, second), second);
    }
}
