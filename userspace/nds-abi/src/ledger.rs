//! The tenure ledger: one record per tenure that ended, written by the kernel before the slab
//! is zeroed, as BSD process accounting writes one per process that exits.
//!
//! The original driver has no ledger; this is an addition of this module's, reached through an
//! ioctl number of its own ([`NDS_IOCTL_FOLLOW_LEDGER`]), so the original's ABI is unchanged.
//! A file of `/dev/neuronN` that issued it reads ledger records instead of metric posts:
//! `read()` returns whole [`TenureRecord`]s from the file position on (the position is the next
//! sequence number wanted), waits for one when there is none (or fails with `EAGAIN` for a
//! non-blocking file), and `poll` reports `POLLIN` when one exists. Each device keeps its last
//! [`LEDGER_CAPACITY`] records; a reader that fell behind gets the oldest kept, whose `seq`
//! is higher than it asked for: the difference is what it lost, never silently.
//!
//! A record is the reader's to read by the rule of the tenure it describes, the rule ACQUIRE
//! applies (the reader has the owner's ids, the owner was dumpable and held no capability the
//! reader lacks), evaluated against the owner's credentials at the tenure's end, or the file's
//! opener is `perfmon_capable()`. Any other reader gets the record redacted
//! ([`TENURE_REDACTED`]): its sequence number, device, slot and times, nothing of whom it was.

use super::{
    layout::NDS_TOTAL_NEURONCORE_COUNT,
    records::NDS_PROCESS_INFO_TAG_SIZE,
    sysfs::SYSFS_COUNTERS, //
};
use core::mem::size_of;
use zerocopy_derive::{
    FromBytes,
    Immutable,
    IntoBytes,
    KnownLayout, //
};

/// ioctl type byte of this module's own commands, none of which the original driver has.
pub const NDS_EXT_IOCTL_BASE: u32 = 0xDA;

/// Makes the file a follower of its device's ledger for good: its reads return records from
/// the file position on (0: the oldest kept). No argument: `_IO(0xDA, 1)`.
pub const NDS_IOCTL_FOLLOW_LEDGER: u32 = (NDS_EXT_IOCTL_BASE << 8) | 1;

/// Records each device keeps.
pub const LEDGER_CAPACITY: usize = 64;

/// Bytes of a record's cgroup path, its terminating NUL included.
pub const TENURE_CGROUP_PATH_SIZE: usize = 256;

/// How a tenure ended ([`TenureRecord::end`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum TenureEnd {
    /// The owner's RELEASE.
    Release = 1,
    /// The owner's last file on the device was closed (its exit, or a close without RELEASE).
    LastClose = 2,
    /// The owner had exited, and a later ACQUIRE or metrics period released its slab (it owned
    /// it through a file another process still held).
    Reaped = 3,
    /// The owner ran another program under other credentials: what it wrote before belongs to
    /// credentials it no longer has.
    Outlived = 4,
}

impl TenureEnd {
    /// The end a record's `end` byte names, if it names one.
    #[must_use]
    pub const fn from_raw(raw: u8) -> Option<Self> {
        match raw {
            1 => Some(Self::Release),
            2 => Some(Self::LastClose),
            3 => Some(Self::Reaped),
            4 => Some(Self::Outlived),
            _ => None,
        }
    }

    /// A short lowercase name, as the tools print it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Release => "release",
            Self::LastClose => "close",
            Self::Reaped => "reaped",
            Self::Outlived => "outlived",
        }
    }
}

/// [`TenureRecord::flags`]: the reader may not know whose tenure it was; only `seq`, `device`,
/// `slot`, `end`, `generation` and the times are filled in.
pub const TENURE_REDACTED: u8 = 1 << 0;
/// [`TenureRecord::flags`]: the owner had published a process-info record whose hash checked,
/// and `tag` is its tag.
pub const TENURE_TAG_PUBLISHED: u8 = 1 << 1;
/// [`TenureRecord::flags`]: the cgroup path was longer than the record holds, and is cut.
pub const TENURE_CGROUP_CUT: u8 = 1 << 2;

