//! The tenure ledger as `nds-ls --ledger` prints it, as `lastcomm` prints process accounting:
//! one line (or one JSON object) per tenure that ended, and one per run of records the kernel
//! dropped before they were read.
//!
//! Counters are shown as the sysfs totals add them: the record's value of the slab counter a
//! sysfs node reads, times the node's scale (`flop_count` is twice the MACs). A record the
//! reader may not read in full (`redacted`) shows when and where a tenure ended, not whose.

use std::time::{Duration, UNIX_EPOCH};

use nds::LedgerEvent;
use nds_abi::{
    ledger::TenureRecord,
    sysfs::{SysfsGroup, SYSFS_COUNTERS},
};
use nds_terminal::escape;
use serde_json::{json, Map, Value};

/// The heading of [`table_line`]'s columns.
pub const TABLE_HEADER: &str =
    "DEVICE  SEQ  SLOT  END       PID      UID  STARTED (UTC)         SECONDS  COMPLETED  ERRORS  TAG";

/// `ns` nanoseconds after the epoch as an RFC 3339 time to the second, in UTC.
fn utc(ns: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_nanos(ns)).to_string()
}

/// The value a sysfs `total` adds for node `node` (an index into `SYSFS_COUNTERS`), from the
/// record's raw value.
fn scaled(node: usize, raw: u64) -> u64 {
    SYSFS_COUNTERS
        .get(node)
        .map_or(raw, |counter| raw.wrapping_mul(counter.scale))
}

/// The completed executions and the failed ones (every other status node), over the cores.
fn outcomes(record: &TenureRecord) -> (u64, u64) {
    let cores = &record.counters[..usize::from(record.core_count).min(record.counters.len())];
    let mut completed = 0u64;
    let mut errors = 0u64;
    for values in cores {
        for (node, (counter, &raw)) in SYSFS_COUNTERS.iter().zip(values).enumerate() {
            if counter.group != SysfsGroup::Status {
                continue;
            }
            if counter.name == "success" {
                completed = completed.wrapping_add(scaled(node, raw));
            } else {
                errors = errors.wrapping_add(scaled(node, raw));
            }
        }
    }
    (completed, errors)
}

/// The end's name, or its number if the kernel is newer than this tool.
fn end_name(record: &TenureRecord) -> String {
    record
        .ended_by()
        .map_or_else(|| record.end.to_string(), |end| end.name().to_owned())
}

/// One line of the table for `event` of device `device`'s ledger.
#[must_use]
pub fn table_line(device: u32, event: &LedgerEvent) -> String {
    let record = match event {
        LedgerEvent::Lost { first, last } => {
            return format!("{device:<6}  lost records {first} to {last} before they were read");
        }
        LedgerEvent::Restarted => {
            return format!("{device:<6}  the ledger started over: the module was loaded again");
        }
        LedgerEvent::Tenure(record) => record,
    };
    let seconds = record.ended_ns.saturating_sub(record.started_ns) as f64 / 1e9;
    let head = format!(
        "{device:<6}  {:<3}  {:<4}  {:<8}",
        record.seq,
        record.slot,
        end_name(record)
    );
    if record.is_redacted() {
        return format!(
            "{head}  {:>5}  {:>7}  {:<20}  {seconds:>7.1}  {:>9}  {:>6}  -",
            "-",
            "-",
            utc(record.started_ns),
            "-",
            "-"
        );
    }
    let (completed, errors) = outcomes(record);
    let tag = record.tag().map_or_else(
        || "-".to_owned(),
        |tag| escape(&String::from_utf8_lossy(tag)),
    );
    format!(
        "{head}  {:>5}  {:>7}  {:<20}  {seconds:>7.1}  {completed:>9}  {errors:>6}  {tag}",
        record.pid,
        record.uid,
        utc(record.started_ns)
    )
}

