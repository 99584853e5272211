//! The tenure boundary: no byte of a slab reaches anyone after their right to it ends. Every
//! actor is a `ds-tenure` process under an identity of its own (uid 1000 and 1001 are two
//! unprivileged users), on a node everyone may open, so every refusal is the module's.

use neuron_ds_guest_tests::{
    actor::{Actor, NOTHING},
    *,
};
use std::{io::BufRead, os::unix::fs::PermissionsExt, time::Instant};

/// What `actor`'s old reader mapping shows after the owner's release: the ended tenure as it
/// ended (its `marker`, its generation moved on to the release's even one) until the slab is
/// zeroed, and nothing from then on, without any new owner coming. A scan reads the marker
/// before the generation, so one that the zeroing overtook may see the marker and then a 0,
/// never a 0 and then a generation.
fn assert_ended_then_nothing(actor: &mut Actor, marker: u64) {
    let ended = actor.scan();
    let generation_ok = ended.generation.is_multiple_of(2);
    let in_order = ended.counter == marker || ended.generation == 0;
    assert!(
        (ended.counter == marker || ended.counter == 0) && generation_ok && in_order,
        "{ended:?}"
    );
    eventually("the ended view reads zeros", || actor.scan() == NOTHING);
}

/// Sixteen owners of uid 1001, one per slot (every slot is free when the test starts).
fn take_every_slot(marker: u64) -> Vec<Actor> {
    let owners: Vec<Actor> = (0..SLOTS)
        .map(|_| Actor::owner("uid:1001", marker))
        .collect();
    assert!(
        slots().iter().all(|row| row.pid != 0),
        "every slot is owned"
    );
    owners
}

#[test]
fn sixteen_squatted_reader_windows_show_nothing_of_the_next_owners() {
    let _node = WorldWritableNode::new(DEVICE);
    let mut squatter = Actor::start("uid:1000", "squat", &["0", &SLOTS.to_string()]);
    assert!(
        squatter.hello.starts_with("squatting "),
        "{}",
        squatter.hello
    );
    let owners = take_every_slot(0xBEEF);
    // Every page of all sixteen kept mappings reads zero: no counter, no generation, nothing
    // the uid-1001 owners wrote.
    assert_eq!(squatter.scan(), NOTHING);
    drop(owners);
    assert!(squatter.stop().success());
}

#[test]
fn a_same_uid_readers_old_mapping_shows_nothing_of_the_next_owner_of_another_uid() {
    let _node = WorldWritableNode::new(DEVICE);
    let owner = Actor::owner("uid:1000", 41);
    let mut reader = Actor::start("uid:1000", "watch", &["0", &owner.pid.to_string()]);
    let mut words = reader.hello.split_whitespace().skip(1);
    assert_eq!(words.next(), Some("41"), "{}", reader.hello);
    let generation: u64 = words.next().unwrap().parse().unwrap();
    assert_eq!(generation % 2, 1);
    assert!(owner.stop().success());
    // Released: the reader's view ended with the tenure.
    assert_ended_then_nothing(&mut reader, 41);
    let owners = take_every_slot(0xD00D);
    assert_eq!(reader.scan(), NOTHING);
    drop(owners);
}

#[test]
fn a_mapping_authorized_before_a_release_and_touched_after_it_shows_nothing() {
    let _node = WorldWritableNode::new(DEVICE);
    let owner = Actor::owner("uid:1000", 5);
    // Checked and mapped while the tenure lasts, but no page touched yet.
    let mut mapped = Actor::start("uid:1000", "map", &["0", &owner.pid.to_string()]);
    assert_eq!(mapped.hello, "mapped");
    assert!(owner.stop().success());
    let owners = take_every_slot(0xCAFE);
    // Its first touch comes after the release and another user's acquire.
    assert_eq!(mapped.scan(), NOTHING);
    drop(owners);
}

/// Tenures the racing readers attach to before the race counts as exercised.
const RACING_ATTACHES: u64 = 20;

