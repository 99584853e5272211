//! Consumers that wait instead of polling on a timer: a blocked read of the metric posts wakes
//! at the next post, a non-blocking one gets EAGAIN, poll and edge-triggered epoll report
//! POLLIN and lose no wakeup; METRICS_CTRL pauses and resumes the posting; a sysfs counter
//! wakes its pollers (POLLPRI) as `info/notify_delay` says.

use nds_abi::metrics::{MetricKind, METRIC_DEFS, METRIC_POST_SIZE};
use neuron_ds_guest_tests::{
    module_control::{harness_params, reload_with, Restore},
    posts::posts_until,
    *,
};
use std::{
    fs::{self, File},
    io::Read,
    os::{fd::AsRawFd, unix::fs::FileExt},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant},
};

/// The harness's metrics period.
fn period() -> Duration {
    let ms: u64 = harness_params()
        .iter()
        .find_map(|p| p.strip_prefix("metrics_period_ms="))
        .and_then(|ms| ms.parse().ok())
        .expect("the harness loads the module with a short metrics period");
    Duration::from_millis(ms)
}

/// An owned slab whose counter metrics (every NC counter a CloudWatch counter is made of) go
/// up all the time, so that every period posts, until dropped.
struct Churn {
    stop: Arc<AtomicBool>,
    writer: Option<thread::JoinHandle<()>>,
}

impl Churn {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let writer = thread::spawn(move || {
            let file = open_device(DEVICE).unwrap();
            let info = acquire(&file, 0).unwrap();
            let rw = libc::PROT_READ | libc::PROT_WRITE;
            let slab = Mapping::new(&file, SLAB_SIZE, rw, info.mmap_offset).unwrap();
            let counters: Vec<usize> = METRIC_DEFS
                .iter()
                .filter_map(|def| match def.kind {
                    MetricKind::Counter(source) => Some(nc_offset(0, source.index())),
                    _ => None,
                })
                .collect();
            ready_tx.send(()).unwrap();
            while !stopping.load(Ordering::Relaxed) {
                for &offset in &counters {
                    slab.atomic_u64(offset).fetch_add(1, Ordering::Relaxed);
                }
                thread::sleep(Duration::from_millis(1));
            }
            drop(slab);
            release(&file, 0).unwrap();
        });
        ready_rx.recv().unwrap();
        Self {
            stop,
            writer: Some(writer),
        }
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// Sets the file's `O_NONBLOCK`.
fn set_nonblocking(file: &File, on: bool) {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        let flags = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        assert_eq!(libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags), 0);
    }
}

