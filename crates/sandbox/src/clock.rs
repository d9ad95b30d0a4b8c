//! The run's clock: guest CPU, sleeps, in-flight calls, person wait, and which
//! budget stopped the run.
//!
//! The job executor tells the clock when the guest starts and stops running
//! JavaScript; `sleep` and tool calls tell it what the guest is waiting on; the
//! host tells it (through [`PersonSignal`]) when a call is held on a person.
//! From that the clock keeps the two budgets that only time can spend:
//!
//! - **JS CPU**: the sum of the spans in which the guest ran JavaScript. Time
//!   awaiting a tool, sleeping or waiting on a person is not in it. The clock
//!   checks it each time the guest stops; a guest that never stops is ended from
//!   outside (the page terminates the worker, the CLI exits), which is what
//!   [`CpuGauge`] and the host's own accounting are for.
//! - **Person wait**: time in which the guest is stopped, nothing is sleeping,
//!   and every in-flight call is held on a person.
//!
//! The person-wait budget also bounds how long calls are held on a person at
//! all: time in which some call is held counts toward it even while a sleep is
//! pending or the guest runs (that time is not person wait, and the wall clock
//! still counts it), so a program cannot keep an approval open past the
//! budget by sleeping beside it.

use std::cell::{Cell, RefCell};
use std::cmp::Ordering as Order;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::ops::Add;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Poll, Waker};
use std::time::Duration;

use futures::future::{Either, select};
use kiln_types::tool_result::Budget;

/// A reading of the system clock (`kiln_clock::now_ms`), the moments the run's spans start
/// and end at. Ordered by the reading, which never goes back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Moment {
    ms: f64,
}

impl Moment {
    pub(crate) fn now() -> Self {
        Self {
            ms: kiln_clock::now_ms(),
        }
    }

    /// The time since this moment.
    pub(crate) fn elapsed(self) -> Duration {
        Self::now().saturating_duration_since(self)
    }

    /// The time from `earlier` to this moment, zero if `earlier` is later.
    pub(crate) fn saturating_duration_since(self, earlier: Self) -> Duration {
        Duration::try_from_secs_f64((self.ms - earlier.ms) / 1e3).unwrap_or(Duration::ZERO)
    }
}

impl Add<Duration> for Moment {
    type Output = Self;

    fn add(self, duration: Duration) -> Self {
        Self {
            ms: self.ms + duration.as_secs_f64() * 1e3,
        }
    }
}

impl PartialEq for Moment {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Order::Equal
    }
}

impl Eq for Moment {}

impl PartialOrd for Moment {
    fn partial_cmp(&self, other: &Self) -> Option<Order> {
        Some(self.cmp(other))
    }
}

impl Ord for Moment {
    fn cmp(&self, other: &Self) -> Order {
        self.ms.total_cmp(&other.ms)
    }
}

/// What the guest is waiting on when it stops running JavaScript.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleState {
    /// Guest JavaScript time so far, in milliseconds.
    pub cpu_ms: f64,
    /// When a sleep is pending: how long until the earliest one ends, in
    /// milliseconds. The guest runs again then even if no call is answered.
    pub wake_in_ms: Option<f64>,
}

/// The guest's JavaScript time, readable from another thread while the run
/// goes on (the CLI's watchdog polls it to end a guest that never stops).
#[derive(Debug)]
pub struct CpuGauge {
    epoch: Moment,
    spent_us: AtomicU64,
    /// Microseconds since `epoch` plus one when the guest started running, or
    /// zero while it is stopped.
    busy_since_us: AtomicU64,
}

impl Default for CpuGauge {
    fn default() -> Self {
        Self {
            epoch: Moment::now(),
            spent_us: AtomicU64::new(0),
            busy_since_us: AtomicU64::new(0),
        }
    }
}