#[test]
fn readers_racing_releases_and_reuse_only_ever_see_their_own_tenure() {
    // The cycler owns and releases one slab as fast as it can, writing into each tenure its
    // own generation, until the readers have attached to enough tenures. Readers map
    // whichever tenure is current and check every marker they read: zero (the view ended) or
    // the generation they attached to, never a later tenure's.
    let cycler = Actor::start("root", "cycle", &["0"]);
    assert_eq!(cycler.hello, "cycling");
    let (mut attached, mut live_reads, mut ended_reads) = (0u64, 0u64, 0u64);
    let file = open_device(DEVICE).unwrap();
    let deadline = Instant::now() + EVENTUALLY;
    while attached < RACING_ATTACHES || live_reads == 0 {
        assert!(
            Instant::now() < deadline,
            "the race was not exercised: {attached} attaches, {live_reads} live reads"
        );
        let Ok(info) = acquire(&file, cycler.pid) else {
            continue;
        };
        let Ok(view) = Mapping::new(&file, SLAB_SIZE, libc::PROT_READ, info.mmap_offset) else {
            // Released between the ACQUIRE and the mmap: the grant maps nothing.
            continue;
        };
        let generation = view.read_u64(GENERATION_OFFSET);
        if generation % 2 == 0 {
            continue;
        }
        attached += 1;
        for _ in 0..64 {
            match view.read_u64(nc_offset(0, 1)) {
                0 => ended_reads += 1,
                marker => {
                    assert_eq!(marker, generation, "a reader saw another tenure's marker");
                    live_reads += 1;
                }
            }
        }
        // The tenure's own generation, its release's (written before the pages go), or the
        // zeros of an ended view: never a later tenure's.
        let after = view.read_u64(GENERATION_OFFSET);
        assert!(
            after == generation || after == generation + 1 || after == 0,
            "generation {after} through a view of {generation}"
        );
    }
    let mut cycler = cycler;
    let done = cycler.ask("report").expect("cycler report");
    println!("{done}; readers attached {attached} times, {live_reads} live reads, {ended_reads} after the end");
    assert!(cycler.stop().success());
}

#[test]
fn a_new_owners_slab_is_all_zero_but_its_generation() {
    let _node = WorldWritableNode::new(DEVICE);
    let first = Actor::owner("root", u64::MAX);
    let slot = offset_slot(first.offset());
    assert!(first.stop().success());
    // Take every slot, so the released one is among them.
    let mut owners = take_every_slot(0);
    let heir = owners
        .iter_mut()
        .find(|owner| offset_slot(owner.offset()) == slot)
        .expect("the released slot is handed out again");
    let scan = heir.scan();
    assert_eq!(scan.counter, 0);
    assert_eq!(scan.generation % 2, 1);
    // The generation word is the only nonzero word of a fresh slab.
    let generation_bytes = scan
        .generation
        .to_ne_bytes()
        .iter()
        .filter(|b| **b != 0)
        .count();
    assert_eq!(scan.nonzero, generation_bytes as u64);
}

#[test]
fn after_a_setuid_exec_the_old_uid_can_read_nothing_the_new_image_writes() {
    let _node = WorldWritableNode::new(DEVICE);
    let privileged = SetUidCopy::new("/tmp/ds-tenure-setuid");
    let mut owner = Actor::start("uid:1000", "exec-owner", &["0", "111"]);
    assert!(owner.hello.starts_with("ready "), "{}", owner.hello);
    let pid = owner.pid.to_string();
    // Before the exec, its user reads it.
    let mut before = Actor::start("uid:1000", "watch", &["0", &pid]);
    assert!(
        before.hello.starts_with("watching 111 "),
        "{}",
        before.hello
    );

    let answer = owner.ask(&format!("exec {} 333", privileged.0)).unwrap();
    let mut words = answer.split_whitespace();
    assert_eq!(words.next(), Some("reacquired"), "{answer}");
    assert!(words.next().is_some(), "{answer}");
    assert_eq!(words.next(), Some("euid=0"), "the exec made it privileged");
    // Its credentials changed: the old tenure ended, and the new image has a slab of its own,
    // the process's one.
    let owned: Vec<SlotRow> = slots()
        .into_iter()
        .filter(|row| row.pid == owner.pid)
        .collect();
    assert_eq!(owned.len(), 1, "one slab for the process: {owned:?}");

    // A new ACQUIRE by the old uid is refused: the owner's credentials are checked now.
    let after = Actor::start("uid:1000", "watch", &["0", &pid]);
    assert_eq!(after.hello, "acquire=EPERM");
    // The mapping made before the exec shows the ended tenure, then nothing, and never
    // anything the new image wrote.
    let seen = before.scan();
    assert_ne!(
        seen.counter, 333,
        "a pre-exec mapping read the privileged image's marker"
    );
    assert_ended_then_nothing(&mut before, 111);
    // Root still may (CAP_SYS_PTRACE), and sees the new image's marker.
    let root = Actor::start("root", "watch", &["0", &pid]);
    assert!(root.hello.starts_with("watching 333 "), "{}", root.hello);
    drop(root);
    drop(after);
    let owner_pid = owner.pid;
    assert!(owner.stop().success());
    assert!(slots().iter().all(|row| row.pid != owner_pid));
    drop(privileged);
}

