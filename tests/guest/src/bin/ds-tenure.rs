//! The actors of the tenure tests: processes that own, watch, squat on or exec with a slab,
//! each under an identity of its own. `ds-tenure IDENTITY MODE ARGS...`; IDENTITY (`root`,
//! `uid:N`) is what it becomes first, as a process that user started would be (dumpable).
//! Every mode prints one line when it is set up, then answers commands on stdin, one per line,
//! and exits when stdin closes:
//!
//! * `hold DEVICE MARKER`: owns a slab, maps it writable, writes MARKER into counter 1 of core
//!   0; prints `ready <offset>`.
//! * `watch DEVICE PID`: maps PID's slab read-only and reads it; prints `watching <counter>
//!   <generation>`, or `acquire=<errno>` if the ACQUIRE is refused.
//! * `map DEVICE PID`: maps PID's slab read-only without touching it; prints `mapped`.
//! * `squat DEVICE N [MAPS]`: N times: ACQUIRE its own slab, map the slot's reader window MAPS
//!   times (1 if not given) and read it, RELEASE, keeping every file and mapping; prints
//!   `squatting <slots>`.
//! * `map-many DEVICE WINDOW N`: ACQUIREs its own slab and maps its `reader` or `owner` WINDOW
//!   up to N times, keeping every mapping; prints `mapped <count> then=<outcome>`, the outcome
//!   of the mapping that failed (`ok` if none did).
//! * `exec-owner DEVICE MARKER`: like `hold`, then on `exec PATH MARKER2` executes PATH as
//!   `ds-tenure - after-exec FD MARKER2` with its device file kept open.
//! * `thread-exec DEVICE MARKER`: like `hold`, then on `exec` a second thread executes this
//!   program as `after-exec` (the thread becomes the group leader).
//! * `after-exec FD MARKER`: the image after such an exec: ACQUIREs its own slab through the
//!   inherited file FD, maps it and writes MARKER; prints `reacquired <offset> euid=<euid>`.
//! * `after-exec-idle FD`: an image after such an exec that keeps the inherited file FD and
//!   does nothing with it; prints `idle euid=<euid>`.
//! * `drop-exec DEVICE MARKER`: like `hold` (run as root), also writing MARKER into counter 1
//!   of core 1; then on `exec MODE MARKER2` it becomes uid 1000 (real, effective and saved)
//!   and executes this program's MODE (`after-exec` or `after-exec-idle`) with its device
//!   file kept open.
//! * `fork-exec DEVICE PATH MARKER MARKER2`: like `hold`, then starts PATH as `ds-tenure -
//!   after-exec FD MARKER2` in a child that shares its device file (the open file description,
//!   not a copy: a fork's); the child's line follows `ready`. Answers `map-reader <offset>`
//!   by mapping the reader's window of the slot of `<offset>` through that shared file:
//!   `map-reader <outcome> counter=<counter 1 of core 0, or -1>`.
//! * `posts DEVICE`: opens DEVICE and tries to read one metric post and to poll for one;
//!   prints `posts read=<outcome> poll=<revents>`.
//! * `tagged DEVICE TAG MARKER`: an owner through the `nds` library, as a runtime is: publishes
//!   a process-info record with TAG, adds MARKER completed executions on core 0; prints
//!   `ready`; answers `add N` by adding N more (`added`); RELEASEs when stdin closes.
//! * `ledger DEVICE SEQ`: reads record SEQ of DEVICE's ledger (waiting for it); prints
//!   `record seq=<n> end=<end> redacted=<bool> pid=<pid> uid=<uid> tag=<tag or -> completed=<core
//!   0 completed executions>`, or `lost <first>..<last>` if the ring dropped it first.
//! * `pidns DEVICE PID`: in a new pid namespace, tries to ACQUIRE PID and reads the slot table;
//!   prints `pidns acquire=<outcome> listed=<whether PID appears in the table>`.
//! * `cycle DEVICE`: owns and releases a slab over and over, writing into each tenure its own
//!   generation (into counter 1 of core 0); prints `cycling`; stops at `report`, which it
//!   answers with `cycled <tenures>`.
//! * `pass DEVICE PID IDENTITY`: ACQUIREs PID's slab for reading and hands the file to a child
//!   that becomes IDENTITY (the guest kernel has no sockets to pass it over); the child prints
//!   `passed map=<errno>` if it may not map it at all, or tries every route to write through
//!   it and
//!   prints `passed read=<counter> map_write=<perms> mprotect_write=<outcome>
//!   proc_mem_write=<refused|wrote> mremap=<perms> owner_window=<outcome>
//!   private_write=<perms>`, and keeps its read-only mapping for `scan`.
//!
//! `scan` (every mapping mode) reads every byte of every mapping it holds and prints `scan
//! nonzero=<bytes> counter=<counter 1 of core 0> generation=<generation word>` (of the first
//! mapping); a mapping that shows nothing of any tenure reads all zeros.