/// `poll()` of one descriptor for `events`; the events returned (0 on timeout).
fn poll_one(file: &File, events: i16, timeout: Duration) -> i16 {
    let mut pfd = libc::pollfd {
        fd: file.as_raw_fd(),
        events,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap();
    // SAFETY: one valid pollfd.
    let ret = unsafe { libc::poll(&mut pfd, 1, ms) };
    assert!(ret >= 0, "poll: {}", std::io::Error::last_os_error());
    pfd.revents
}

/// Pauses the device's posting until dropped.
struct Paused(File);

impl Paused {
    fn new() -> Self {
        let file = open_device(DEVICE).unwrap();
        metrics_ctrl(&file, METRICS_DISABLE).unwrap();
        Self(file)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = metrics_ctrl(&self.0, METRICS_ENABLE);
    }
}

#[test]
fn a_blocked_read_wakes_at_the_first_post_after_it() {
    let mut stream = File::open(DEVICE).unwrap();
    set_nonblocking(&stream, true);
    let position = read_available_posts(&mut stream)
        .last()
        .map(|post| post.seq);
    set_nonblocking(&stream, false);
    let (woke, waking) = std::sync::mpsc::channel();
    let reader = thread::spawn(move || {
        let mut buf = vec![0u8; 256 * METRIC_POST_SIZE];
        let n = stream.read(&mut buf).unwrap();
        let _ = woke.send(());
        buf.truncate(n);
        buf
    });
    let mut watch = open_posts(DEVICE).unwrap();
    read_available_posts(&mut watch);
    let churn = Churn::start();
    // Once a post is made, no more: a reader not woken by that one post would sleep on.
    posts_until(&mut watch, "a post while the counters move", |posts| {
        !posts.is_empty()
    });
    let paused = Paused::new();
    drop(churn);
    let woken = waking.recv_timeout(EVENTUALLY);
    drop(paused);
    assert!(
        woken.is_ok(),
        "the blocked read slept on with a post unread"
    );
    let buf = reader.join().unwrap();
    assert!(!buf.is_empty() && buf.len().is_multiple_of(METRIC_POST_SIZE));
    let posts: Vec<_> = buf
        .chunks_exact(METRIC_POST_SIZE)
        .map(|chunk| {
            <nds_abi::metrics::MetricPost as zerocopy::FromBytes>::read_from_bytes(chunk).unwrap()
        })
        .collect();
    // It returned the posts from its position on: the first one made after it blocked.
    if let Some(position) = position {
        assert_eq!(posts[0].seq, position + 1, "the read skipped a post");
    }
    assert!(
        posts.windows(2).all(|pair| pair[1].seq == pair[0].seq + 1),
        "posts in order, none left out"
    );
    println!("woke with {} posts", posts.len());
}

#[test]
fn with_posting_paused_a_nonblocking_read_is_eagain_and_nothing_is_readable() {
    let period = period();
    let _churn = Churn::start();
    // The posting takes the lock the pause is taken under: from here on no period posts.
    let paused = Paused::new();
    let mut stream = open_posts(DEVICE).unwrap();
    read_available_posts(&mut stream);
    // What is tested is that nothing comes: three periods' worth of time with the counters
    // moving, and no post (a slower guest only makes the check weaker, never wrong).
    thread::sleep(period * 3);
    let mut buf = vec![0u8; METRIC_POST_SIZE];
    let err = stream.read(&mut buf).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EAGAIN));
    assert_eq!(poll_one(&stream, libc::POLLIN, Duration::ZERO), 0);
    // Resumed: posts again, and poll says so.
    drop(paused);
    let events = poll_one(&stream, libc::POLLIN, EVENTUALLY);
    assert_ne!(events & libc::POLLIN, 0, "no post after the resume");
    assert!(!read_available_posts(&mut stream).is_empty());
    let file = open_device(DEVICE).unwrap();
    assert_eq!(errno(metrics_ctrl(&file, 2)), libc::EINVAL);
}

