//! The runtime worker, started, and the exchanges in flight with it.
//!
//! Every exchange the client sends gets an id of its own; the worker's
//! answers name it. An exchange ends with its [`FromRuntime::Done`] or
//! [`FromRuntime::Failed`]; a keyed run's [`FromRuntime::Interim`] settles
//! its answer early while the exchange stays, because its run still calls the
//! page until it ends. A worker that fails settles every exchange with an
//! `engine` problem: nothing waits forever on a worker that is gone.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use futures::channel::oneshot;
use kiln_types::model::ModelStatus;
use kiln_types::permission::Answer;
use kiln_types::runtime::{
    ExchangeEvent, FromRuntime, Problem, RuntimeOptions, ToRuntime, Told, decode, encode,
};
use kiln_types::tool_result::{CallOutcome, ToolFailure};
use serde_json::Value;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{ErrorEvent, MessageEvent, Worker, WorkerOptions, WorkerType};

use crate::abort::{AbortListener, Signal};
use crate::js::{console_error, error_text};
use crate::page_side::{PageCall, PageSide};

/// An exchange's answer: its value, or why there is none. The sender is
/// dropped only when the client itself goes.
pub type Answered = oneshot::Receiver<Result<Value, Problem>>;

/// Where an exchange's streamed events go.
pub type Listener = Rc<dyn Fn(ExchangeEvent)>;

/// Where a watch's committed changes go (`[{table, key, version}]`).
pub type ChangeListener = Rc<dyn Fn(Value)>;

/// Where the in-browser model's loading statuses go.
pub type StatusListener = Rc<dyn Fn(ModelStatus)>;

/// Who serves an exchange on the page: what answers its calls back, where
/// its events go, and the signal that cancels it. All optional: a storage
/// operation has none.
#[derive(Default)]
pub struct With {
    pub page: Option<Rc<dyn PageSide>>,
    pub on_event: Option<Listener>,
    pub signal: Option<Signal>,
}

/// What the client keeps of one exchange while the worker serves it.
enum Entry {
    Exchange {
        page: Option<Rc<dyn PageSide>>,
        /// Taken by a keyed run's interim answer.
        done: Option<oneshot::Sender<Result<Value, Problem>>>,
        on_event: Option<Listener>,
        /// Sends `cancel` when the page's signal fires; removed when the
        /// exchange ends.
        _abort: Option<AbortListener>,
    },
    /// A change-feed watch: every batch goes to `on_change` until unwatched.
    Watch { on_change: ChangeListener },
}

impl Entry {
    fn finish(self, answer: Result<Value, Problem>) {
        match self {
            Self::Exchange { done, .. } => {
                if let Some(done) = done {
                    let _ = done.send(answer);
                }
            }
            Self::Watch { .. } => {
                if let Err(problem) = answer {
                    console_error(&format!(
                        "kiln: the change feed stopped: {}",
                        problem.message
                    ));
                }
            }
        }
    }

    fn on_event(&self) -> Option<Listener> {
        match self {
            Self::Exchange { on_event, .. } => on_event.clone(),
            Self::Watch { .. } => None,
        }
    }

    fn page(&self) -> Option<Rc<dyn PageSide>> {
        match self {
            Self::Exchange { page, .. } => page.clone(),
            Self::Watch { .. } => None,
        }
    }
}

/// The worker's `ready` (with why its stores did not open, if they did not),
/// or why it did not start.
type Started = Result<Option<Problem>, String>;

struct Shared {
    worker: Worker,
    entries: RefCell<HashMap<u64, Entry>>,
    ready: RefCell<Option<oneshot::Sender<Started>>>,
    model_listeners: RefCell<Vec<StatusListener>>,
}

/// A started runtime worker. Dropping it terminates the worker.
pub struct RuntimeClient {
    shared: Rc<Shared>,
    next_id: Cell<u64>,
    storage: Option<Problem>,
    _onmessage: Closure<dyn FnMut(MessageEvent)>,
    _onerror: Closure<dyn FnMut(ErrorEvent)>,
}

fn send(worker: &Worker, message: &ToRuntime) {
    // A worker that is gone answers nothing; its exchanges fail by `onerror`.
    let _ = worker.post_message(&JsValue::from_str(&encode(message)));
}

