//! [`FakeClock`]: a clock for tests, whose time moves only when the test says so (or, when
//! auto-advancing, jumps to the end of each sleep as soon as something waits on it).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use futures::future::LocalBoxFuture;

use crate::Clock;

/// A clock for tests. Clones are the same clock.
///
/// It starts at 0 ms. Made with [`FakeClock::new`], time moves only on
/// [`FakeClock::advance`], which ends every sleep it passes: right for code that races a
/// sleep against something else (a deadline against a stream), where the test decides when
/// the deadline comes. Made with [`FakeClock::auto_advancing`], a sleep ends as soon as it is
/// awaited, the clock moved to its end: right for code that waits on one sleep at a time
/// (a retry loop), which then runs at once and deterministically. Either way
/// [`FakeClock::sleeps`] says which waits were asked for.
#[derive(Clone, Default)]
pub struct FakeClock {
    state: Rc<RefCell<State>>,
}

#[derive(Default)]
struct State {
    now_ms: f64,
    auto_advance: bool,
    /// Every sleep asked for, in milliseconds, in order.
    asked: Vec<u64>,
    /// Sleeps not yet over, by number: when each ends and whom to wake then.
    pending: BTreeMap<u64, (f64, Option<Waker>)>,
    next_sleep: u64,
}

impl FakeClock {
    /// A clock at 0 ms that moves only on [`FakeClock::advance`].
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A clock at 0 ms on which each sleep ends as soon as it is awaited, the clock moved
    /// forward to its end.
    #[must_use]
    pub fn auto_advancing() -> Self {
        let clock = Self::default();
        clock.state.borrow_mut().auto_advance = true;
        clock
    }

    /// Moves the clock `ms` forward and ends every sleep that is then over.
    pub fn advance(&self, ms: f64) {
        let wakers = {
            let mut state = self.state.borrow_mut();
            state.now_ms += ms.max(0.0);
            state.due()
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Every sleep asked of this clock so far, in milliseconds, in the order asked (whether
    /// or not it ran to its end).
    #[must_use]
    pub fn sleeps(&self) -> Vec<u64> {
        self.state.borrow().asked.clone()
    }

    /// How many sleeps are waiting for the clock to reach their end.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.state.borrow().pending.len()
    }
}

impl State {
    /// The wakers of sleeps that are over, taken out of `pending`'s wait.
    fn due(&mut self) -> Vec<Waker> {
        let now_ms = self.now_ms;
        self.pending
            .values_mut()
            .filter(|(ends_at, _)| *ends_at <= now_ms)
            .filter_map(|(_, waker)| waker.take())
            .collect()
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> f64 {
        self.state.borrow().now_ms
    }

    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()> {
        let mut state = self.state.borrow_mut();
        state.asked.push(ms);
        let number = state.next_sleep;
        state.next_sleep += 1;
        // Past 2^53 ms an f64 stops counting single milliseconds; no test waits that long.
        let ends_at = state.now_ms + ms as f64;
        state.pending.insert(number, (ends_at, None));
        Box::pin(FakeSleep {
            clock: self.clone(),
            number,
        })
    }
}

/// One sleep on a [`FakeClock`]; dropping it takes it off the clock.
struct FakeSleep {
    clock: FakeClock,
    number: u64,
}

impl Future for FakeSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        let others = {
            let mut state = self.clock.state.borrow_mut();
            let Some(&(ends_at, _)) = state.pending.get(&self.number) else {
                return Poll::Ready(());
            };
            if ends_at > state.now_ms && !state.auto_advance {
                if let Some((_, waker)) = state.pending.get_mut(&self.number) {
                    *waker = Some(context.waker().clone());
                }
                return Poll::Pending;
            }
            state.now_ms = state.now_ms.max(ends_at);
            state.pending.remove(&self.number);
            // Moving the clock may have ended other sleeps too.
            state.due()
        };
        for waker in others {
            waker.wake();
        }
        Poll::Ready(())
    }
}

impl Drop for FakeSleep {
    fn drop(&mut self) {
        self.clock.state.borrow_mut().pending.remove(&self.number);
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt as _;
    use futures::executor::block_on;

    use super::*;

    #[test]
    fn a_sleep_ends_when_the_clock_is_advanced_past_it() {
        let clock = FakeClock::new();
        let mut short = clock.sleep(100);
        let mut long = clock.sleep(1_000);
        assert_eq!(((&mut short).now_or_never(), clock.pending()), (None, 2));
        clock.advance(99.0);
        assert_eq!((&mut short).now_or_never(), None);
        clock.advance(1.0);
        assert_eq!((&mut short).now_or_never(), Some(()));
        assert_eq!((&mut long).now_or_never(), None);
        clock.advance(900.0);
        assert_eq!((&mut long).now_or_never(), Some(()));
        assert_eq!(
            (clock.now_ms(), clock.sleeps(), clock.pending()),
            (1_000.0, vec![100, 1_000], 0)
        );
    }

    #[test]
    fn advancing_wakes_a_task_waiting_on_the_sleep() {
        let clock = FakeClock::new();
        let mut pool = futures::executor::LocalPool::new();
        let ended = Rc::new(RefCell::new(None));
        let sleep = clock.sleep(500);
        {
            let (clock, ended) = (clock.clone(), Rc::clone(&ended));
            futures::task::LocalSpawnExt::spawn_local(&pool.spawner(), async move {
                sleep.await;
                *ended.borrow_mut() = Some(clock.now_ms());
            })
            .unwrap_or_default();
        }
        pool.run_until_stalled();
        assert_eq!(*ended.borrow(), None);
        clock.advance(500.0);
        pool.run_until_stalled();
        assert_eq!(*ended.borrow(), Some(500.0));
    }

    #[test]
    fn an_auto_advancing_clock_jumps_to_the_end_of_each_sleep() {
        let clock = FakeClock::auto_advancing();
        block_on(async {
            clock.sleep(1_000).await;
            clock.sleep_until(1_500.5).await;
        });
        assert_eq!(
            (clock.now_ms(), clock.sleeps()),
            (1_501.0, vec![1_000, 501])
        );
    }

    #[test]
    fn a_dropped_sleep_leaves_the_clock() {
        let clock = FakeClock::new();
        drop(clock.sleep(10));
        assert_eq!((clock.pending(), clock.sleeps()), (0, vec![10]));
    }
}
