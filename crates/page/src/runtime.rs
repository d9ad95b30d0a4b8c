//! The page's side of the runtime protocol: starts the runtime worker
//! (`workers/runtime.js`), sends it each run, chat turn, storage operation
//! and change-feed watch, hands streamed events to their listeners, and
//! answers what a run asks of the page — a page tool's call, the `approve`
//! callback — while the run goes on there. The page holds no ladder,
//! provider, store, sandbox pool or run record: those are the worker's.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use futures::channel::oneshot;
use js_sys::{Function, Promise, Reflect};
use kiln_types::runtime::{
    Approval, FromRuntime, Problem, RuntimeOptions, ToRuntime, Told, decode, encode,
};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde_json::Value;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{ErrorEvent, MessageEvent, Worker, WorkerOptions, WorkerType};

use crate::{answer_text, describe, failure, from_json_text, invoke_tool, to_json_text};

/// What the page keeps of one run while the worker runs it.
struct PageRun {
    /// Each page tool's `call`, by name.
    calls: HashMap<String, Function>,
    approve: Option<Function>,
    /// An agent turn's `ask(question)`, which answers `ask_user`.
    ask: Option<Function>,
    /// The page's answer; taken by a keyed run's interim result, whose run
    /// still calls the page until it ends.
    done: Option<oneshot::Sender<Result<Value, Problem>>>,
    /// Sends `cancel` when the page's signal fires; dropped (the listener
    /// removed) when the run ends.
    _listener: Option<crate::chat::web_sys_abort::Listener>,
    /// An agent turn's `onEvent`.
    on_event: Option<Listener>,
}

/// The page's functions an exchange calls back: its tools' `call`s, and
/// its `approve` and `ask` callbacks.
struct PageSide {
    calls: HashMap<String, Function>,
    approve: Option<Function>,
    ask: Option<Function>,
}

/// Where a streamed event or a change goes.
pub(crate) type Listener = Rc<dyn Fn(Value)>;

/// What the page keeps of one exchange while the worker serves it.
enum Exchange {
    Run(PageRun),
    /// A request with one answer (a storage operation, a model list, a
    /// chat turn, a bench figure) and, for a chat turn, its events' listener.
    Call {
        done: oneshot::Sender<Result<Value, Problem>>,
        on_event: Option<Listener>,
        _listener: Option<crate::chat::web_sys_abort::Listener>,
    },
    /// A change-feed watch: every batch of changes goes to `on_change`.
    Watch {
        on_change: Listener,
    },
}

impl Exchange {
    fn finish(self, answer: Result<Value, Problem>) {
        match self {
            Self::Run(run) => {
                if let Some(done) = run.done {
                    let _ = done.send(answer);
                }
            }
            Self::Call { done, .. } => {
                let _ = done.send(answer);
            }
            Self::Watch { .. } => {
                if let Err(problem) = answer {
                    web_sys_console_error(&format!(
                        "kiln: the change feed stopped: {}",
                        problem.message
                    ));
                }
            }
        }
    }
}

/// The worker's `ready` (with why its stores did not open, if they did not),
/// or why it did not start.
type Started = Result<Option<Problem>, String>;

struct Shared {
    worker: Worker,
    exchanges: RefCell<HashMap<u64, Exchange>>,
    ready: RefCell<Option<oneshot::Sender<Started>>>,
    /// `kiln.onModelStatus` listeners: where loading Kiln's own model stands.
    model_listeners: RefCell<Vec<Listener>>,
}

/// A started runtime worker.
pub(crate) struct RuntimeClient {
    shared: Rc<Shared>,
    next_id: Cell<u64>,
    _onmessage: Closure<dyn FnMut(MessageEvent)>,
    _onerror: Closure<dyn FnMut(ErrorEvent)>,
}

