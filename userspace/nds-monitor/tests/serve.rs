//! `nds-monitor serve` as an exporter: what each path and method answers, that hostile
//! clients (slowloris, one that never reads, a 256 MiB request line) stop no scrape and grow
//! no memory, that scrapes change nothing, HTTPS with a certificate, `/healthz` following the
//! sampling loop, and a clean exit on SIGTERM.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// `nds-monitor serve` over the scratch directory, every group every `period`.
fn serve(scratch: &Scratch, period: &str, extra: &[&str]) -> Served {
    Served::start(
        scratch
            .monitor_command(period)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra),
    )
}

/// The resident set of process `pid`, in KiB.
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// The value of the sample line starting with `prefix` (name and the labels up to a point).
fn sample(body: &str, prefix: &str) -> Option<f64> {
    body.lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

#[test]
fn paths_methods_and_malformed_requests() {
    let scratch = Scratch::new("serve-paths");
    produce(&scratch.slabs(), 0, 6001, "paths", 50);
    let served = serve(&scratch, "200ms", &[]);
    let address = served.address.clone();

    let metrics = served.get("/metrics");
    assert!(metrics.status.contains(" 200 "), "{metrics:?}");
    // A query string is the same exposition (scrapers add their own parameters).
    let queried = served.get("/metrics?target=x&module=y");
    assert!(queried.status.contains(" 200 "), "{queried:?}");
    assert!(queried.body.contains("nds_runtime_info{"));
    let head = request(&address, "HEAD", "/metrics").unwrap();
    assert!(head.status.contains(" 200 "), "{head:?}");
    assert!(head.body.is_empty(), "HEAD has no body");
    let health = served.get("/healthz");
    assert!(health.status.contains(" 200 "), "{health:?}");
    assert_eq!(health.body, "ok\n");
    let health_head = request(&address, "HEAD", "/healthz?probe=1").unwrap();
    assert!(health_head.status.contains(" 200 "), "{health_head:?}");
    let index = served.get("/");
    assert!(index.body.contains("/metrics"), "{index:?}");
    assert!(served.get("/metrics/x").status.contains(" 404 "));

    let post = request(&address, "POST", "/metrics").unwrap();
    assert!(post.status.contains(" 405 "), "{post:?}");
    assert_eq!(post.header("allow"), Some("GET, HEAD"));

    // Headers beyond 8 KiB: 431; a request line that is not HTTP: 400.
    let big = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Filler: {}\r\n\r\n",
        "a".repeat(16 * 1024)
    );
    let refused = exchange(&address, &big).unwrap();
    assert!(refused.status.contains(" 431 "), "{refused:?}");
    let garbage = exchange(&address, "\x01\x02 nonsense\r\n\r\n").unwrap();
    assert!(garbage.status.contains(" 400 "), "{garbage:?}");

    // Keep-alive: two requests on one connection, two answers.
    let mut stream = TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut both = String::new();
    stream.read_to_string(&mut both).unwrap();
    assert_eq!(both.matches("HTTP/1.1 200 OK").count(), 2, "{both}");

    let status = served.stop_with(libc::SIGTERM);
    assert!(status.success(), "SIGTERM ends serve with {status}");
}

