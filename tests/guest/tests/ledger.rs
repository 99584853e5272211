//! The tenure ledger end to end: every way a tenure ends leaves one record, with what the
//! owner wrote and whom it was, readable in full by whom the tenure was readable and by
//! perfmon, redacted for anyone else; a ledger that overflows says what was lost; a record
//! names the owner's cgroup; `nds-ls --ledger` prints it and follows it; a follower whose
//! position is from before a reload of the module is told that the ledger started over.

use nds::{LedgerEvent, LedgerFollower};
use nds_abi::{
    counters::NcCounter,
    ledger::{TenureEnd, TenureRecord, LEDGER_CAPACITY},
    sysfs::SYSFS_COUNTERS,
};
use neuron_ds_guest_tests::{
    actor::Actor,
    module_control::{reload_with, Restore},
    *,
};
use std::{
    fs,
    os::{
        fd::{AsFd, AsRawFd},
        unix::fs::{FileExt, OpenOptionsExt},
    },
    path::Path,
    process::Command,
    time::Instant,
};

/// `CAP_PERFMON`.
const CAP_PERFMON: u32 = 38;

/// A follower of device 0's ledger from its current end on: what earlier tests left is read
/// and dropped.
fn follow_from_now() -> LedgerFollower {
    // Under `make coverage`, the thread reading the ledger collects what it reaches.
    kcov::follow_thread();
    let mut follower = LedgerFollower::open(Path::new(DEVICE), 0).unwrap();
    follower.read().unwrap();
    follower
}

