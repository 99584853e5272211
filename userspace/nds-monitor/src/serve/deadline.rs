//! The deadlines of one connection, enforced on its I/O: [`Deadline`] fails a read or a write
//! with [`io::ErrorKind::TimedOut`] once the phase the connection is in took too long.
//!
//! - **Idle**: between responses (and before the first request), the next request's first
//!   byte must arrive within `idle`. Longer than the usual 15 s and 30 s scrape intervals, so a
//!   scraper's keep-alive connection (and its TLS session) lasts from scrape to scrape.
//! - **Head**: from a request's first byte, the request must be complete (its response
//!   begun) within `head`, however slowly it trickles in.
//! - **Write**: from a response's first byte, the client must have read it within `write`.
//!
//! hyper's own header-read timeout runs from the moment it waits for a head, so it cannot tell
//! an idle keep-alive connection from a slow request; it is off, and these replace it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// How long each phase may last.
#[derive(Clone, Copy, Debug)]
pub struct Phases {
    /// Waiting for a request's first byte.
    pub idle: Duration,
    /// From a request's first byte until its response begins.
    pub head: Duration,
    /// From a response's first byte until it is written.
    pub write: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Head,
    Write,
}

/// `io` whose reads and writes fail once the current phase is past its deadline.
#[derive(Debug)]
pub struct Deadline<T> {
    io: T,
    phases: Phases,
    phase: Phase,
    timer: Pin<Box<Sleep>>,
}

impl<T> Deadline<T> {
    /// Wraps `io`, idle from now.
    pub fn new(io: T, phases: Phases) -> Self {
        Self {
            io,
            phases,
            phase: Phase::Idle,
            timer: Box::pin(tokio::time::sleep(phases.idle)),
        }
    }

    fn enter(&mut self, phase: Phase) {
        if self.phase != phase {
            self.phase = phase;
            let limit = match phase {
                Phase::Idle => self.phases.idle,
                Phase::Head => self.phases.head,
                Phase::Write => self.phases.write,
            };
            self.timer.as_mut().reset(Instant::now() + limit);
        }
    }

    /// Fails if the current phase is past its deadline (and arranges a wake-up at it).
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.timer.as_mut().poll(cx) {
            Poll::Pending => Ok(()),
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                match self.phase {
                    Phase::Idle => "the connection was idle too long",
                    Phase::Head => "the request did not arrive in time",
                    Phase::Write => "the client did not read the response in time",
                },
            )),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Deadline<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // hyper reads again only once a response is out: the connection is idle.
        if this.phase == Phase::Write {
            this.enter(Phase::Idle);
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before && this.phase == Phase::Idle {
                    this.enter(Phase::Head);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => match this.check(cx) {
                Ok(()) => Poll::Pending,
                Err(error) => Poll::Ready(Err(error)),
            },
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Deadline<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.enter(Phase::Write);
        this.check(cx)?;
        Pin::new(&mut this.io).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.enter(Phase::Write);
        this.check(cx)?;
        Pin::new(&mut this.io).poll_write_vectored(cx, data)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.phase == Phase::Write {
            this.check(cx)?;
        }
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const PHASES: Phases = Phases {
        idle: Duration::from_millis(900),
        head: Duration::from_millis(300),
        write: Duration::from_millis(300),
    };

    fn run(test: impl Future<Output = ()>) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(test);
    }

    #[test]
    fn a_response_nobody_reads_fails_at_its_deadline() {
        run(async {
            // A pipe of 64 bytes that nobody reads.
            let (writer, _reader) = tokio::io::duplex(64);
            let mut io = Deadline::new(writer, PHASES);
            let started = Instant::now();
            let error = io.write_all(&[0u8; 1024]).await.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::TimedOut);
            assert_eq!(started.elapsed(), PHASES.write);
        });
    }

    #[test]
    fn an_idle_connection_outlives_the_head_deadline_then_ends() {
        run(async {
            let (server, _client) = tokio::io::duplex(64);
            let mut io = Deadline::new(server, PHASES);
            let started = Instant::now();
            let error = io.read(&mut [0u8; 16]).await.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::TimedOut);
            assert_eq!(started.elapsed(), PHASES.idle);
        });
    }

    #[test]
    fn a_trickling_request_ends_at_the_head_deadline() {
        run(async {
            let (server, mut client) = tokio::io::duplex(64);
            let mut io = Deadline::new(server, PHASES);
            let trickle = tokio::spawn(async move {
                for byte in b"GET / HTTP/1.1\r\n" {
                    if client.write_all(&[*byte]).await.is_err() {
                        break;
                    }
                    // The client's pace is what is tested, on the paused clock (not
                    // synchronisation): the whole head would take 1.6 s.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                client
            });
            let started = Instant::now();
            let mut buf = [0u8; 16];
            let error = loop {
                match io.read(&mut buf).await {
                    Ok(0) => panic!("the whole request trickled in: no deadline"),
                    Ok(_) => {}
                    Err(error) => break error,
                }
            };
            assert_eq!(error.kind(), io::ErrorKind::TimedOut);
            // The head's deadline runs from its first byte, at once here.
            assert_eq!(started.elapsed(), PHASES.head);
            drop(trickle);
        });
    }

    #[test]
    fn each_response_gives_the_next_request_a_fresh_idle_period() {
        run(async {
            let (server, mut client) = tokio::io::duplex(1024);
            let mut io = Deadline::new(server, PHASES);
            let mut buf = [0u8; 64];
            for _ in 0..3 {
                // Scrapes 600 ms apart, on the paused clock: each one inside the idle period
                // after the last (the interval under test, not synchronisation).
                tokio::time::sleep(Duration::from_millis(600)).await;
                client.write_all(b"GET /metrics\r\n").await.unwrap();
                assert!(io.read(&mut buf).await.unwrap() > 0);
                io.write_all(b"200\r\n").await.unwrap();
                assert!(client.read(&mut buf).await.unwrap() > 0);
            }
        });
    }
}
