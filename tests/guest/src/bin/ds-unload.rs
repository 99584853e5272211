//! Unloading under load: `ds-unload [--cycles N] [--ko PATH]`.
//!
//! Each cycle loads the module (two devices, a metrics period of 20 ms so that the worker is
//! always about to run), puts it under load and unloads it twice:
//!
//! 1. With owners holding writable mappings, readers attached (ACQUIRE of an owner's pid and
//!    a read-only mapping), a reader of the metric posts, and sysfs files open and being read
//!    by a second thread: `rmmod` must refuse (busy) and leave the module working.
//! 2. With the owners gone (one released, one exited, one killed) and the readers detached,
//!    but the sysfs files still open and read by the other thread and the worker due: `rmmod`
//!    must complete; reads of the open sysfs files then fail cleanly, nothing of the module is
//!    left registered, and the kernel log holds no complaint (KASAN on the debug kernel).
//!
//! A reload must start clean: every slot free, every sysfs total 0, no metric post. At the
//! end the module is loaded again with the guest's own parameters (`/module.params`).

use nds_abi::sysfs::SYSFS_COUNTERS;
use neuron_ds_guest_tests::{
    acquire, device_path,
    kcov::Collector,
    kernel_log::KernelLog,
    module_control::{leftovers, load_module, unload_module},
    open_device, open_posts, slots_on, sysfs_core_count, sysfs_counter_on, sysfs_device, Mapping,
    Producer, EVENTUALLY, SLAB_SIZE,
};
use std::{
    fs::{self, File},
    io::Read,
    os::{fd::AsRawFd, unix::fs::FileExt},
    process::exit,
    sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
    thread,
    time::{Duration, Instant},
};

const DEVICES: usize = 2;
const PARAMS: &str = "devices=2 cores_per_device=2 metrics_period_ms=20";

/// Opens the sysfs files a monitor would keep open: a total, a present and the slot table of
/// each device.
fn open_sysfs_files() -> Vec<File> {
    let mut files = Vec::new();
    for device in 0..DEVICES {
        let dir = sysfs_device(device);
        let counter = &SYSFS_COUNTERS[0];
        let node = format!(
            "{dir}/neuron_core0/stats/{}/{}",
            counter.group.dir_name(),
            counter.name
        );
        for path in [
            format!("{node}/total"),
            format!("{node}/present"),
            format!("{dir}/datastore/slots"),
        ] {
            files.push(File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}")));
        }
    }
    files
}

/// The module's sysfs totals all read 0, every slot is free and no metric was posted.
fn starts_clean() -> Result<(), String> {
    for device in 0..DEVICES {
        let owned: Vec<_> = slots_on(device)
            .into_iter()
            .filter(|r| r.pid != 0)
            .collect();
        if !owned.is_empty() {
            return Err(format!(
                "neuron{device}: slots owned after a reload: {owned:?}"
            ));
        }
        for core in 0..sysfs_core_count(device) {
            for counter in SYSFS_COUNTERS.iter() {
                let group = counter.group.dir_name();
                let total = sysfs_counter_on(device, core, group, counter.name, "total");
                if total != 0 {
                    return Err(format!(
                        "neuron{device} core {core} {group}/{}: total {total} after a reload",
                        counter.name
                    ));
                }
            }
        }
        // Nothing posted yet: a read that must not wait says so (EAGAIN).
        let mut posts = vec![0u8; 4096];
        match open_posts(&device_path(device)).and_then(|mut f| f.read(&mut posts)) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok(read) => {
                return Err(format!(
                    "neuron{device}: {read} bytes of posts right after a reload"
                ))
            }
            Err(e) => return Err(format!("reading the posts of a fresh neuron{device}: {e}")),
        }
    }
    Ok(())
}

struct Load {
    owners: Vec<Producer>,
    readers: Vec<(File, Mapping)>,
    posts: File,
}

fn put_under_load() -> Result<Load, String> {
    let mut owners = Vec::new();
    for device in [0, 1, 0] {
        owners.push(
            Producer::start(&device_path(device), &[(0, 1, 7), (1, 4, 2)])
                .map_err(|e| format!("starting an owner: {e}"))?,
        );
    }
    let mut readers = Vec::new();
    for (owner, device) in owners.iter().zip([0, 1, 0]).take(2) {
        let file = open_device(&device_path(device)).map_err(|e| format!("reader open: {e}"))?;
        let info = acquire(&file, owner.pid).map_err(|e| format!("reader ACQUIRE: {e}"))?;
        let map = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset)
            .map_err(|e| format!("reader mmap: {e}"))?;
        readers.push((file, map));
    }
    // A reader of the posts, which reads what there is without waiting.
    let mut posts = open_posts(&device_path(0)).map_err(|e| format!("posts open: {e}"))?;
    let mut buf = vec![0u8; 4096];
    let _ = posts.read(&mut buf);
    Ok(Load {
        owners,
        readers,
        posts,
    })
}