/// `event` of device `device`'s ledger as one JSON object.
#[must_use]
pub fn json_object(device: u32, event: &LedgerEvent) -> Value {
    let record = match event {
        LedgerEvent::Lost { first, last } => {
            return json!({ "lost": { "device": device, "first": first, "last": last } });
        }
        LedgerEvent::Restarted => return json!({ "restarted": { "device": device } }),
        LedgerEvent::Tenure(record) => record,
    };
    let mut object = json!({
        "seq": record.seq,
        "device": record.device,
        "slot": record.slot,
        "end": end_name(record),
        "generation": record.generation,
        "started": utc(record.started_ns),
        "ended": utc(record.ended_ns),
        "started_ns": record.started_ns,
        "ended_ns": record.ended_ns,
        "redacted": record.is_redacted(),
    });
    if record.is_redacted() {
        return object;
    }
    let mut cores = Map::new();
    for (core, values) in record
        .counters
        .iter()
        .take(usize::from(record.core_count))
        .enumerate()
    {
        let counters: Map<String, Value> = SYSFS_COUNTERS
            .iter()
            .zip(values)
            .enumerate()
            .map(|(node, (counter, &raw))| (counter.name.to_owned(), json!(scaled(node, raw))))
            .collect();
        cores.insert(core.to_string(), Value::Object(counters));
    }
    let extra = json!({
        "pid": record.pid,
        "uid": record.uid,
        "gid": record.gid,
        "tag": record.tag().map(|tag| String::from_utf8_lossy(tag).into_owned()),
        "cgroup_id": record.cgroup_id,
        "cgroup": String::from_utf8_lossy(record.cgroup_path()),
        "cgroup_cut": record.flags & nds_abi::ledger::TENURE_CGROUP_CUT != 0,
        "neuroncores": cores,
    });
    if let (Value::Object(object), Value::Object(extra)) = (&mut object, extra) {
        object.extend(extra);
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use nds_abi::ledger::{TenureEnd, TENURE_REDACTED, TENURE_TAG_PUBLISHED};
    use zerocopy::FromZeros;

    fn node(name: &str) -> usize {
        SYSFS_COUNTERS.iter().position(|c| c.name == name).unwrap()
    }

    fn record() -> Box<TenureRecord> {
        let mut record = Box::new(TenureRecord::new_zeroed());
        record.seq = 7;
        record.device = 1;
        record.slot = 3;
        record.end = TenureEnd::Reaped as u8;
        record.started_ns = 1_700_000_000_000_000_000;
        record.ended_ns = record.started_ns + 2_500_000_000;
        record.pid = 4242;
        record.uid = 1000;
        record.core_count = 2;
        record.flags = TENURE_TAG_PUBLISHED;
        record.tag[..6].copy_from_slice(b"bert\x1b]");
        record.counters[0][node("success")] = 10;
        record.counters[1][node("success")] = 5;
        record.counters[1][node("timeout")] = 2;
        record.counters[0][node("flop_count")] = 21;
        // A core past core_count is not the device's: never summed.
        record.counters[2][node("success")] = 1000;
        record
    }

    #[test]
    fn a_line_sums_the_cores_outcomes_and_escapes_the_tag() {
        let line = table_line(1, &LedgerEvent::Tenure(record()));
        assert!(line.starts_with("1       7    3     reaped"), "{line}");
        assert!(line.contains("2023-11-14T22:13:20Z"), "{line}");
        assert!(line.contains("    2.5         15       2  bert"), "{line}");
        assert!(
            !line.contains('\u{1b}'),
            "a control character reached the terminal: {line}"
        );
        let lost = table_line(0, &LedgerEvent::Lost { first: 3, last: 9 });
        assert_eq!(lost, "0       lost records 3 to 9 before they were read");
        let restarted = table_line(2, &LedgerEvent::Restarted);
        assert_eq!(
            restarted,
            "2       the ledger started over: the module was loaded again"
        );
        assert_eq!(
            json_object(2, &LedgerEvent::Restarted),
            json!({ "restarted": { "device": 2 } })
        );
    }

    #[test]
    fn json_shows_sysfs_values_and_a_redacted_record_hides_its_owner() {
        let object = json_object(1, &LedgerEvent::Tenure(record()));
        assert_eq!(object["pid"], 4242);
        assert_eq!(object["end"], "reaped");
        assert_eq!(object["neuroncores"]["1"]["timeout"], 2);
        // As sysfs adds it: twice the MACs.
        assert_eq!(object["neuroncores"]["0"]["flop_count"], 42);
        assert!(object["neuroncores"].get("2").is_none());
        let mut redacted = record();
        redacted.flags = TENURE_REDACTED;
        let hidden = json_object(1, &LedgerEvent::Tenure(redacted.clone()));
        assert_eq!(hidden["redacted"], true);
        assert!(hidden.get("pid").is_none() && hidden.get("neuroncores").is_none());
        let line = table_line(1, &LedgerEvent::Tenure(redacted));
        assert!(!line.contains("4242") && !line.contains("bert"), "{line}");
    }
}