impl RuntimeClient {
    /// Starts the worker at `url` with `options` and waits for its `ready`:
    /// `Ok` with why the workspace's stores did not open there, if they did
    /// not.
    pub(crate) async fn start(
        url: &str,
        options: &RuntimeOptions,
    ) -> Result<(Self, Option<Problem>), String> {
        let worker_options = WorkerOptions::new();
        worker_options.set_type(WorkerType::Module);
        worker_options.set_name(&serde_json::to_string(options).unwrap_or_default());
        let worker = Worker::new_with_options(url, &worker_options)
            .map_err(|error| format!("the runtime worker could not start: {}", describe(&error)))?;
        let (ready, is_ready) = oneshot::channel();
        let shared = Rc::new(Shared {
            worker,
            exchanges: RefCell::default(),
            ready: RefCell::new(Some(ready)),
            model_listeners: RefCell::default(),
        });
        let onmessage = Closure::<dyn FnMut(MessageEvent)>::new({
            let shared = shared.clone();
            move |event: MessageEvent| {
                let text = event.data().as_string().unwrap_or_default();
                match decode::<FromRuntime>(&text) {
                    Ok(message) => on_message(&shared, message),
                    Err(error) => web_sys_console_error(&format!(
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
        Ok((
            Self {
                shared,
                next_id: Cell::new(0),
                _onmessage: onmessage,
                _onerror: onerror,
            },
            storage,
        ))
    }

    /// Sends one run; resolves to the worker's answer. The page's `signal`
    /// sends `cancel` (once the run was sent, so even a signal aborted
    /// already cancels it).
    pub(crate) fn run(
        &self,
        request: Value,
        report: bool,
        calls: HashMap<String, Function>,
        approve: Option<Function>,
        signal: Option<crate::chat::web_sys_abort::Signal>,
    ) -> oneshot::Receiver<Result<Value, Problem>> {
        self.exchange(
            move |id, approve| ToRuntime::Run {
                id,
                request,
                approve,
                report,
            },
            PageSide {
                calls,
                approve,
                ask: None,
            },
            signal,
            None,
        )
    }

    /// Sends one agent turn; resolves to its result, its events going to
    /// `on_event`. Page tools and approvals are answered as for a run.
    pub(crate) fn agent(
        &self,
        request: Value,
        calls: HashMap<String, Function>,
        approve: Option<Function>,
        ask: Option<Function>,
        signal: Option<crate::chat::web_sys_abort::Signal>,
        on_event: Option<Listener>,
    ) -> oneshot::Receiver<Result<Value, Problem>> {
        let asks = ask.is_some();
        self.exchange(
            move |id, approve| ToRuntime::Agent {
                id,
                request,
                approve,
                ask: asks,
            },
            PageSide {
                calls,
                approve,
                ask,
            },
            signal,
            on_event,
        )
    }

    /// Sends one code node's run (`node`) or graph's run (`graph`);
    /// resolves to its answer, a graph's node reports going to `on_event`.
    /// Page tools and approvals are answered as for a run.
    pub(crate) fn nodes(
        &self,
        graph: bool,
        request: Value,
        calls: HashMap<String, Function>,
        approve: Option<Function>,
        signal: Option<crate::chat::web_sys_abort::Signal>,
        on_event: Option<Listener>,
    ) -> oneshot::Receiver<Result<Value, Problem>> {
        self.exchange(
            move |id, approve| {
                if graph {
                    ToRuntime::Graph {
                        id,
                        request,
                        approve,
                    }
                } else {
                    ToRuntime::Node {
                        id,
                        request,
                        approve,
                    }
                }
            },
            PageSide {
                calls,
                approve,
                ask: None,
            },
            signal,
            on_event,
        )
    }

    /// An exchange whose page tools and approvals the page answers.
    fn exchange(
        &self,
        message: impl FnOnce(u64, bool) -> ToRuntime,
        side: PageSide,
        signal: Option<crate::chat::web_sys_abort::Signal>,
        on_event: Option<Listener>,
    ) -> oneshot::Receiver<Result<Value, Problem>> {
        let id = self.next_id();
        let (done, answered) = oneshot::channel();
        let PageSide {
            calls,
            approve,
            ask,
        } = side;
        let asks = approve.is_some();
        self.shared.exchanges.borrow_mut().insert(
            id,
            Exchange::Run(PageRun {
                calls,
                approve,
                ask,
                done: Some(done),
                _listener: None,
                on_event,
            }),
        );
        send(&self.shared.worker, &message(id, asks));
        if let Some(signal) = signal {
            let worker = self.shared.worker.clone();
            let listener = signal.on_abort_do(move || send(&worker, &ToRuntime::Cancel { id }));
            if let Some(Exchange::Run(run)) = self.shared.exchanges.borrow_mut().get_mut(&id) {
                run._listener = Some(listener);
            }
        }
        answered
    }

    fn next_id(&self) -> u64 {
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        id
    }

    /// Sends the request `message(id)` makes; resolves to its answer, its
    /// streamed events going to `on_event`. The page's `signal` sends
    /// `cancel`.
    /// Adds a listener of Kiln's own model's loading status.
    pub(crate) fn on_model_status(&self, listener: Listener) {
        self.shared.model_listeners.borrow_mut().push(listener);
    }

    pub(crate) fn call(
        &self,
        message: impl FnOnce(u64) -> ToRuntime,
        on_event: Option<Listener>,
        signal: Option<&crate::chat::web_sys_abort::Signal>,
    ) -> oneshot::Receiver<Result<Value, Problem>> {
        let id = self.next_id();
        let (done, answered) = oneshot::channel();
        self.shared.exchanges.borrow_mut().insert(
            id,
            Exchange::Call {
                done,
                on_event,
                _listener: None,
            },
        );
        send(&self.shared.worker, &message(id));
        // Once the request is sent, so even a signal aborted already cancels it.
        if let Some(signal) = signal {
            let worker = self.shared.worker.clone();
            let listener = signal.on_abort_do(move || send(&worker, &ToRuntime::Cancel { id }));
            if let Some(Exchange::Call { _listener, .. }) =
                self.shared.exchanges.borrow_mut().get_mut(&id)
            {
                *_listener = Some(listener);
            }
        }
        answered
    }

    /// Sends `message`, which has no answer.
    pub(crate) fn tell(&self, message: &ToRuntime) {
        send(&self.shared.worker, message);
    }

    /// Watches the workspace's committed changes; answers the watch's id,
    /// for [`RuntimeClient::unwatch`].
    pub(crate) fn watch(&self, on_change: Listener) -> u64 {
        let id = self.next_id();
        self.shared
            .exchanges
            .borrow_mut()
            .insert(id, Exchange::Watch { on_change });
        send(&self.shared.worker, &ToRuntime::Watch { id });
        id
    }

    /// Ends watch `id`.
    pub(crate) fn unwatch(&self, id: u64) {
        if self.shared.exchanges.borrow_mut().remove(&id).is_some() {
            send(&self.shared.worker, &ToRuntime::Cancel { id });
        }
    }
}

impl Drop for RuntimeClient {
    fn drop(&mut self) {
        self.shared.worker.terminate();
    }
}

pub(crate) fn send(worker: &Worker, message: &ToRuntime) {
    // A worker that is gone answers nothing; its runs fail by `onerror`.
    let _ = worker.post_message(&JsValue::from_str(&encode(message)));
}

fn fail_all(shared: &Shared, problem: &str) {
    let exchanges: Vec<Exchange> = shared
        .exchanges
        .borrow_mut()
        .drain()
        .map(|(_, exchange)| exchange)
        .collect();
    for exchange in exchanges {
        exchange.finish(Err(Problem {
            bad_request: false,
            message: problem.to_owned(),
            code: Some("engine".into()),
            hint: Some("reload the page".into()),
            status: None,
        }));
    }
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
                web_sys_console_error(&format!(
                    "kiln: the runtime worker refused a message: {problem}"
                ));
            }
        }
        FromRuntime::Done { id, value } => {
            let exchange = shared.exchanges.borrow_mut().remove(&id);
            if let Some(exchange) = exchange {
                exchange.finish(Ok(value));
            }
        }
        FromRuntime::Interim { id, value } => {
            // The answer goes now; the exchange stays for the run's calls.
            let done = match shared.exchanges.borrow_mut().get_mut(&id) {
                Some(Exchange::Run(run)) => run.done.take(),
                _ => None,
            };
            if let Some(done) = done {
                let _ = done.send(Ok(value));
            }
        }
        FromRuntime::Failed { id, problem } => {
            let exchange = shared.exchanges.borrow_mut().remove(&id);
            if let Some(exchange) = exchange {
                exchange.finish(Err(problem));
            }
        }
        FromRuntime::Event { id, event } => {
            // Called with the map free: a listener may call into Kiln again.
            let listener = match shared.exchanges.borrow().get(&id) {
                Some(Exchange::Call { on_event, .. }) => on_event.clone(),
                Some(Exchange::Run(run)) => run.on_event.clone(),
                _ => None,
            };
            if let Some(on_event) = listener {
                on_event(event);
            }
        }
        FromRuntime::ModelStatus { status } => {
            // To the page's own listeners and to every exchange's `onEvent`, as
            // an event `{type: "model_status", state, …}`: the turn waiting on
            // the model is among them.
            let mut event = serde_json::to_value(&status).unwrap_or(Value::Null);
            if let Some(object) = event.as_object_mut() {
                object.insert("type".into(), Value::from("model_status"));
            }
            let mut listeners: Vec<Listener> = shared.model_listeners.borrow().clone();
            listeners.extend(shared.exchanges.borrow().values().filter_map(
                |exchange| match exchange {
                    Exchange::Call { on_event, .. } => on_event.clone(),
                    Exchange::Run(run) => run.on_event.clone(),
                    Exchange::Watch { .. } => None,
                },
            ));
            for listener in listeners {
                listener(event.clone());
            }
        }
        FromRuntime::Changed { id, changes } => {
            let listener = match shared.exchanges.borrow().get(&id) {
                Some(Exchange::Watch { on_change }) => Some(on_change.clone()),
                _ => None,
            };
            if let Some(on_change) = listener {
                on_change(changes);
            }
        }
        FromRuntime::ToolCall {
            id,
            call_number,
            key,
            tool,
            args,
        } => {
            let call = match shared.exchanges.borrow().get(&id) {
                Some(Exchange::Run(run)) => run.calls.get(&tool).cloned(),
                _ => None,
            };
            let worker = shared.worker.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let reply = match call {
                    Some(call) => {
                        let call_id = CallId {
                            id,
                            call_number,
                            key,
                        };
                        call_tool(&worker, call_id, &tool, &call, &args).await
                    }
                    None => Err(ToolFailure {
                        code: "tool_unavailable".into(),
                        message: format!("the page has no `{tool}` for this run"),
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
        FromRuntime::Question { id, ask, question } => {
            let person = match shared.exchanges.borrow().get(&id) {
                Some(Exchange::Run(run)) => run.ask.clone(),
                _ => None,
            };
            let worker = shared.worker.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let told = match person {
                    Some(person) => ask_person(&person, &question).await,
                    None => Told::Unavailable {
                        reason: "the page gave no ask callback".into(),
                    },
                };
                send(&worker, &ToRuntime::Told { ask, told });
            });
        }
        FromRuntime::Approve { id, ask, request } => {
            let approve = match shared.exchanges.borrow().get(&id) {
                Some(Exchange::Run(run)) => run.approve.clone(),
                _ => None,
            };
            let worker = shared.worker.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let approval = match approve {
                    Some(approve) => ask_page(&approve, &request).await,
                    None => Approval::Unavailable {
                        reason: "the page gave no approve callback".into(),
                    },
                };
                send(&worker, &ToRuntime::Answer { ask, approval });
            });
        }
    }
}

/// What a page function's call answered: its value, or the value its
/// promise settled with.
async fn settle(called: Result<JsValue, JsValue>) -> Result<JsValue, JsValue> {
    match called?.dyn_into::<Promise>() {
        Ok(promise) => JsFuture::from(promise).await,
        Err(value) => Ok(value),
    }
}

/// Asks the page's `ask(question)` callback, which answers with text.
async fn ask_person(ask: &Function, question: &str) -> Told {
    let called = ask.call1(&JsValue::NULL, &JsValue::from_str(question));
    let settled = settle(called).await;
    match settled {
        Ok(value) => match value.as_string() {
            Some(text) => Told::Said { text },
            None => Told::Unavailable {
                reason: format!(
                    "the page's ask callback answered {}; expected a string",
                    answer_text(&value)
                ),
            },
        },
        Err(error) => Told::Unavailable {
            reason: format!("the page's ask callback failed: {}", describe(&error)),
        },
    }
}

/// Which call a page tool answers: its exchange, its number in its run
/// (`ctx.callNumber`) and the worker's key for it.
#[derive(Clone, Copy)]
struct CallId {
    id: u64,
    call_number: u32,
    key: u64,
}

/// Calls a page tool: `call(args, ctx)`, `ctx.waitOnPerson` telling the
/// worker the call is held on a person.
async fn call_tool(
    worker: &Worker,
    call_id: CallId,
    tool: &str,
    call: &Function,
    args: &Value,
) -> ToolReply {
    let CallId {
        id,
        call_number,
        key,
    } = call_id;
    let hold = {
        let worker = worker.clone();
        Closure::<dyn FnMut(u32, bool)>::new(move |call_number: u32, held: bool| {
            send(
                &worker,
                &ToRuntime::ToolHeld {
                    id,
                    call_number,
                    key,
                    held,
                },
            );
        })
        .into_js_value()
        .unchecked_into::<Function>()
    };
    let args = serde_json::to_string(args).unwrap_or_else(|_| "{}".into());
    let settled = settle(invoke_tool(call, &args, call_number, &hold)).await;
    match settled {
        Ok(value) if value.is_undefined() => Ok(Value::Null),
        Ok(value) => {
            let text = to_json_text(&value).map_err(|problem| ToolFailure {
                code: "invalid_result".into(),
                message: format!("{tool} returned a value that {problem}"),
                detail: None,
                outcome: CallOutcome::Error,
            })?;
            let value: Value = serde_json::from_str(&text).map_err(|error| ToolFailure {
                code: "invalid_result".into(),
                message: format!("{tool} returned a value that is not JSON: {error}"),
                detail: None,
                outcome: CallOutcome::Error,
            })?;
            // Deeper, its reply's envelope would be past what the worker reads.
            kiln_types::check_depth(&value).map_err(|problem| ToolFailure {
                code: "invalid_result".into(),
                message: format!("{tool} returned a value that {problem}"),
                detail: None,
                outcome: CallOutcome::Error,
            })?;
            Ok(value)
        }
        Err(error) => Err(failure(&error)),
    }
}

/// Asks the page's `approve(request)` callback.
async fn ask_page(approve: &Function, request: &Value) -> Approval {
    let called = approve.call1(&JsValue::NULL, &from_json_text(&request.to_string()));
    let settled = settle(called).await;
    match settled {
        Ok(value) => match value.as_string().as_deref() {
            Some("approve") => Approval::Approve,
            Some("deny") => Approval::Deny,
            Some("allow_for_session") => Approval::AllowForSession,
            _ => Approval::Unavailable {
                reason: format!(
                    "the page's approve callback answered {}; expected \"approve\", \"deny\" or \"allow_for_session\"",
                    answer_text(&value)
                ),
            },
        },
        Err(error) => Approval::Unavailable {
            reason: format!("the page's approve callback failed: {}", describe(&error)),
        },
    }
}

fn web_sys_console_error(text: &str) {
    if let Ok(console) = Reflect::get(&js_sys::global(), &JsValue::from_str("console"))
        && let Ok(error) = Reflect::get(&console, &JsValue::from_str("error"))
        && let Ok(error) = error.dyn_into::<Function>()
    {
        let _ = error.call1(&console, &JsValue::from_str(text));
    }
}
