//! The metrics path end to end: over several periods, the posted deltas of each CloudWatch
//! id add up to exactly what the producers wrote, whether they released mid-period, exited
//! or were killed. The module is loaded with a short `metrics_period_ms`, so that the periods
//! the test waits for come soon.

use nds_abi::metrics::{MetricPost, METRIC_POST_SIZE};
use neuron_ds_guest_tests::{
    monotonic_ns, open_posts,
    posts::{posts_through_a_period_end, posts_until},
    Producer, DEVICE,
};
use std::{collections::BTreeMap, io::Read};

/// Sum of the posted values per CloudWatch id.
fn sums(posts: &[MetricPost], ids: &[u8]) -> BTreeMap<u8, u64> {
    let mut sums = BTreeMap::new();
    for post in posts.iter().filter(|p| ids.contains(&p.cw_id)) {
        let value: u64 = std::str::from_utf8(post.value_bytes())
            .unwrap()
            .parse()
            .unwrap();
        *sums.entry(post.cw_id).or_default() += value;
    }
    sums
}

#[test]
fn posted_deltas_add_up_to_what_producers_wrote() {
    let ids = [200, 205, 229];
    let mut stream = open_posts(DEVICE).unwrap();
    // Every earlier test's releases are posted by then; the test's sums start after them.
    let drained = posts_through_a_period_end(DEVICE, &mut stream);
    let mut last_seq = drained.last().map_or(0, |p| p.seq);
    let started_ns = monotonic_ns();

    // (core, NC index, value): success is cw 200, timeout cw 205, EXT 40 cw 229.
    let a = Producer::start(DEVICE, &[(0, 1, 10), (1, 4, 2)]).unwrap();
    let b = Producer::start(DEVICE, &[(1, 1, 100), (0, 40, 7)]).unwrap();
    // Posted while owned: a period samples both live slabs before either goes.
    let mut posts = posts_until(
        &mut stream,
        "a's and b's counts posted while owned",
        |posts| sums(posts, &ids) == BTreeMap::from([(200, 110), (205, 2), (229, 7)]),
    );
    a.release_and_exit(); // released after its counts were posted: no double count
    let c = Producer::start(DEVICE, &[(0, 1, 1000), (0, 4, 30)]).unwrap();
    c.release_and_exit(); // released before any period sampled it live
    let d = Producer::start(DEVICE, &[(1, 1, 5000)]).unwrap();
    posts.extend(posts_until(
        &mut stream,
        "c's release and d's counts posted",
        |more| {
            sums(&[posts.as_slice(), more].concat(), &ids)
                == BTreeMap::from([(200, 6110), (205, 32), (229, 7)])
        },
    ));
    d.kill();
    b.exit();
    // Whatever the ends of b and d still had to add is posted by the next period's end.
    posts.extend(posts_through_a_period_end(DEVICE, &mut stream));
    let ended_ns = monotonic_ns();

    for post in &posts {
        assert_eq!(post.seq, last_seq + 1, "no post was dropped");
        last_seq = post.seq;
        assert!(
            (started_ns..=ended_ns).contains(&post.posted_ns),
            "post {} says it was taken at {} ns, outside the test's {started_ns}..={ended_ns}",
            post.seq,
            post.posted_ns
        );
    }
    // The posts of one period carry its one time, and later periods later times.
    for pair in posts.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.period == b.period {
            assert_eq!(a.posted_ns, b.posted_ns, "one period, one time");
        } else {
            assert!(b.posted_ns > a.posted_ns, "a later period is taken later");
        }
    }
    let periods: std::collections::BTreeSet<u64> = posts.iter().map(|p| p.period).collect();
    println!("{} posts over {} periods", posts.len(), periods.len());
    // Three waits above, each for a post that only a later period than the last can make.
    assert!(periods.len() >= 3, "the counts came in {periods:?}");
    let expected = BTreeMap::from([(200u8, 6110u64), (205, 32), (229, 7)]);
    assert_eq!(sums(&posts, &ids), expected, "nothing posted twice");
}

#[test]
fn reads_smaller_than_one_post_are_refused() {
    let mut stream = open_posts(DEVICE).unwrap();
    let mut small = [0u8; METRIC_POST_SIZE - 1];
    let err = stream.read(&mut small).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
}