fn cycle(log: &mut KernelLog, ko: &str, kcov: &mut Option<Collector>) -> Result<(), String> {
    load_module(ko, PARAMS).map_err(|e| format!("insmod: errno {e}"))?;
    if let Some(kcov) = kcov.as_mut() {
        kcov.refresh_sections();
    }
    starts_clean()?;
    let load = put_under_load()?;
    let sysfs = open_sysfs_files();
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let failed_reads = AtomicU64::new(0);
    thread::scope(|scope| -> Result<(), String> {
        scope.spawn(|| {
            let mut buf = [0u8; 4096];
            while !stop.load(Relaxed) {
                for file in &sysfs {
                    match file.read_at(&mut buf, 0) {
                        Ok(_) => reads.fetch_add(1, Relaxed),
                        Err(_) => failed_reads.fetch_add(1, Relaxed),
                    };
                }
            }
        });
        let result = (|| {
            match unload_module() {
                Err(e) if e == libc::EAGAIN || e == libc::EBUSY => {}
                Err(e) => return Err(format!("rmmod under load failed with errno {e}, not busy")),
                Ok(()) => return Err("rmmod completed while files and mappings were open".into()),
            }
            let owned = slots_on(0).into_iter().filter(|r| r.pid != 0).count();
            if owned != 2 {
                return Err(format!(
                    "after the refused rmmod neuron0 has {owned} owners, not 2"
                ));
            }
            let Load {
                mut owners,
                readers,
                posts,
            } = load;
            drop(readers);
            drop(posts);
            owners.remove(0).release_and_exit();
            owners.remove(0).exit();
            owners.remove(0).kill();
            let start = Instant::now();
            loop {
                match unload_module() {
                    Ok(()) => break,
                    // The killed owner's files may still be closing.
                    Err(e) if e == libc::EAGAIN && start.elapsed() < EVENTUALLY => {
                        thread::sleep(Duration::from_millis(10))
                    }
                    Err(e) => return Err(format!("rmmod with no file open failed with errno {e}")),
                }
            }
            Ok(())
        })();
        // Reads after the unload must fail, not crash.
        thread::sleep(Duration::from_millis(20));
        stop.store(true, Relaxed);
        result
    })?;
    let mut buf = [0u8; 64];
    for file in &sysfs {
        if let Ok(len) = file.read_at(&mut buf, 0) {
            return Err(format!(
                "a sysfs file of the unloaded module still reads {len} bytes (fd {})",
                file.as_raw_fd()
            ));
        }
    }
    drop(sysfs);
    if let Some(kcov) = kcov.as_mut() {
        // Located in the sections of the module that was just unloaded.
        kcov.save();
    }
    let left = leftovers();
    if !left.is_empty() {
        return Err(format!("after rmmod: {left:?}"));
    }
    let complaints = log.complaints();
    if !complaints.is_empty() {
        return Err(format!("kernel complaints: {complaints:?}"));
    }
    if reads.load(Relaxed) == 0 {
        return Err("the sysfs reader never read while the module was loaded".into());
    }
    Ok(())
}

fn main() {
    let mut cycles = 100u32;
    let mut ko = "/neuron_ds.ko".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--cycles", Some(n)) => cycles = n.parse().expect("--cycles N"),
            ("--ko", Some(path)) => ko = path,
            _ => {
                eprintln!("usage: ds-unload [--cycles N] [--ko PATH]");
                exit(2);
            }
        }
    }
    let mut log = KernelLog::open().expect("/dev/kmsg");
    if fs::metadata("/sys/module/neuron_ds").is_ok() {
        unload_module().unwrap_or_else(|e| panic!("rmmod: errno {e}"));
    }
    let started = Instant::now();
    let mut failure = None;
    let mut kcov = Collector::from_env("unload");
    for n in 1..=cycles {
        if let Err(why) = cycle(&mut log, &ko, &mut kcov) {
            failure = Some(format!("cycle {n}: {why}"));
            break;
        }
    }
    let params = fs::read_to_string("/module.params").unwrap_or_default();
    if fs::metadata("/sys/module/neuron_ds").is_ok() {
        let _ = unload_module();
    }
    if let Err(e) = load_module(&ko, params.trim()) {
        failure.get_or_insert(format!("reloading with the guest's parameters: errno {e}"));
    }
    match failure {
        None => println!(
            "ds-unload: PASS: {cycles} cycles of rmmod refused under load, then completed under \
             open sysfs files and a due worker, in {:.1} s",
            started.elapsed().as_secs_f64()
        ),
        Some(why) => {
            println!("ds-unload: FAIL: {why}");
            exit(1);
        }
    }
}
