// SPDX-License-Identifier: GPL-2.0

//! When a device notifies pollers of its sysfs counters (`info/notify_delay`, as in the
//! original driver): never (-1, the default), at every change (0), or at most once per window
//! of N milliseconds, the changes of a window going out together at its end.

use kernel::prelude::*;

/// The `notify_delay` value that turns notification off.
pub(crate) const NOTIFY_OFF: i64 = -1;

/// The largest window accepted, in milliseconds (a day).
pub(crate) const MAX_NOTIFY_DELAY_MS: i64 = 86_400_000;

/// What to do about a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notify {
    /// Nothing: notification is off, or a notification is already due.
    Nothing,
    /// Notify in this many milliseconds (0: now).
    In(u64),
}

/// The notification state of one device, guarded by the device mutex.
pub(crate) struct NotifyPolicy {
    delay_ms: i64,
    /// When the last notification went out, in the caller's milliseconds.
    last_ms: Option<u64>,
    /// A notification is scheduled and has not gone out yet.
    due: bool,
}

impl NotifyPolicy {
    /// Notification off.
    pub(crate) const fn new() -> Self {
        Self {
            delay_ms: NOTIFY_OFF,
            last_ms: None,
            due: false,
        }
    }

    /// The `notify_delay` value.
    pub(crate) fn delay_ms(&self) -> i64 {
        self.delay_ms
    }

    /// Sets `notify_delay` at `now_ms`; `EINVAL` outside -1..=[`MAX_NOTIFY_DELAY_MS`]. A
    /// notification already due moves to where the new delay puts it (now, if notification is
    /// now off): left where a day's delay had put it, it would hold back every later change.
    pub(crate) fn set_delay_ms(&mut self, delay_ms: i64, now_ms: u64) -> Result<Notify> {
        if !(NOTIFY_OFF..=MAX_NOTIFY_DELAY_MS).contains(&delay_ms) {
            return Err(EINVAL);
        }
        self.delay_ms = delay_ms;
        if !self.due {
            return Ok(Notify::Nothing);
        }
        Ok(self.window_end(u64::try_from(delay_ms).unwrap_or(0), now_ms))
    }

    /// Whether changes are notified at all (if not, the caller forgets them).
    pub(crate) fn is_on(&self) -> bool {
        self.delay_ms >= 0
    }

    /// A counter changed at `now_ms`.
    pub(crate) fn on_change(&mut self, now_ms: u64) -> Notify {
        let Ok(delay) = u64::try_from(self.delay_ms) else {
            return Notify::Nothing;
        };
        if self.due {
            return Notify::Nothing;
        }
        self.due = true;
        self.window_end(delay, now_ms)
    }

    /// When a window of `delay` ms that opened at the last notification ends, from `now_ms`.
    fn window_end(&self, delay: u64, now_ms: u64) -> Notify {
        let end = self
            .last_ms
            .map_or(now_ms, |last| last.saturating_add(delay));
        Notify::In(end.saturating_sub(now_ms))
    }

    /// The scheduled notification goes out at `now_ms`.
    pub(crate) fn on_notify(&mut self, now_ms: u64) {
        self.due = false;
        self.last_ms = Some(now_ms);
    }
}

#[cfg(neuron_ds_kunit)]
#[kunit_tests(neuron_ds_notify)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_only_minus_one_to_a_day_is_accepted() -> Result {
        let mut policy = NotifyPolicy::new();
        assert_eq!(policy.delay_ms(), NOTIFY_OFF);
        assert!(!policy.is_on());
        assert_eq!(policy.on_change(5), Notify::Nothing);
        for bad in [-2, MAX_NOTIFY_DELAY_MS + 1, i64::MIN] {
            assert_eq!(policy.set_delay_ms(bad, 0), Err(EINVAL));
        }
        policy.set_delay_ms(MAX_NOTIFY_DELAY_MS, 0)?;
        assert!(policy.is_on());
        Ok(())
    }

    #[test]
    fn zero_notifies_every_change_at_once() -> Result {
        let mut policy = NotifyPolicy::new();
        policy.set_delay_ms(0, 0)?;
        for now in [10, 10, 11] {
            assert_eq!(policy.on_change(now), Notify::In(0));
            policy.on_notify(now);
        }
        Ok(())
    }

    #[test]
    fn a_window_sends_its_changes_together_at_most_once_per_window() -> Result {
        let mut policy = NotifyPolicy::new();
        policy.set_delay_ms(100, 0)?;
        // The first change goes out at once; the next ones wait for the window to end.
        assert_eq!(policy.on_change(1000), Notify::In(0));
        policy.on_notify(1000);
        assert_eq!(policy.on_change(1030), Notify::In(70));
        assert_eq!(policy.on_change(1060), Notify::Nothing);
        policy.on_notify(1100);
        // A change long after the last notification goes out at once.
        assert_eq!(policy.on_change(5000), Notify::In(0));
        Ok(())
    }

    #[test]
    fn a_due_notification_moves_with_a_new_delay() -> Result {
        let mut policy = NotifyPolicy::new();
        assert_eq!(
            policy.set_delay_ms(MAX_NOTIFY_DELAY_MS, 0)?,
            Notify::Nothing
        );
        assert_eq!(policy.on_change(1000), Notify::In(0));
        policy.on_notify(1000);
        let day_later = u64::try_from(MAX_NOTIFY_DELAY_MS).map_err(|_| EINVAL)?;
        assert_eq!(policy.on_change(2000), Notify::In(day_later - 1000));
        // A shorter delay brings it in: the window since the last notification is over.
        assert_eq!(policy.set_delay_ms(0, 3000)?, Notify::In(0));
        policy.on_notify(3000);
        // Nothing due, nothing to move.
        assert_eq!(policy.set_delay_ms(100, 3500)?, Notify::Nothing);
        assert_eq!(policy.on_change(3050), Notify::In(50));
        assert_eq!(policy.set_delay_ms(40, 3060)?, Notify::In(0));
        assert_eq!(policy.set_delay_ms(200, 3060)?, Notify::In(140));
        // Turned off, what was due goes out now; later changes are not notified.
        assert_eq!(policy.set_delay_ms(NOTIFY_OFF, 3070)?, Notify::In(0));
        policy.on_notify(3070);
        assert_eq!(policy.on_change(3100), Notify::Nothing);
        Ok(())
    }
}