impl RuntimeClient {
    /// Starts the worker at `url` with `options` (given as its name, so they
    /// are there before its first message) and waits for its `ready`.
    ///
    /// # Errors
    ///
    /// Why the worker could not start, or refused its options.
    pub async fn start(url: &str, options: &RuntimeOptions) -> Result<Self, String> {
        let worker_options = WorkerOptions::new();
        worker_options.set_type(WorkerType::Module);
        worker_options.set_name(&serde_json::to_string(options).unwrap_or_default());
        let worker = Worker::new_with_options(url, &worker_options).map_err(|error| {
            format!("the runtime worker could not start: {}", error_text(&error))
        })?;
        let (ready, is_ready) = oneshot::channel();
        let shared = Rc::new(Shared {
            worker,
            entries: RefCell::default(),
            ready: RefCell::new(Some(ready)),
            model_listeners: RefCell::default(),
        });
        let onmessage = Closure::<dyn FnMut(MessageEvent)>::new({
            let shared = shared.clone();
            move |event: MessageEvent| {
                let text = event.data().as_string().unwrap_or_default();
                match decode::<FromRuntime>(&text) {
                    Ok(message) => on_message(&shared, message),
                    Err(error) => console_error(&format!(
                        "kiln: a message from the runtime worker was refused: {error}"
                    )),
                }
            }
        });
        let onerror = Closure::<dyn FnMut(ErrorEvent)>::new({
            let shared = shared.clone();
            move |event: ErrorEvent| {
                let problem = format!("the runtime worker failed: {}", event.message());
                if let Some(ready) = shared.ready.borrow_mut().take() {
                    let _ = ready.send(Err(problem.clone()));
                }
                fail_all(&shared, &problem);
            }
        });
        shared
            .worker
            .set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
        shared
            .worker
            .set_onerror(Some(onerror.as_ref().unchecked_ref()));
        let storage = is_ready
            .await
            .map_err(|_| "the runtime worker went away before it was ready".to_owned())??;
        Ok(Self {
            shared,
            next_id: Cell::new(0),
            storage,
            _onmessage: onmessage,
            _onerror: onerror,
        })
    }

    /// Why the workspace's stores did not open in the worker, when they did
    /// not (runs then go on without the storage tools).
    #[must_use]
    pub fn storage(&self) -> Option<&Problem> {
        self.storage.as_ref()
    }

    fn next_id(&self) -> u64 {
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        id
    }

    /// Sends the exchange `message(id)` makes, served on the page `with`;
    /// returns its id (for [`RuntimeClient::cancel`]) and its answer. The
    /// signal is listened to once the message is sent, so even a signal
    /// aborted already cancels it.
    pub fn send(&self, message: impl FnOnce(u64) -> ToRuntime, with: With) -> (u64, Answered) {
        let id = self.next_id();
        let (done, answered) = oneshot::channel();
        let With {
            page,
            on_event,
            signal,
        } = with;
        self.shared.entries.borrow_mut().insert(
            id,
            Entry::Exchange {
                page,
                done: Some(done),
                on_event,
                _abort: None,
            },
        );
        send(&self.shared.worker, &message(id));
        if let Some(signal) = signal {
            let worker = self.shared.worker.clone();
            let listener = signal.on_abort_do(move || send(&worker, &ToRuntime::Cancel { id }));
            if let Some(Entry::Exchange { _abort, .. }) =
                self.shared.entries.borrow_mut().get_mut(&id)
            {
                *_abort = Some(listener);
            }
        }
        (id, answered)
    }

    /// Sends a request that calls nothing back on the page and streams
    /// nothing (a storage operation, a catalog, a model list).
    pub fn request(&self, message: impl FnOnce(u64) -> ToRuntime) -> Answered {
        self.send(message, With::default()).1
    }

    /// Sends `message`, which has no answer.
    pub fn tell(&self, message: &ToRuntime) {
        send(&self.shared.worker, message);
    }

    /// Ends exchange `id` at once (a Stop button); a keyed run is withdrawn.
    pub fn cancel(&self, id: u64) {
        send(&self.shared.worker, &ToRuntime::Cancel { id });
    }

    /// Follows the workspace's committed changes (this tab's and other
    /// tabs'); answers the watch's id, for [`RuntimeClient::unwatch`].
    pub fn watch(&self, on_change: ChangeListener) -> u64 {
        let id = self.next_id();
        self.shared
            .entries
            .borrow_mut()
            .insert(id, Entry::Watch { on_change });
        send(&self.shared.worker, &ToRuntime::Watch { id });
        id
    }

    /// Ends watch `id`.
    pub fn unwatch(&self, id: u64) {
        if self.shared.entries.borrow_mut().remove(&id).is_some() {
            self.cancel(id);
        }
    }

    /// Follows the in-browser model's loading, whichever exchange waits on
    /// it. Each exchange with a listener hears it too, as
    /// [`ExchangeEvent::ModelStatus`].
    pub fn on_model_status(&self, listener: StatusListener) {
        self.shared.model_listeners.borrow_mut().push(listener);
    }
}

impl Drop for RuntimeClient {
    fn drop(&mut self) {
        self.shared.worker.terminate();
    }
}

