//! kmemleak (the debug and cov kernels): scanning for unreferenced objects and telling the
//! module's from the rest of the kernel's.

use crate::fault_injection::MODULE_AREA;
use std::{fs, thread, time::Duration};

const CONTROL: &str = "/sys/kernel/debug/kmemleak";

/// Writes a command (`scan`, `clear`, ...) to kmemleak; false if this kernel has none.
pub fn command(command: &str) -> bool {
    fs::write(CONTROL, command).is_ok()
}

/// One object kmemleak reports unreferenced.
pub struct Leak {
    /// Its address and size, as kmemleak names it.
    pub object: String,
    /// The pid of the task that allocated it.
    pub pid: i32,
    /// kmemleak's whole report of it.
    pub text: String,
    /// Whether a frame of its allocation's stack is in the module (by symbol, or by address
    /// in the module area once the module that allocated it is gone).
    pub from_module: bool,
}

/// Scans and returns the unreferenced objects; `None` without kmemleak. An object is
/// reported only once it is older than 5 s and a scan found no reference to it, so this
/// waits and scans again.
pub fn scan() -> Option<Vec<Leak>> {
    if !command("scan") {
        return None;
    }
    thread::sleep(Duration::from_secs(6));
    command("scan");
    command("scan");
    let report = fs::read_to_string(CONTROL).ok()?;
    Some(parse(&report))
}

/// Parses kmemleak's report.
pub fn parse(report: &str) -> Vec<Leak> {
    report
        .split("unreferenced object")
        .skip(1)
        .map(|block| {
            let pid = block
                .split_once(", pid ")
                .and_then(|(_, rest)| rest.split(',').next())
                .and_then(|p| p.trim().parse().ok())
                .unwrap_or(-1);
            let from_module = block.lines().any(|line| {
                let frame = line.trim();
                frame.ends_with("[neuron_ds]")
                    || frame
                        .strip_prefix("0x")
                        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                        .is_some_and(|a| (MODULE_AREA.0..MODULE_AREA.1).contains(&a))
            });
            Leak {
                object: block.lines().next().unwrap_or("").trim().to_owned(),
                pid,
                text: format!("unreferenced object{block}"),
                from_module,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_attributed_by_module_frame_or_module_address() {
        let report = "unreferenced object 0xffff888005f1c000 (size 64):
  comm \"ds-faults\", pid 123, jiffies 4294892410
  backtrace (crc 0):
    __kmalloc_noprof+0x1/0x2
    _RNvCs1_9neuron_ds4open+0x1/0x2 [neuron_ds]
unreferenced object 0xffff888005f1d000 (size 32):
  comm \"insmod\", pid 9, jiffies 4294892411
  backtrace (crc 0):
    __kmalloc_noprof+0x1/0x2
    0xffffffffa0001234
unreferenced object 0xffff888005f1e000 (size 16):
  comm \"swapper/0\", pid 1, jiffies 4294892412
  backtrace (crc 0):
    acpi_os_alloc+0x1/0x2
";
        let leaks = parse(report);
        assert_eq!(leaks.len(), 3);
        assert_eq!(
            leaks
                .iter()
                .map(|l| (l.pid, l.from_module))
                .collect::<Vec<_>>(),
            [(123, true), (9, true), (1, false)]
        );
    }
}