/// Reads `follower` until `count` more records came (waiting for each); panics on a lost one.
fn next_records(follower: &mut LedgerFollower, count: usize) -> Vec<TenureRecord> {
    let deadline = Instant::now() + EVENTUALLY;
    let mut records = Vec::new();
    while records.len() < count {
        for event in follower.read().unwrap() {
            match event {
                LedgerEvent::Tenure(record) => records.push(*record),
                LedgerEvent::Lost { first, last } => panic!("records {first}..={last} lost"),
                LedgerEvent::Restarted => panic!("the ledger started over"),
            }
        }
        if records.len() >= count {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "{} of {count} records came", records.len());
        let mut pfd = libc::pollfd {
            fd: follower.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the call only.
        unsafe {
            libc::poll(
                &mut pfd,
                1,
                i32::try_from(left.as_millis()).unwrap_or(i32::MAX),
            )
        };
    }
    records
}

/// The index of sysfs counter node `name`.
fn node(name: &str) -> usize {
    SYSFS_COUNTERS.iter().position(|c| c.name == name).unwrap()
}

#[test]
fn every_way_a_tenure_ends_leaves_one_record_with_what_the_owner_wrote() {
    let mut ledger = follow_from_now();
    // (core, NC index, value): completed executions (InferCompleted) and timeouts.
    let completed = NcCounter::InferCompleted.index();
    let timeouts = NcCounter::InferTimedOut.index();
    let released = Producer::start(DEVICE, &[(0, completed, 10), (1, timeouts, 3)]).unwrap();
    let released_pid = released.pid;
    released.release_and_exit();
    let closed = Producer::start(DEVICE, &[(1, completed, 20)]).unwrap();
    let closed_pid = closed.pid;
    closed.exit();
    let killed = Producer::start(DEVICE, &[(0, completed, 30)]).unwrap();
    let killed_pid = killed.pid;
    killed.kill();
    // An owner through a file another process (this one) still holds: reaped once it exited,
    // by the next ACQUIRE.
    let file = open_device(DEVICE).unwrap();
    let status = in_child(|| {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        match acquire(&file, 0)
            .and_then(|info| Mapping::new(&file, SLAB_SIZE, rw, info.mmap_offset))
        {
            Ok(slab) => {
                slab.write_u64(nc_offset(0, completed), 40);
                0
            }
            Err(_) => 1,
        }
    });
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    acquire(&file, 0).unwrap();
    release(&file, 0).unwrap();
    let records = next_records(&mut ledger, 5);
    let expected = [
        (TenureEnd::Release, Some(released_pid), [10, 0], 3),
        (TenureEnd::LastClose, Some(closed_pid), [0, 20], 0),
        (TenureEnd::LastClose, Some(killed_pid), [30, 0], 0),
        (TenureEnd::Reaped, None, [40, 0], 0),
        (
            TenureEnd::Release,
            Some(std::process::id() as i32),
            [0, 0],
            0,
        ),
    ];
    assert!(
        records
            .windows(2)
            .all(|pair| pair[1].seq == pair[0].seq + 1),
        "contiguous"
    );
    for (record, (end, pid, done, timed_out)) in records.iter().zip(expected) {
        assert_eq!(record.ended_by(), Some(end), "{record:?}");
        assert!(!record.is_redacted());
        if let Some(pid) = pid {
            // Root's namespace sees the pid until the process is reaped; a reaped one is 0.
            assert!(
                record.pid == pid || record.pid == 0,
                "{} for {pid}",
                record.pid
            );
        }
        assert_eq!(record.uid, 0);
        assert_eq!(record.generation % 2, 1);
        assert!(record.started_ns <= record.ended_ns);
        assert_eq!(
            [
                record.counters[0][node("success")],
                record.counters[1][node("success")]
            ],
            done,
            "{end:?}"
        );
        assert_eq!(record.counters[1][node("timeout")], timed_out);
        assert_eq!(usize::from(record.core_count), sysfs_core_count(0));
    }
}

#[test]
fn a_record_is_whole_for_whom_the_tenure_was_readable_and_redacted_for_anyone_else() {
    let _node = WorldWritableNode::new(DEVICE);
    let mut ledger = follow_from_now();
    // A uid 1000 runtime that publishes its tag, through the nds library.
    let owner = Actor::start("uid:1000", "tagged", &["0", "bert-1000", "12"]);
    assert_eq!(owner.hello, "ready");
    let owner_pid = owner.pid;
    assert!(owner.stop().success());
    let seq = next_records(&mut ledger, 1)[0].seq.to_string();
    let whole = format!(
        "record seq={seq} end=release redacted=false pid={owner_pid} uid=1000 tag=bert-1000 \
         completed=12"
    );
    for (reader, expected) in [
        ("uid:1000".to_owned(), whole.clone()),
        (format!("uid:1001+cap:{CAP_PERFMON}"), whole.clone()),
        ("root".to_owned(), whole.clone()),
        (
            "uid:1001".to_owned(),
            format!("record seq={seq} end=release redacted=true pid=0 uid=0 tag=- completed=0"),
        ),
    ] {
        let actor = Actor::start(&reader, "ledger", &["0", &seq]);
        assert_eq!(actor.hello, expected, "{reader}");
    }
}

#[test]
fn an_overflowed_ledger_says_how_many_records_were_lost_and_loses_nothing_else() {
    let mut ledger = follow_from_now();
    let first = ledger.next();
    let extra = 5;
    for n in 0..LEDGER_CAPACITY + extra {
        Producer::start(DEVICE, &[(0, 1, n as u64 + 1)])
            .unwrap()
            .release_and_exit();
    }
    let events = ledger.read().unwrap();
    let lost: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            LedgerEvent::Lost { first, last } => Some((*first, *last)),
            LedgerEvent::Tenure(_) | LedgerEvent::Restarted => None,
        })
        .collect();
    // The follower had read up to `first - 1`: the ring kept the last 64 of the 69.
    let dropped = first.max(1)..=first.max(1) + extra as u64 - 1;
    assert_eq!(lost, [(*dropped.start(), *dropped.end())]);
    let records: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            LedgerEvent::Tenure(record) => Some(record),
            LedgerEvent::Lost { .. } | LedgerEvent::Restarted => None,
        })
        .collect();
    assert_eq!(records.len(), LEDGER_CAPACITY);
    assert!(records
        .windows(2)
        .all(|pair| pair[1].seq == pair[0].seq + 1));
    // The kept ones are the last 64 tenures, with what each wrote.
    for (record, n) in records.iter().zip(extra..) {
        assert_eq!(record.counters[0][node("success")], n as u64 + 1);
    }
}

