//! The permission matrix: what the owner, root, the owner's uid, another uid, and another
//! uid holding only CAP_PERFMON or CAP_SYS_ADMIN may do with a slab owned by uid 1001:
//! ACQUIRE it, map it writable or executable, map it readable and mprotect that mapping,
//! RELEASE it. Each identity runs `ds-probe`, which switches to its credentials first; the
//! node is world-readable and -writable (mode 0666, as the original driver's udev rule makes
//! it), so every refusal is the module's rule.

use neuron_ds_guest_tests::{
    identity::Identity,
    module_control::{reload_with, Restore},
    *,
};
use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
};

const OWNER_UID: u32 = 1001;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_NET_BIND_SERVICE: u32 = 10;
fn probe_command(identity: Identity) -> Command {
    let mut command = Command::new(helper_path("ds-probe"));
    command.args([identity.text(), "0".into()]);
    command
}

/// Runs `ds-probe` as `identity` against `pid`; returns its outcome line and its CapEff.
fn probe(identity: Identity, pid: i32, offset: u64) -> (String, u64) {
    let output = probe_command(identity)
        .args([pid.to_string(), offset.to_string()])
        .output()
        .expect("run ds-probe");
    assert!(
        output.status.success(),
        "ds-probe as {identity:?}: {}",
        output.status
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let mut lines = text.lines();
    let outcomes = lines.next().unwrap_or_default().to_owned();
    let cap_eff = lines
        .next()
        .and_then(|l| l.strip_prefix("capeff="))
        .and_then(|v| u64::from_str_radix(v, 16).ok())
        .expect("capeff line");
    (outcomes, cap_eff)
}

/// A `ds-probe` holding its own slab as uid `OWNER_UID` until dropped.
struct Owner {
    child: Child,
    pid: i32,
    offset: u64,
}

impl Owner {
    fn start() -> Self {
        Self::start_as(Identity::User(OWNER_UID))
    }

    fn start_as(identity: Identity) -> Self {
        let mut child = probe_command(identity)
            .arg("hold")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the owner");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let offset = line
            .strip_prefix("ready ")
            .and_then(|o| o.trim().parse().ok());
        let offset = offset.unwrap_or_else(|| panic!("owner: {line:?}"));
        Self {
            pid: child.id() as i32,
            offset,
            child,
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

const READER: &str = "open=ok acquire=ok map_write=ok map_write_perms=r--s map_exec=EPERM \
                      map_read=ok mprotect_write=EACCES mprotect_exec=EACCES release=ok";
const REFUSED: &str = "open=ok acquire=EPERM map_write=EINVAL map_write_perms=- map_exec=EINVAL \
                       map_read=EINVAL mprotect_write=- mprotect_exec=- release=ok";

#[test]
fn the_permission_matrix_holds_for_every_identity() {
    let _mode = WorldWritableNode::new(DEVICE);
    let owner = Owner::start();
    let slot = offset_slot(owner.offset);
    let rows: [(&str, Identity, i32, &str, u64); 6] = [
        (
            "owner (its own slab)",
            Identity::User(OWNER_UID),
            0,
            "open=ok acquire=ok map_write=ok map_write_perms=rw-s map_exec=EPERM map_read=ok \
             mprotect_write=ok mprotect_exec=EACCES release=ok",
            0,
        ),
        ("root", Identity::Root, owner.pid, READER, u64::MAX),
        (
            "the owner's uid",
            Identity::User(OWNER_UID),
            owner.pid,
            READER,
            0,
        ),
        ("another uid", Identity::User(1002), owner.pid, REFUSED, 0),
        (
            "another uid + CAP_PERFMON",
            Identity::UserWithCap(1003, CAP_PERFMON),
            owner.pid,
            READER,
            1 << CAP_PERFMON,
        ),
        (
            "another uid + CAP_SYS_ADMIN",
            Identity::UserWithCap(1004, CAP_SYS_ADMIN),
            owner.pid,
            READER,
            1 << CAP_SYS_ADMIN,
        ),
    ];
    for (name, identity, pid, expected, caps) in rows {
        let (outcomes, cap_eff) = probe(identity, pid, owner.offset);
        println!("{name:<28} capeff={cap_eff:016x} {outcomes}");
        if caps == u64::MAX {
            assert_ne!(
                cap_eff & (1 << CAP_SYS_ADMIN),
                0,
                "{name}: root lacks CAP_SYS_ADMIN"
            );
        } else {
            assert_eq!(cap_eff, caps, "{name}: effective capabilities");
        }
        assert_eq!(
            outcomes,
            expected.split_whitespace().collect::<Vec<_>>().join(" "),
            "{name}"
        );
        // Nobody but the owner can take the slab away from it.
        assert_eq!(
            slots()[slot].pid,
            owner.pid,
            "{name}: the owner lost its slab"
        );
    }
    drop(owner);
    assert_eq!(slots()[slot].pid, 0, "the owner's exit released its slab");
}

/// Each `(name, identity, expected outcomes)` row, probed against `owner`'s slab.
fn assert_outcomes(owner: &Owner, rows: &[(&str, Identity, &str)]) {
    for &(name, identity, expected) in rows {
        let (outcomes, _) = probe(identity, owner.pid, owner.offset);
        assert_eq!(
            outcomes,
            expected.split_whitespace().collect::<Vec<_>>().join(" "),
            "{name}"
        );
    }
}

/// The capability module's part of the kernel's rule: an owner holding a capability its reader
/// lacks is not the reader's to read, same uid or not, unless the reader has `CAP_SYS_PTRACE`
/// (root) or `CAP_PERFMON`.
#[test]
fn an_owner_with_a_capability_the_reader_lacks_is_not_readable_by_its_uid() {
    let _mode = WorldWritableNode::new(DEVICE);
    let owner = Owner::start_as(Identity::UserWithCap(OWNER_UID, CAP_NET_BIND_SERVICE));
    let rows = [
        ("the owner's uid", Identity::User(OWNER_UID), REFUSED),
        (
            "the owner's uid + the same capability",
            Identity::UserWithCap(OWNER_UID, CAP_NET_BIND_SERVICE),
            READER,
        ),
        ("root", Identity::Root, READER),
        (
            "another uid + CAP_PERFMON",
            Identity::UserWithCap(1003, CAP_PERFMON),
            READER,
        ),
    ];
    assert_outcomes(&owner, &rows);
}

/// `attach_requires_perfmon=1`: the ptrace rule no longer lets anyone attach (the owner's uid
/// is refused), only `perfmon_capable()` does (root among them); an owner still gets and maps
/// its own slab.
#[test]
fn with_attach_requires_perfmon_only_perfmon_capable_readers_attach() {
    let _restore = Restore;
    reload_with(&["attach_requires_perfmon=1"]);
    // After the reload, which makes the node anew.
    let _mode = WorldWritableNode::new(DEVICE);
    let owner = Owner::start();
    let rows = [
        ("the owner's uid", Identity::User(OWNER_UID), REFUSED),
        ("another uid", Identity::User(1002), REFUSED),
        (
            "another uid + CAP_PERFMON",
            Identity::UserWithCap(1003, CAP_PERFMON),
            READER,
        ),
        (
            "another uid + CAP_SYS_ADMIN",
            Identity::UserWithCap(1004, CAP_SYS_ADMIN),
            READER,
        ),
    ];
    assert_outcomes(&owner, &rows);
    let (own, _) = probe(Identity::User(OWNER_UID), 0, owner.offset);
    assert!(
        own.starts_with("open=ok acquire=ok map_write=ok map_write_perms=rw-s"),
        "{own}"
    );
}