/// Posts the edge-triggered stress runs for: `EVENT_STRESS_POSTS`, 10^5 by default.
fn stress_posts() -> u64 {
    std::env::var("EVENT_STRESS_POSTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000)
}

/// The seconds after which it stops short of [`stress_posts`] if the posts come slower, once it
/// has [`MEANINGFUL_POSTS`]: `EVENT_STRESS_SECONDS`, 180 by default (about 2,500 posts a second
/// come under TCG on two idle cores: 40 s).
fn stress_seconds() -> u64 {
    std::env::var("EVENT_STRESS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180)
}

/// Posts below which the stress means nothing, however long they take to come.
const MEANINGFUL_POSTS: u64 = 1000;

#[test]
fn edge_triggered_epoll_with_a_one_post_reader_loses_no_wakeup() {
    // The shortest period the kernel has (a jiffy at HZ=250), a producer changing every
    // counter metric, and a consumer in a tight loop: epoll_wait (edge-triggered, no timeout),
    // then reads of one post each until EAGAIN. Every 100 ms the posting pauses; once nothing
    // more can come, the consumer must catch up with the last post: a missed wakeup leaves it
    // asleep with a post unread for good, which the wait for it calls a hang.
    let _restore = Restore;
    reload_with(&["metrics_period_ms=4"]);
    let seen = Arc::new(AtomicU64::new(0));
    let last_seq = Arc::new(AtomicU64::new(0));
    let gaps = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    // Written to when the consumer is to stop: it wakes the consumer's epoll_wait.
    // SAFETY: a plain eventfd call.
    let stop = unsafe { libc::eventfd(0, 0) };
    assert!(stop >= 0, "eventfd: {}", std::io::Error::last_os_error());
    let consumer = {
        let (seen, last_seq, gaps, done) =
            (seen.clone(), last_seq.clone(), gaps.clone(), done.clone());
        thread::spawn(move || {
            let mut stream = open_posts(DEVICE).unwrap();
            // SAFETY: plain epoll calls on descriptors we own.
            let epoll = unsafe { libc::epoll_create1(0) };
            assert!(epoll >= 0);
            let mut event = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLET) as u32,
                u64: 0,
            };
            // SAFETY: as above.
            let added = unsafe {
                libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, stream.as_raw_fd(), &mut event)
            };
            assert_eq!(added, 0);
            let mut stopping = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: 1,
            };
            // SAFETY: as above.
            let added = unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, stop, &mut stopping) };
            assert_eq!(added, 0);
            let mut one = vec![0u8; METRIC_POST_SIZE];
            while !done.load(Ordering::Relaxed) {
                loop {
                    match stream.read(&mut one) {
                        Ok(n) => {
                            assert_eq!(n, METRIC_POST_SIZE);
                            let seq = u64::from_ne_bytes(one[..8].try_into().unwrap());
                            let previous = last_seq.swap(seq, Ordering::Relaxed);
                            if previous != 0 && seq != previous + 1 {
                                gaps.fetch_add(seq - previous - 1, Ordering::Relaxed);
                            }
                            seen.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => panic!("read: {e}"),
                    }
                }
                let mut ready = libc::epoll_event { events: 0, u64: 0 };
                // SAFETY: one event buffer.
                let n = unsafe { libc::epoll_wait(epoll, &mut ready, 1, -1) };
                assert!(
                    n >= 0
                        || std::io::Error::last_os_error().kind()
                            == std::io::ErrorKind::Interrupted,
                    "epoll_wait: {}",
                    std::io::Error::last_os_error()
                );
            }
        })
    };
    let churn = Churn::start();
    let mut newest = open_posts(DEVICE).unwrap();
    let control = open_device(DEVICE).unwrap();
    // Once paused, nothing more is posted (the pause is taken under the posting's lock): the
    // newest post is the last, and the consumer must get to it.
    let quiet_point = |newest: &mut File, produced: &mut u64| {
        metrics_ctrl(&control, METRICS_DISABLE).unwrap();
        if let Some(last) = read_available_posts(newest).last() {
            *produced = last.seq;
        }
        eventually("the consumer reads up to the last post", || {
            last_seq.load(Ordering::Relaxed) >= *produced
        });
    };
    let started = Instant::now();
    let enough = |produced: u64| {
        produced >= stress_posts()
            || (started.elapsed() >= Duration::from_secs(stress_seconds())
                && produced >= MEANINGFUL_POSTS)
    };
    let (mut rounds, mut produced) = (0u64, 0u64);
    while !enough(produced) {
        // The workload: 100 ms of posts between two quiet points.
        thread::sleep(Duration::from_millis(100));
        quiet_point(&mut newest, &mut produced);
        rounds += 1;
        metrics_ctrl(&control, METRICS_ENABLE).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(stress_seconds()) + EVENTUALLY,
            "{produced} posts in {:?}: the posting stalled",
            started.elapsed()
        );
    }
    // The end: the last posts, then nothing more; the consumer reads up to the last one.
    drop(churn);
    quiet_point(&mut newest, &mut produced);
    metrics_ctrl(&control, METRICS_ENABLE).unwrap();
    done.store(true, Ordering::Relaxed);
    // SAFETY: an eight-byte write to the eventfd made above.
    let woke = unsafe { libc::write(stop, 1u64.to_ne_bytes().as_ptr().cast(), 8) };
    assert_eq!(woke, 8);
    consumer.join().unwrap();
    // SAFETY: the eventfd is ours and nothing uses it any more.
    unsafe { libc::close(stop) };
    let seen = seen.load(Ordering::Relaxed);
    println!(
        "posts produced {produced}, seen {seen}, dropped by the ring {}, {rounds} quiet points",
        gaps.load(Ordering::Relaxed),
    );
    assert_eq!(seen, produced, "every post since the reload was seen, once");
    assert_eq!(
        gaps.load(Ordering::Relaxed),
        0,
        "the consumer fell behind the ring"
    );
    assert!(
        seen >= MEANINGFUL_POSTS,
        "the stress posted too little to mean anything"
    );
}

/// `info/notify_delay` of device 0 for the test, -1 again afterwards.
struct NotifyDelay;

impl NotifyDelay {
    fn set(ms: i64) -> Self {
        fs::write(
            format!("{}/info/notify_delay", sysfs_device(0)),
            ms.to_string(),
        )
        .unwrap();
        Self
    }
}

impl Drop for NotifyDelay {
    fn drop(&mut self) {
        let _ = fs::write(format!("{}/info/notify_delay", sysfs_device(0)), "-1");
    }
}

/// The success total of core 0, opened and read once (which arms its poll).
fn armed_total() -> File {
    let path = format!(
        "{}/neuron_core0/stats/status/success/total",
        sysfs_device(0)
    );
    let file = File::open(path).unwrap();
    rearm(&file);
    file
}