#[test]
fn a_record_names_the_cgroup_its_owner_ran_in() {
    let root = Path::new("/sys/fs/cgroup");
    if !root.join("cgroup.procs").exists() {
        fs::create_dir_all(root).unwrap();
        run_command("mount", &["-t", "cgroup2", "none", "/sys/fs/cgroup"]);
    }
    let pod = "kubepods.slice/kubepods-pod4d1c0bd0_5e7a_4c3e_9b61_0123456789ab.slice";
    let dir = root.join(pod);
    fs::create_dir_all(&dir).unwrap();
    let mut ledger = follow_from_now();
    // The producer is in the pod's cgroup when it acquires: its shell moves itself there
    // before it becomes the producer.
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec {} {DEVICE} 0:1=5 </dev/null",
            dir.display(),
            helper_path("ds-producer")
        ))
        .status()
        .unwrap();
    assert!(status.success());
    let record = &next_records(&mut ledger, 1)[0];
    assert_eq!(
        String::from_utf8_lossy(record.cgroup_path()),
        format!("/{pod}"),
        "{record:?}"
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(record.cgroup_id, fs::metadata(&dir).unwrap().ino());
    fs::remove_dir(&dir).unwrap();
    fs::remove_dir(dir.parent().unwrap()).unwrap();
}

/// A cgroup path longer than a record holds is cut to what it holds, and flagged so.
#[test]
fn a_cgroup_path_too_long_for_the_record_is_cut_and_says_so() {
    let root = Path::new("/sys/fs/cgroup");
    if !root.join("cgroup.procs").exists() {
        fs::create_dir_all(root).unwrap();
        run_command("mount", &["-t", "cgroup2", "none", "/sys/fs/cgroup"]);
    }
    // Three levels of 100 characters: 303 bytes with the slashes.
    let levels: Vec<String> = (0..3).map(|level| format!("{level}").repeat(100)).collect();
    let mut dir = root.to_path_buf();
    for level in &levels {
        dir.push(level);
    }
    fs::create_dir_all(&dir).unwrap();
    let mut ledger = follow_from_now();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec {} {DEVICE} 0:1=5 </dev/null",
            dir.display(),
            helper_path("ds-producer")
        ))
        .status()
        .unwrap();
    assert!(status.success());
    let record = &next_records(&mut ledger, 1)[0];
    let full = format!("/{}", levels.join("/"));
    let kept = record.cgroup_path();
    assert_eq!(kept.len(), nds_abi::ledger::TENURE_CGROUP_PATH_SIZE - 1);
    assert_eq!(kept, &full.as_bytes()[..kept.len()], "the path's beginning");
    assert_ne!(
        record.flags & nds_abi::ledger::TENURE_CGROUP_CUT,
        0,
        "{record:?}"
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        record.cgroup_id,
        fs::metadata(&dir).unwrap().ino(),
        "the id is whole"
    );
    while dir != root {
        fs::remove_dir(&dir).unwrap();
        dir.pop();
    }
}

/// The tag a record carries is the one the owner published, at every length a tag may have.
#[test]
fn a_records_tag_is_the_published_tag_at_every_length() {
    let mut ledger = follow_from_now();
    for length in 1..nds_abi::records::NDS_PROCESS_INFO_TAG_SIZE {
        let tag: String = (0..length)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let owner = Actor::start("root", "tagged", &["0", &tag, "1"]);
        assert_eq!(owner.hello, "ready");
        owner.stop();
        let record = &next_records(&mut ledger, 1)[0];
        assert_eq!(record.tag(), Some(tag.as_bytes()), "length {length}");
    }
}

/// Runs `program` with `args`; panics unless it succeeds.
fn run_command(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} {args:?}: {status}");
}

