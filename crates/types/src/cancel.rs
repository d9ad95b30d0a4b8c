//! The cancel switch of a run or a turn (a Stop button, a page's
//! `AbortSignal`, Ctrl-C): one type, shared by the providers (a streaming
//! turn), the sandbox pool (a program run) and the agent layer. Plain
//! single-threaded state and wakers; no I/O.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct AbortState {
    aborted: Cell<bool>,
    wakers: RefCell<Vec<Waker>>,
}

/// Clones share one switch. After [`AbortSignal::abort`], whatever holds a
/// clone ends what it runs: a turn drops its request and ends with an
/// `aborted` stop; a program run ends `cancelled`.
#[derive(Clone, Default)]
pub struct AbortSignal(Rc<AbortState>);

impl AbortSignal {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    pub fn abort(&self) {
        self.0.aborted.set(true);
        for waker in self.0.wakers.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    #[must_use]
    pub fn is_aborted(&self) -> bool {
        self.0.aborted.get()
    }

    /// Ready once aborted; until then registers `cx`'s waker (once).
    pub fn poll_aborted(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_aborted() {
            return Poll::Ready(());
        }
        let mut wakers = self.0.wakers.borrow_mut();
        if !wakers.iter().any(|waker| waker.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// A future that completes when the switch is thrown (at once if it was).
    #[must_use]
    pub fn aborted(&self) -> Aborted {
        Aborted(self.clone())
    }
}

impl std::fmt::Debug for AbortSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortSignal")
            .field("aborted", &self.is_aborted())
            .finish()
    }
}

/// [`AbortSignal::aborted`].
#[derive(Debug)]
pub struct Aborted(AbortSignal);

impl Future for Aborted {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.poll_aborted(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::AbortSignal;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    #[test]
    fn a_clone_sees_the_abort_and_the_future_completes() {
        let signal = AbortSignal::new();
        let seen = signal.clone();
        let mut aborted = pin!(seen.aborted());
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(aborted.as_mut().poll(&mut cx), Poll::Pending);
        signal.abort();
        assert!(seen.is_aborted());
        assert_eq!(aborted.as_mut().poll(&mut cx), Poll::Ready(()));
    }
}