/// Reads the file from its start again, as a poller does after an event.
fn rearm(file: &File) {
    let mut buf = [0u8; 64];
    file.read_at(&mut buf, 0).unwrap();
}

/// A release that adds `count` successes on core 0.
fn release_successes(count: u64) {
    Producer::start(DEVICE, &[(0, 1, count)])
        .unwrap()
        .release_and_exit();
}

#[test]
fn a_counters_pollers_are_woken_as_notify_delay_says() {
    let pri = libc::POLLPRI;
    let info = format!("{}/info/notify_delay", sysfs_device(0));
    assert_eq!(
        fs::read_to_string(&info).unwrap().trim(),
        "-1",
        "off by default"
    );
    for bad in [
        "-2",
        "+5",
        "x",
        "86400001",
        "1.5",
        "4294967296",
        "99999999999",
    ] {
        assert!(fs::write(&info, bad).is_err(), "notify_delay took {bad:?}");
    }
    // Off: a release changes the total, and nobody is woken.
    let total = armed_total();
    release_successes(3);
    // What is tested is that nothing comes (a slower guest only makes it a weaker check).
    assert_eq!(poll_one(&total, pri, Duration::from_millis(600)) & pri, 0);
    {
        // At every change.
        let _delay = NotifyDelay::set(0);
        let total = armed_total();
        release_successes(3);
        assert_ne!(poll_one(&total, pri, EVENTUALLY) & pri, 0);
        rearm(&total);
        release_successes(4);
        assert_ne!(poll_one(&total, pri, EVENTUALLY) & pri, 0);
    }
    {
        // At most once per 3 s window: a change inside a window goes out at its end. The first
        // notification went out after the first release began and the second at least a window
        // after the first, so at least a window after the first release began, however late
        // this thread woke for either.
        let _delay = NotifyDelay::set(3000);
        let total = armed_total();
        let began = Instant::now();
        release_successes(1);
        assert_ne!(poll_one(&total, pri, EVENTUALLY) & pri, 0);
        rearm(&total);
        release_successes(2);
        assert_ne!(poll_one(&total, pri, EVENTUALLY) & pri, 0);
        let apart = began.elapsed();
        assert!(
            apart >= Duration::from_millis(2900),
            "two notifications within {apart:?}, in a 3 s window"
        );
    }
    {
        // The changes of one window go out together, and a change waiting out a day's window
        // goes out as soon as a shorter delay is set, not a day later.
        let _delay = NotifyDelay::set(86_400_000);
        let total = armed_total();
        for count in [1, 2, 3] {
            release_successes(count);
        }
        assert_eq!(
            poll_one(&total, pri, Duration::from_millis(500)) & pri,
            0,
            "a day's window since the last notification is not over"
        );
        fs::write(&info, "0").unwrap();
        assert_ne!(
            poll_one(&total, pri, EVENTUALLY) & pri,
            0,
            "the waiting changes went out when the delay became 0"
        );
        rearm(&total);
        assert_eq!(
            poll_one(&total, pri, Duration::from_millis(500)) & pri,
            0,
            "the three releases of the window were one notification"
        );
    }
}

#[test]
fn nds_metrics_prints_what_is_posted_and_with_follow_waits_for_the_next_post() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let _churn = Churn::start();
    let mut stream = open_posts(DEVICE).unwrap();
    posts_until(&mut stream, "a post while the counters move", |posts| {
        !posts.is_empty()
    });
    // Without --follow: what is there, then it exits (the read does not wait).
    let once = Command::new(helper_path("nds-metrics")).output().unwrap();
    assert!(
        once.status.success(),
        "{}",
        String::from_utf8_lossy(&once.stderr)
    );
    let lines = String::from_utf8(once.stdout).unwrap();
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    let last_seq = last["seq"].as_u64().unwrap();
    // With --follow it blocks in read and prints each post as the module posts it.
    let mut follow = Command::new(helper_path("nds-metrics"))
        .arg("--follow")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(follow.stdout.take().unwrap());
    let mut newer = None;
    for line in (&mut out).lines() {
        let post: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if post["seq"].as_u64().unwrap() > last_seq {
            newer = Some(post);
            break;
        }
    }
    follow.kill().unwrap();
    follow.wait().unwrap();
    assert!(newer.is_some(), "no post after {last_seq}");
}