#[test]
fn nds_ls_prints_the_ledger_and_follows_it() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    Producer::start(DEVICE, &[(0, 1, 7)])
        .unwrap()
        .release_and_exit();
    let once = Command::new(helper_path("nds-ls"))
        .args(["--ledger", "--output-format", "json"])
        .output()
        .unwrap();
    assert!(
        once.status.success(),
        "{}",
        String::from_utf8_lossy(&once.stderr)
    );
    let text = String::from_utf8(once.stdout).unwrap();
    let last: serde_json::Value = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .rfind(|object| object["device"] == 0)
        .unwrap();
    assert_eq!(last["neuroncores"]["0"]["success"], 7, "{last}");
    let seq = last["seq"].as_u64().unwrap();
    // Following: the next tenure's line comes as it ends.
    let mut follow = Command::new(helper_path("nds-ls"))
        .args(["--ledger", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let header = lines.next().unwrap().unwrap();
    assert!(header.starts_with("DEVICE  SEQ"), "{header}");
    Producer::start(DEVICE, &[(0, 1, 9)])
        .unwrap()
        .release_and_exit();
    let wanted = (seq + 1).to_string();
    let line = lines
        .map(Result::unwrap)
        .find(|line| {
            let mut words = line.split_whitespace();
            words.next() == Some("0") && words.next() == Some(wanted.as_str())
        })
        .unwrap();
    follow.kill().unwrap();
    follow.wait().unwrap();
    assert!(line.contains("release"), "{line}");
    assert!(line.split_whitespace().any(|word| word == "9"), "{line}");
}

/// A position kept across a reload of the module (a follower that closed the node of an idle
/// device and opens it again) is beyond the new ledger's next record: the kernel refuses it
/// rather than make the reader wait for numbers that the new ledger reaches only after
/// records the reader would then have skipped; the follower says so and reads the new
/// ledger from its first record.
#[test]
fn a_follower_from_before_a_reload_is_told_the_ledger_started_over() {
    let _restore = Restore;
    let mut follower = follow_from_now();
    for n in 1..=3 {
        Producer::start(DEVICE, &[(0, 1, n)])
            .unwrap()
            .release_and_exit();
    }
    next_records(&mut follower, 3);
    let position = follower.next();
    assert!(position > 3, "three records at least: next {position}");
    drop(follower);
    reload_with(&[]);

    // The new ledger is empty: 1 is its next record, anything past it no position it gave.
    let raw = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(DEVICE)
        .unwrap();
    // SAFETY: FOLLOW_LEDGER takes no argument.
    let rc = unsafe {
        libc::ioctl(
            raw.as_raw_fd(),
            nds_abi::ledger::NDS_IOCTL_FOLLOW_LEDGER as libc::Ioctl,
        )
    };
    assert_eq!(rc, 0, "FOLLOW_LEDGER");
    let mut buffer = vec![0; nds_abi::ledger::TENURE_RECORD_SIZE];
    let error = raw.read_at(&mut buffer, position).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::ERANGE), "{error}");
    // The next record to come is no error: a non-blocking read of it would wait.
    let error = raw.read_at(&mut buffer, 1).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EAGAIN), "{error}");
    drop(raw);

    let mut follower = LedgerFollower::open(Path::new(DEVICE), position).unwrap();
    for n in 1..=2 {
        Producer::start(DEVICE, &[(0, 1, n * 10)])
            .unwrap()
            .release_and_exit();
    }
    let deadline = Instant::now() + EVENTUALLY;
    let mut events = Vec::new();
    while events
        .iter()
        .filter(|e| matches!(e, LedgerEvent::Tenure(_)))
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "{events:?}");
        events.extend(follower.read().unwrap());
    }
    assert!(matches!(events[0], LedgerEvent::Restarted), "{events:?}");
    let records: Vec<_> = events[1..]
        .iter()
        .map(|event| match event {
            LedgerEvent::Tenure(record) => (record.seq, record.counters[0][node("success")]),
            other => panic!("{other:?} after the restart"),
        })
        .collect();
    assert_eq!(records, [(1, 10), (2, 20)]);
}
