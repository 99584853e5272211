//! Kernel complaints and memory, as the campaigns check them from inside the guest.
//!
//! A failure forced by the kernel's fault injection is reported in the log with a stack dump
//! ("FAULT_INJECTION: forcing a failure.", then the `dump_stack` lines). That report is what
//! the fault campaign asked for, so it is returned as an [`Injection`], never as a complaint;
//! `qemu/boot.sh` skips the same lines when it scans the console.

use std::{
    fs::{File, OpenOptions},
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

/// The first line of fault injection's report of a forced failure.
pub const INJECTION_MARK: &str = "FAULT_INJECTION: forcing a failure.";

/// A failure forced by fault injection, as its report in the kernel log describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Injection {
    /// The fault attribute that fired: `failslab`, `fail_page_alloc` or `fail_usercopy`.
    pub attr: String,
    /// The pid of the task that got the failure.
    pub pid: Option<i32>,
    /// The stack at the failure point, innermost first, as `symbol+off/size [module]` (only
    /// the frames the unwinder walked).
    pub frames: Vec<String>,
}

impl Injection {
    /// The innermost frame in the module `module`, demangled, without its offsets.
    pub fn module_site(&self, module: &str) -> Option<String> {
        let tag = format!("[{module}]");
        let frame = self.frames.iter().find(|f| f.ends_with(&tag))?;
        let symbol = frame.split('+').next()?.trim_start_matches("? ").trim();
        Some(demangle(symbol))
    }
}

/// A Rust symbol demangled without its hash; other symbols as they are.
pub fn demangle(symbol: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(symbol))
}

/// Whether `line` (one line of a record, without the console's timestamp) is part of the
/// stack dump of a fault-injection report: the header lines `dump_stack` prints, the call
/// trace markers and `symbol+0xoff/0xsize` frames.
pub fn is_dump_line(line: &str) -> bool {
    const HEADERS: [&str; 17] = [
        "CPU: ",
        "Tainted: ",
        "Hardware name: ",
        "Workqueue: ",
        "Call Trace:",
        "name ",
        // The user registers of the system call the failure happened in.
        "RIP: ",
        "Code: ",
        "RSP: ",
        "RAX: ",
        "RDX: ",
        "RBP: ",
        "R10: ",
        "R13: ",
        "FS: ",
        "CS: ",
        "CR2: ",
    ];
    if HEADERS.iter().any(|h| line.starts_with(h)) {
        return true;
    }
    let frame = line.trim_start();
    if frame.starts_with('<') && frame.ends_with('>') {
        return true; // <TASK>, </TASK>, <IRQ>, ...
    }
    let frame = frame.strip_prefix("? ").unwrap_or(frame);
    let symbol = frame.split(' ').next().unwrap_or("");
    let Some((_, offsets)) = symbol.rsplit_once('+') else {
        return false;
    };
    let module_ok = match frame.split_once(' ') {
        None => true,
        Some((_, rest)) => rest.starts_with('[') && rest.ends_with(']'),
    };
    module_ok
        && offsets
            .split_once('/')
            .is_some_and(|(off, size)| off.starts_with("0x") && size.starts_with("0x"))
}

/// A reader of the kernel log from the moment it was opened on.
pub struct KernelLog {
    kmsg: File,
    /// A fault-injection report whose stack dump has not ended yet.
    open_report: Option<Injection>,
    injections: Vec<Injection>,
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
        Ok(Self {
            kmsg,
            open_report: None,
            injections: Vec::new(),
        })
    }

    /// Every complaint logged since the last call (or since `open`). Fault-injection reports
    /// are set aside for [`KernelLog::take_injections`].
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
                    // Continuation lines ("\n key=value" dictionary lines) are not the text.
                    let message = message.lines().next().unwrap_or("").trim_end();
                    if self.take_report_line(message) {
                        continue;
                    }
                    let ours = level <= LOG_WARNING && message.contains("neuron_ds");
                    if ours || COMPLAINTS.iter().any(|c| message.contains(c)) {
                        found.push(message.to_owned());
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(_) => break,
            }
        }
        found
    }

    /// The fault-injection reports logged since the last call, in order (reading the log
    /// first).
    pub fn take_injections(&mut self) -> (Vec<Injection>, Vec<String>) {
        let complaints = self.complaints();
        (std::mem::take(&mut self.injections), complaints)
    }

    /// Consumes `message` if it belongs to a fault-injection report.
    fn take_report_line(&mut self, message: &str) -> bool {
        // /dev/kmsg escapes the newline inside the report's first record.
        let mut lines = message.split("\\x0a");
        let first = lines.next().unwrap_or("");
        if first.starts_with(INJECTION_MARK) {
            if let Some(report) = self.open_report.take() {
                self.injections.push(report);
            }
            let attr = lines
                .next()
                .and_then(|l| l.strip_prefix("name "))
                .and_then(|l| l.split(',').next())
                .unwrap_or("")
                .to_owned();
            self.open_report = Some(Injection {
                attr,
                ..Injection::default()
            });
            return true;
        }
        let Some(report) = self.open_report.as_mut() else {
            return false;
        };
        if !is_dump_line(first) {
            return false;
        }
        if let Some(rest) = first.strip_prefix("CPU: ") {
            report.pid = rest
                .split_once("PID: ")
                .and_then(|(_, p)| p.split(' ').next())
                .and_then(|p| p.parse().ok());
        } else if first.trim() == "</TASK>" {
            let done = self.open_report.take().expect("an open report");
            self.injections.push(done);
        } else if first.contains("+0x") && !first.trim_start().starts_with("? ") {
            // Frames marked "?" are stale return addresses the unwinder did not walk through.
            report.frames.push(first.trim().to_owned());
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_dump_lines_are_recognised_and_complaints_are_not() {
        for line in [
            "CPU: 1 UID: 0 PID: 77 Comm: ds-faults Tainted: G           O        7.3.4 #1",
            "Tainted: [O]=OOT_MODULE",
            "Hardware name: QEMU Standard PC (i440FX + PIIX, 1996)",
            "Call Trace:",
            " <TASK>",
            " dump_stack_lvl+0x5d/0x80",
            " ? __kasan_kmalloc+0x8f/0xa0",
            " _RNvMs_NtCs1_9neuron_ds6deviceNtB4_8OpenFile4open+0x1a3/0x5c0 [neuron_ds]",
            " </TASK>",
            "name failslab, interval 1, probability 0, space 0, times -1",
        ] {
            assert!(is_dump_line(line), "{line:?}");
        }
        for line in [
            "BUG: KASAN: slab-use-after-free in foo+0x1/0x2",
            "WARNING: CPU: 0 PID: 1 at lib/foo.c:1 bar+0x1/0x2",
            "neuron_ds: releasing a slab on close failed: ENOMEM",
            "Oops: general protection fault",
        ] {
            assert!(!is_dump_line(line), "{line:?}");
        }
    }

    #[test]
    fn the_module_site_is_the_innermost_module_frame_demangled() {
        let injection = Injection {
            attr: "failslab".into(),
            pid: Some(7),
            frames: vec![
                "should_fail_ex+0x10/0x20".into(),
                "__kmalloc_noprof+0x1/0x2".into(),
                "_RNvNtCs1234_9neuron_ds6device4open+0x1a3/0x5c0 [neuron_ds]".into(),
                "misc_open+0x1/0x2".into(),
            ],
        };
        assert_eq!(
            injection.module_site("neuron_ds").as_deref(),
            Some("neuron_ds::device::open")
        );
    }
}