/// Counters of one NeuronCore in a record: one per sysfs counter node, in
/// [`SYSFS_COUNTERS`]'s order.
pub const TENURE_COUNTERS_PER_CORE: usize = SYSFS_COUNTERS.len();

/// One ended tenure, as a reader of the ledger reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct TenureRecord {
    /// Per device, from 1; contiguous but for what the reader lost.
    pub seq: u64,
    /// The device index.
    pub device: u32,
    /// The slot.
    pub slot: u8,
    /// How the tenure ended: a [`TenureEnd`].
    pub end: u8,
    /// `TENURE_*` flags.
    pub flags: u8,
    /// NeuronCores of the device, whose counters are filled in.
    pub core_count: u8,
    /// The slab's generation during the tenure (odd).
    pub generation: u64,
    /// When the tenure began and ended, `CLOCK_REALTIME` in nanoseconds.
    pub started_ns: u64,
    /// See `started_ns`.
    pub ended_ns: u64,
    /// The owner's process id in the reader's pid namespace; 0 if it is not in it (or the
    /// owner is gone from every namespace the reader sees).
    pub pid: i32,
    /// The owner's real user id as the reader's user namespace maps it (the overflow id,
    /// 65534, if unmapped).
    pub uid: u32,
    /// The owner's real group id, mapped the same way.
    pub gid: u32,
    /// Zero.
    pub reserved: u32,
    /// The id of the owner's cgroup v2 at the tenure's end (the inode number of its directory
    /// under `/sys/fs/cgroup`); 0 if unknown.
    pub cgroup_id: u64,
    /// The owner's process tag (`ProcessInfo::tag`) if [`TENURE_TAG_PUBLISHED`], NUL-padded.
    pub tag: [u8; NDS_PROCESS_INFO_TAG_SIZE],
    /// The path of that cgroup from the root of the cgroup hierarchy, NUL-terminated (a pod's
    /// UID is in a `kubepods` path, so a record names its pod after the pod is gone).
    pub cgroup: [u8; TENURE_CGROUP_PATH_SIZE],
    /// The final value, per NeuronCore and sysfs counter node, of the counter the node reads
    /// (before its scale: the sysfs `total` adds `value × scale`).
    pub counters: [[u64; TENURE_COUNTERS_PER_CORE]; NDS_TOTAL_NEURONCORE_COUNT],
}

/// Bytes of one record.
pub const TENURE_RECORD_SIZE: usize = size_of::<TenureRecord>();

impl TenureRecord {
    /// How the tenure ended, if the record names a known end.
    #[must_use]
    pub const fn ended_by(&self) -> Option<TenureEnd> {
        TenureEnd::from_raw(self.end)
    }

    /// Whether the reader was refused who the tenure's owner was.
    #[must_use]
    pub const fn is_redacted(&self) -> bool {
        self.flags & TENURE_REDACTED != 0
    }

    /// The process tag, if the owner published one.
    #[must_use]
    pub fn tag(&self) -> Option<&[u8]> {
        (self.flags & TENURE_TAG_PUBLISHED != 0).then(|| super::text::c_text(&self.tag))
    }

    /// The cgroup path, up to its NUL.
    #[must_use]
    pub fn cgroup_path(&self) -> &[u8] {
        super::text::c_text(&self.cgroup)
    }
}

const _: () = assert!(NDS_IOCTL_FOLLOW_LEDGER == 0x0000_DA01);
const _: () = assert!(TENURE_RECORD_SIZE.is_multiple_of(8));
const _: () = assert!(core::mem::offset_of!(TenureRecord, generation) == 16);
const _: () = assert!(core::mem::offset_of!(TenureRecord, cgroup_id) == 56);
const _: () = assert!(core::mem::offset_of!(TenureRecord, counters) == 64 + 32 + 256);
const _: () = assert!(TENURE_RECORD_SIZE == 3936);
