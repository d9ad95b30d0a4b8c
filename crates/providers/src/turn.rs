//! One turn under the run's bounds: admitted by the [`RunBudget`] (reserve before, commit
//! after), cut by the caller's [`AbortSignal`] or the run's deadline — each of those ends the
//! turn with one visible [`Event::Stop`] naming the reason, never silently.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use futures::future::{LocalBoxFuture, poll_fn};
use futures::stream::{self, StreamExt as _};

use crate::budget::{Reservation, RunBudget};
use crate::cost::estimate_prompt_tokens;
use crate::event::{Event, FinalMessage, Stop, StopReason, Usage};
use crate::{ChatRequest, EventStream, Provider};

#[derive(Default)]
struct AbortState {
    aborted: Cell<bool>,
    wakers: RefCell<Vec<Waker>>,
}

/// A turn's cancel switch (the Stop button): clones share it. After `abort()` the turn
/// drops its request (which cancels the HTTP exchange) and ends with an `aborted` stop.
#[derive(Clone, Default)]
pub struct AbortSignal(Rc<AbortState>);

impl AbortSignal {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn abort(&self) {
        self.0.aborted.set(true);
        for waker in self.0.wakers.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    pub fn is_aborted(&self) -> bool {
        self.0.aborted.get()
    }

    fn poll_aborted(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_aborted() {
            return Poll::Ready(());
        }
        let mut wakers = self.0.wakers.borrow_mut();
        if !wakers.iter().any(|waker| waker.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl std::fmt::Debug for AbortSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortSignal")
            .field("aborted", &self.is_aborted())
            .finish()
    }
}

enum Wake {
    Item(Option<Result<Event, crate::ProviderError>>),
    Aborted,
    Deadline,
}

struct Running {
    inner: EventStream,
    abort: Option<AbortSignal>,
    deadline: Option<LocalBoxFuture<'static, ()>>,
    budget: Option<RunBudget>,
    reservation: Option<Reservation>,
    message: FinalMessage,
    prompt_tokens: u64,
    finished: bool,
}

impl Running {
    /// Kiln ends the turn: what came so far is the message, with this stop.
    fn stop_here(&mut self, stop: Stop) -> Vec<Result<Event, crate::ProviderError>> {
        self.finished = true;
        // The request is dropped with the stream, which cancels it.
        self.inner = stream::empty().boxed_local();
        let event = Event::Stop { stop };
        self.message.absorb(&event);
        if let Some(reservation) = self.reservation.take() {
            // The provider charges for what it produced; when it did not say, estimate it.
            let usage = if self.message.usage == Usage::default() {
                Usage {
                    input_tokens: self.prompt_tokens,
                    output_tokens: u64::try_from(self.message.text.len().div_ceil(4)).unwrap_or(0),
                }
            } else {
                self.message.usage
            };
            reservation.commit(usage);
        }
        vec![
            Ok(event),
            Ok(Event::Done {
                message: std::mem::take(&mut self.message),
            }),
        ]
    }

    async fn next_batch(&mut self) -> Vec<Result<Event, crate::ProviderError>> {
        let wake = {
            let abort = self.abort.clone();
            let deadline = &mut self.deadline;
            let inner = &mut self.inner;
            poll_fn(|cx| {
                if let Some(abort) = &abort
                    && abort.poll_aborted(cx).is_ready()
                {
                    return Poll::Ready(Wake::Aborted);
                }
                if let Some(timer) = deadline
                    && Pin::new(timer).poll(cx).is_ready()
                {
                    return Poll::Ready(Wake::Deadline);
                }
                inner.poll_next_unpin(cx).map(Wake::Item)
            })
            .await
        };
        match wake {
            Wake::Aborted => self.stop_here(Stop {
                reason: StopReason::Aborted,
                message: Some(format!(
                    "stopped by the person after {} characters of the reply",
                    self.message.text.chars().count()
                )),
            }),
            Wake::Deadline => {
                let stop = self
                    .budget
                    .as_ref()
                    .and_then(|budget| budget.check_deadline().err())
                    .unwrap_or(Stop {
                        reason: StopReason::Deadline,
                        message: Some("the run's deadline has passed".to_owned()),
                    });
                self.stop_here(stop)
            }
            Wake::Item(None) => {
                self.finished = true;
                Vec::new()
            }
            Wake::Item(Some(Err(error))) => {
                self.finished = true;
                // Nothing is known of what a failed call cost: its hold is released.
                self.reservation = None;
                vec![Err(error)]
            }
            Wake::Item(Some(Ok(event))) => {
                if let Event::Done { message } = &event {
                    self.finished = true;
                    if let Some(reservation) = self.reservation.take() {
                        reservation.commit(message.usage);
                    }
                } else {
                    self.message.absorb(&event);
                }
                vec![Ok(event)]
            }
        }
    }
}

/// Streams one turn of `provider` under `budget` (none: unbudgeted) and `abort`.
///
/// A turn the budget refuses yields its `Stop` (`budget`, `deadline` or `turns`, with the
/// budget's sentence) and an empty `Done`, and sends nothing.
pub fn turn(
    provider: &dyn Provider,
    request: ChatRequest,
    budget: Option<RunBudget>,
    abort: Option<AbortSignal>,
) -> EventStream {
    let refused = |stop: Stop| {
        let mut message = FinalMessage::default();
        let event = Event::Stop { stop };
        message.absorb(&event);
        stream::iter([Ok(event), Ok(Event::Done { message })]).boxed_local()
    };
    if abort.as_ref().is_some_and(AbortSignal::is_aborted) {
        return refused(Stop {
            reason: StopReason::Aborted,
            message: Some("stopped by the person before the request was sent".to_owned()),
        });
    }
    let prompt_tokens = estimate_prompt_tokens(&request);
    let reservation = match &budget {
        None => None,
        Some(budget) => match budget.reserve(
            &request.options.model,
            prompt_tokens,
            request.options.max_tokens,
        ) {
            Ok(reservation) => Some(reservation),
            Err(stop) => return refused(stop),
        },
    };
    let deadline = budget
        .as_ref()
        .and_then(RunBudget::remaining_ms)
        .map(|ms| kiln_http::sleep(ms.max(0.0).ceil() as u64));
    let running = Running {
        inner: provider.stream(request),
        abort,
        deadline,
        budget,
        reservation,
        message: FinalMessage::default(),
        prompt_tokens,
        finished: false,
    };
    stream::unfold(
        (running, Vec::<Result<Event, crate::ProviderError>>::new()),
        |(mut running, mut queued)| async move {
            loop {
                if !queued.is_empty() {
                    let item = queued.remove(0);
                    return Some((item, (running, queued)));
                }
                if running.finished {
                    return None;
                }
                queued = running.next_batch().await;
            }
        },
    )
    .boxed_local()
}
