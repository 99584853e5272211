//! A write deadline for a connection: a response must be written within [`Deadline`]'s limit
//! from its first byte, however slowly the client reads, or the connection fails.
//!
//! hyper bounds how long a request head may take to arrive; nothing bounds how long a client
//! may take to read the answer. The deadline starts with the first write after the connection
//! read something (a new request) and is cleared by the next read, so a keep-alive connection
//! gets a fresh deadline per response.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `io` whose writes fail with [`io::ErrorKind::TimedOut`] once a response took `limit`.
#[derive(Debug)]
pub struct Deadline<T> {
    io: T,
    limit: Duration,
    /// Set from the first write of a response until the next read.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<T> Deadline<T> {
    /// Wraps `io`.
    pub fn new(io: T, limit: Duration) -> Self {
        Self {
            io,
            limit,
            timer: None,
        }
    }

    /// Fails if the current response is past its deadline; starts one for a new response.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let limit = self.limit;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read the response in time",
            )),
            Poll::Pending => Ok(()),
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
        let before = buf.filled().len();
        let result = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.timer = None;
        }
        result
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Deadline<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Err(error) = this.check(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut this.io).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Err(error) = this.check(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, data)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.timer.is_some() {
            if let Err(error) = this.check(cx) {
                return Poll::Ready(Err(error));
            }
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
    use tokio::io::AsyncWriteExt;

    #[test]
    fn a_response_nobody_reads_fails_at_its_deadline() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            // A pipe of 64 bytes that nobody reads.
            let (writer, _reader) = tokio::io::duplex(64);
            let mut io = Deadline::new(writer, Duration::from_millis(200));
            let started = Instant::now();
            let error = io.write_all(&[0u8; 1024]).await.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::TimedOut);
            let took = started.elapsed();
            assert!(
                took >= Duration::from_millis(200) && took < Duration::from_secs(5),
                "{took:?}"
            );
        });
    }
}
