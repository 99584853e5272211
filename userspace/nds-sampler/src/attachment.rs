//! An attached slab: the reader, the tenure it reads, and where its latency sampling stands.
//! What the views keep about a tenure (the document's baselines, the exporter's series) is
//! theirs, fed by the stream.

use nds::{Error as NdsError, Reader};
use nds_abi::layout::{slab_generation_is_owned, NDS_TOTAL_NEURONCORE_COUNT};
use nds_document::groups;
use nds_slabs::snapshot::{observe, sample_latencies, Observation, SlabReading};
use nds_slabs::{Candidate, Owner, SlabKey};

use crate::stream::{AttachFailure, EndReason, Tenure, TenureId};

/// The reason of an error opening a slab.
#[must_use]
pub fn failure_of(error: &NdsError) -> AttachFailure {
    let denied = |errno: i32| errno == libc::EPERM || errno == libc::EACCES;
    let gone = |errno: i32| errno == libc::ENOENT || errno == libc::ESRCH;
    match error {
        NdsError::Ioctl { errno, .. } if denied(*errno) => AttachFailure::NoPermission,
        NdsError::Ioctl { errno, .. } if gone(*errno) => AttachFailure::Vanished,
        NdsError::Io { source, .. } => match source.raw_os_error() {
            Some(errno) if denied(errno) => AttachFailure::NoPermission,
            Some(errno) if gone(errno) => AttachFailure::Vanished,
            _ => AttachFailure::Other,
        },
        NdsError::NotASlabFile { .. }
        | NdsError::SlabTooSmall { .. }
        | NdsError::UnexpectedSlabSize { .. } => AttachFailure::NotASlab,
        _ => AttachFailure::Other,
    }
}

/// Whether discovery's `found` shows the slab of `then` as it was: the same owner and, for
/// slab files, the same file.
#[must_use]
pub fn same_slab(found: &Candidate, then: &Candidate) -> bool {
    found.owner == then.owner
        && match (found.file, then.file) {
            (Some(now), Some(was)) => now.inode == was.inode,
            _ => true,
        }
}

/// An attached slab.
#[derive(Debug)]
pub struct Attachment {
    /// Where it is.
    pub key: SlabKey,
    /// The tenure it reads.
    pub tenure: Tenure,
    /// How discovery found it when attaching.
    pub candidate: Candidate,
    /// The owner as the slot table (or file name) showed it when attaching.
    pub owner: Owner,
    /// The reader.
    pub store: Reader,
    /// The process tag, as last read.
    pub tag: String,
    /// Inference counts per core at the last latency sample.
    pub inferences: [u64; NDS_TOTAL_NEURONCORE_COUNT],
}

/// A slab just attached, with the reading it attached with (none if that first look found
/// the slab moved on already).
#[derive(Debug)]
pub struct Attached {
    /// The attachment.
    pub attachment: Attachment,
    /// The reading it attached with.
    pub first: Option<Box<SlabReading>>,
}

/// What attaching needs besides the slab.
#[derive(Clone, Copy, Debug)]
pub struct AttachAs<'a> {
    /// The tenure's number.
    pub id: TenureId,
    /// Whether the owner ran before this monitor started.
    pub ran_before_monitor: bool,
    /// The owner's cgroup path.
    pub cgroup: Option<&'a str>,
}

impl Attachment {
    /// Opens a reader of `candidate` as tenure `attach_as`; `Ok(None)` when the owner has not
    /// published its header yet, or the slab changed hands since the slot table was read (the
    /// next refresh tries again).
    ///
    /// # Errors
    ///
    /// The slab cannot be opened or mapped, or its owner is gone ([`failure_of`] says why).
    pub fn attach(
        key: SlabKey,
        candidate: Candidate,
        attach_as: AttachAs<'_>,
    ) -> Result<Option<Attached>, NdsError> {
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
        let tenure = Tenure {
            id: attach_as.id,
            device: candidate.device,
            slot: match key {
                SlabKey::Slot { slot, .. } => Some(slot),
                SlabKey::File(_) => None,
            },
            generation,
            pid,
            address: candidate.address.clone(),
            ran_before_monitor: attach_as.ran_before_monitor,
            cgroup: attach_as.cgroup.map(str::to_owned),
        };
        let mut attachment = Self {
            key,
            tenure,
            tag: pid.to_string(),
            owner: candidate.owner,
            candidate,
            store,
            inferences: [0; NDS_TOTAL_NEURONCORE_COUNT],
        };
        let first = match observe(&attachment.store) {
            Observation::Reading(reading) => {
                attachment.tag = groups::tag_of(&reading, pid);
                let _ = sample_latencies(&attachment.store, &mut attachment.inferences);
                Some(reading)
            }
            Observation::Moved { .. } => None,
        };
        Ok(Some(Attached { attachment, first }))
    }

    /// Whether discovery's `found` no longer shows this attachment's slab: another owner,
    /// another file under the same name, or a file shorter than the mapping.
    #[must_use]
    pub fn is_stale(&self, found: Option<&Candidate>) -> bool {
        found.is_none_or(|found| !same_slab(found, &self.candidate) || self.truncated(Some(found)))
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

    /// Why the attachment ended and what the document says of it, now that the slab shows
    /// `generation` and discovery `found` (`None`: the slot is free or the file gone).
    #[must_use]
    pub fn ended(&self, generation: Option<u64>, found: Option<&Candidate>) -> (EndReason, String) {
        let owner_now: Option<Owner> = found.map(|candidate| candidate.owner);
        let pid = self.owner.pid;
        let attached = self.tenure.generation;
        let generations = match (attached, generation) {
            (Some(from), Some(to)) if from != to => format!(" (generation {from} -> {to})"),
            _ => String::new(),
        };
        let withheld = "; numbers withheld, they are not this process's";
        let released = "; its counters went to the kernel's totals";
        if self.truncated(found) {
            let reason = format!("slab file truncated under the monitor{withheld}");
            return (EndReason::Truncated, reason);
        }
        match owner_now {
            Some(owner)
                if owner.pid != pid
                    || (owner.generation.is_some() && owner.generation != attached) =>
            {
                (
                    EndReason::Reused,
                    format!("slab reused by pid {}{generations}{withheld}", owner.pid),
                )
            }
            _ => match generation {
                Some(now) if Some(now) != attached && slab_generation_is_owned(now) => (
                    EndReason::Reused,
                    format!("slab reused by another process{generations}{withheld}"),
                ),
                _ => (
                    EndReason::Released,
                    format!("slab released by pid {pid}{generations}{released}"),
                ),
            },
        }
    }
}
