//! The run's concurrency permit pool (reference/000, "Executor defaults"): one permit
//! stands for one open provider conversation. A task takes none; each plan step and each
//! sub-agent holds one. A child that a holder spawns runs on its parent's permit while the
//! parent waits in the spawning call, and borrows from the pool beyond that (a second child
//! at once). A holder never queues for a second permit of its own, so nesting cannot
//! deadlock: every holder that waits has lent its permit to a child that runs. One pool
//! bounds tasks, steps and sub-agents together; it rides the [`crate::budget::RunBudget`],
//! so it is a run total like the budget's other bounds.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// How many provider conversations a run has open at once when its limits name no number.
pub const DEFAULT_MAX_CONCURRENCY: u32 = 4;

struct Pool {
    capacity: u32,
    /// Permits of the pool in use (a borrowed parent's permit is not one).
    in_use: u32,
    /// The most permits of the pool ever in use at once.
    peak: u32,
    waiting: Vec<Waker>,
}

impl Pool {
    fn wake_all(&mut self) {
        for waker in self.waiting.drain(..) {
            waker.wake();
        }
    }
}

/// The pool. Cloning gives the same pool.
#[derive(Clone)]
pub struct PermitPool(Rc<RefCell<Pool>>);

impl PermitPool {
    /// A pool of `capacity` permits (at least one).
    #[must_use]
    pub fn new(capacity: u32) -> Self {
        Self(Rc::new(RefCell::new(Pool {
            capacity: capacity.max(1),
            in_use: 0,
            peak: 0,
            waiting: Vec::new(),
        })))
    }

    /// The pool's size.
    #[must_use]
    pub fn capacity(&self) -> u32 {
        self.0.borrow().capacity
    }

    /// Permits of the pool in use now.
    #[must_use]
    pub fn in_use(&self) -> u32 {
        self.0.borrow().in_use
    }

    /// The most permits of the pool in use at once so far.
    #[must_use]
    pub fn peak(&self) -> u32 {
        self.0.borrow().peak
    }

    /// A permit of the pool for a loop nobody spawned (the run's own turn): waits while
    /// the pool is spent.
    pub fn acquire(&self) -> Acquire {
        Acquire {
            pool: self.clone(),
            parent: None,
        }
    }
}

impl fmt::Debug for PermitPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pool = self.0.borrow();
        f.debug_struct("PermitPool")
            .field("capacity", &pool.capacity)
            .field("in_use", &pool.in_use)
            .finish_non_exhaustive()
    }
}

/// One loop's permit: its own from the pool, or its parent's, borrowed. Dropping it gives
/// it back (to the pool, or to the parent for its next child) and wakes whoever waits.
pub struct Held {
    pool: PermitPool,
    /// The parent's `lent` flag when this permit is the parent's.
    borrowed_from: Option<Rc<Cell<bool>>>,
    /// Whether this permit is lent to a child now.
    lent: Rc<Cell<bool>>,
}

impl Held {
    /// A permit for a child of this holder: this holder's own while it is not lent (the
    /// parent waits in the spawning call), else one of the pool's, waiting while the pool
    /// is spent.
    pub fn child(&self) -> Acquire {
        Acquire {
            pool: self.pool.clone(),
            parent: Some(self.lent.clone()),
        }
    }

    /// Whether this permit is its parent's.
    #[must_use]
    pub fn is_borrowed(&self) -> bool {
        self.borrowed_from.is_some()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Ok(mut pool) = self.pool.0.try_borrow_mut() else {
            return;
        };
        match &self.borrowed_from {
            Some(parent) => parent.set(false),
            None => pool.in_use = pool.in_use.saturating_sub(1),
        }
        pool.wake_all();
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("borrowed", &self.is_borrowed())
            .field("lent", &self.lent.get())
            .finish_non_exhaustive()
    }
}

/// Waiting for a permit.
pub struct Acquire {
    pool: PermitPool,
    parent: Option<Rc<Cell<bool>>>,
}

impl Future for Acquire {
    type Output = Held;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Held> {
        let this = self.get_mut();
        let mut pool = this.pool.0.borrow_mut();
        if let Some(parent) = &this.parent
            && !parent.get()
        {
            parent.set(true);
            return Poll::Ready(Held {
                pool: this.pool.clone(),
                borrowed_from: Some(parent.clone()),
                lent: Rc::new(Cell::new(false)),
            });
        }
        if pool.in_use < pool.capacity {
            pool.in_use += 1;
            pool.peak = pool.peak.max(pool.in_use);
            return Poll::Ready(Held {
                pool: this.pool.clone(),
                borrowed_from: None,
                lent: Rc::new(Cell::new(false)),
            });
        }
        pool.waiting.push(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt as _;

    use super::*;

    #[test]
    fn a_child_runs_on_its_parents_permit_and_a_second_borrows_from_the_pool() {
        let pool = PermitPool::new(2);
        let root = pool.acquire().now_or_never().expect("a permit is free");
        assert_eq!(pool.in_use(), 1);
        let first = root.child().now_or_never().expect("the parent's own");
        assert!(first.is_borrowed());
        assert_eq!(pool.in_use(), 1, "the first child costs the pool nothing");
        let second = root.child().now_or_never().expect("the pool's last");
        assert!(!second.is_borrowed());
        assert_eq!(pool.in_use(), 2);
        let mut third = Box::pin(root.child());
        assert!(
            (&mut third).now_or_never().is_none(),
            "the pool is spent: it waits"
        );
        drop(first);
        let third = third.now_or_never().expect("the parent's permit came back");
        assert!(third.is_borrowed());
        drop((second, third, root));
        assert_eq!(pool.in_use(), 0);
        assert_eq!(pool.peak(), 2);
    }

    #[test]
    fn nesting_deeper_than_the_pool_never_waits() {
        // Each holder lends its permit to its one child: a chain of any depth runs in a
        // pool of one.
        let pool = PermitPool::new(1);
        let mut chain = vec![pool.acquire().now_or_never().expect("free")];
        for depth in 0..5 {
            let next = chain
                .last()
                .expect("a holder")
                .child()
                .now_or_never()
                .unwrap_or_else(|| panic!("depth {depth} had to wait"));
            chain.push(next);
        }
        assert_eq!(pool.peak(), 1);
    }
}
