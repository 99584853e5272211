//! The weighted mix of NRT statuses execution results are drawn from.

use std::fmt;
use std::str::FromStr;

use nrt_status::NrtStatus;

use crate::error::Error;
use crate::rng::Rng;

/// The default mix: mostly successes, and a sprinkling of every outcome the bridge counts.
pub const DEFAULT_MIX: &str =
    "SUCCESS=900,EXEC_COMPLETED_WITH_ERR=20,EXEC_COMPLETED_WITH_NUM_ERR=10,\
TIMEOUT=15,EXEC_BAD_INPUT=10,QUEUE_FULL=15,HW_ERROR=3,FAILURE=5,INVALID=3,EXEC_OOB=2,\
EXEC_HW_ERR_COLLECTIVES=2,EXEC_HW_ERR_HBM_UE=1,EXEC_HW_ERR_NC_UE=1,EXEC_HW_ERR_DMA_ABORT=1,\
EXEC_SW_NQ_OVERFLOW=2,EXEC_HW_ERR_REPAIRABLE_HBM_UE=1,EXEC_NC_BUSY=4,COLL_PENDING=5";

/// Statuses with integer weights: `NAME_OR_NUMBER=WEIGHT,…`, names with or without `NRT_`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusMix {
    entries: Vec<(NrtStatus, u64)>,
    total: u64,
}

impl StatusMix {
    /// The weighted statuses.
    #[must_use]
    pub fn entries(&self) -> &[(NrtStatus, u64)] {
        &self.entries
    }

    /// Draws one status.
    pub fn pick(&self, rng: &mut Rng) -> NrtStatus {
        let mut ticket = rng.below(self.total);
        for &(status, weight) in &self.entries {
            if ticket < weight {
                return status;
            }
            ticket -= weight;
        }
        // Unreachable while the weights sum to `total`; success is the harmless answer.
        NrtStatus::SUCCESS
    }
}

impl Default for StatusMix {
    fn default() -> Self {
        // The default specification is a constant that the tests parse.
        DEFAULT_MIX.parse().unwrap_or(Self {
            entries: vec![(NrtStatus::SUCCESS, 1)],
            total: 1,
        })
    }
}

impl FromStr for StatusMix {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self, Error> {
        let fail = |reason: String| Error::Mix {
            spec: spec.to_owned(),
            reason,
        };
        let mut entries = Vec::new();
        for item in spec
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            let (name, weight) = item
                .split_once('=')
                .ok_or_else(|| fail(format!("{item:?} is not STATUS=WEIGHT")))?;
            let status: NrtStatus = name.parse().map_err(|e| fail(format!("{e}")))?;
            let weight: u64 = weight
                .trim()
                .parse()
                .map_err(|_| fail(format!("weight of {name} is not a whole number")))?;
            if weight > 0 {
                entries.push((status, weight));
            }
        }
        let total = entries
            .iter()
            .try_fold(0u64, |sum, (_, weight)| sum.checked_add(*weight))
            .ok_or_else(|| fail("weights overflow".into()))?;
        if total == 0 {
            return Err(fail("no status has a positive weight".into()));
        }
        Ok(Self { entries, total })
    }
}

impl fmt::Display for StatusMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, (status, weight)) in self.entries.iter().enumerate() {
            let separator = if index == 0 { "" } else { "," };
            write!(f, "{separator}{}={weight}", status.as_u32())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_numbers_and_round_trips() {
        let mix: StatusMix = "SUCCESS=3, NRT_TIMEOUT=1,1004=2,QUEUE_FULL=0"
            .parse()
            .unwrap();
        assert_eq!(
            mix.entries(),
            &[
                (NrtStatus::SUCCESS, 3),
                (NrtStatus::TIMEOUT, 1),
                (NrtStatus::EXEC_COMPLETED_WITH_ERR, 2)
            ]
        );
        assert_eq!(mix.to_string().parse::<StatusMix>().unwrap(), mix);
        assert_eq!(StatusMix::default().entries().len(), 18);
    }

    #[test]
    fn rejects_bad_specs() {
        for spec in ["", "SUCCESS", "SUCCESS=x", "BOGUS=1", "SUCCESS=0"] {
            assert!(spec.parse::<StatusMix>().is_err(), "{spec:?}");
        }
    }

    #[test]
    fn draws_follow_the_weights() {
        let mix: StatusMix = "SUCCESS=1,TIMEOUT=3".parse().unwrap();
        let mut rng = Rng::new(1);
        let timeouts = (0..4000)
            .filter(|_| mix.pick(&mut rng) == NrtStatus::TIMEOUT)
            .count();
        assert!((2700..3300).contains(&timeouts), "{timeouts}");
    }
}
