//! The kernel's failure injection, driven the way syzkaller drives it: per task with
//! `fail-nth`, confined to the module's call sites by the stacktrace filter.
//!
//! Writing N to a task's `fail-nth` makes the N-th failure point that task reaches fail, and
//! only that one. A failure point is a call of `should_fail` by one of the three attributes
//! configured here (slab allocations, page allocations, user copies); with the stacktrace
//! filter, only points whose stack has a frame in the module area count. The task's
//! `fail-nth` counts down as points are reached: read back after the call, a non-zero value
//! means the call reached fewer than N points (`remaining` tells how many fewer).

use std::{fs, io};

/// The three fault attributes under `/sys/kernel/debug`.
pub const ATTRS: [&str; 3] = ["failslab", "fail_page_alloc", "fail_usercopy"];

/// Where x86-64 loads modules when the kernel is not randomised (KASLR is off in these
/// kernels): `Documentation/arch/x86/x86_64/mm.rst`, "module mapping space". The guest loads
/// no module but neuron_ds, so a frame in this range is a frame of the module.
pub const MODULE_AREA: (u64, u64) = (0xffff_ffff_a000_0000, 0xffff_ffff_ff00_0000);

const DEBUGFS: &str = "/sys/kernel/debug";

/// Whether this kernel has the failure injection the campaign needs.
pub fn available() -> bool {
    ATTRS
        .iter()
        .all(|attr| fs::metadata(format!("{DEBUGFS}/{attr}/require-start")).is_ok())
}

fn write(attr: &str, file: &str, value: &str) -> io::Result<()> {
    let path = format!("{DEBUGFS}/{attr}/{file}");
    fs::write(&path, value).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// Functions of kmemleak's own bookkeeping (mm/kmemleak.c, laid out together in the kernel's
/// text): every slab allocation made with kmemleak on also allocates kmemleak's metadata,
/// with a fallback pool, and that nested allocation is not the module's.
const KMEMLEAK_INTERNALS: [&str; 5] = [
    "delete_object_full",
    "__create_object",
    "__alloc_object",
    "__link_object",
    "kmemleak_seq_show",
];

/// The text range of kmemleak's bookkeeping functions, from the first of them to the symbol
/// after the last; `None` without kmemleak.
pub fn kmemleak_internals() -> Option<(u64, u64)> {
    let kallsyms = fs::read_to_string("/proc/kallsyms").ok()?;
    let mut text: Vec<(u64, &str)> = kallsyms
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let addr = u64::from_str_radix(fields.next()?, 16).ok()?;
            let kind = fields.next()?;
            let name = fields.next()?;
            (kind == "t" || kind == "T").then_some((addr, name))
        })
        .collect();
    text.sort_unstable();
    let ours: Vec<usize> = (0..text.len())
        .filter(|&i| KMEMLEAK_INTERNALS.contains(&text[i].1))
        .collect();
    let (first, last) = (*ours.first()?, *ours.last()?);
    let end = text.get(last + 1)?.0;
    (text[first].0 != 0).then_some((text[first].0, end))
}

/// Sets every attribute up for `fail-nth` stepping confined to `[start, end)`: no random
/// failures (probability 0: only `fail-nth` fires), a stack dump per forced failure (the
/// report names the call site), sleeping allocations and order-0 pages included, and
/// kmemleak's own metadata allocations left alone.
pub fn confine_to(start: u64, end: u64) -> io::Result<()> {
    for attr in ATTRS {
        write(attr, "probability", "0")?;
        write(attr, "interval", "1")?;
        write(attr, "times", "-1")?;
        write(attr, "space", "0")?;
        write(attr, "verbose", "2")?;
        write(attr, "task-filter", "N")?;
        write(attr, "stacktrace-depth", "32")?;
        write(attr, "require-start", &format!("{start:#x}"))?;
        write(attr, "require-end", &format!("{end:#x}"))?;
        write(attr, "reject-start", "0")?;
        write(attr, "reject-end", "0")?;
    }
    if let Some((reject_start, reject_end)) = kmemleak_internals() {
        write("failslab", "reject-start", &format!("{reject_start:#x}"))?;
        write("failslab", "reject-end", &format!("{reject_end:#x}"))?;
    }
    // GFP_KERNEL allocations may sleep; by default both allocators' injection ignores them,
    // and the page allocator's ignores order-0 pages, which is all the module allocates.
    write("failslab", "ignore-gfp-wait", "N")?;
    write("fail_page_alloc", "ignore-gfp-wait", "N")?;
    write("fail_page_alloc", "ignore-gfp-highmem", "N")?;
    write("fail_page_alloc", "min-order", "0")?;
    Ok(())
}

fn fail_nth_path(tid: Option<i32>) -> String {
    match tid {
        None => "/proc/thread-self/fail-nth".into(),
        Some(tid) => format!("/proc/{tid}/task/{tid}/fail-nth"),
    }
}

/// Arms the calling thread (`None`) or thread `tid`: its `n`-th failure point fails (0
/// disarms).
pub fn set_fail_nth(tid: Option<i32>, n: u32) -> io::Result<()> {
    fs::write(fail_nth_path(tid), n.to_string())
}

/// What is left of the thread's `fail-nth`: 0 once the failure was forced (or if it was never
/// armed).
pub fn fail_nth(tid: Option<i32>) -> io::Result<u32> {
    fs::read_to_string(fail_nth_path(tid))?
        .trim()
        .parse()
        .map_err(io::Error::other)
}

/// The threads of every kernel worker (`kworker/...`), whose pool runs the module's metrics
/// work.
pub fn kworkers() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.starts_with("kworker/"))
        })
        .collect()
}

/// Keeps the stack dumps of forced failures off the console while it lives: messages logged
/// without a level (`dump_stack` logs so) get level 6, which the console (`loglevel=5`) does
/// not print. Messages with a level, every complaint's first line among them, still reach
/// the console, and the kernel log keeps everything.
pub struct QuietDumps {
    saved: Option<String>,
}

impl QuietDumps {
    const PRINTK: &'static str = "/proc/sys/kernel/printk";

    /// Lowers the default message level until dropped.
    pub fn new() -> Self {
        let saved = fs::read_to_string(Self::PRINTK).ok();
        if let Some(levels) = &saved {
            let mut fields: Vec<&str> = levels.split_whitespace().collect();
            if fields.len() == 4 {
                fields[1] = "6";
                let _ = fs::write(Self::PRINTK, fields.join(" "));
            }
        }
        Self { saved }
    }
}

impl Default for QuietDumps {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for QuietDumps {
    fn drop(&mut self) {
        if let Some(levels) = &self.saved {
            let _ = fs::write(Self::PRINTK, levels.trim());
        }
    }
}