#[test]
fn scrapes_read_the_published_exposition_and_change_nothing() {
    let scratch = Scratch::new("serve-readonly");
    produce(&scratch.slabs(), 0, 6101, "readonly", 50);
    // A long period: between two reports, every scrape sees one and the same exposition.
    let served = serve(&scratch, "3s", &[]);
    let reports = |body: &str| sample(body, "nds_monitor_reports_total{");
    // The monitor's own process metrics change between renders only.
    let strip = |body: &str| -> String {
        body.lines()
            .filter(|line| !line.starts_with("process_"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Five scrapes in a row of one report, each the same as the first of that report. A
    // report the monitor's schedule brings in between starts the count again; a server whose
    // scrapes made reports would never get there.
    let mut first = served.scrape_until(|body| reports(body).is_some());
    let mut same = 1;
    let deadline = Instant::now() + Duration::from_secs(60);
    while same < 5 {
        assert!(
            Instant::now() < deadline,
            "never five scrapes of one report: {same} of report {:?}",
            reports(&first)
        );
        let body = served.get("/metrics").body;
        let (now, then) = (reports(&body), reports(&first));
        if now != then {
            assert!(
                now > then,
                "the report number went from {then:?} to {now:?}"
            );
            (first, same) = (body, 1);
            continue;
        }
        assert_eq!(strip(&body), strip(&first), "a scrape changed nothing");
        same += 1;
    }
}

/// Whether the peer of `stream` hung up on it (closed or reset it) within `within`, seen
/// without reading from it (a read would take what the peer sent, as a client that reads).
fn hung_up_within(stream: &TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut poll = libc::pollfd {
            fd: stream.as_raw_fd(),
            events: libc::POLLRDHUP,
            revents: 0,
        };
        let timeout = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd, on a socket this function borrows.
        let ready = unsafe { libc::poll(&mut poll, 1, timeout) };
        if ready > 0 {
            return poll.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0;
        }
        // A signal interrupted the wait: wait on, unless the time is up.
        if ready == 0 || left.is_zero() {
            return false;
        }
    }
}

/// Whether a write failed because the peer refused it (closed or reset the connection), not
/// because it waited too long.
fn refused(error: &std::io::Error) -> bool {
    !matches!(
        error.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// The server's shortest deadline for a hostile client (a request's head, a response's
/// reading: 10 s each, `serve/http.rs`): a scrape that waited behind such a client would take
/// about that long, an answered one takes milliseconds.
const HOSTILE_DEADLINE: Duration = Duration::from_secs(10);

#[test]
fn hostile_clients_stop_no_scrape_and_grow_no_memory() {
    let scratch = Scratch::new("serve-hostile");
    for pid in 0..8 {
        produce(
            &scratch.slabs(),
            0,
            6201 + pid,
            &format!("hostile-{pid}"),
            100,
        );
    }
    let served = serve(&scratch, "500ms", &[]);
    let address = served.address.clone();
    let pid = served.pid();
    served.scrape_until(|body| body.contains("\nneuroncore_utilization_ratio{"));
    let rss_before = rss_kib(pid);

    // Slowloris: one byte of a request every 2 s, for ever; the server must hang up on it.
    // Its own bound (a minute) only ends a test whose server never does.
    let slowloris = {
        let address = address.clone();
        std::thread::spawn(move || {
            let mut stream = TcpStream::connect(&address).unwrap();
            let started = Instant::now();
            for byte in b"GET /metrics HTTP/1.1\r\nHost: slow\r\n".iter().cycle() {
                if stream.write_all(&[*byte]).is_err() {
                    return Some(started.elapsed());
                }
                if started.elapsed() > Duration::from_secs(60) {
                    return None;
                }
                // The client's pace is what is tested (not synchronisation): bytes that come
                // slower than any idle timeout would notice, and never a whole head.
                std::thread::sleep(Duration::from_secs(2));
            }
            unreachable!("the request cycles for ever")
        })
    };
    // A client that asks for the exposition thousands of times and never reads: the server
    // must give up on it once a response waits unread past the write deadline.
    let never_reads = {
        let address = address.clone();
        std::thread::spawn(move || {
            let mut stream = TcpStream::connect(&address).unwrap();
            let requests = "GET /metrics HTTP/1.1\r\nHost: never\r\n\r\n".repeat(4000);
            let _ = stream.write_all(requests.as_bytes());
            hung_up_within(&stream, 6 * HOSTILE_DEADLINE)
        })
    };
    // 256 MiB of request line, no newline. A write that waits a minute means the server
    // neither reads nor refuses.
    let flood = {
        let address = address.clone();
        std::thread::spawn(move || {
            let mut stream = TcpStream::connect(&address).unwrap();
            stream
                .set_write_timeout(Some(6 * HOSTILE_DEADLINE))
                .unwrap();
            let chunk = vec![b'A'; 1 << 20];
            let mut sent = 0usize;
            let _ = stream.write_all(b"GET /");
            while sent < 256 << 20 {
                match stream.write(&chunk) {
                    Ok(n) => sent += n,
                    Err(error) => return (sent, Some(error)),
                }
            }
            (sent, None)
        })
    };
    // Meanwhile, until every hostile client is done with, scrapes: each answered, without
    // waiting behind any of them.
    let mut slowest = Duration::ZERO;
    let mut scrapes = 0;
    while !(slowloris.is_finished() && never_reads.is_finished() && flood.is_finished()) {
        let asked = Instant::now();
        let response = served.get("/metrics");
        let took = asked.elapsed();
        assert!(response.status.contains(" 200 "), "{response:?}");
        assert!(response.body.contains("nds_runtime_info{"));
        assert!(
            took < HOSTILE_DEADLINE / 2,
            "scrape {scrapes} took {took:?}"
        );
        slowest = slowest.max(took);
        scrapes += 1;
        // A scraper's pace (not synchronisation): the loop ends when the clients are done.
        std::thread::sleep(Duration::from_millis(100));
    }
    let hung_up_after = slowloris.join().unwrap();
    let never_reads_cut = never_reads.join().unwrap();
    let (flooded, flood_error) = flood.join().unwrap();
    let rss_after = rss_kib(pid);
    println!(
        "{scrapes} scrapes, slowest {slowest:?}; slowloris cut after {hung_up_after:?}; \
         {} MiB of the 256 MiB request accepted ({flood_error:?}); RSS {rss_before} -> \
         {rss_after} KiB",
        flooded >> 20
    );
    assert!(
        hung_up_after.is_some_and(|after| after < 3 * HOSTILE_DEADLINE),
        "the slowloris client was cut after {hung_up_after:?}"
    );
    assert!(
        flood_error.as_ref().is_some_and(refused),
        "the request line was refused before its end: {flood_error:?} after {flooded} bytes"
    );
    assert!(
        never_reads_cut,
        "the client that never reads still held its connection"
    );
    assert!(
        rss_after < rss_before + 8 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    let health = served.get("/healthz");
    assert!(health.status.contains(" 200 "), "{health:?}");
}

/// A self-signed certificate for 127.0.0.1 and its key, written by openssl.
fn certificate(scratch: &Scratch) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (scratch.0.join("cert.pem"), scratch.0.join("key.pem"));
    let output = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (qemu/deps.sh installs it)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (cert, key)
}

fn curl(args: &[&str]) -> std::process::Output {
    Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "10"])
        .args(args)
        .output()
        .expect("curl (qemu/deps.sh installs it)")
}

#[test]
fn https_with_a_certificate_and_its_key() {
    let scratch = Scratch::new("serve-tls");
    produce(&scratch.slabs(), 0, 6301, "tls", 50);
    let (cert, key) = certificate(&scratch);
    let served = serve(
        &scratch,
        "200ms",
        &[
            "--cert-file",
            cert.to_str().unwrap(),
            "--key-file",
            key.to_str().unwrap(),
        ],
    );
    assert_eq!(served.scheme, "https");
    let url = format!("https://{}", served.address);
    let health = curl(&[
        "--cacert",
        cert.to_str().unwrap(),
        &format!("{url}/healthz"),
    ]);
    assert!(
        health.status.success(),
        "{}",
        String::from_utf8_lossy(&health.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&health.stdout), "ok\n");
    let metrics = curl(&[
        "--cacert",
        cert.to_str().unwrap(),
        &format!("{url}/metrics"),
    ]);
    assert!(String::from_utf8_lossy(&metrics.stdout).contains("runtime_tag=\"tls\""));
    // Plain HTTP to the TLS port gets no exposition; an untrusted client is refused.
    let plain = request(&served.address, "GET", "/metrics");
    assert!(plain.is_err() || !plain.unwrap().body.contains("nds_runtime_info"));
    assert!(!curl(&[&format!("{url}/healthz")]).status.success());
    assert!(served.stop_with(libc::SIGTERM).success());

    // A key that is not the certificate's, or a missing file: a clear error, no server.
    let (other_cert, _) = {
        let other = Scratch::new("serve-tls-other");
        let pair = certificate(&other);
        let copy = scratch.0.join("other-cert.pem");
        std::fs::copy(&pair.0, &copy).unwrap();
        (copy, pair.1)
    };
    for (cert_file, key_file, expected) in [
        (other_cert.clone(), key.clone(), "key.pem"),
        (scratch.0.join("missing.pem"), key.clone(), "missing.pem"),
        (cert.clone(), cert.clone(), "cert.pem"),
    ] {
        let output = Command::new(nds_monitor())
            .arg("--slab-dir")
            .arg(scratch.slabs())
            .args([
                "--instance-metadata",
                "off",
                "serve",
                "--listen",
                "127.0.0.1:0",
            ])
            .arg("--cert-file")
            .arg(&cert_file)
            .arg("--key-file")
            .arg(&key_file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{cert_file:?} {key_file:?}");
        assert!(output.stdout.is_empty(), "nothing listened");
        assert!(
            stderr.contains("serve:") && stderr.contains(expected),
            "{stderr}"
        );
    }
    // --cert-file without --key-file is a usage error.
    let output = Command::new(nds_monitor())
        .args(["serve", "--cert-file"])
        .arg(&cert)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn healthz_follows_the_sampling_loop() {
    let scratch = Scratch::new("serve-health");
    produce(&scratch.slabs(), 0, 6401, "health", 20);
    // A sysfs tree whose slot table is a FIFO: the first report that reads it blocks the
    // sampling loop until something writes it.
    scratch.sysfs(1, 2, 0, 0);
    let slots = scratch.sys().join("neuron0/datastore/slots");
    std::fs::remove_file(&slots).unwrap();
    let path = std::ffi::CString::new(slots.to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let served = serve(&scratch, "200ms", &[]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let stalled = loop {
        let health = served.get("/healthz");
        if health.status.contains(" 503 ") {
            break health;
        }
        assert!(Instant::now() < deadline, "never stalled: {health:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(stalled.body.contains("last advanced"), "{stalled:?}");
    // Scrapes are still answered, from the last exposition.
    assert!(served.get("/metrics").status.contains(" 200 "));
    // Writing the FIFO lets the report finish; the loop advances again.
    std::fs::write(&slots, "slot pid clear_tick generation\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !served.get("/healthz").status.contains(" 200 ") {
        // Each later report opens the FIFO again: keep writing it.
        let writer = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&slots);
        drop(writer);
        assert!(Instant::now() < deadline, "never recovered");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM ends the process even while the sampling loop is stuck in a system call: here a
/// sysfs counter that became a FIFO, whose read waits for a writer for good. The HTTP side
/// stops at once and the loop gets a second before the process exits without it.
#[test]
fn sigterm_ends_serve_while_the_sampling_loop_is_stuck_in_a_read() {
    let scratch = Scratch::new("serve-stuck");
    scratch.sysfs(1, 2, 5, 0);
    let served = serve(&scratch, "200ms", &[]);
    assert!(served.get("/healthz").status.contains(" 200 "));
    let total = scratch
        .sys()
        .join("neuron0/neuron_core0/stats/status/success/total");
    std::fs::remove_file(&total).unwrap();
    let name = std::ffi::CString::new(total.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    // The loop is stuck once /healthz goes stale (twice the period without a tick).
    let deadline = Instant::now() + Duration::from_secs(20);
    while served.get("/healthz").status.contains(" 200 ") {
        assert!(
            Instant::now() < deadline,
            "the sampling loop never read the FIFO"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = served.stop_with(libc::SIGTERM);
    assert!(status.success(), "SIGTERM ends serve with {status}");
}

/// `[::]` (the entrypoint's default, `nds-entrypoint`) serves IPv6 and IPv4 clients alike:
/// `/healthz` answers on `[::1]` and on `127.0.0.1`, as an IPv6 cluster's kubelet and an
/// IPv4 one's would probe it.
#[test]
fn every_address_serves_ipv6_and_ipv4() {
    let scratch = Scratch::new("serve-dual-stack");
    let served = Served::start(
        scratch
            .monitor_command("200ms")
            .args(["serve", "--listen", "[::]:0"]),
    );
    let port = served.address.rsplit(':').next().unwrap().to_owned();
    for host in ["[::1]", "127.0.0.1"] {
        let health = request(&format!("{host}:{port}"), "GET", "/healthz").unwrap();
        assert!(health.status.contains(" 200 "), "{host}: {health:?}");
    }
    assert!(served.stop_with(libc::SIGTERM).success());
}

/// A connection to `address` from the loopback address `from`, open and idle.
fn connect_from(from: std::net::Ipv4Addr, address: &str) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let target: std::net::SocketAddr = address.parse().unwrap();
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket
        .bind(&std::net::SocketAddr::from((from, 0)).into())
        .unwrap();
    socket.connect(&target.into()).unwrap();
    socket.into()
}

/// Whether the server closed `stream` (it reads the end) within `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    match stream.read(&mut [0u8; 1]) {
        Ok(read) => read == 0,
        // A timeout means open; a reset, closed.
        Err(error) => error.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

/// Every connection the server keeps, held idle from eight addresses, still leaves room for
/// the kubelet's probe: each probe closes the quietest connection, and a peer past its share
/// closes only its own.
#[test]
fn healthz_answers_while_every_connection_is_held() {
    let scratch = Scratch::new("serve-starved");
    produce(&scratch.slabs(), 0, 6501, "starved", 50);
    let served = serve(&scratch, "200ms", &[]);
    // 8 addresses × 32 connections each = the 256 the server keeps at once.
    let mut held = Vec::new();
    for peer in 2..10u8 {
        for _ in 0..32 {
            held.push(connect_from([127, 0, 0, peer].into(), &served.address));
        }
    }
    // Each probe is accepted after every connection before it (the listen queue is first in,
    // first out), so the server has admitted all the held ones by the first answer.
    for probe in 0..20 {
        let asked = Instant::now();
        let health = served.get("/healthz");
        assert!(health.status.contains(" 200 "), "probe {probe}: {health:?}");
        assert!(asked.elapsed() < Duration::from_secs(2), "probe {probe}");
    }
    // The first probe closed the quietest held connection, the one opened first; each later
    // probe took the room the one before it left, and no other held connection was closed (a
    // short look at each: one the server closed has its end waiting already).
    assert!(
        closed_within(&mut held[0], Duration::from_secs(10)),
        "the first probe left the quietest connection open"
    );
    let closed: Vec<usize> = (1..held.len())
        .filter(|&i| closed_within(&mut held[i], Duration::from_millis(20)))
        .collect();
    assert!(
        closed.is_empty(),
        "held connections {closed:?} were closed besides the first"
    );

    // A peer opening more than its share (32) closes others' only until it has its share,
    // then its own oldest: eight of its 40, the first eight.
    let hoarder: std::net::Ipv4Addr = [127, 0, 0, 20].into();
    let mut own: Vec<TcpStream> = (0..40)
        .map(|_| connect_from(hoarder, &served.address))
        .collect();
    for (index, stream) in own[..8].iter_mut().enumerate() {
        assert!(
            closed_within(stream, Duration::from_secs(10)),
            "the hoarder's connection {index} stayed open"
        );
    }
    // The eighth closed when the fortieth was admitted: every admission has happened.
    let also_closed: Vec<usize> = (8..own.len())
        .filter(|&i| closed_within(&mut own[i], Duration::from_millis(50)))
        .collect();
    assert!(
        also_closed.is_empty(),
        "the hoarder's connections {also_closed:?} were closed too"
    );
    assert!(served.get("/healthz").status.contains(" 200 "));
}

/// A keep-alive connection outlives a 30 s scrape interval: the second scrape goes over the
/// connection of the first.
#[test]
fn a_keep_alive_connection_outlives_a_30_s_interval() {
    let scratch = Scratch::new("serve-keep-alive");
    produce(&scratch.slabs(), 0, 6601, "keep-alive", 50);
    let served = serve(&scratch, "200ms", &[]);
    let mut stream = TcpStream::connect(&served.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let ask = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut answer = [0u8; 512];
    for scrape in 0..2 {
        if scrape > 0 {
            // The interval under test (not synchronisation): the connection idles past 30 s.
            std::thread::sleep(Duration::from_secs(31));
        }
        stream.write_all(ask.as_bytes()).unwrap();
        let read = stream.read(&mut answer).unwrap();
        let text = String::from_utf8_lossy(&answer[..read]);
        assert!(
            text.starts_with("HTTP/1.1 200 "),
            "scrape {scrape}: {text:?}"
        );
    }
}

/// A certificate replaced on disk (as a rotated Secret is) is served from the next handshake,
/// without a restart; a broken replacement leaves the last good pair in use.
#[test]
fn a_rotated_certificate_is_served_without_a_restart() {
    let scratch = Scratch::new("serve-tls-rotation");
    let (first_cert, first_key) = certificate(&scratch);
    let (cert_file, key_file) = (scratch.0.join("tls.crt"), scratch.0.join("tls.key"));
    std::fs::copy(&first_cert, &cert_file).unwrap();
    std::fs::copy(&first_key, &key_file).unwrap();
    let served = serve(
        &scratch,
        "200ms",
        &[
            "--cert-file",
            cert_file.to_str().unwrap(),
            "--key-file",
            key_file.to_str().unwrap(),
        ],
    );
    let url = format!("https://{}/healthz", served.address);
    let trusts = |ca: &std::path::Path| curl(&["--cacert", ca.to_str().unwrap(), &url]);
    assert!(trusts(&first_cert).status.success());

    // The next pair, moved into place as the kubelet swaps a Secret's files.
    let next = Scratch::new("serve-tls-rotation-next");
    let (next_cert, next_key) = certificate(&next);
    for (from, to) in [(&next_key, &key_file), (&next_cert, &cert_file)] {
        let staged = to.with_extension("staged");
        std::fs::copy(from, &staged).unwrap();
        std::fs::rename(&staged, to).unwrap();
    }
    let answer = trusts(&next_cert);
    assert!(
        answer.status.success(),
        "{}",
        String::from_utf8_lossy(&answer.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&answer.stdout), "ok\n");
    assert!(
        !trusts(&first_cert).status.success(),
        "the old certificate is still served"
    );

    // A certificate file that is no PEM: the pair before it stays.
    std::fs::write(&cert_file, "not a certificate\n").unwrap();
    assert!(trusts(&next_cert).status.success());
    assert!(served.stop_with(libc::SIGTERM).success());
}

/// Reading the kernel, `/healthz` is 503 while the module is not loaded (as during a reload)
/// and 200 again once it is back, without a restart.
#[test]
fn healthz_is_unhealthy_while_the_module_is_gone() {
    let scratch = Scratch::new("serve-module-gone");
    let module = scratch.0.join("module");
    std::fs::create_dir_all(module.join("parameters")).unwrap();
    std::fs::create_dir_all(scratch.0.join("dev")).unwrap();
    let served = Served::start(
        Command::new(nds_monitor())
            .arg("--sysfs-root")
            .arg(scratch.sys())
            .arg("--dev-dir")
            .arg(scratch.0.join("dev"))
            .arg("--module-dir")
            .arg(&module)
            .arg("--hardware-sysfs-root")
            .arg(scratch.hardware_root())
            .args(["--period", "200ms", "--instance-metadata", "off"])
            .args(["serve", "--listen", "127.0.0.1:0"]),
    );
    let wait_for = |status: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let health = served.get("/healthz");
            if health.status.contains(status) {
                return health;
            }
            assert!(Instant::now() < deadline, "never {status}: {health:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for(" 200 ");
    std::fs::remove_dir_all(&module).unwrap();
    let gone = wait_for(" 503 ");
    assert!(
        gone.body.contains("neuron_ds module is not loaded"),
        "{gone:?}"
    );
    std::fs::create_dir_all(module.join("parameters")).unwrap();
    wait_for(" 200 ");
    assert!(served.stop_with(libc::SIGTERM).success());
}
