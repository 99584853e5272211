//! The tenure boundary: no byte of a slab reaches anyone after their right to it ends. Every
//! actor is a `ds-tenure` process under an identity of its own (uid 1000 and 1001 are two
//! unprivileged users), on a node everyone may open, so every refusal is the module's.

use neuron_ds_guest_tests::*;
use std::{
    io::{BufRead, BufReader, Write},
    os::unix::fs::PermissionsExt,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::Instant,
};

/// A running `ds-tenure`.
struct Actor {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pid: i32,
    /// Its first line.
    hello: String,
}

impl Actor {
    fn start(identity: &str, mode: &str, args: &[&str]) -> Self {
        let mut child = Command::new(helper_path("ds-tenure"))
            .arg(identity)
            .arg(mode)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start ds-tenure");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut hello = String::new();
        stdout.read_line(&mut hello).unwrap();
        assert!(
            !hello.is_empty(),
            "ds-tenure {identity} {mode} {args:?} said nothing"
        );
        Self {
            pid: child.id() as i32,
            stdin: child.stdin.take(),
            child,
            stdout,
            hello: hello.trim().to_owned(),
        }
    }

    /// An owner holding a slab with `marker` in it.
    fn owner(identity: &str, marker: u64) -> Self {
        let actor = Self::start(identity, "hold", &["0", &marker.to_string()]);
        assert!(actor.hello.starts_with("ready "), "{}", actor.hello);
        actor
    }

    fn offset(&self) -> u64 {
        let word = self.hello.split_whitespace().nth(1).unwrap();
        word.parse().unwrap()
    }

    /// Sends `command` and returns the answer line, if one comes (`None`: it exited).
    fn ask(&mut self, command: &str) -> Option<String> {
        writeln!(self.stdin.as_mut().unwrap(), "{command}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).ok()?;
        (!line.is_empty()).then(|| line.trim().to_owned())
    }

    /// The `scan` answer's fields.
    fn scan(&mut self) -> Scan {
        let line = self.ask("scan").expect("the scan ended the actor");
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{line}"))
        };
        Scan {
            nonzero: field("nonzero"),
            counter: field("counter"),
            generation: field("generation"),
        }
    }

    fn stop(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

impl Drop for Actor {
    fn drop(&mut self) {
        if self.stdin.take().is_some() {
            let _ = self.child.wait();
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Scan {
    nonzero: u64,
    counter: u64,
    generation: u64,
}

const NOTHING: Scan = Scan {
    nonzero: 0,
    counter: 0,
    generation: 0,
};

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
    // A set-uid-root copy of the helper, as a privileged runtime would be installed.
    let privileged = "/tmp/ds-tenure-setuid";
    std::fs::copy(helper_path("ds-tenure"), privileged).unwrap();
    std::os::unix::fs::chown(privileged, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(privileged, std::fs::Permissions::from_mode(0o4755)).unwrap();

    let mut owner = Actor::start("uid:1000", "exec-owner", &["0", "111"]);
    assert!(owner.hello.starts_with("ready "), "{}", owner.hello);
    let slot = offset_slot(owner.offset());
    let pid = owner.pid.to_string();
    // Before the exec, its user reads it.
    let mut before = Actor::start("uid:1000", "watch", &["0", &pid]);
    assert!(
        before.hello.starts_with("watching 111 "),
        "{}",
        before.hello
    );

    let answer = owner.ask(&format!("exec {privileged} 333")).unwrap();
    let mut words = answer.split_whitespace();
    assert_eq!(words.next(), Some("reacquired"), "{answer}");
    let offset: u64 = words.next().unwrap().parse().unwrap();
    assert_eq!(
        offset_slot(offset),
        slot,
        "the process keeps its one slab across the exec"
    );
    assert_eq!(words.next(), Some("euid=0"), "the exec made it privileged");

    // A new ACQUIRE by the old uid is refused: the owner's credentials are checked now.
    let after = Actor::start("uid:1000", "watch", &["0", &pid]);
    assert_eq!(after.hello, "acquire=EPERM");
    // The mapping made before the exec shows nothing the new image wrote.
    let seen = before.scan();
    assert_ne!(
        seen.counter, 333,
        "a pre-exec mapping read the privileged image's marker"
    );
    assert_eq!(seen, NOTHING);
    // Root still may (CAP_SYS_PTRACE), and sees the new image's marker.
    let root = Actor::start("root", "watch", &["0", &pid]);
    assert!(root.hello.starts_with("watching 333 "), "{}", root.hello);
    drop(root);
    drop(after);
    let owner_pid = owner.pid;
    assert!(owner.stop().success());
    assert!(slots().iter().all(|row| row.pid != owner_pid));
    std::fs::remove_file(privileged).unwrap();
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
fn a_handed_descriptor_stays_read_only_and_in_its_tenure_for_another_uid() {
    let _node = WorldWritableNode::new(DEVICE);
    let owner = Actor::owner("uid:1001", 9);
    let probe = Actor::start("root", "pass", &["0", &owner.pid.to_string(), "uid:1002"]);
    // The holder (a forked child that became another uid) can do with the descriptor what its
    // grant allows, reading only: a writable request is made read-only, mprotect and
    // /proc/self/mem cannot write, mremap keeps it read-only, the owner's window is refused;
    // and after the release, nothing.
    assert_eq!(
        probe.hello,
        "passed read=9 map_write=r--s mprotect_write=EACCES proc_mem_write=refused \
         mremap=r--s owner_window=EINVAL private_write=r--p"
    );
    let mut probe = probe;
    assert!(owner.stop().success());
    assert_ended_then_nothing(&mut probe, 9);
}
