//! Consumers that wait instead of polling on a timer: a blocked read of the metric posts wakes
//! at the next post, a non-blocking one gets EAGAIN, poll and edge-triggered epoll report
//! POLLIN and lose no wakeup; METRICS_CTRL pauses and resumes the posting; a sysfs counter
//! wakes its pollers (POLLPRI) as `info/notify_delay` says.

use nds_abi::metrics::{MetricKind, METRIC_DEFS, METRIC_POST_SIZE};
use neuron_ds_guest_tests::{
    module_control::{harness_params, reload_with, Restore},
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
    let period = period();
    let mut stream = File::open(DEVICE).unwrap();
    set_nonblocking(&stream, true);
    read_available_posts(&mut stream);
    set_nonblocking(&stream, false);
    let _churn = Churn::start();
    let mut buf = vec![0u8; 256 * METRIC_POST_SIZE];
    let started = Instant::now();
    let n = stream.read(&mut buf).unwrap();
    let waited = started.elapsed();
    assert!(n > 0 && n.is_multiple_of(METRIC_POST_SIZE));
    let posts: Vec<_> = buf[..n]
        .chunks_exact(METRIC_POST_SIZE)
        .map(|chunk| {
            <nds_abi::metrics::MetricPost as zerocopy::FromBytes>::read_from_bytes(chunk).unwrap()
        })
        .collect();
    // It woke at the first period that posted after it blocked, before the next one: every
    // post it got is of that one period.
    let first = posts[0].period;
    assert!(
        posts.iter().all(|post| post.period == first),
        "woke late: posts of periods {:?}",
        posts.iter().map(|p| p.period).collect::<Vec<_>>()
    );
    println!(
        "blocked {waited:?} (period {period:?}), woke with {} posts",
        posts.len()
    );
}

#[test]
fn with_posting_paused_a_nonblocking_read_is_eagain_and_nothing_is_readable() {
    let period = period();
    let _churn = Churn::start();
    let paused = Paused::new();
    // A period that ended before the pause has posted by now.
    thread::sleep(period * 2);
    let mut stream = open_posts(DEVICE).unwrap();
    read_available_posts(&mut stream);
    // Three periods with the counters moving: no post.
    thread::sleep(period * 3);
    let mut buf = vec![0u8; METRIC_POST_SIZE];
    let err = stream.read(&mut buf).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EAGAIN));
    assert_eq!(poll_one(&stream, libc::POLLIN, Duration::ZERO), 0);
    // Resumed: posts again, and poll says so within a few periods.
    drop(paused);
    let events = poll_one(&stream, libc::POLLIN, period * 4);
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

