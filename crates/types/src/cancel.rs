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
    /// Who threw the switch and why, in words for the run's error.
    reason: RefCell<Option<String>>,
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

    /// Throws the switch saying why (`the MCP client withdrew the run`): the
    /// run's `cancelled` error names it. The first reason given stays.
    pub fn abort_because(&self, reason: impl Into<String>) {
        if !self.is_aborted() {
            *self.0.reason.borrow_mut() = Some(reason.into());
        }
        self.abort();
    }

    /// Why the switch was thrown, when whoever threw it said.
    #[must_use]
    pub fn reason(&self) -> Option<String> {
        self.0.reason.borrow().clone()
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

    #[test]
    fn the_first_reason_given_is_the_one_kept() {
        let signal = AbortSignal::new();
        assert_eq!(signal.reason(), None);
        signal.abort_because("the MCP client withdrew the run");
        signal.clone().abort_because("Ctrl-C stopped the run");
        assert!(signal.is_aborted());
        assert_eq!(
            signal.reason().as_deref(),
            Some("the MCP client withdrew the run")
        );
        let plain = AbortSignal::new();
        plain.abort();
        plain.abort_because("too late");
        assert_eq!(
            plain.reason(),
            None,
            "a switch already thrown keeps no later reason"
        );
    }
}