use neuron_ds_guest_tests::{
    acquire, device_path, identity::Identity, kcov, nc_offset, open_device, release, slab_offset,
    slots_on, Mapping, GENERATION_OFFSET, SLAB_SIZE,
};
use std::{
    fs::File,
    io::{self, BufRead, Write},
    os::{
        fd::{AsFd, AsRawFd, FromRawFd},
        unix::process::CommandExt,
    },
    process::{exit, Command},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};
use zerocopy::FromZeros;

const RW: i32 = libc::PROT_READ | libc::PROT_WRITE;

/// Counter 1 of core 0, where the markers go.
fn marker_offset() -> usize {
    nc_offset(0, 1)
}

fn errno_name(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::ENOENT) => "ENOENT".into(),
        Some(libc::EINVAL) => "EINVAL".into(),
        Some(libc::EACCES) => "EACCES".into(),
        Some(other) => format!("errno{other}"),
        None => error.to_string(),
    }
}

/// Reads every byte of every mapping (a fault here kills the process, which the tests see).
fn scan(mappings: &[Mapping]) -> String {
    let nonzero: usize = mappings
        .iter()
        .map(|mapping| {
            (0..SLAB_SIZE / 8)
                .filter(|word| mapping.read_u64(word * 8) != 0)
                .map(|word| {
                    mapping
                        .read_u64(word * 8)
                        .to_ne_bytes()
                        .iter()
                        .filter(|b| **b != 0)
                        .count()
                })
                .sum::<usize>()
        })
        .sum();
    let (counter, generation) = mappings.first().map_or((0, 0), |first| {
        (
            first.read_u64(marker_offset()),
            first.read_u64(GENERATION_OFFSET),
        )
    });
    format!("scan nonzero={nonzero} counter={counter} generation={generation}")
}

/// Answers `scan` (and, through `other`, the mode's own commands) until stdin closes.
fn serve(mappings: &[Mapping], mut other: impl FnMut(&str) -> io::Result<()>) -> io::Result<()> {
    for line in io::stdin().lock().lines() {
        let line = line?;
        match line.trim() {
            "scan" => println!("{}", scan(mappings)),
            command => other(command)?,
        }
        io::stdout().flush()?;
    }
    Ok(())
}

fn say(line: &str) -> io::Result<()> {
    println!("{line}");
    io::stdout().flush()
}

/// Owns a slab on `file`: maps it writable and writes `marker`.
fn own(file: &File, marker: u64) -> io::Result<(Mapping, u64)> {
    let info = acquire(file, 0)?;
    let slab = Mapping::new(file, SLAB_SIZE, RW, info.mmap_offset)?;
    slab.write_u64(marker_offset(), marker);
    Ok((slab, info.mmap_offset))
}

/// Executes this program's `after-exec` mode at `path`, keeping `file` open across it.
fn exec_after(path: &str, file: &File, marker: &str) -> io::Error {
    exec_mode(std::path::Path::new(path), "after-exec", file, marker)
}

/// Executes this program's `mode` (`after-exec`, `after-exec-idle`) at `path`, keeping `file`
/// open across it.
fn exec_mode(path: &std::path::Path, mode: &str, file: &File, marker: &str) -> io::Error {
    kcov::end_thread();
    let fd = file.as_raw_fd();
    // SAFETY: clearing FD_CLOEXEC on a descriptor this process owns.
    unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    Command::new(path)
        .args(["-", mode, &fd.to_string(), marker])
        .exec()
}