#[test]
fn an_exec_from_a_second_thread_keeps_the_process_one_slab() {
    let mut owner = Actor::start("root", "thread-exec", &["0", "7"]);
    assert!(owner.hello.starts_with("ready "), "{}", owner.hello);
    let slot = offset_slot(owner.offset());
    let answer = owner.ask("exec 8").unwrap();
    let offset: u64 = answer
        .strip_prefix("reacquired ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|o| o.parse().ok())
        .unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(offset_slot(offset), slot, "same slab after the exec");
    let owned: Vec<SlotRow> = slots()
        .into_iter()
        .filter(|row| row.pid == owner.pid)
        .collect();
    assert_eq!(owned.len(), 1, "one slab for the process: {owned:?}");
    let mut reader = Actor::start("root", "watch", &["0", &owner.pid.to_string()]);
    assert!(reader.hello.starts_with("watching 8 "), "{}", reader.hello);
    assert_eq!(reader.scan().counter, 8);
    let pid = owner.pid;
    assert!(owner.stop().success());
    assert!(slots().iter().all(|row| row.pid != pid), "released at exit");
}

#[test]
fn a_process_in_a_pid_namespace_cannot_name_a_process_outside_it() {
    let owner = Actor::owner("root", 3);
    let probe = Actor::start("root", "pidns", &["0", &owner.pid.to_string()]);
    assert_eq!(probe.hello, "pidns acquire=ENOENT listed=false");
    drop(probe);
    drop(owner);
}

#[test]
fn a_handed_descriptor_maps_only_for_whom_may_read_and_then_only_reads_within_its_tenure() {
    let _node = WorldWritableNode::new(DEVICE);
    let owner = Actor::owner("uid:1001", 9);
    // Root's descriptor, handed to another uid (a forked child that became uid 1002): the
    // grant names the slab, the read rule refuses that uid, so it maps nothing.
    let stranger = Actor::start("root", "pass", &["0", &owner.pid.to_string(), "uid:1002"]);
    assert_eq!(stranger.hello, "passed map=EPERM");
    drop(stranger);
    let probe = Actor::start("root", "pass", &["0", &owner.pid.to_string(), "uid:1001"]);
    // Handed to the owner's uid, which may read it: it reads and only reads. A writable
    // request is made read-only, mprotect and /proc/self/mem cannot write, mremap keeps it
    // read-only, the owner's window is refused; and after the release, nothing.
    assert_eq!(
        probe.hello,
        "passed read=9 map_write=r--s mprotect_write=EACCES proc_mem_write=refused \
         mremap=r--s owner_window=EINVAL private_write=r--p"
    );
    let mut probe = probe;
    assert!(owner.stop().success());
    assert_ended_then_nothing(&mut probe, 9);
}

/// A set-uid-root copy of `ds-tenure`, as a privileged runtime would be installed; removed
/// when dropped.
struct SetUidCopy(&'static str);

impl SetUidCopy {
    fn new(path: &'static str) -> Self {
        std::fs::copy(helper_path("ds-tenure"), path).unwrap();
        std::os::unix::fs::chown(path, Some(0), Some(0)).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o4755)).unwrap();
        Self(path)
    }
}

impl Drop for SetUidCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// The bytes of `word` that are not zero.
fn nonzero_bytes(word: u64) -> u64 {
    word.to_ne_bytes().iter().filter(|b| **b != 0).count() as u64
}

