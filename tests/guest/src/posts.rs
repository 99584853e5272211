//! Waiting for the module's metric posts as events: a test reads the posts it needs as they
//! come, never a number of periods it expects to fit into a stretch of wall-clock time, which a
//! guest slowed by emulation and a busy host does not keep to.

use crate::{monotonic_ns, read_available_posts, Producer, EVENTUALLY};
use nds_abi::{counters::NcCounter, metrics::MetricPost};
use std::{fs::File, os::fd::AsRawFd, time::Instant};

/// The CloudWatch id of the change [`posts_through_a_period_end`] makes to recognise a period
/// by (`NERR_FAIL`, one generic failure on core 0): tests that sum posts leave it out.
pub const PERIOD_MARKER_CW_ID: u8 = 201;

/// Reads `stream` (opened with [`crate::open_posts`]), waiting for each new post, until
/// `enough` holds of every post read so far; returns them, oldest first. Panics naming `what`
/// if that takes longer than [`EVENTUALLY`], which only a hang does.
pub fn posts_until(
    stream: &mut File,
    what: &str,
    mut enough: impl FnMut(&[MetricPost]) -> bool,
) -> Vec<MetricPost> {
    let deadline = Instant::now() + EVENTUALLY;
    let mut posts = read_available_posts(stream);
    while !enough(&posts) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "{what}: not within {EVENTUALLY:?}");
        let mut pfd = libc::pollfd {
            fd: stream.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd, for the call only.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        assert!(ready >= 0, "poll: {}", std::io::Error::last_os_error());
        posts.extend(read_available_posts(stream));
    }
    posts
}

/// Reads `stream`, a post stream of `device`, until `device` has posted a period that ended
/// after this call began; returns the posts read, oldest first. Everything released on the
/// device before the call is in them (or was read before).
///
/// A period posts only what changed in it, so the call makes a change of its own: a producer
/// that adds one generic failure on core 0 ([`PERIOD_MARKER_CW_ID`]) and releases it. The
/// period that posts it ended after its release.
pub fn posts_through_a_period_end(device: &str, stream: &mut File) -> Vec<MetricPost> {
    let began = monotonic_ns();
    Producer::start(device, &[(0, NcCounter::GenericFail.index(), 1)])
        .unwrap()
        .release_and_exit();
    posts_until(
        stream,
        "a post of a period that ended after the call",
        |posts| {
            posts
                .iter()
                .any(|post| post.cw_id == PERIOD_MARKER_CW_ID && post.posted_ns > began)
        },
    )
}