fn fail_all(shared: &Shared, problem: &str) {
    let entries: Vec<Entry> = shared
        .entries
        .borrow_mut()
        .drain()
        .map(|(_, entry)| entry)
        .collect();
    for entry in entries {
        entry.finish(Err(Problem {
            bad_request: false,
            message: problem.to_owned(),
            code: Some("engine".into()),
            hint: Some("reload the page".into()),
            status: None,
        }));
    }
}

/// The page side of exchange `id`, while it goes on.
fn page_of(shared: &Shared, id: u64) -> Option<Rc<dyn PageSide>> {
    shared.entries.borrow().get(&id).and_then(Entry::page)
}

fn on_message(shared: &Rc<Shared>, message: FromRuntime) {
    match message {
        FromRuntime::Ready { storage } => {
            if let Some(ready) = shared.ready.borrow_mut().take() {
                let _ = ready.send(Ok(storage));
            }
        }
        FromRuntime::Rejected { problem } => {
            if let Some(ready) = shared.ready.borrow_mut().take() {
                let _ = ready.send(Err(problem));
            } else {
                console_error(&format!(
                    "kiln: the runtime worker refused a message: {problem}"
                ));
            }
        }
        FromRuntime::Done { id, value } => {
            let entry = shared.entries.borrow_mut().remove(&id);
            if let Some(entry) = entry {
                entry.finish(Ok(value));
            }
        }
        FromRuntime::Failed { id, problem } => {
            let entry = shared.entries.borrow_mut().remove(&id);
            if let Some(entry) = entry {
                entry.finish(Err(problem));
            }
        }
        FromRuntime::Interim { id, value } => {
            // The answer goes now; the exchange stays for the run's calls.
            let done = match shared.entries.borrow_mut().get_mut(&id) {
                Some(Entry::Exchange { done, .. }) => done.take(),
                _ => None,
            };
            if let Some(done) = done {
                let _ = done.send(Ok(value));
            }
        }
        FromRuntime::Event { id, event } => {
            // Called with the map free: a listener may send another exchange.
            let listener = shared.entries.borrow().get(&id).and_then(Entry::on_event);
            if let Some(listener) = listener {
                listener(event);
            }
        }
        FromRuntime::Changed { id, changes } => {
            let listener = match shared.entries.borrow().get(&id) {
                Some(Entry::Watch { on_change }) => Some(on_change.clone()),
                _ => None,
            };
            if let Some(on_change) = listener {
                on_change(changes);
            }
        }
        FromRuntime::ModelStatus { status } => {
            // Cloned out first: a listener may add another.
            let listeners = shared.model_listeners.borrow().clone();
            for listener in listeners {
                listener(status.clone());
            }
            let waiting: Vec<Listener> = shared
                .entries
                .borrow()
                .values()
                .filter_map(Entry::on_event)
                .collect();
            for listener in waiting {
                listener(ExchangeEvent::ModelStatus(status.clone()));
            }
        }
        FromRuntime::ToolCall {
            id,
            call_number,
            key,
            tool,
            args,
        } => {
            let page = page_of(shared, id);
            let worker = shared.worker.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let reply = match page {
                    Some(page) => {
                        let held_worker = worker.clone();
                        let held = Rc::new(move |held: bool| {
                            send(
                                &held_worker,
                                &ToRuntime::ToolHeld {
                                    id,
                                    call_number,
                                    key,
                                    held,
                                },
                            );
                        });
                        let call = PageCall {
                            call_number,
                            tool,
                            args,
                        };
                        page.call(call, held).await
                    }
                    None => Err(ToolFailure {
                        code: "tool_unavailable".into(),
                        message: format!(
                            "the page has no `{tool}` for this run: the run had ended"
                        ),
                        detail: None,
                        outcome: CallOutcome::ToolUnavailable,
                    }),
                };
                send(
                    &worker,
                    &ToRuntime::ToolReply {
                        id,
                        call_number,
                        key,
                        reply,
                    },
                );
            });
        }
        FromRuntime::Approve { id, ask, request } => {
            let page = page_of(shared, id);
            let worker = shared.worker.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let approval = match page {
                    Some(page) => page.approve(request).await,
                    None => Answer::Unavailable {
                        reason: "the run had ended".into(),
                    },
                };
                send(&worker, &ToRuntime::Answer { ask, approval });
            });
        }
        FromRuntime::Question { id, ask, question } => {
            let page = page_of(shared, id);
            let worker = shared.worker.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let told = match page {
                    Some(page) => page.ask(question).await,
                    None => Told::Unavailable {
                        reason: "the turn had ended".into(),
                    },
                };
                send(&worker, &ToRuntime::Told { ask, told });
            });
        }
    }
}