#[test]
fn a_shared_description_maps_nothing_of_a_set_uid_image_for_its_old_uid() {
    let _node = WorldWritableNode::new(DEVICE);
    let privileged = SetUidCopy::new("/tmp/ds-tenure-setuid-shared");
    // A uid 1000 owner whose child shares its open file (no O_CLOEXEC) and executes a
    // set-uid-root program, which ACQUIREs and writes its own slab through that file: the
    // file then holds a grant the privileged image made.
    let mut owner = Actor::start("uid:1000", "fork-exec", &["0", privileged.0, "21", "777"]);
    assert!(owner.hello.starts_with("ready "), "{}", owner.hello);
    let mut line = String::new();
    owner.stdout.read_line(&mut line).unwrap();
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("reacquired"), "{line}");
    let offset: u64 = words.next().unwrap().parse().unwrap();
    assert_eq!(
        words.next(),
        Some("euid=0"),
        "the child runs privileged: {line}"
    );
    // The read rule refuses the old uid the privileged image, by any ACQUIRE...
    let child = slots()[offset_slot(offset)].pid;
    let refused = Actor::start("uid:1000", "watch", &["0", &child.to_string()]);
    assert_eq!(refused.hello, "acquire=EPERM");
    // ... and by the grant in the file it shares with it: the mmap checks who maps.
    let answer = owner.ask(&format!("map-reader {offset}")).unwrap();
    assert_eq!(
        answer, "map-reader EPERM counter=-1",
        "the old uid read the privileged image"
    );
    // Root may (CAP_SYS_PTRACE), and sees the privileged image's marker.
    let root = Actor::start("root", "watch", &["0", &child.to_string()]);
    assert!(root.hello.starts_with("watching 777 "), "{}", root.hello);
    drop(root);
    assert!(owner.stop().success());
}

#[test]
fn reader_mappings_kept_across_sixteen_ended_tenures_leave_every_later_owner_readable() {
    let _node = WorldWritableNode::new(DEVICE);
    // A uid 1000 squatter maps its own reader window as often as a view allows, in each of
    // sixteen tenures, one per slot, and keeps every mapping.
    let squatter = Actor::start(
        "uid:1000",
        "squat",
        &["0", &SLOTS.to_string(), &MAPPINGS_PER_VIEW.to_string()],
    );
    assert!(
        squatter.hello.starts_with("squatting "),
        "{}",
        squatter.hello
    );
    let slots_squatted: std::collections::BTreeSet<&str> =
        squatter.hello["squatting ".len()..].split(',').collect();
    assert_eq!(slots_squatted.len(), SLOTS, "{}", squatter.hello);
    // Every later owner, of another uid, on every slot: root and its own uid read it.
    let owners = take_every_slot(0x5EA7);
    for owner in &owners {
        for reader in ["root", "uid:1001"] {
            let watcher = Actor::start(reader, "watch", &["0", &owner.pid.to_string()]);
            assert!(
                watcher.hello.starts_with(&format!("watching {} ", 0x5EA7)),
                "{reader} on slot {}: {}",
                offset_slot(owner.offset()),
                watcher.hello
            );
        }
    }
    drop(owners);
    assert!(squatter.stop().success());
}

#[test]
fn an_owners_windows_are_bounded_per_view() {
    // However many times an owner maps a window of its slab, in one process or (with CLONE_VM)
    // several: past the bound the mmap is refused, so ending the view stays short.
    for window in ["owner", "reader"] {
        let owner = Actor::start(
            "root",
            "map-many",
            &["0", window, &(2 * MAPPINGS_PER_VIEW).to_string()],
        );
        assert_eq!(
            owner.hello,
            format!("mapped {MAPPINGS_PER_VIEW} then=errno{}", libc::ENOMEM),
            "{window}"
        );
    }
}

#[test]
fn a_root_owner_that_lowers_its_privileges_and_executes_leaves_nothing_for_its_new_uid() {
    let _node = WorldWritableNode::new(DEVICE);
    let success = || {
        sysfs_counter(0, "status", "success", "total")
            + sysfs_counter(1, "status", "success", "total")
    };
    for (mode, new_image) in [("after-exec-idle", 0), ("after-exec", 666)] {
        // Root writes its marker into two counters (success on cores 0 and 1)...
        let before = success();
        let mut owner = Actor::start("root", "drop-exec", &["0", "555"]);
        assert!(owner.hello.starts_with("ready "), "{}", owner.hello);
        let pid = owner.pid.to_string();
        // ... becomes uid 1000, executes, and keeps its file open: dumpable again.
        let answer = owner.ask(&format!("exec {mode} 666")).unwrap();
        let mut reader = Actor::start("uid:1000", "watch", &["0", &pid]);
        if new_image == 0 {
            assert_eq!(answer, "idle euid=1000");
            // Root's tenure ended with the image that wrote it: nothing to read.
            assert_eq!(reader.hello, "acquire=ENOENT");
        } else {
            assert!(answer.starts_with("reacquired "), "{answer}");
            assert!(answer.ends_with(" euid=1000"), "{answer}");
            // The new image writes into a zeroed slab: its marker, nothing of root's.
            assert!(
                reader.hello.starts_with("watching 666 "),
                "{}",
                reader.hello
            );
            let scan = reader.scan();
            assert_eq!(scan.counter, 666);
            assert_eq!(
                scan.nonzero,
                nonzero_bytes(666) + nonzero_bytes(scan.generation),
                "only the new image's marker and the generation: {scan:?}"
            );
        }
        drop(reader);
        let owner_pid = owner.pid;
        assert!(owner.stop().success());
        eventually("the owner's slabs are released", || {
            slots().iter().all(|row| row.pid != owner_pid)
        });
        // Each tenure counted once, exactly: root's two 555, the new image's 666.
        assert_eq!(success() - before, 2 * 555 + new_image, "{mode}");
    }
}

