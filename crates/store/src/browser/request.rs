//! IndexedDB's events as futures: [`Pending`] for one request (`success` or
//! `error`), [`Finished`] for a transaction (`complete` or `abort`).
//!
//! `idb`'s own futures need its `futures` feature, which brings tokio into the
//! bundle; these are a few lines over web-sys instead. Both attach their
//! handlers when made (so an event that fires before the first poll is not
//! missed) and detach them when dropped (so a late event never calls a freed
//! closure). A continuation runs as a microtask of the event that woke it,
//! while its transaction is still active, so a transaction may span awaits
//! on its own requests (never on anything else).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use wasm_bindgen::prelude::Closure;
use wasm_bindgen::{JsCast as _, JsValue};
use web_sys::{Event, IdbRequest, IdbTransaction};

/// What an event reported, and who waits for it.
struct Slot<T> {
    outcome: Option<T>,
    waker: Option<Waker>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self {
            outcome: None,
            waker: None,
        }
    }
}

/// A slot shared by a future and its event handler.
type Shared<T> = Rc<RefCell<Slot<T>>>;

/// How a transaction ended (see [`Finished`]).
type Ending = Result<(), Option<JsValue>>;

fn settle<T>(slot: &RefCell<Slot<T>>, outcome: T) {
    let waker = {
        let mut slot = slot.borrow_mut();
        if slot.outcome.is_none() {
            slot.outcome = Some(outcome);
        }
        slot.waker.take()
    };
    if let Some(waker) = waker {
        waker.wake();
    }
}

fn poll_slot<T>(slot: &RefCell<Slot<T>>, context: &mut Context<'_>) -> Poll<T> {
    let mut slot = slot.borrow_mut();
    match slot.outcome.take() {
        Some(outcome) => Poll::Ready(outcome),
        None => {
            slot.waker = Some(context.waker().clone());
            Poll::Pending
        }
    }
}

/// One request's next `success` (its `result`) or `error` (its `error`, a
/// `DOMException`). A cursor request fires once per step: make a new
/// `Pending` on it after each `continue()`.
pub(crate) struct Pending {
    request: IdbRequest,
    slot: Shared<Result<JsValue, JsValue>>,
    _handler: Closure<dyn FnMut(Event)>,
}

impl Pending {
    pub fn new(request: impl Into<IdbRequest>) -> Self {
        let request: IdbRequest = request.into();
        let slot: Shared<Result<JsValue, JsValue>> = Rc::default();
        let handler = {
            let request = request.clone();
            let slot = slot.clone();
            Closure::<dyn FnMut(Event)>::new(move |event: Event| {
                let outcome = if event.type_() == "success" {
                    request.result()
                } else {
                    Err(match request.error() {
                        Ok(Some(exception)) => exception.into(),
                        Ok(None) | Err(_) => JsValue::from_str("the request failed"),
                    })
                };
                settle(&slot, outcome);
            })
        };
        request.set_onsuccess(Some(handler.as_ref().unchecked_ref()));
        request.set_onerror(Some(handler.as_ref().unchecked_ref()));
        Self {
            request,
            slot,
            _handler: handler,
        }
    }
}

impl Future for Pending {
    type Output = Result<JsValue, JsValue>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        poll_slot(&self.slot, context)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.request.set_onsuccess(None);
        self.request.set_onerror(None);
    }
}

/// A transaction's end: `Ok` on `complete`; on `abort`, `Err` with the
/// transaction's `error` (`None` when it was aborted on purpose).
pub(crate) struct Finished {
    transaction: IdbTransaction,
    slot: Shared<Ending>,
    _handler: Closure<dyn FnMut(Event)>,
}

impl Finished {
    pub fn new(transaction: &IdbTransaction) -> Self {
        let slot: Shared<Ending> = Rc::default();
        let handler = {
            let transaction = transaction.clone();
            let slot = slot.clone();
            Closure::<dyn FnMut(Event)>::new(move |event: Event| {
                let outcome = if event.type_() == "complete" {
                    Ok(())
                } else {
                    Err(transaction.error().map(JsValue::from))
                };
                settle(&slot, outcome);
            })
        };
        transaction.set_oncomplete(Some(handler.as_ref().unchecked_ref()));
        transaction.set_onabort(Some(handler.as_ref().unchecked_ref()));
        Self {
            transaction: transaction.clone(),
            slot,
            _handler: handler,
        }
    }
}

impl Future for Finished {
    type Output = Ending;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        poll_slot(&self.slot, context)
    }
}

impl Drop for Finished {
    fn drop(&mut self) {
        self.transaction.set_oncomplete(None);
        self.transaction.set_onabort(None);
    }
}
