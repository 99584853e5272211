// SPDX-License-Identifier: GPL-2.0

//! The device's tenure ledger: what it keeps of a tenure's owner, and each record as one reader
//! may read it (`nds_abi::ledger` has the format and the rules).

use super::{
    DeviceState,
    Owner, //
};
use crate::{
    abi::ledger::{
        TenureRecord,
        TENURE_CGROUP_CUT,
        TENURE_CGROUP_PATH_SIZE,
        TENURE_REDACTED,
        TENURE_TAG_PUBLISHED, //
    },
    shim::{
        capability::{
            opener_may_read_any_process,
            opener_perfmon_capable, //
        },
        cgroup::CgroupName,
        thread_group::{
            Credentials,
            ThreadGroup, //
        },
    },
    state::ledger::TenureEntry,
};
use kernel::{
    fs::{
        File,
        LocalFile, //
    },
    prelude::*,
    sync::poll::PollTable,
};
use zerocopy::FromZeros;

/// What the ledger keeps of a tenure's owner: whom a reader's rights and namespaces are
/// evaluated against when it reads the record, the owner's process possibly gone by then.
pub(crate) struct TenureOwner {
    /// The thread group, by its TGID: its number in the reader's pid namespace.
    group: ThreadGroup,
    /// Its credentials at the tenure's start (or its view's renewal).
    credentials: Credentials,
    /// Whether it was dumpable then.
    dumpable: bool,
    /// Its cgroup then.
    cgroup: KBox<CgroupName<TENURE_CGROUP_PATH_SIZE>>,
}

impl From<Owner> for TenureOwner {
    fn from(owner: Owner) -> Self {
        // Still alive, its dumpability now counts: one that made itself non-dumpable during
        // the tenure keeps what it wrote from its uid.
        let dumpable = owner.dumpable && owner.group.is_dumpable().unwrap_or(true);
        Self {
            group: owner.group,
            credentials: owner.credentials,
            dumpable,
            cgroup: owner.cgroup,
        }
    }
}

impl DeviceState {
    /// The first ledger record from sequence number `from` on, written into `record` as the
    /// reader of `file` may read it; if there is none yet, waits for one, or fails with
    /// `EAGAIN` when `nonblocking` (`ERESTARTSYS` if a signal comes); `ERANGE` for a position
    /// beyond the next record (from another load of the module: none would ever come).
    ///
    /// A reader gets the whole record if the file's opener is `perfmon_capable()` or has
    /// `CAP_SYS_PTRACE`, or the tenure's owner was readable by the opener's credentials by the
    /// kernel's rule for reading a process (as ACQUIRE applies it, here against the owner's
    /// credentials of the tenure, the process possibly gone); any other reader gets it
    /// redacted: sequence number, device, slot, end, generation and times only.
    pub(crate) fn read_tenure(
        &self,
        from: u64,
        file: &LocalFile,
        nonblocking: bool,
        record: &mut TenureRecord,
    ) -> Result {
        let privileged = opener_perfmon_capable(file) || opener_may_read_any_process(file);
        let caller = current!();
        let namespace = caller.active_pid_ns();
        let mut inner = self.inner.lock();
        // The ledger only grows: a position not ahead now never is.
        if inner.ledger.is_ahead(from) {
            return Err(ERANGE);
        }
        while !inner.ledger.has_from(from) {
            if nonblocking {
                return Err(EAGAIN);
            }
            if self.tenure_ended.wait_interruptible(&mut inner) {
                return Err(ERESTARTSYS);
            }
        }
        let Some((seq, entry, counters)) = inner.ledger.first_from(from) else {
            return Err(EAGAIN);
        };
        let TenureEntry {
            ended: Some(ended),
            tag,
            core_count,
        } = entry
        else {
            return Err(EAGAIN);
        };
        let owner = &ended.owner;
        // In place: a record is too large to build on the stack and move.
        record.zero();
        record.seq = seq;
        record.device = u32::from(self.config.index);
        record.slot = ended.slot;
        record.end = ended.end as u8;
        record.generation = ended.generation;
        record.started_ns = ended.started_ns;
        record.ended_ns = ended.ended_ns;
        let reader = file.cred();
        if !privileged && !owner.credentials.readable_by(owner.dumpable, reader) {
            record.flags = TENURE_REDACTED;
            return Ok(());
        }
        (record.uid, record.gid) = owner.credentials.ids_seen_by(reader);
        record.pid = owner.group.nr_in(namespace);
        record.cgroup_id = owner.cgroup.id;
        record.cgroup.copy_from_slice(&owner.cgroup.path);
        if owner.cgroup.cut {
            record.flags |= TENURE_CGROUP_CUT;
        }
        if let Some(tag) = tag {
            record.tag.copy_from_slice(tag);
            record.flags |= TENURE_TAG_PUBLISHED;
        }
        // CAST: at most `MAX_CORES`, 16.
        record.core_count = *core_count as u8;
        record.counters.copy_from_slice(counters);
        Ok(())
    }

    /// Registers `table` for the next ledger records and tells whether one from `from` on
    /// exists. (`from` is the file's position, which reads only ever advance to the next
    /// record: never ahead.)
    #[inline]
    pub(crate) fn poll_ledger(&self, file: &File, table: &PollTable<'_>, from: u64) -> bool {
        table.register_wait(file, &self.tenure_ended);
        self.inner.lock().ledger.has_from(from)
    }
}
