//! The one clock seam: what time it is ([`Clock::now_ms`]) and a wait ([`Clock::sleep`]).
//!
//! Code that waits on time for a reason a test would want to check (a provider's retry
//! back-off, a run's deadline) takes a [`Clock`]; [`SystemClock`] is the platform's, and
//! `FakeClock` (behind the `fake` feature, which only tests turn on) is one whose time moves
//! only when the test says, so a test asserts "retried after 1,000 ms of the fake clock"
//! rather than timing a shared machine. Code that only ever needs the platform's time (an
//! HTTP timeout, the sandbox's CPU accounting) calls [`now_ms`] and [`sleep`], the system
//! clock's.
//!
//! Natively (`native`) one timer thread serves every sleep of the process and `now_ms` counts
//! from an `Instant`; in the browser (`browser`), in a Window or a Worker alike, a sleep is
//! `setTimeout` and `now_ms` is `performance.now()`.

use futures::future::LocalBoxFuture;

#[cfg(target_arch = "wasm32")]
mod browser;
#[cfg(feature = "fake")]
mod fake;
#[cfg(not(target_arch = "wasm32"))]
mod native;

#[cfg(feature = "fake")]
pub use fake::FakeClock;

/// A source of time: a monotonic reading in milliseconds and a wait.
///
/// Not `Send`: a clock lives on the thread (or in the worker) whose futures it wakes.
pub trait Clock {
    /// Milliseconds from an arbitrary origin: only differences between two readings of the
    /// same clock mean anything. Never goes back.
    fn now_ms(&self) -> f64;

    /// Resolves once `ms` milliseconds of this clock have passed (or later, never earlier).
    /// Dropping it cancels the wait.
    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()>;

    /// Resolves once this clock reads `at_ms` or more; at once when that has passed. A
    /// fractional wait is rounded up, so it never ends early.
    fn sleep_until(&self, at_ms: f64) -> LocalBoxFuture<'static, ()> {
        self.sleep(whole_ms(at_ms - self.now_ms()))
    }
}

/// The platform's clock: [`now_ms`] and [`sleep`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> f64 {
        now_ms()
    }

    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()> {
        sleep(ms)
    }
}

/// Milliseconds on the platform's monotonic clock from an arbitrary origin: natively an
/// `Instant` since the first reading in the process; in the browser `performance.now()` (or
/// `Date.now()` where a scope has no `performance`). Safe to call from any thread.
#[must_use]
pub fn now_ms() -> f64 {
    #[cfg(not(target_arch = "wasm32"))]
    return native::now_ms();
    #[cfg(target_arch = "wasm32")]
    return browser::now_ms();
}

/// Wall-clock milliseconds since 1970-01-01 UTC, for what records when it
/// happened (a job's `created_ms`); `0` on a clock set before the epoch.
/// Not for measuring: use [`now_ms`], which never goes back.
#[must_use]
pub fn epoch_ms() -> u64 {
    #[cfg(not(target_arch = "wasm32"))]
    return native::epoch_ms();
    #[cfg(target_arch = "wasm32")]
    return browser::epoch_ms();
}

/// Resolves after `ms` milliseconds of the platform's clock (or later, never earlier).
/// Dropping it cancels the timer.
///
/// Natively one timer thread serves every sleep of the process; in the browser it is
/// `setTimeout`, clamped to `i32::MAX` ms (about 24 days, the longest delay timers take).
pub fn sleep(ms: u64) -> LocalBoxFuture<'static, ()> {
    #[cfg(not(target_arch = "wasm32"))]
    return native::sleep(ms);
    #[cfg(target_arch = "wasm32")]
    return browser::sleep(ms);
}

/// A wait of `ms` as whole milliseconds: rounded up, zero when negative or not a number,
/// `u64::MAX` (never) when too long to count.
#[must_use]
pub fn whole_ms(ms: f64) -> u64 {
    if ms.is_nan() || ms <= 0.0 {
        0
    } else {
        // Saturates: an infinite wait is `u64::MAX`, which no clock reaches.
        ms.ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_round_up_to_whole_milliseconds() {
        let cases = [
            (0.0, 0),
            (-5.0, 0),
            (f64::NAN, 0),
            (0.2, 1),
            (999.0, 999),
            (999.01, 1_000),
            (f64::INFINITY, u64::MAX),
        ];
        for (ms, whole) in cases {
            assert_eq!(whole_ms(ms), whole, "{ms}");
        }
    }
}