/// The most seconds it runs for if the posts come slower: `EVENT_STRESS_SECONDS`, 180 by
/// default (about 2,500 posts a second come under TCG on two idle cores: 40 s).
fn stress_seconds() -> u64 {
    std::env::var("EVENT_STRESS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180)
}

#[test]
fn edge_triggered_epoll_with_a_one_post_reader_loses_no_wakeup() {
    // The shortest period the kernel has (a jiffy at HZ=250), a producer changing every
    // counter metric, and a consumer in a tight loop: epoll_wait (edge-triggered), then reads
    // of one post each until EAGAIN. Every 100 ms the posting pauses; once nothing more can
    // come, the consumer must catch up with the last post without its wait timing out: a
    // missed wakeup leaves it asleep with a post unread.
    let _restore = Restore;
    reload_with(&["metrics_period_ms=4"]);
    let seen = Arc::new(AtomicU64::new(0));
    let last_seq = Arc::new(AtomicU64::new(0));
    let gaps = Arc::new(AtomicU64::new(0));
    let timeouts = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (seen, last_seq, gaps, timeouts, done) = (
            seen.clone(),
            last_seq.clone(),
            gaps.clone(),
            timeouts.clone(),
            done.clone(),
        );
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
                let n = unsafe { libc::epoll_wait(epoll, &mut ready, 1, 2000) };
                if n == 0 && !done.load(Ordering::Relaxed) {
                    timeouts.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let churn = Churn::start();
    let mut newest = open_posts(DEVICE).unwrap();
    let control = open_device(DEVICE).unwrap();
    let deadline = Instant::now() + Duration::from_secs(stress_seconds());
    let (mut rounds, mut lost, mut produced) = (0u64, 0u64, 0u64);
    while Instant::now() < deadline && produced < stress_posts() {
        thread::sleep(Duration::from_millis(100));
        metrics_ctrl(&control, METRICS_DISABLE).unwrap();
        // Five periods: the one running when the pause came has posted.
        thread::sleep(Duration::from_millis(20));
        if let Some(last) = read_available_posts(&mut newest).last() {
            produced = last.seq;
        }
        let caught_up = Instant::now() + Duration::from_secs(1);
        while last_seq.load(Ordering::Relaxed) < produced && Instant::now() < caught_up {
            thread::sleep(Duration::from_millis(1));
        }
        if last_seq.load(Ordering::Relaxed) < produced {
            lost += 1;
        }
        rounds += 1;
        metrics_ctrl(&control, METRICS_ENABLE).unwrap();
    }
    // The end: the last posts, then nothing more; the consumer reads up to the last one.
    drop(churn);
    metrics_ctrl(&control, METRICS_DISABLE).unwrap();
    thread::sleep(Duration::from_millis(20));
    if let Some(last) = read_available_posts(&mut newest).last() {
        produced = last.seq;
    }
    let caught_up = Instant::now() + Duration::from_secs(1);
    while last_seq.load(Ordering::Relaxed) < produced && Instant::now() < caught_up {
        thread::sleep(Duration::from_millis(1));
    }
    metrics_ctrl(&control, METRICS_ENABLE).unwrap();
    done.store(true, Ordering::Relaxed);
    consumer.join().unwrap();
    let seen = seen.load(Ordering::Relaxed);
    println!(
        "posts produced {produced}, seen {seen}, dropped by the ring {}, {rounds} quiet points, \
         {lost} with the consumer asleep on an unread post, {} wait timeouts",
        gaps.load(Ordering::Relaxed),
        timeouts.load(Ordering::Relaxed)
    );
    assert_eq!(lost, 0, "a wakeup was lost");
    assert_eq!(seen, produced, "every post since the reload was seen, once");
    assert_eq!(
        gaps.load(Ordering::Relaxed),
        0,
        "the consumer fell behind the ring"
    );
    assert!(seen > 1000, "the stress posted too little to mean anything");
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
    assert_eq!(poll_one(&total, pri, Duration::from_millis(600)) & pri, 0);
    {
        // At every change.
        let _delay = NotifyDelay::set(0);
        let total = armed_total();
        release_successes(3);
        assert_ne!(poll_one(&total, pri, Duration::from_secs(2)) & pri, 0);
        rearm(&total);
        release_successes(4);
        assert_ne!(poll_one(&total, pri, Duration::from_secs(2)) & pri, 0);
    }
    {
        // At most once per 3 s window: changes inside a window go out together at its end, so
        // two notifications are never less than the window apart.
        let _delay = NotifyDelay::set(3000);
        let total = armed_total();
        release_successes(1);
        assert_ne!(poll_one(&total, pri, Duration::from_secs(5)) & pri, 0);
        let first = Instant::now();
        rearm(&total);
        for count in [1, 2, 3] {
            release_successes(count);
        }
        assert_ne!(poll_one(&total, pri, Duration::from_secs(5)) & pri, 0);
        let apart = first.elapsed();
        assert!(
            apart >= Duration::from_millis(2900),
            "two notifications {apart:?} apart in a 3 s window"
        );
        rearm(&total);
        assert_eq!(
            poll_one(&total, pri, Duration::from_millis(500)) & pri,
            0,
            "the three releases of the window were one notification"
        );
    }
    {
        // A change waiting out a day's window goes out as soon as a shorter delay is set, not
        // a day later.
        let _delay = NotifyDelay::set(86_400_000);
        let total = armed_total();
        release_successes(2);
        assert_eq!(
            poll_one(&total, pri, Duration::from_millis(500)) & pri,
            0,
            "a day's window since the last notification is not over"
        );
        fs::write(&info, "0").unwrap();
        assert_ne!(
            poll_one(&total, pri, Duration::from_secs(2)) & pri,
            0,
            "the waiting change went out when the delay became 0"
        );
    }
}

#[test]
fn nds_metrics_prints_what_is_posted_and_with_follow_waits_for_the_next_post() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let period = period();
    let _churn = Churn::start();
    thread::sleep(period * 2);
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
