//! The app's side of the runtime protocol: starts this tab's runtime worker
//! (`workers/runtime.js`), which runs the programs — ladder, sandbox pool,
//! MCP sessions, the run's record — and answers what a run asks of the page:
//! a call of one of the app's own tools, and the person's approval. The
//! storage panels' reads and writes, the change feed, the chat's turns and
//! the in-browser model's loading cross here too.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use kiln_types::model::ModelStatus;
use kiln_types::permission::GateSettings;
use kiln_types::runtime::{
    Approval, FromRuntime, Problem, RuntimeOptions, ToRuntime, Told, decode, encode,
};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde_json::Value;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{ErrorEvent, MessageEvent, Worker, WorkerOptions, WorkerType};

/// Where the runtime worker's bootstrap is served, relative to the page.
const RUNTIME_WORKER_URL: &str = "./workers/runtime.js";

/// What a run asks of the page: its own tools' calls and the person's answers.
pub(crate) trait PageSide {
    /// Calls the page's tool `tool`; `held(true)` while it waits on the person.
    fn call(
        &self,
        call_number: u32,
        tool: String,
        args: Value,
        held: Rc<dyn Fn(bool)>,
    ) -> LocalBoxFuture<'static, ToolReply>;
    /// Asks the person about a call (`request` is the approval card's content).
    fn approve(&self, request: Value) -> LocalBoxFuture<'static, Approval>;
    /// Whether someone answers an agent's `ask_user` here.
    fn can_ask(&self) -> bool {
        false
    }
    /// Puts an agent's `ask_user` question to the person: their answer, or
    /// why there is none.
    fn ask(&self, _question: String) -> LocalBoxFuture<'static, Told> {
        Box::pin(async {
            Told::Unavailable {
                reason: "nobody answers questions here".into(),
            }
        })
    }
}

/// One exchange in flight: a run (which may call back into the page) or a
/// plain request (a tool catalog, an MCP check).
struct Run {
    page: Option<Rc<dyn PageSide>>,
    done: oneshot::Sender<Result<Value, Problem>>,
}

type Started = Result<Option<Problem>, String>;

/// Where a watch's or a chat turn's stream goes.
pub(crate) type Listener = Rc<dyn Fn(Value)>;

/// Where the in-browser model's loading statuses go.
pub(crate) type StatusListener = Rc<dyn Fn(ModelStatus)>;

struct Shared {
    worker: Worker,
    runs: RefCell<HashMap<u64, Run>>,
    /// The change feed's listeners and the chat turns' event sinks, by id.
    listeners: RefCell<HashMap<u64, Listener>>,
    /// Who follows the in-browser model's loading (broadcast, for no exchange in
    /// particular).
    model_listeners: RefCell<Vec<StatusListener>>,
    ready: RefCell<Option<oneshot::Sender<Started>>>,
}

/// This tab's runtime worker, started.
pub(crate) struct Runtime {
    /// Why the workspace's stores did not open, when they did not.
    pub(crate) storage: Option<Problem>,
    shared: Rc<Shared>,
    next_id: Cell<u64>,
    _onmessage: Closure<dyn FnMut(MessageEvent)>,
    _onerror: Closure<dyn FnMut(ErrorEvent)>,
}

fn send(worker: &Worker, message: &ToRuntime) {
    // A worker that is gone answers nothing; its runs fail by `onerror`.
    let _ = worker.post_message(&JsValue::from_str(&encode(message)));
}

/// `path` resolved against the page's address.
fn absolute(path: &str) -> String {
    web_sys::window()
        .and_then(|window| window.location().href().ok())
        .and_then(|base| web_sys::Url::new_with_base(path, &base).ok())
        .map_or_else(|| path.to_owned(), |url| url.href())
}