impl CpuGauge {
    /// Guest JavaScript time so far, including the span running now.
    #[must_use]
    pub fn spent(&self) -> Duration {
        let spent = self.spent_us.load(Ordering::Acquire);
        let busy_since = self.busy_since_us.load(Ordering::Acquire);
        let running = if busy_since == 0 {
            0
        } else {
            self.now_us().saturating_sub(busy_since - 1)
        };
        Duration::from_micros(spent.saturating_add(running))
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn busy(&self) {
        self.busy_since_us
            .store(self.now_us().saturating_add(1), Ordering::Release);
    }

    fn idle(&self, spent: Duration) {
        let spent = u64::try_from(spent.as_micros()).unwrap_or(u64::MAX);
        self.spent_us.store(spent, Ordering::Release);
        self.busy_since_us.store(0, Ordering::Release);
    }
}

/// Lets the host say that one call is (or no longer is) held on a person.
#[derive(Clone)]
pub struct PersonSignal {
    clock: Rc<RunClock>,
    call_number: u32,
}

impl PersonSignal {
    /// `held: true` while the call waits for a person's approval or decision.
    pub fn held(&self, held: bool) {
        self.clock.call_held(self.call_number, held);
    }
}

pub(crate) struct RunClock {
    started: Moment,
    js_cpu: Duration,
    person_budget: Duration,
    gauge: Option<Arc<CpuGauge>>,
    cpu: Cell<Duration>,
    busy_since: Cell<Option<Moment>>,
    /// In-flight calls by number: held on a person right now?
    calls: RefCell<BTreeMap<u32, bool>>,
    held_ever: RefCell<BTreeSet<u32>>,
    /// Deadlines of pending sleeps, each with how many end then: ordered, so
    /// that settling many sleeps costs a logarithm each, not a scan.
    sleeps: RefCell<BTreeMap<Moment, usize>>,
    person: Cell<Duration>,
    person_since: Cell<Option<Moment>>,
    /// Time in which some call was held on a person, and since when one is.
    held: Cell<Duration>,
    held_since: Cell<Option<Moment>>,
    stop: Cell<Option<Budget>>,
    /// When the program's first statement was about to run, from the start.
    first_statement: Cell<Option<Duration>>,
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl RunClock {
    pub(crate) fn new(js_cpu_ms: u64, person_wait_ms: u64, gauge: Option<Arc<CpuGauge>>) -> Self {
        Self {
            started: Moment::now(),
            js_cpu: Duration::from_millis(js_cpu_ms),
            person_budget: Duration::from_millis(person_wait_ms),
            gauge,
            cpu: Cell::new(Duration::ZERO),
            busy_since: Cell::new(None),
            calls: RefCell::new(BTreeMap::new()),
            held_ever: RefCell::new(BTreeSet::new()),
            sleeps: RefCell::new(BTreeMap::new()),
            person: Cell::new(Duration::ZERO),
            person_since: Cell::new(None),
            held: Cell::new(Duration::ZERO),
            held_since: Cell::new(None),
            stop: Cell::new(None),
            first_statement: Cell::new(None),
            generation: Cell::new(0),
            wakers: RefCell::new(Vec::new()),
        }
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The program is parsed and its first statement runs next.
    pub(crate) fn starting(&self) {
        self.first_statement.set(Some(self.started.elapsed()));
    }

    /// How long the run took to reach the program's first statement.
    pub(crate) fn start_time(&self) -> Option<Duration> {
        self.first_statement.get()
    }

    /// Ends the run by `budget`: no further job runs. The first stop wins.
    pub(crate) fn stop(&self, budget: Budget) {
        if self.stop.get().is_none() {
            self.stop.set(Some(budget));
        }
        self.changed();
    }

    pub(crate) fn stopped(&self) -> Option<Budget> {
        self.stop.get()
    }

    /// The guest starts running JavaScript.
    pub(crate) fn busy(&self) {
        if self.busy_since.get().is_none() {
            self.busy_since.set(Some(Moment::now()));
            if let Some(gauge) = &self.gauge {
                gauge.busy();
            }
            self.update_person();
        }
    }

    /// The guest stops running JavaScript. Spends its CPU budget, stopping the
    /// run when it is gone.
    pub(crate) fn idle(&self) -> IdleState {
        if let Some(since) = self.busy_since.take() {
            self.cpu.set(self.cpu.get() + since.elapsed());
            if let Some(gauge) = &self.gauge {
                gauge.idle(self.cpu.get());
            }
        }
        if self.cpu.get() > self.js_cpu {
            self.stop(Budget::JsCpu);
        }
        self.update_person();
        let now = Moment::now();
        let wake_in_ms = self
            .sleeps
            .borrow()
            .keys()
            .next()
            .map(|deadline| deadline.saturating_duration_since(now).as_secs_f64() * 1e3);
        IdleState {
            cpu_ms: self.cpu.get().as_secs_f64() * 1e3,
            wake_in_ms,
        }
    }

    pub(crate) fn person_signal(self: &Rc<Self>, call_number: u32) -> PersonSignal {
        PersonSignal {
            clock: self.clone(),
            call_number,
        }
    }

    pub(crate) fn call_started(&self, call_number: u32) {
        self.calls.borrow_mut().insert(call_number, false);
        self.update_person();
    }

    /// The call settled; returns whether it was ever held on a person.
    pub(crate) fn call_settled(&self, call_number: u32) -> bool {
        self.calls.borrow_mut().remove(&call_number);
        self.update_person();
        self.held_ever.borrow().contains(&call_number)
    }

    /// Whether the call was ever held on a person (for calls still in flight
    /// when the run ended).
    pub(crate) fn was_held(&self, call_number: u32) -> bool {
        self.held_ever.borrow().contains(&call_number)
    }

    fn call_held(&self, call_number: u32, held: bool) {
        if let Some(state) = self.calls.borrow_mut().get_mut(&call_number) {
            *state = held;
            if held {
                self.held_ever.borrow_mut().insert(call_number);
            }
        }
        self.update_person();
    }

    pub(crate) fn sleep_started(&self, deadline: Moment) {
        *self.sleeps.borrow_mut().entry(deadline).or_insert(0) += 1;
        self.update_person();
    }

    pub(crate) fn sleep_ended(&self, deadline: Moment) {
        let mut sleeps = self.sleeps.borrow_mut();
        if let Some(count) = sleeps.get_mut(&deadline) {
            *count -= 1;
            if *count == 0 {
                sleeps.remove(&deadline);
            }
        }
        drop(sleeps);
        self.update_person();
    }

    /// Person-wait time so far, including a wait going on now.
    pub(crate) fn person_wait(&self) -> Duration {
        self.person.get()
            + self
                .person_since
                .get()
                .map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// Time in which some call was held on a person, including now: never
    /// less than [`Self::person_wait`].
    fn held_time(&self) -> Duration {
        self.held.get()
            + self
                .held_since
                .get()
                .map_or(Duration::ZERO, |since| since.elapsed())
    }

    fn waiting_on_person(&self) -> bool {
        let calls = self.calls.borrow();
        self.busy_since.get().is_none()
            && self.sleeps.borrow().is_empty()
            && !calls.is_empty()
            && calls.values().all(|held| *held)
    }

    fn update_person(&self) {
        let waiting = self.waiting_on_person();
        match (waiting, self.person_since.get()) {
            (true, None) => self.person_since.set(Some(Moment::now())),
            (false, Some(since)) => {
                self.person.set(self.person.get() + since.elapsed());
                self.person_since.set(None);
            }
            _ => {}
        }
        let held = self.calls.borrow().values().any(|held| *held);
        match (held, self.held_since.get()) {
            (true, None) => self.held_since.set(Some(Moment::now())),
            (false, Some(since)) => {
                self.held.set(self.held.get() + since.elapsed());
                self.held_since.set(None);
            }
            _ => {}
        }
        if self.held_time() > self.person_budget {
            self.stop.set(self.stop.get().or(Some(Budget::PersonWait)));
        }
        self.changed();
    }

    fn changed(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
        for waker in self.wakers.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    /// Completes when anything the clock knows changes, or when the person-wait
    /// budget runs out while a call is held on a person (then the run is
    /// stopped with `person_wait`).
    pub(crate) fn watch(self: &Rc<Self>) -> impl Future<Output = ()> + 'static {
        let clock = self.clone();
        let generation = self.generation.get();
        let changed = futures::future::poll_fn(move |cx| {
            if clock.generation.get() == generation {
                clock.wakers.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        });
        let deadline = self
            .held_since
            .get()
            .map(|_| self.person_budget.saturating_sub(self.held_time()));
        let clock = self.clone();
        async move {
            match deadline {
                Some(remaining) => {
                    // Rounded up to whole milliseconds, and one more: the budget is
                    // spent once the wait is *past* it.
                    let timer = kiln_clock::sleep(
                        kiln_clock::whole_ms(remaining.as_secs_f64() * 1e3).saturating_add(1),
                    );
                    if let Either::Right(..) = select(Box::pin(changed), timer).await {
                        clock.update_person();
                    }
                }
                None => changed.await,
            }
        }
    }
}
