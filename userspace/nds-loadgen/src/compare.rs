//! Producers' reports next to the kernel's aggregated sysfs totals.

use std::collections::BTreeMap;
use std::fmt::Write;

use nds_abi::sysfs::SYSFS_COUNTERS;
use nds_sysfs::{CoreTotals, SysfsRoot};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::report::Summary;

/// The sysfs totals at some moment, to subtract from later ones.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// One entry per core of every device.
    pub cores: Vec<BaselineCore>,
}

/// One core's totals by node name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaselineCore {
    /// Device index.
    pub device: u32,
    /// Core index.
    pub core: usize,
    /// Node name → total.
    pub totals: BTreeMap<String, u64>,
}

impl Baseline {
    /// Reads every total under `root`.
    ///
    /// # Errors
    ///
    /// The sysfs reader's error.
    pub fn capture(root: &SysfsRoot) -> Result<Self> {
        Ok(Self::from_totals(&root.all_totals()?))
    }

    /// A baseline holding `totals`.
    #[must_use]
    pub fn from_totals(totals: &[CoreTotals]) -> Self {
        let cores = totals
            .iter()
            .map(|core| BaselineCore {
                device: core.device,
                core: core.core,
                totals: core
                    .iter()
                    .map(|(counter, value)| (counter.name.to_owned(), value))
                    .collect(),
            })
            .collect();
        Self { cores }
    }

    /// The total of node `name` on (`device`, `core`); 0 if the baseline does not have it.
    #[must_use]
    pub fn get(&self, device: u32, core: usize, name: &str) -> u64 {
        self.cores
            .iter()
            .find(|entry| entry.device == device && entry.core == core)
            .and_then(|entry| entry.totals.get(name))
            .copied()
            .unwrap_or(0)
    }
}

/// One node of one core: what the producers reported against what the kernel counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Device index.
    pub device: u32,
    /// Core index.
    pub core: usize,
    /// Node name.
    pub counter: &'static str,
    /// Sum over the reports.
    pub reported: u64,
    /// The sysfs total minus the baseline.
    pub kernel: u64,
}

impl Row {
    /// Whether the two agree.
    #[must_use]
    pub fn matches(&self) -> bool {
        self.reported == self.kernel
    }
}

/// Every node where either side is non-zero, for every core in `now`.
#[must_use]
pub fn compare(summary: &Summary, baseline: &Baseline, now: &[CoreTotals]) -> Vec<Row> {
    let mut rows = Vec::new();
    for core in now {
        for (counter, total) in core.iter() {
            let row = Row {
                device: core.device,
                core: core.core,
                counter: counter.name,
                reported: summary.sysfs_contribution(core.device, core.core, counter),
                kernel: total.wrapping_sub(baseline.get(core.device, core.core, counter.name)),
            };
            if row.reported != 0 || row.kernel != 0 {
                rows.push(row);
            }
        }
    }
    // Reports about cores the kernel does not have can never match.
    for report in &summary.producers {
        for core in report
            .nc_counters
            .keys()
            .filter_map(|c| c.parse::<usize>().ok())
        {
            if now
                .iter()
                .any(|t| t.device == report.device && t.core == core)
            {
                continue;
            }
            for counter in SYSFS_COUNTERS.iter() {
                let reported = report.sysfs_contribution(core, counter);
                if reported != 0 {
                    rows.push(Row {
                        device: report.device,
                        core,
                        counter: counter.name,
                        reported,
                        kernel: 0,
                    });
                }
            }
        }
    }
    rows
}

/// The producers, then the rows as an aligned text table, with a verdict line.
#[must_use]
pub fn render(summary: &Summary, rows: &[Row]) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{:<22} {:>6} {:>6} {:>10} {:>6}  ended by",
        "producer", "device", "pid", "executions", "models"
    );
    for report in &summary.producers {
        let _ = writeln!(
            text,
            "{:<22} {:>6} {:>6} {:>10} {:>6}  {}",
            report.tag,
            report.device,
            report.pid,
            report.executions,
            report.loaded_models.len(),
            if report.crashed {
                "SIGKILL (crash)"
            } else {
                "exit"
            }
        );
    }
    let _ = writeln!(text);
    let _ = writeln!(
        text,
        "{:<6} {:<4} {:<34} {:>16} {:>16}  equal",
        "device", "core", "sysfs counter", "producers", "kernel (sysfs)"
    );
    for row in rows {
        let _ = writeln!(
            text,
            "{:<6} {:<4} {:<34} {:>16} {:>16}  {}",
            row.device,
            row.core,
            row.counter,
            row.reported,
            row.kernel,
            if row.matches() { "yes" } else { "NO" }
        );
    }
    let bad = rows.iter().filter(|row| !row.matches()).count();
    let _ = writeln!(
        text,
        "{} counters compared, {} equal, {} different",
        rows.len(),
        rows.len() - bad,
        bad
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ProducerReport;

    fn report(device: u32, core: &str, success: u64, macs: u64) -> ProducerReport {
        let mut report: ProducerReport = serde_json::from_str(&format!(
            r#"{{"tag":"t","pid":1,"device":{device},"crashed":false,"executions":0,
            "statuses":{{}},"model_loads":0,"model_unloads":0,"failed_loads":0,
            "loaded_models":[],"nd_counters":{{}},"nc_counters":{{}}}}"#
        ))
        .unwrap();
        let counters = report.nc_counters.entry(core.into()).or_default();
        counters.insert("NDS_NC_COUNTER_INFER_COMPLETED".into(), success);
        counters.insert("NDS_NC_COUNTER_MAC_COUNT".into(), macs);
        report
    }

    fn totals(device: u32, core: usize, success: u64, flops: u64) -> CoreTotals {
        let mut values = [0; SYSFS_COUNTERS.len()];
        for (value, counter) in values.iter_mut().zip(SYSFS_COUNTERS.iter()) {
            *value = match counter.name {
                "success" => success,
                "flop_count" => flops,
                _ => 0,
            };
        }
        CoreTotals {
            device,
            core,
            values,
        }
    }

    #[test]
    fn sums_reports_scales_flops_and_subtracts_the_baseline() {
        let mut summary = Summary {
            producers: vec![report(0, "1", 5, 10), report(0, "1", 7, 1)],
        };
        let baseline = Baseline::from_totals(&[totals(0, 1, 30, 8)]);
        let rows = compare(&summary, &baseline, &[totals(0, 1, 42, 30)]);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(rows.iter().all(Row::matches), "{rows:?}");
        // Device 1 has no sysfs core: its report cannot match.
        summary.producers.push(report(1, "1", 100, 0));
        let rows = compare(&summary, &Baseline::default(), &[totals(0, 1, 12, 22)]);
        let unmatched: Vec<_> = rows.iter().filter(|row| !row.matches()).collect();
        assert_eq!(unmatched.len(), 1);
        assert_eq!((unmatched[0].device, unmatched[0].reported), (1, 100));
        assert!(render(&summary, &rows).ends_with("3 counters compared, 2 equal, 1 different\n"));
    }
}
