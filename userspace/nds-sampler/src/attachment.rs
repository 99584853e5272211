//! An attached slab: the reader, whose it is, and what the monitor keeps about it between
//! reports (baselines per group, the period's latency samples, the series it feeds).

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use nds::{Error as NdsError, Reader};
use nds_abi::layout::{slab_generation_is_owned, NDS_TOTAL_NEURONCORE_COUNT};
use nds_document::config::RuntimeGroup;
use nds_document::document::{RuntimeEntry, RuntimeReport};
use nds_document::groups;
use nds_document::latency::LatencyReservoir;
use nds_exporter::feeds::SlabFeeds;
use nds_exporter::pods::SlabAttribution;
use nds_host::host::ProcessCpu;
use nds_slabs::snapshot::{observe, sample_latencies, Observation, SlabReading};
use nds_slabs::{Candidate, Owner, SlabKey};

/// Why an attachment ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The owner gave the slab back (or its file went away).
    Released,
    /// Another process (or another tenure) has the slab now.
    Reused,
    /// The slab file shrank under the reader.
    Truncated,
}

impl EndReason {
    /// The `reason` label of `nds_monitor_slabs_ended_total`.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::Reused => "reused",
            Self::Truncated => "truncated",
        }
    }
}

/// Why a slab discovery found could not be attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AttachFailure {
    /// The module (or the file's mode) refused this monitor: the kernel's ptrace read rule,
    /// or no `CAP_PERFMON`.
    NoPermission,
    /// What is there is not a slab: not a regular file, too small, another size.
    NotASlab,
    /// The owner was gone by the time the monitor got to it.
    Vanished,
    /// The slot is owned by a process outside the monitor's pid namespace, which it cannot
    /// name (a pod without `hostPID`).
    NoPidView,
    /// Anything else (an I/O error).
    Other,
}

impl AttachFailure {
    /// Every reason, in label order.
    pub const ALL: [Self; 5] = [
        Self::NoPermission,
        Self::NotASlab,
        Self::Vanished,
        Self::NoPidView,
        Self::Other,
    ];

    /// The `reason` label of `nds_monitor_attach_failures_total`.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::NoPermission => "no_permission",
            Self::NotASlab => "not_a_slab",
            Self::Vanished => "vanished",
            Self::NoPidView => "no_pid_view",
            Self::Other => "other",
        }
    }

    /// The reason of an error opening a slab.
    #[must_use]
    pub fn of(error: &NdsError) -> Self {
        let denied = |errno: i32| errno == libc::EPERM || errno == libc::EACCES;
        let gone = |errno: i32| errno == libc::ENOENT || errno == libc::ESRCH;
        match error {
            NdsError::Ioctl { errno, .. } if denied(*errno) => Self::NoPermission,
            NdsError::Ioctl { errno, .. } if gone(*errno) => Self::Vanished,
            NdsError::Io { source, .. } => match source.raw_os_error() {
                Some(errno) if denied(errno) => Self::NoPermission,
                Some(errno) if gone(errno) => Self::Vanished,
                _ => Self::Other,
            },
            NdsError::NotASlabFile { .. }
            | NdsError::SlabTooSmall { .. }
            | NdsError::UnexpectedSlabSize { .. } => Self::NotASlab,
            _ => Self::Other,
        }
    }
}

/// An attached slab.
#[derive(Debug)]
pub struct Attachment {
    /// Where it is.
    pub key: SlabKey,
    /// How discovery found it when attaching.
    pub candidate: Candidate,
    /// The owner as the slot table (or file name) showed it when attaching.
    pub owner: Owner,
    /// The slab generation in the mapping when attaching; it must not change.
    pub generation: Option<u64>,
    /// The reader.
    pub store: Reader,
    /// The process tag, as last read.
    pub tag: String,
    /// Per group: when it was last reported for this slab, and the reading then.
    pub baselines: HashMap<RuntimeGroup, (Instant, SlabReading)>,
    /// The current period's latency samples (sampled only if its rule wants them).
    pub latency: LatencyReservoir,
    /// Inference counts per core at the last latency sample.
    pub inferences: [u64; NDS_TOTAL_NEURONCORE_COUNT],
    /// The owner's CPU time when `neuron_runtime_vcpu_usage` was last reported.
    pub cpu_baseline: Option<(Instant, ProcessCpu)>,
    /// The exporter's series it feeds.
    pub feeds: SlabFeeds,
    /// The containers of its series, with pod attribution on.
    pub pods: SlabAttribution,
}

