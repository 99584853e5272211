//! A histogram series' new observations, replayed as measurements for the SDK's histogram.
//!
//! The OpenTelemetry SDK aggregates a histogram from measurements and takes no aggregated
//! buckets; the monitor's histograms are already aggregated. Between two samples of a series,
//! each bucket gained some observations and the sum grew by some amount. Replaying one
//! measurement per new observation, inside its bucket, gives the SDK the same bucket counts and
//! count; their values are spread inside the buckets so that they add up to the sum's growth
//! (the true observations lay in the same buckets, so such values exist): the sum is the
//! exposition's to rounding. Minimum and maximum would be made up, and are not recorded.

use crate::exposition::Buckets;

/// The new observations of a series from `before` (none: a new series) to `now`, as
/// `(value, how many)`, for a histogram of finite upper `bounds`; `None` when the series went
/// backwards (a reset), which is replayed whole instead.
#[must_use]
pub fn new_observations(
    bounds: &[f64],
    before: Option<&Buckets>,
    now: &Buckets,
) -> Vec<(f64, u64)> {
    let per_bucket = |buckets: &Buckets| -> Vec<u64> {
        let mut previous = 0;
        buckets
            .cumulative
            .iter()
            .map(|&cumulative| {
                let count = cumulative.saturating_sub(previous);
                previous = cumulative;
                count
            })
            .collect()
    };
    let now_counts = per_bucket(now);
    let (gained, sum) = match before {
        Some(before)
            if before.cumulative.len() == now.cumulative.len()
                && per_bucket(before)
                    .iter()
                    .zip(&now_counts)
                    .all(|(was, is)| was <= is) =>
        {
            let was = per_bucket(before);
            let gained: Vec<u64> = now_counts
                .iter()
                .zip(&was)
                .map(|(is, was)| is - was)
                .collect();
            (gained, now.sum - before.sum)
        }
        _ => (now_counts, now.sum),
    };
    spread(bounds, &gained, sum)
}

/// Values for `gained[i]` observations in bucket `i` (`(bounds[i-1], bounds[i]]`, the first
/// from 0, the last above the last bound) adding up to `sum`.
fn spread(bounds: &[f64], gained: &[u64], sum: f64) -> Vec<(f64, u64)> {
    let range = |bucket: usize| {
        let lower = if bucket == 0 { 0.0 } else { bounds[bucket - 1] };
        (lower, bounds.get(bucket).copied())
    };
    let (mut lowest, mut finite_width, mut overflow) = (0.0, 0.0, 0u64);
    for (bucket, &count) in gained.iter().enumerate() {
        let (lower, upper) = range(bucket);
        lowest += count as f64 * lower;
        match upper {
            Some(upper) => finite_width += count as f64 * (upper - lower),
            None => overflow += count,
        }
    }
    // How far into its bucket each finite observation lies (the same share for all), and how
    // far above the last bound each overflowing one does.
    let share = if finite_width > 0.0 {
        ((sum - lowest) / finite_width).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let above = if overflow > 0 {
        ((sum - lowest - share * finite_width) / overflow as f64).max(0.0)
    } else {
        0.0
    };
    gained
        .iter()
        .enumerate()
        .filter(|&(_, &count)| count > 0)
        .map(|(bucket, &count)| {
            let (lower, upper) = range(bucket);
            let value = match upper {
                // Strictly above the lower bound, which belongs to the bucket below, and not
                // above the upper one once rounded.
                Some(upper) => {
                    let value = (lower + share * (upper - lower)).min(upper);
                    if value > lower || bucket == 0 {
                        value
                    } else {
                        upper
                    }
                }
                None => {
                    let value = lower + above;
                    if value > lower {
                        value
                    } else {
                        lower * 2.0 + 1.0
                    }
                }
            };
            (value, count)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: [f64; 3] = [0.001, 0.01, 0.1];

    /// The bucket of `value` as the SDK finds it: the first bound not below it.
    fn bucket(value: f64) -> usize {
        BOUNDS.partition_point(|&bound| bound < value)
    }

    fn check(before: Option<&Buckets>, now: &Buckets) {
        let replayed = new_observations(&BOUNDS, before, now);
        let mut counts = [0u64; 4];
        let mut sum = before.map_or(0.0, |b| b.sum);
        for &(value, count) in &replayed {
            counts[bucket(value)] += count;
            sum += value * count as f64;
        }
        let mut cumulative = before.map_or(vec![0; 4], |b| b.cumulative.clone());
        let mut running = 0;
        for (at, total) in cumulative.iter_mut().enumerate() {
            let base = before.map_or(0, |b| {
                b.cumulative[at] - if at == 0 { 0 } else { b.cumulative[at - 1] }
            });
            running += base + counts[at];
            *total = running;
        }
        assert_eq!(cumulative, now.cumulative, "{replayed:?}");
        assert!(
            (sum - now.sum).abs() <= 1e-12 * now.sum.max(1.0),
            "{sum} {now:?}"
        );
    }

    fn buckets(cumulative: [u64; 4], sum: f64) -> Buckets {
        Buckets {
            cumulative: cumulative.to_vec(),
            sum,
            count: cumulative[3],
        }
    }

    #[test]
    fn the_replay_gives_the_buckets_and_the_sum() {
        // One observation of 0.005, then two more of 0.0002 and 0.05, then one of 3.
        let first = buckets([0, 1, 1, 1], 0.005);
        check(None, &first);
        let second = buckets([1, 2, 3, 3], 0.0552);
        check(Some(&first), &second);
        let third = buckets([1, 2, 3, 4], 3.0552);
        check(Some(&second), &third);
        // Nothing new: nothing replayed.
        assert!(new_observations(&BOUNDS, Some(&third), &third).is_empty());
        // Observations exactly at bounds.
        check(None, &buckets([1, 2, 3, 3], 0.111));
        check(None, &buckets([0, 0, 0, 2], 0.25));
    }

    #[test]
    fn a_series_that_went_backwards_is_replayed_whole() {
        let before = buckets([5, 5, 5, 5], 0.004);
        let now = buckets([1, 1, 1, 1], 0.0005);
        assert_eq!(
            new_observations(&BOUNDS, Some(&before), &now),
            [(0.0005, 1)]
        );
    }
}
