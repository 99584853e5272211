//! Following a device's tenure ledger: the kernel's record of every tenure that ended, with
//! the final value of every counter (`nds_abi::ledger` has the format and who may read what).
//!
//! A [`LedgerFollower`] is a file of `/dev/neuronN` that issued `FOLLOW_LEDGER`: it reads
//! whole records from a sequence number on, in order, and reports what the kernel's bounded
//! ring dropped before it read them as [`LedgerEvent::Lost`], never silently.

use std::{
    fs::File,
    io,
    os::{
        fd::{
            AsFd,
            AsRawFd,
            BorrowedFd, //
        },
        unix::fs::{
            FileExt,
            OpenOptionsExt, //
        },
    },
    path::Path,
};

use nds_abi::ledger::{TenureRecord, NDS_IOCTL_FOLLOW_LEDGER, TENURE_RECORD_SIZE};
use zerocopy::FromBytes;

use crate::{Error, Result};

/// What a read of the ledger gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LedgerEvent {
    /// One record.
    Tenure(Box<TenureRecord>),
    /// Records `first..=last` were dropped by the device's ring before they were read.
    Lost {
        /// First lost sequence number.
        first: u64,
        /// Last lost sequence number.
        last: u64,
    },
    /// The device's ledger started over: the module was loaded again since the follower's
    /// last read (the kernel refuses a position beyond its next record with `ERANGE`). What
    /// follows is the new ledger's, from its first record on.
    Restarted,
}

/// Records read per `pread`.
const BATCH: usize = 16;

/// A follower of one device's ledger.
#[derive(Debug)]
pub struct LedgerFollower {
    file: File,
    /// The next sequence number wanted.
    next: u64,
    /// Whether the follower knows the number it wants: one was asked for, or it has read (a
    /// record, or an empty ledger). Until then the first record kept, whatever its number, is
    /// where it starts, and nothing before it counts as lost.
    asked: bool,
}

impl LedgerFollower {
    /// Follows the ledger of the device node at `path`, from sequence number `from` on (0:
    /// the oldest record kept). The file is non-blocking: [`LedgerFollower::read`] returns
    /// what there is, and the caller waits with `poll` on [`LedgerFollower::as_fd`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the node cannot be opened; [`Error::Ioctl`] if the module refuses
    /// `FOLLOW_LEDGER` (one without a ledger answers `ENOTTY`).
    pub fn open(path: &Path, from: u64) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        // glibc takes the request as `unsigned long`, musl as `int`: the cast widens or
        // reinterprets the 32-bit number as each C library expects.
        let request = NDS_IOCTL_FOLLOW_LEDGER as libc::Ioctl;
        // SAFETY: `FOLLOW_LEDGER` takes no argument and changes only the file's mode.
        if unsafe { libc::ioctl(file.as_raw_fd(), request) } != 0 {
            return Err(Error::Ioctl {
                request: "FOLLOW_LEDGER",
                errno: io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO),
            });
        }
        Ok(Self {
            file,
            next: from,
            asked: from != 0,
        })
    }

    /// The next sequence number wanted.
    #[must_use]
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Every record there is from the next sequence number on, in order, each after the gap
    /// before it if the ring dropped some; empty when there is none yet.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the read fails (but for there being nothing yet), or returns bytes that
    /// are not whole records.
    pub fn read(&mut self) -> Result<Vec<LedgerEvent>> {
        let mut events = Vec::new();
        let mut buf = vec![0u8; BATCH * TENURE_RECORD_SIZE];
        loop {
            let n = match self.file.read_at(&mut buf, self.next) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !self.asked {
                        // Nothing kept at all: nothing was ever recorded, and the first record
                        // to come is number 1, which this follower must not miss.
                        self.next = 1;
                        self.asked = true;
                    }
                    return Ok(events);
                }
                Err(e) if e.raw_os_error() == Some(libc::ERANGE) && self.asked => {
                    events.push(LedgerEvent::Restarted);
                    // The new ledger's records are numbered from 1: any it dropped before this
                    // read are lost, and said so.
                    self.next = 1;
                    continue;
                }
                Err(e) => return Err(Error::io("reading the ledger".to_owned(), e)),
            };
            if n == 0 || n % TENURE_RECORD_SIZE != 0 {
                return Err(Error::io(
                    "reading the ledger".to_owned(),
                    io::Error::new(io::ErrorKind::InvalidData, format!("{n} bytes")),
                ));
            }
            for chunk in buf[..n].chunks_exact(TENURE_RECORD_SIZE) {
                let Ok(record) = TenureRecord::read_from_bytes(chunk) else {
                    continue;
                };
                if record.seq > self.next && self.asked {
                    events.push(LedgerEvent::Lost {
                        first: self.next.max(1),
                        last: record.seq - 1,
                    });
                }
                self.asked = true;
                self.next = record.seq + 1;
                events.push(LedgerEvent::Tenure(Box::new(record)));
            }
            if n < buf.len() {
                return Ok(events);
            }
        }
    }
}

impl AsFd for LedgerFollower {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}