/// The line of the `ledger` mode for `event`, if it is about record `seq`.
fn ledger_line(event: &nds::LedgerEvent, seq: u64) -> Option<String> {
    match event {
        nds::LedgerEvent::Lost { first, last } if (*first..=*last).contains(&seq) => {
            Some(format!("lost {first}..{last}"))
        }
        nds::LedgerEvent::Tenure(record) if record.seq == seq => {
            let success = nds_abi::sysfs::SYSFS_COUNTERS
                .iter()
                .position(|counter| counter.name == "success")
                .unwrap_or(0);
            let tag = record.tag().map_or_else(
                || "-".to_owned(),
                |tag| String::from_utf8_lossy(tag).into_owned(),
            );
            Some(format!(
                "record seq={} end={} redacted={} pid={} uid={} tag={tag} completed={}",
                record.seq,
                record.ended_by().map_or("?", |end| end.name()),
                record.is_redacted(),
                record.pid,
                record.uid,
                record.counters[0][success]
            ))
        }
        _ => None,
    }
}

/// `ok` or the errno's name.
fn outcome<T>(result: &io::Result<T>) -> String {
    result.as_ref().map_or_else(errno_name, |_| "ok".into())
}

/// Owns and releases slabs on `device` for `seconds`; returns how many tenures it had.
fn cycle(device: usize, stop: &AtomicBool) -> io::Result<u64> {
    let file = open_device(&device_path(device))?;
    let mut tenures = 0;
    while !stop.load(Ordering::Relaxed) {
        let info = acquire(&file, 0)?;
        let slab = Mapping::new(&file, SLAB_SIZE, RW, info.mmap_offset)?;
        let generation = slab.read_u64(GENERATION_OFFSET);
        slab.write_u64(marker_offset(), generation);
        drop(slab);
        release(&file, 0)?;
        tenures += 1;
    }
    Ok(tenures)
}

/// What a holder of a reader's file can do with it; returns its line and its
/// read-only mapping.
fn try_passed(file: &File, offset: u64) -> io::Result<(String, Mapping)> {
    let view = Mapping::new(file, SLAB_SIZE, libc::PROT_READ, offset)?;
    let read = view.read_u64(marker_offset());
    let writable = Mapping::new(file, SLAB_SIZE, RW, offset);
    let map_write = writable
        .as_ref()
        .map_or_else(errno_name, Mapping::permissions);
    let mprotect_write = writable
        .as_ref()
        .map_or("-".into(), |m| outcome(&m.protect(RW)));
    drop(writable);
    let proc_mem = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")?;
    let value = 666u64.to_ne_bytes();
    let target = view.addr() as u64 + marker_offset() as u64;
    let wrote = std::os::unix::fs::FileExt::write_at(&proc_mem, &value, target).is_ok();
    let proc_mem_write = if wrote { "wrote" } else { "refused" };
    let moved = Mapping::new(file, SLAB_SIZE, libc::PROT_READ, offset)?.moved();
    let mremap = moved.as_ref().map_or_else(errno_name, |m| {
        format!(
            "{}{}",
            m.permissions(),
            if m.protect(RW).is_ok() { "+w" } else { "" }
        )
    });
    let owner_window = outcome(&Mapping::new(
        file,
        SLAB_SIZE,
        RW,
        offset + SLAB_SIZE as u64,
    ));
    let private = Mapping::with_flags(file, SLAB_SIZE, RW, libc::MAP_PRIVATE, offset);
    let private_write = private
        .as_ref()
        .map_or_else(errno_name, Mapping::permissions);
    let line = format!(
        "passed read={read} map_write={map_write} mprotect_write={mprotect_write} \
         proc_mem_write={proc_mem_write} mremap={mremap} owner_window={owner_window} \
         private_write={private_write}"
    );
    Ok((line, view))
}