impl Attachment {
    /// Opens a reader of `candidate`; `Ok(None)` when the owner has not published its header
    /// yet, or the slab changed hands since the slot table was read (the next refresh tries
    /// again). `ran_before_monitor`: whether the owner ran before this
    /// monitor started ([`SlabFeeds::new`]).
    ///
    /// # Errors
    ///
    /// The slab cannot be opened or mapped, or its owner is gone ([`AttachFailure::of`] says
    /// which).
    pub fn attach(
        key: SlabKey,
        candidate: Candidate,
        now: Instant,
        proc_root: &Path,
        ran_before_monitor: bool,
    ) -> Result<Option<Self>, NdsError> {
        let store = match Reader::open(&candidate.backend, candidate.owner.pid) {
            Ok(store) => store,
            Err(NdsError::BadHeader { .. }) => return Ok(None),
            Err(error) => return Err(error),
        };
        let generation = store.attached_generation();
        if candidate.owner.generation.is_some() && candidate.owner.generation != generation {
            return Ok(None);
        }
        let pid = candidate.owner.pid;
        let mut attachment = Self {
            key,
            tag: pid.to_string(),
            owner: candidate.owner,
            candidate,
            generation,
            store,
            baselines: HashMap::new(),
            latency: LatencyReservoir::default(),
            inferences: [0; NDS_TOTAL_NEURONCORE_COUNT],
            cpu_baseline: ProcessCpu::read(proc_root, pid).ok().map(|cpu| (now, cpu)),
            feeds: SlabFeeds::new(ran_before_monitor),
            pods: SlabAttribution::default(),
        };
        if let Observation::Reading(reading) = observe(&attachment.store) {
            attachment.tag = groups::tag_of(&reading, pid);
            for group in RuntimeGroup::ALL {
                attachment
                    .baselines
                    .insert(group, (now, (*reading).clone()));
            }
            let _ = sample_latencies(&attachment.store, &mut attachment.inferences);
        }
        Ok(Some(attachment))
    }

    /// Whether discovery's `found` no longer shows this attachment's slab: another owner,
    /// another file under the same name, or a file shorter than the mapping.
    #[must_use]
    pub fn is_stale(&self, found: Option<&Candidate>) -> bool {
        let Some(found) = found else {
            return true;
        };
        if found.owner != self.owner || self.truncated(Some(found)) {
            return true;
        }
        match (found.file, self.candidate.file) {
            (Some(now), Some(then)) => now.inode != then.inode,
            _ => false,
        }
    }

    /// The entry of this process in a report (no group yet), with `error`.
    #[must_use]
    pub fn entry(&self, error: String) -> RuntimeEntry {
        RuntimeEntry {
            pid: self.owner.pid,
            address: self.candidate.address.clone(),
            neuron_device_index: self.candidate.device,
            slot: match self.key {
                SlabKey::Slot { slot, .. } => Some(slot),
                SlabKey::File(_) => None,
            },
            generation: self.generation,
            neuron_runtime_tag: self.tag.clone(),
            error,
            report: RuntimeReport::default(),
            pods: self.pods.pods().clone(),
        }
    }

    /// Whether the slab file shrank under the reader: a read faulted, or discovery's `found`
    /// shows it shorter than the mapping.
    fn truncated(&self, found: Option<&Candidate>) -> bool {
        let shorter = found
            .and_then(|candidate| candidate.file)
            .is_some_and(|file| {
                usize::try_from(file.len).is_ok_and(|len| len < self.store.mapped_len())
            });
        shorter || self.store.file_truncated()
    }

    /// Why the attachment ended and the entry saying so, now that the slab shows
    /// `generation` and discovery `found` (`None`: the slot is free or the file gone).
    #[must_use]
    pub fn ended(
        &self,
        generation: Option<u64>,
        found: Option<&Candidate>,
    ) -> (EndReason, RuntimeEntry) {
        let owner_now: Option<Owner> = found.map(|candidate| candidate.owner);
        let pid = self.owner.pid;
        let generations = match (self.generation, generation) {
            (Some(from), Some(to)) if from != to => format!(" (generation {from} -> {to})"),
            _ => String::new(),
        };
        let withheld = "; numbers withheld, they are not this process's";
        let released = "; its counters went to the kernel's totals";
        if self.truncated(found) {
            let reason = format!("slab file truncated under the monitor{withheld}");
            return (EndReason::Truncated, self.entry(reason));
        }
        let (reason, text) = match owner_now {
            Some(owner)
                if owner.pid != pid
                    || (owner.generation.is_some() && owner.generation != self.generation) =>
            {
                (
                    EndReason::Reused,
                    format!("slab reused by pid {}{generations}{withheld}", owner.pid),
                )
            }
            _ => match generation {
                Some(now) if Some(now) != self.generation && slab_generation_is_owned(now) => (
                    EndReason::Reused,
                    format!("slab reused by another process{generations}{withheld}"),
                ),
                _ => (
                    EndReason::Released,
                    format!("slab released by pid {pid}{generations}{released}"),
                ),
            },
        };
        (reason, self.entry(text))
    }
}
