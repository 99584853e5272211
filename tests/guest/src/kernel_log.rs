//! Kernel complaints and memory, as the campaigns check them from inside the guest.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Read},
    os::{fd::AsRawFd, unix::fs::OpenOptionsExt},
};

/// What qemu/boot.sh treats as a kernel complaint on the console.
const COMPLAINTS: [&str; 10] = [
    "BUG:",
    "WARNING:",
    "Oops",
    "KASAN:",
    "circular locking",
    "Invalid wait context",
    "Call Trace",
    "Kernel panic",
    "UBSAN:",
    "kernel BUG",
];

/// Log level of warnings (`KERN_WARNING`): the module's own messages at this level or more
/// severe are complaints too, since it only logs on failures.
const LOG_WARNING: u32 = 4;

/// A reader of the kernel log from the moment it was opened on.
pub struct KernelLog {
    kmsg: File,
}

impl KernelLog {
    /// Starts watching: only records logged from now on are returned.
    pub fn open() -> io::Result<Self> {
        let kmsg = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/kmsg")?;
        // SAFETY: repositioning our own descriptor at the end of the log.
        if unsafe { libc::lseek(kmsg.as_raw_fd(), 0, libc::SEEK_END) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { kmsg })
    }

    /// Every complaint logged since the last call (or since `open`).
    pub fn complaints(&mut self) -> Vec<String> {
        let mut found = Vec::new();
        // One record per read; EAGAIN ends the log, EPIPE means records were overwritten
        // before we read them (the next read continues with the oldest one left).
        let mut record = [0u8; 8192];
        loop {
            match self.kmsg.read(&mut record) {
                Ok(0) => break,
                Ok(len) => {
                    let text = String::from_utf8_lossy(&record[..len]);
                    let (prefix, message) = text.split_once(';').unwrap_or(("", &text));
                    // The prefix is "priority,sequence,timestamp,flags"; level = priority % 8.
                    let level = prefix
                        .split(',')
                        .next()
                        .and_then(|p| p.parse::<u32>().ok())
                        .map_or(u32::MAX, |p| p % 8);
                    let ours = level <= LOG_WARNING && message.contains("neuron_ds");
                    if ours || COMPLAINTS.iter().any(|c| message.contains(c)) {
                        found.push(message.trim_end().to_owned());
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(_) => break,
            }
        }
        found
    }
}

/// `MemAvailable` in bytes, after dropping clean caches so that the figure moves only with
/// memory that is really held.
pub fn mem_available() -> i64 {
    let _ = fs::write("/proc/sys/vm/drop_caches", "3\n");
    let meminfo = fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
    let line = meminfo
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .expect("MemAvailable");
    let kib: i64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("MemAvailable value");
    kib * 1024
}