impl Runtime {
    /// Starts the worker for `workspace` and waits for its `ready`.
    pub(crate) async fn start(
        workspace: &str,
        sandbox_url: &str,
        pool_size: u32,
    ) -> Result<Self, String> {
        let options = RuntimeOptions {
            workspace: workspace.to_owned(),
            sandbox_url: absolute(sandbox_url),
            pool_size,
            reply_due_ms: None,
        };
        let worker_options = WorkerOptions::new();
        worker_options.set_type(WorkerType::Module);
        worker_options.set_name(&serde_json::to_string(&options).unwrap_or_default());
        let worker = Worker::new_with_options(&absolute(RUNTIME_WORKER_URL), &worker_options)
            .map_err(|error| {
                format!(
                    "the runtime worker could not start: {}",
                    crate::js_text(&error)
                )
            })?;
        let (ready, is_ready) = oneshot::channel();
        let shared = Rc::new(Shared {
            worker,
            runs: RefCell::default(),
            listeners: RefCell::default(),
            model_listeners: RefCell::default(),
            ready: RefCell::new(Some(ready)),
        });
        let onmessage = Closure::<dyn FnMut(MessageEvent)>::new({
            let shared = shared.clone();
            move |event: MessageEvent| {
                let text = event.data().as_string().unwrap_or_default();
                match decode::<FromRuntime>(&text) {
                    Ok(message) => on_message(&shared, message),
                    Err(error) => web_sys::console::error_1(&JsValue::from_str(&format!(
                        "kiln: a message from the runtime worker was refused: {error}"
                    ))),
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
                // Nothing more streams from a worker that failed.
                shared.listeners.borrow_mut().clear();
                let runs: Vec<Run> = shared
                    .runs
                    .borrow_mut()
                    .drain()
                    .map(|(_, run)| run)
                    .collect();
                for run in runs {
                    let _ = run.done.send(Err(Problem {
                        bad_request: false,
                        message: problem.clone(),
                        code: Some("engine".into()),
                        hint: Some("reload the page".into()),
                        status: None,
                    }));
                }
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
            storage,
            shared,
            next_id: Cell::new(0),
            _onmessage: onmessage,
            _onerror: onerror,
        })
    }

    /// Sends one run (`request` is the run request's JSON; the answer is the
    /// worker's report, model text and record); returns its id, for
    /// [`Runtime::cancel`], and its answer.
    pub(crate) fn run(
        &self,
        request: Value,
        page: Rc<dyn PageSide>,
    ) -> (u64, oneshot::Receiver<Result<Value, Problem>>) {
        self.exchange(
            |id| ToRuntime::Run {
                id,
                request,
                approve: true,
                report: true,
            },
            None,
            page,
        )
    }

    fn next_id(&self) -> u64 {
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        id
    }

    /// Sends the request `message(id)` makes, which calls nothing back on
    /// the page; resolves to its answer.
    pub(crate) fn call(
        &self,
        message: impl FnOnce(u64) -> ToRuntime,
    ) -> oneshot::Receiver<Result<Value, Problem>> {
        let id = self.next_id();
        let (done, answered) = oneshot::channel();
        self.shared
            .runs
            .borrow_mut()
            .insert(id, Run { page: None, done });
        send(&self.shared.worker, &message(id));
        answered
    }

    /// Sends the exchange `message(id)` makes, whose calls back (page tools,
    /// approvals) `page` answers and whose events go to `on_event`; returns
    /// its id, for [`Runtime::cancel`], and its answer. A code node's run
    /// and a graph's go this way.
    pub(crate) fn exchange(
        &self,
        message: impl FnOnce(u64) -> ToRuntime,
        on_event: Option<Listener>,
        page: Rc<dyn PageSide>,
    ) -> (u64, oneshot::Receiver<Result<Value, Problem>>) {
        let id = self.next_id();
        if let Some(on_event) = on_event {
            self.shared.listeners.borrow_mut().insert(id, on_event);
        }
        let (done, answered) = oneshot::channel();
        self.shared.runs.borrow_mut().insert(
            id,
            Run {
                page: Some(page),
                done,
            },
        );
        send(&self.shared.worker, &message(id));
        (id, answered)
    }

    /// Sends the storage operation `op` with `args`.
    pub(crate) fn store(&self, op: &str, args: Value) -> oneshot::Receiver<Result<Value, Problem>> {
        let op = op.to_owned();
        self.call(move |id| ToRuntime::Store { id, op, args })
    }

    /// Follows the workspace's committed changes (this tab's and other
    /// tabs'): `on_change` gets each batch, `[{table, key, version}]`.
    pub(crate) fn watch(&self, on_change: Listener) {
        let id = self.next_id();
        self.shared.listeners.borrow_mut().insert(id, on_change);
        send(&self.shared.worker, &ToRuntime::Watch { id });
    }

    /// Sends an agent turn (`request` as `kiln.agent` takes it, minus its
    /// functions): `on_event` gets each `AgentEvent`, `page` answers its page
    /// tool calls, approvals and questions, and the answer is its result
    /// with the thread to continue from. Returns its id, for
    /// [`Runtime::cancel`].
    pub(crate) fn agent(
        &self,
        request: Value,
        on_event: Listener,
        page: Rc<dyn PageSide>,
    ) -> (u64, oneshot::Receiver<Result<Value, Problem>>) {
        let ask = page.can_ask();
        self.exchange(
            |id| ToRuntime::Agent {
                id,
                request,
                approve: true,
                ask,
            },
            Some(on_event),
            page,
        )
    }

    /// Follows the in-browser model's loading: `on_status` gets each status the
    /// worker broadcasts, whichever exchange is waiting on the model.
    pub(crate) fn on_model_status(&self, on_status: StatusListener) {
        self.shared.model_listeners.borrow_mut().push(on_status);
    }

    /// The person changed the permission settings: the runs going on decide
    /// their next call by them.
    pub(crate) fn permission(&self, settings: GateSettings) {
        send(&self.shared.worker, &ToRuntime::Permission { settings });
    }

    /// Ends run or chat turn `id` at once (the Stop button).
    pub(crate) fn cancel(&self, id: u64) {
        send(&self.shared.worker, &ToRuntime::Cancel { id });
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shared.worker.terminate();
    }
}

/// The page side of run `id`, while it runs.
fn page_of(shared: &Shared, id: u64) -> Option<Rc<dyn PageSide>> {
    shared
        .runs
        .borrow()
        .get(&id)
        .and_then(|run| run.page.clone())
}

fn on_message(shared: &Rc<Shared>, message: FromRuntime) {
    match message {
        FromRuntime::ModelStatus { status } => {
            // Cloned out first: a listener may add another.
            let listeners = shared.model_listeners.borrow().clone();
            for listener in listeners {
                listener(status.clone());
            }
        }
        FromRuntime::Ready { storage } => {
            if let Some(ready) = shared.ready.borrow_mut().take() {
                let _ = ready.send(Ok(storage));
            }
        }
        FromRuntime::Rejected { problem } => {
            if let Some(ready) = shared.ready.borrow_mut().take() {
                let _ = ready.send(Err(problem));
            } else {
                web_sys::console::error_1(&JsValue::from_str(&format!(
                    "kiln: the runtime worker refused a message: {problem}"
                )));
            }
        }
        FromRuntime::Done { id, value } => {
            shared.listeners.borrow_mut().remove(&id);
            let run = shared.runs.borrow_mut().remove(&id);
            if let Some(run) = run {
                let _ = run.done.send(Ok(value));
            }
        }
        // The app sends no keyed runs, so none of its runs answers early.
        FromRuntime::Interim { .. } => {}
        FromRuntime::Failed { id, problem } => {
            shared.listeners.borrow_mut().remove(&id);
            let run = shared.runs.borrow_mut().remove(&id);
            if let Some(run) = run {
                let _ = run.done.send(Err(problem));
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
                        page.call(call_number, tool, args, held).await
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
        FromRuntime::Approve { id, ask, request } => {
            let page = page_of(shared, id);
            let worker = shared.worker.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let approval = match page {
                    Some(page) => page.approve(request).await,
                    None => Approval::Unavailable {
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
        FromRuntime::Event { id, event: value } | FromRuntime::Changed { id, changes: value } => {
            let listener = shared.listeners.borrow().get(&id).cloned();
            if let Some(listener) = listener {
                listener(value);
            }
        }
    }
}
