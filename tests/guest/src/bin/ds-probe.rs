//! Tries everything a process may or may not do with another process's slab and prints the
//! outcomes: `ds-probe IDENTITY DEVICE PID OFFSET` (PID 0: the probe's own slab, OFFSET
//! ignored). IDENTITY (`root`, `uid:N`, `uid:N+cap:C`) is what the probe switches to first.
//!
//! `ds-probe IDENTITY DEVICE hold` is an owner instead: it acquires its own slab, maps it,
//! writes 77 into counter 1 of core 0, prints `ready <offset>` and holds it until stdin closes.
//!
//! Output: one line `open=… acquire=… map_write=… map_write_perms=… map_exec=… map_read=…
//! mprotect_write=… mprotect_exec=… release=…`, each `ok` or an errno name (`map_write_perms`:
//! the permissions the writable request got), `-` when not attempted because an earlier step
//! failed; then `capeff=<hex>`, the effective capabilities it ran with. The
//! permission-matrix test runs it under several identities.

use neuron_ds_guest_tests::{
    acquire, device_path, identity::Identity, kcov::Collector, nc_offset, open_device, release,
    Mapping, SLAB_SIZE,
};
use std::{
    io::{self, Read},
    process::exit,
};

/// Owns a slab until stdin closes.
fn hold(device: &str) -> io::Result<()> {
    let file = open_device(device)?;
    let info = acquire(&file, 0)?;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let slab = Mapping::new(&file, SLAB_SIZE, rw, info.mmap_offset)?;
    slab.write_u64(nc_offset(0, 1), 77);
    println!("ready {}", info.mmap_offset);
    io::stdin().read_to_end(&mut Vec::new())?;
    Ok(())
}

fn outcome<T>(result: &io::Result<T>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(e) => match e.raw_os_error() {
            Some(libc::EPERM) => "EPERM".into(),
            Some(libc::EACCES) => "EACCES".into(),
            Some(libc::EINVAL) => "EINVAL".into(),
            Some(libc::ENOENT) => "ENOENT".into(),
            Some(libc::EFAULT) => "EFAULT".into(),
            Some(other) => format!("errno{other}"),
            None => "error".into(),
        },
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let identity = args.first().and_then(|text| Identity::parse(text));
    let Some(identity) = identity else {
        eprintln!("usage: ds-probe IDENTITY DEVICE PID OFFSET | ds-probe IDENTITY DEVICE hold");
        exit(2);
    };
    // An owner runs as a process its user started (dumpable), which readers of the same uid
    // may read; a prober tries as the identity itself. On the cov kernel, KCOV is opened before
    // a prober's switch (its debugfs file is root's); the thread stays traced under its new
    // identity. An owner, which runs as its user from the start, is not traced.
    let holding = args.get(2).is_some_and(|word| word == "hold");
    if holding {
        if let Err(e) = identity.become_user() {
            eprintln!("ds-probe: becoming {}: {e}", identity.text());
            exit(2);
        }
    }
    let mut kcov = if holding {
        None
    } else {
        Collector::from_env("probe")
    };
    if !holding {
        if let Err(e) = identity.assume() {
            eprintln!("ds-probe: switching to {}: {e}", identity.text());
            exit(2);
        }
    }
    let (device, pid, offset) = match &args[1..] {
        [device, hold_word] if hold_word == "hold" => {
            let held = hold(&device_path(device.parse().expect("DEVICE")));
            if let Some(kcov) = kcov.as_mut() {
                kcov.save();
            }
            match held {
                Ok(()) => exit(0),
                Err(e) => {
                    eprintln!("ds-probe: holding a slab: {e}");
                    exit(1);
                }
            }
        }
        [device, pid, offset] => (device, pid, offset),
        _ => {
            eprintln!("usage: ds-probe IDENTITY DEVICE PID OFFSET | ds-probe IDENTITY DEVICE hold");
            exit(2);
        }
    };
    let pid: i32 = pid.parse().expect("PID");
    let mut results: Vec<(&str, String)> = Vec::new();
    let file = open_device(&device_path(device.parse().expect("DEVICE")));
    results.push(("open", outcome(&file)));
    if let Ok(file) = &file {
        let acquired = acquire(file, pid);
        results.push(("acquire", outcome(&acquired)));
        // Without a grant the owner's offset is tried anyway: the mapping must still fail.
        let offset = match (&acquired, pid) {
            (Ok(info), _) => info.mmap_offset,
            (Err(_), 0) => 0,
            (Err(_), _) => offset.parse().expect("OFFSET"),
        };
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let writable = Mapping::new(file, SLAB_SIZE, rw, offset);
        results.push(("map_write", outcome(&writable)));
        // What a writable request was granted: `rw-s`, or `r--s` for a reader.
        let granted = writable.as_ref().map_or("-".into(), Mapping::permissions);
        results.push(("map_write_perms", granted));
        drop(writable);
        let rx = libc::PROT_READ | libc::PROT_EXEC;
        results.push((
            "map_exec",
            outcome(&Mapping::new(file, SLAB_SIZE, rx, offset)),
        ));
        let view = Mapping::new(file, SLAB_SIZE, libc::PROT_READ, offset);
        results.push(("map_read", outcome(&view)));
        match &view {
            Ok(view) => {
                results.push(("mprotect_write", outcome(&view.protect(rw))));
                results.push(("mprotect_exec", outcome(&view.protect(rx))));
            }
            Err(_) => {
                results.push(("mprotect_write", "-".into()));
                results.push(("mprotect_exec", "-".into()));
            }
        }
        drop(view);
        results.push(("release", outcome(&release(file, pid))));
    }
    if let Some(kcov) = kcov.as_mut() {
        kcov.save();
    }
    let line: Vec<String> = results.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("{}", line.join(" "));
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap_or("");
    println!("capeff={}", cap_eff.trim());
}