#[test]
fn posts_are_read_only_through_a_file_opened_with_perfmon() {
    const CAP_PERFMON: u32 = 38;
    let _node = WorldWritableNode::new(DEVICE);
    let plain = Actor::start("uid:1001", "posts", &["0"]);
    assert_eq!(
        plain.hello,
        format!("posts read=EPERM poll={}", libc::POLLERR),
        "a post carries single processes' values"
    );
    for identity in [format!("uid:1001+cap:{CAP_PERFMON}"), "root".to_owned()] {
        let monitor = Actor::start(&identity, "posts", &["0"]);
        assert!(
            !monitor.hello.contains("EPERM")
                && !monitor.hello.ends_with(&format!("poll={}", libc::POLLERR)),
            "{identity}: {}",
            monitor.hello
        );
    }
}

/// `struct clone_args` of `clone3(2)`.
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Starts a process with pid `pid` (`clone3`'s `set_tid`, as checkpoint-restore tools do)
/// that waits until it is killed; `None` if the number is taken.
fn start_with_pid(pid: i32) -> Option<i32> {
    let tids = [pid];
    let args = CloneArgs {
        exit_signal: libc::SIGCHLD as u64,
        set_tid: tids.as_ptr() as u64,
        set_tid_size: 1,
        ..CloneArgs::default()
    };
    // SAFETY: a clone without CLONE_VM: the child has a copy of the address space, in which it
    // only waits for signals until it is killed.
    let child = unsafe { libc::syscall(libc::SYS_clone3, &args, std::mem::size_of::<CloneArgs>()) };
    match child {
        0 => loop {
            // SAFETY: waits for a signal; the child never returns from here.
            unsafe { libc::pause() };
        },
        -1 => None,
        child => Some(child as i32),
    }
}

#[test]
fn an_exited_owner_does_not_answer_for_its_reused_pid_number() {
    use neuron_ds_guest_tests::module_control::{reload_with, Restore};
    let _restore = Restore;
    // Without the metrics worker only an ACQUIRE of one's own slab reaps a dead owner.
    reload_with(&["metrics_period_ms=0"]);
    let file = open_device(DEVICE).unwrap();
    // A child owns a slab through our file, writes a marker and exits: the file lives on, so
    // no close releases the slab, whose owner is a dead group.
    // SAFETY: the child only makes system calls and then `_exit`s.
    let dead = unsafe { libc::fork() };
    if dead == 0 {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let owned =
            acquire(&file, 0).and_then(|info| Mapping::new(&file, SLAB_SIZE, rw, info.mmap_offset));
        let code = match owned {
            Ok(slab) => {
                slab.write_u64(nc_offset(0, 1), 4242);
                0
            }
            Err(_) => 1,
        };
        // SAFETY: ends the child without running the test harness's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: reaping our own child: its number is free from now on.
    unsafe { libc::waitpid(dead, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status:#x}"
    );
    assert!(
        slots().iter().any(|row| row.pid == dead),
        "the dead owner keeps its slot until it is reaped"
    );
    // Its number goes to a new process, which owns nothing: ACQUIRE by that number (root may
    // read anyone's) finds nothing, not the dead owner's slab.
    let heir = start_with_pid(dead).expect("the reaped number is free");
    let found = acquire(&file, dead);
    // SAFETY: killing and reaping our own child.
    unsafe {
        libc::kill(heir, libc::SIGKILL);
        libc::waitpid(heir, &mut status, 0);
    }
    assert_eq!(
        errno(found),
        libc::ENOENT,
        "a dead owner answered for its number"
    );
    // Our own ACQUIRE reaps the dead owner, with what it counted.
    let before = sysfs_counter(0, "status", "success", "present");
    acquire(&file, 0).unwrap();
    assert!(slots().iter().all(|row| row.pid != dead));
    assert_eq!(
        sysfs_counter(0, "status", "success", "present"),
        before + 4242
    );
    release(&file, 0).unwrap();
}
