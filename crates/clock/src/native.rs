//! Native time: [`sleep`] on one timer thread for the whole process (a streamed body starts
//! an idle timer per chunk, so a thread per timer would be one thread per chunk) and
//! [`now_ms`] from a process-wide `Instant`.

#![expect(
    clippy::disallowed_methods,
    reason = "the one clock seam: the platform's clocks are read here and nowhere else"
)]

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::future::{self, LocalBoxFuture};

/// One sleep for the timer thread: when, and whom to wake.
type Wake = (Instant, oneshot::Sender<()>);

/// Timers dropped before their deadline are swept out once this many are pending.
const SWEEP_FLOOR: usize = 1024;

pub(crate) fn sleep(ms: u64) -> LocalBoxFuture<'static, ()> {
    let Some(deadline) = Instant::now().checked_add(Duration::from_millis(ms)) else {
        // Further out than the clock counts: it never comes.
        return Box::pin(future::pending());
    };
    let (sender, receiver) = oneshot::channel();
    let unsent = match timer_thread() {
        Some(wakes) => wakes.send((deadline, sender)).err().map(|error| error.0.1),
        None => Some(sender),
    };
    if let Some(sender) = unsent {
        // No shared timer thread (it could not be started): a thread for this one sleep. If
        // even that cannot start, `sender` is dropped and the sleep ends at once, so a
        // timeout fails early and visibly rather than never.
        let _ = thread::Builder::new()
            .name("kiln-clock-sleep".to_owned())
            .spawn(move || {
                thread::sleep(deadline.saturating_duration_since(Instant::now()));
                let _ = sender.send(());
            });
    }
    Box::pin(async move {
        // `Canceled` only when no thread holds the sender: see above.
        let _ = receiver.await;
    })
}

pub(crate) fn now_ms() -> f64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_secs_f64() * 1000.0
}

/// The channel to the process's timer thread, started on first use; `None` when it could not
/// be started.
fn timer_thread() -> Option<&'static mpsc::Sender<Wake>> {
    static WAKES: OnceLock<Option<mpsc::Sender<Wake>>> = OnceLock::new();
    WAKES
        .get_or_init(|| {
            let (sender, receiver) = mpsc::channel();
            thread::Builder::new()
                .name("kiln-clock-timers".to_owned())
                .spawn(move || run_timers(&receiver))
                .ok()
                .map(|_| sender)
        })
        .as_ref()
}

/// Wakes each sleep at its deadline, earliest first, and otherwise waits for the next
/// request or the next deadline. Runs as long as the process (the sender is a static).
fn run_timers(wakes: &mpsc::Receiver<Wake>) {
    // Keyed by deadline, then by arrival so equal deadlines do not collide.
    let mut pending: BTreeMap<(Instant, u64), oneshot::Sender<()>> = BTreeMap::new();
    let mut arrivals: u64 = 0;
    let mut sweep_at = SWEEP_FLOOR;
    loop {
        let now = Instant::now();
        while let Some(entry) = pending.first_entry() {
            if entry.key().0 > now {
                break;
            }
            // The sleep may have been dropped: nobody to wake then.
            let _ = entry.remove().send(());
        }
        let next = match pending.first_key_value() {
            Some(((deadline, _), _)) => wakes.recv_timeout(deadline.saturating_duration_since(now)),
            None => wakes.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok((deadline, sender)) => {
                pending.insert((deadline, arrivals), sender);
                arrivals = arrivals.wrapping_add(1);
                // A body's idle timer is dropped whenever its chunk comes first: without a
                // sweep, a long stream would leave one dead timer per chunk until its deadline.
                if pending.len() >= sweep_at {
                    pending.retain(|_, sender| !sender.is_canceled());
                    sweep_at = pending.len().saturating_mul(2).max(SWEEP_FLOOR);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Wall-clock milliseconds since the epoch.
pub(crate) fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;
    use futures::future::join_all;

    use super::*;

    #[test]
    fn a_sleep_lasts_at_least_as_long_as_asked() {
        // Out of order, together: each on the one timer thread.
        let asked = [120, 0, 20, 60];
        let started = now_ms();
        let slept = block_on(join_all(asked.map(|ms| async move {
            sleep(ms).await;
            (ms, now_ms() - started)
        })));
        for (ms, elapsed) in slept {
            assert!(elapsed >= ms as f64, "asked {ms} ms, slept {elapsed} ms");
        }
    }

    #[test]
    fn dropped_sleeps_do_not_hold_up_the_next() {
        for _ in 0..(3 * SWEEP_FLOOR) {
            drop(sleep(60_000));
        }
        let started = now_ms();
        block_on(sleep(10));
        assert!(now_ms() - started >= 10.0);
    }

    #[test]
    fn now_ms_never_goes_back() {
        let readings: Vec<f64> = (0..1_000).map(|_| now_ms()).collect();
        assert!(readings.windows(2).all(|pair| pair[0] <= pair[1]));
        let before = now_ms();
        thread::sleep(Duration::from_millis(20));
        assert!(now_ms() - before >= 20.0);
    }
}