fn run(mode: &str, args: &[String]) -> io::Result<()> {
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or_default();
    match mode {
        "hold" => {
            let file = open_device(&device_path(arg(0).parse().unwrap_or(0)))?;
            let (slab, offset) = own(&file, arg(1).parse().unwrap_or(0))?;
            say(&format!("ready {offset}"))?;
            serve(&[slab], |_| Ok(()))
        }
        "watch" | "map" => {
            let file = open_device(&device_path(arg(0).parse().unwrap_or(0)))?;
            let info = match acquire(&file, arg(1).parse().unwrap_or(0)) {
                Ok(info) => info,
                Err(e) => {
                    say(&format!("acquire={}", errno_name(&e)))?;
                    return serve(&[], |_| Ok(()));
                }
            };
            let view = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset)?;
            if mode == "watch" {
                say(&format!(
                    "watching {} {}",
                    view.read_u64(marker_offset()),
                    view.read_u64(GENERATION_OFFSET)
                ))?;
            } else {
                say("mapped")?;
            }
            serve(&[view], |_| Ok(()))
        }
        "squat" => {
            let device: usize = arg(0).parse().unwrap_or(0);
            let maps: usize = arg(2).parse().unwrap_or(1);
            let mut files = Vec::new();
            let mut views = Vec::new();
            let mut slots = Vec::new();
            for _ in 0..arg(1).parse().unwrap_or(0) {
                let file = open_device(&device_path(device))?;
                let info = acquire(&file, 0)?;
                let slot = neuron_ds_guest_tests::offset_slot(info.mmap_offset);
                // The reader's window of its own slot, through its owner grant.
                for _ in 0..maps {
                    let view = Mapping::new(
                        &file,
                        SLAB_SIZE,
                        libc::PROT_READ,
                        slab_offset(device, slot, false),
                    )?;
                    view.read_u64(GENERATION_OFFSET);
                    views.push(view);
                }
                release(&file, 0)?;
                slots.push(slot.to_string());
                files.push(file);
            }
            say(&format!("squatting {}", slots.join(",")))?;
            serve(&views, |_| Ok(()))
        }
        "map-many" => {
            let device: usize = arg(0).parse().unwrap_or(0);
            let file = open_device(&device_path(device))?;
            let info = acquire(&file, 0)?;
            let owner = arg(1) == "owner";
            let offset = slab_offset(
                device,
                neuron_ds_guest_tests::offset_slot(info.mmap_offset),
                owner,
            );
            let prot = if owner { RW } else { libc::PROT_READ };
            let mut views = Vec::new();
            let mut then = "ok".to_owned();
            for _ in 0..arg(2).parse().unwrap_or(0) {
                match Mapping::new(&file, SLAB_SIZE, prot, offset) {
                    Ok(view) => views.push(view),
                    Err(e) => {
                        then = errno_name(&e);
                        break;
                    }
                }
            }
            say(&format!("mapped {} then={then}", views.len()))?;
            serve(&views, |_| Ok(()))
        }
        "drop-exec" => {
            let file = open_device(&device_path(arg(0).parse().unwrap_or(0)))?;
            let marker = arg(1).parse().unwrap_or(0);
            let (slab, offset) = own(&file, marker)?;
            slab.write_u64(nc_offset(1, 1), marker);
            say(&format!("ready {offset}"))?;
            serve(&[slab], |command| {
                match command.split_whitespace().collect::<Vec<_>>()[..] {
                    ["exec", mode, marker] => {
                        Identity::User(1000).assume()?;
                        Err(exec_mode(&std::env::current_exe()?, mode, &file, marker))
                    }
                    _ => Ok(()),
                }
            })
        }
        "fork-exec" => {
            let device: usize = arg(0).parse().unwrap_or(0);
            let file = open_device(&device_path(device))?;
            let (slab, offset) = own(&file, arg(2).parse().unwrap_or(0))?;
            say(&format!("ready {offset}"))?;
            // SAFETY: clearing FD_CLOEXEC on a descriptor this process owns: the child shares
            // it, as a forked child shares its parent's files.
            unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFD, 0) };
            // Its standard input is a pipe of ours: it ends when we do.
            let _child = Command::new(arg(1))
                .args(["-", "after-exec", &file.as_raw_fd().to_string(), arg(3)])
                .stdin(std::process::Stdio::piped())
                .spawn()?;
            serve(&[slab], |command| {
                match command.split_whitespace().collect::<Vec<_>>()[..] {
                    ["map-reader", offset] => {
                        let slot = neuron_ds_guest_tests::offset_slot(offset.parse().unwrap_or(0));
                        let view = Mapping::new(
                            &file,
                            SLAB_SIZE,
                            libc::PROT_READ,
                            slab_offset(device, slot, false),
                        );
                        let counter = view
                            .as_ref()
                            .map_or(-1, |view| view.read_u64(marker_offset()) as i64);
                        say(&format!("map-reader {} counter={counter}", outcome(&view)))
                    }
                    _ => Ok(()),
                }
            })
        }
        "tagged" => {
            // The library opens the node: this thread collects from here on under coverage.
            kcov::follow_thread();
            let producer = nds::Producer::open(&nds::Backend::device(device_path(
                arg(0).parse().unwrap_or(0),
            )))
            .map_err(io::Error::other)?;
            let mut info = nds_abi::records::ProcessInfo::new_zeroed();
            info.set_tag(arg(1).as_bytes())
                .map_err(|_| io::Error::other("the tag is longer than 31 bytes"))?;
            producer
                .commit_process_info(&info)
                .map_err(io::Error::other)?;
            let completed = nds_abi::counters::NcCounter::InferCompleted.index();
            producer
                .increment_nc_counter(0, completed, arg(2).parse().unwrap_or(0))
                .map_err(io::Error::other)?;
            say("ready")?;
            serve(&[], |command| match command.strip_prefix("add ") {
                Some(count) => {
                    let count = count.parse().map_err(io::Error::other)?;
                    producer
                        .increment_nc_counter(0, completed, count)
                        .map_err(io::Error::other)?;
                    say("added")
                }
                None => Ok(()),
            })?;
            producer.close().map_err(io::Error::other)
        }
        "ledger" => {
            let path = device_path(arg(0).parse().unwrap_or(0));
            let seq: u64 = arg(1).parse().unwrap_or(1);
            let mut follower = nds::LedgerFollower::open(std::path::Path::new(&path), seq)
                .map_err(io::Error::other)?;
            let line = loop {
                let events = follower.read().map_err(io::Error::other)?;
                if let Some(line) = events.iter().find_map(|event| ledger_line(event, seq)) {
                    break line;
                }
                let mut pfd = libc::pollfd {
                    fd: follower.as_fd().as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, for the call only.
                unsafe { libc::poll(&mut pfd, 1, -1) };
            };
            say(&line)?;
            serve(&[], |_| Ok(()))
        }
        "posts" => {
            let stream =
                neuron_ds_guest_tests::open_posts(&device_path(arg(0).parse().unwrap_or(0)))?;
            let mut post = [0u8; nds_abi::metrics::METRIC_POST_SIZE];
            let read = io::Read::read(&mut &stream, &mut post);
            let mut pfd = libc::pollfd {
                fd: stream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, for the call only.
            unsafe { libc::poll(&mut pfd, 1, 0) };
            say(&format!(
                "posts read={} poll={}",
                outcome(&read),
                pfd.revents
            ))?;
            serve(&[], |_| Ok(()))
        }
        "exec-owner" | "thread-exec" => {
            let file = open_device(&device_path(arg(0).parse().unwrap_or(0)))?;
            let (slab, offset) = own(&file, arg(1).parse().unwrap_or(0))?;
            say(&format!("ready {offset}"))?;
            serve(&[slab], |command| {
                let words: Vec<&str> = command.split_whitespace().collect();
                match (mode, words.as_slice()) {
                    ("exec-owner", ["exec", path, marker]) => Err(exec_after(path, &file, marker)),
                    ("thread-exec", ["exec", marker]) => {
                        let marker = marker.to_string();
                        kcov::end_thread();
                        let fd = file.as_raw_fd();
                        // SAFETY: clearing FD_CLOEXEC on a descriptor this process owns.
                        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
                        let thread = std::thread::spawn(move || {
                            Command::new("/proc/self/exe")
                                .args(["-", "after-exec", &fd.to_string(), &marker])
                                .exec()
                        });
                        Err(thread
                            .join()
                            .unwrap_or_else(|_| io::Error::other("exec thread")))
                    }
                    _ => Ok(()),
                }
            })
        }
        "after-exec" => {
            // SAFETY: the descriptor was kept open across the exec for this image.
            let file = unsafe { File::from_raw_fd(arg(0).parse().unwrap_or(-1)) };
            let (slab, offset) = own(&file, arg(1).parse().unwrap_or(0))?;
            // SAFETY: geteuid has no preconditions.
            let euid = unsafe { libc::geteuid() };
            say(&format!("reacquired {offset} euid={euid}"))?;
            serve(&[slab], |_| Ok(()))
        }
        "after-exec-idle" => {
            // SAFETY: the descriptor was kept open across the exec for this image.
            let _file = unsafe { File::from_raw_fd(arg(0).parse().unwrap_or(-1)) };
            // SAFETY: geteuid has no preconditions.
            let euid = unsafe { libc::geteuid() };
            say(&format!("idle euid={euid}"))?;
            serve(&[], |_| Ok(()))
        }
        "pidns" => {
            let device: usize = arg(0).parse().unwrap_or(0);
            let pid: i32 = arg(1).parse().unwrap_or(0);
            // SAFETY: unshare takes no pointers and changes only the namespace of this
            // process's later children.
            if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: this mode runs on the process's only thread, so the child inherits no
            // lock another thread held and may allocate and print as this process would.
            match unsafe { libc::fork() } {
                -1 => Err(io::Error::last_os_error()),
                0 => {
                    let outcome = open_device(&device_path(device))
                        .and_then(|file| acquire(&file, pid))
                        .map_or_else(|e| errno_name(&e), |_| "ok".into());
                    let listed = slots_on(device).iter().any(|row| row.pid == pid);
                    println!("pidns acquire={outcome} listed={listed}");
                    let _ = io::stdout().flush();
                    // SAFETY: leaving the child.
                    unsafe { libc::_exit(0) }
                }
                child => {
                    let mut status = 0;
                    // SAFETY: waiting for our own child.
                    unsafe { libc::waitpid(child, &mut status, 0) };
                    Ok(())
                }
            }
        }
        "cycle" => {
            let stop = Arc::new(AtomicBool::new(false));
            let stopping = stop.clone();
            // The first line (`report`), or the end of stdin, stops the cycling.
            let reporter = std::thread::spawn(move || {
                let mut line = String::new();
                let _ = io::stdin().lock().read_line(&mut line);
                stopping.store(true, Ordering::Relaxed);
                line
            });
            say("cycling")?;
            let tenures = cycle(arg(0).parse().unwrap_or(0), &stop)?;
            if reporter.join().unwrap_or_default().trim() == "report" {
                println!("cycled {tenures}");
            }
            serve(&[], |_| Ok(()))
        }
        "pass" => {
            let file = open_device(&device_path(arg(0).parse().unwrap_or(0)))?;
            let info = acquire(&file, arg(1).parse().unwrap_or(0))?;
            let holder = Identity::parse(arg(2)).ok_or_else(|| io::Error::other("identity"))?;
            // SAFETY: the child makes system calls, prints, serves stdin, and exits.
            match unsafe { libc::fork() } {
                -1 => Err(io::Error::last_os_error()),
                0 => {
                    let result = holder.assume().and_then(|()| {
                        // Dumpable again (the switch cleared it), so that its own
                        // /proc/self/mem opens and only the module's rule can refuse the write.
                        // SAFETY: prctl on the calling process.
                        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1) };
                        // Whoever maps through a descriptor is checked at the mapping.
                        if let Err(e) =
                            Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset)
                        {
                            say(&format!("passed map={}", errno_name(&e)))?;
                            return serve(&[], |_| Ok(()));
                        }
                        let (line, view) = try_passed(&file, info.mmap_offset)?;
                        say(&line)?;
                        serve(&[view], |_| Ok(()))
                    });
                    // SAFETY: leaving the child.
                    unsafe { libc::_exit(i32::from(result.is_err())) }
                }
                child => {
                    drop(file);
                    let mut status = 0;
                    // SAFETY: waiting for our own child.
                    unsafe { libc::waitpid(child, &mut status, 0) };
                    Ok(())
                }
            }
        }
        _ => Err(io::Error::other(format!("unknown mode {mode}"))),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(identity), Some(mode)) = (args.first(), args.get(1)) else {
        eprintln!("usage: ds-tenure IDENTITY MODE ARGS...");
        exit(2);
    };
    // `after-exec` runs as whatever the exec made it; `-` names no identity.
    if identity != "-" {
        let Some(identity) = Identity::parse(identity) else {
            eprintln!("ds-tenure: bad identity {identity}");
            exit(2);
        };
        if let Err(e) = identity.become_user() {
            eprintln!("ds-tenure: becoming {}: {e}", identity.text());
            exit(2);
        }
    }
    let result = run(mode, &args[2..]);
    kcov::end_thread();
    if let Err(e) = result {
        eprintln!("ds-tenure {mode}: {e}");
        exit(1);
    }
}
