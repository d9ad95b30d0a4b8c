//! The page's side of the sandbox protocol: starts sandbox workers, sends them
//! runs, and stops a run that outlives its wall budget by terminating its worker.
//!
//! **Invariant:** the main thread never evaluates guest code; it only posts text
//! to workers and reads their reports.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures::channel::mpsc;
use futures::future::{Either, select};
use futures::{FutureExt, StreamExt};
use kiln_types::protocol::{FromSandbox, ToSandbox, decode, encode};
use kiln_types::{RunError, RunErrorKind, RunLimits, RunReport};

use crate::demo_tools::PageTools;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{ErrorEvent, MessageEvent, Worker, WorkerOptions, WorkerType};

/// Where the sandbox worker's bootstrap is served, relative to the page.
const SANDBOX_WORKER_URL: &str = "./workers/sandbox.js";
/// How long a new worker may take to fetch and instantiate its wasm.
const WORKER_START_MS: u64 = 30_000;

/// What a worker told us, or that it failed.
#[expect(
    clippy::large_enum_variant,
    reason = "events pass one at a time through a channel; boxing reports would buy nothing"
)]
enum Event {
    Message(FromSandbox),
    Failed(String),
}

/// One started worker and the stream of what it says.
struct SandboxWorker {
    worker: Worker,
    events: mpsc::UnboundedReceiver<Event>,
    ready: bool,
    // The handlers must live as long as the worker.
    _onmessage: Closure<dyn FnMut(MessageEvent)>,
    _onerror: Closure<dyn FnMut(ErrorEvent)>,
}

impl SandboxWorker {
    fn start() -> Result<Self, String> {
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        let worker = Worker::new_with_options(SANDBOX_WORKER_URL, &options)
            .map_err(|error| format!("could not start the sandbox worker: {}", describe(&error)))?;
        let (sender, events) = mpsc::unbounded();
        let on_message_sender = sender.clone();
        let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            let event = match event
                .data()
                .as_string()
                .map(|text| decode::<FromSandbox>(&text))
            {
                Some(Ok(message)) => Event::Message(message),
                Some(Err(problem)) => Event::Failed(format!(
                    "the sandbox worker said something unreadable: {problem}"
                )),
                None => Event::Failed("the sandbox worker sent a message that is not text".into()),
            };
            let _ = on_message_sender.unbounded_send(event);
        });
        let onerror = Closure::<dyn FnMut(ErrorEvent)>::new(move |event: ErrorEvent| {
            let message = event.message();
            let message = if message.is_empty() {
                "the worker script could not load".to_owned()
            } else {
                message
            };
            let _ = sender.unbounded_send(Event::Failed(format!(
                "the sandbox worker failed: {message}"
            )));
        });
        worker.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
        worker.set_onerror(Some(onerror.as_ref().unchecked_ref()));
        Ok(Self {
            worker,
            events,
            ready: false,
            _onmessage: onmessage,
            _onerror: onerror,
        })
    }

    /// Waits for the worker's `ready`, once.
    async fn ready(&mut self) -> Result<(), String> {
        if self.ready {
            return Ok(());
        }
        let next = self.events.next();
        let deadline = Box::pin(sleep_ms(WORKER_START_MS));
        match select(next, deadline).await {
            Either::Left((Some(Event::Message(FromSandbox::Ready)), _)) => {
                self.ready = true;
                Ok(())
            }
            Either::Left((Some(Event::Message(FromSandbox::Rejected { problem })), _))
            | Either::Left((Some(Event::Failed(problem)), _)) => Err(problem),
            Either::Left((
                Some(Event::Message(FromSandbox::Report { .. } | FromSandbox::ToolCall { .. })),
                _,
            )) => Err("the sandbox worker answered before it was ready".into()),
            Either::Left((None, _)) => Err("the sandbox worker went away while starting".into()),
            Either::Right(_) => Err(format!(
                "the sandbox worker did not start within {} s",
                WORKER_START_MS / 1000
            )),
        }
    }
}

impl Drop for SandboxWorker {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}

/// Runs programs in sandbox workers, keeping one started worker warm.
#[derive(Clone, Default)]
pub struct SandboxClient {
    idle: Rc<RefCell<Option<SandboxWorker>>>,
    next_run_id: Rc<Cell<u64>>,
}

impl SandboxClient {
    /// Starts a worker now so that the first run does not pay for it.
    pub fn warm_up(&self) {
        if self.idle.borrow().is_none()
            && let Ok(worker) = SandboxWorker::start()
        {
            *self.idle.borrow_mut() = Some(worker);
        }
    }

    /// Runs `code` under `limits` and reports the outcome. A run that passes its
    /// wall budget is stopped by terminating its worker; a fresh worker replaces it.
    pub async fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<dyn PageTools>,
    ) -> RunReport {
        let limits = limits.clamped();
        let started = now_ms();
        let idle = self.idle.borrow_mut().take();
        let mut worker = match idle.map_or_else(SandboxWorker::start, Ok) {
            Ok(worker) => worker,
            Err(problem) => return engine_failure(problem, started),
        };
        if let Err(problem) = worker.ready().await {
            self.warm_up();
            return engine_failure(problem, started);
        }
        let run_id = {
            let next = self.next_run_id.get() + 1;
            self.next_run_id.set(next);
            next
        };
        let catalog = tools.catalog();
        let message = encode(ToSandbox::Run {
            run_id,
            code,
            limits,
            catalog,
        });
        if let Err(error) = worker.worker.post_message(&JsValue::from_str(&message)) {
            return engine_failure(
                format!("could not send the program: {}", describe(&error)),
                started,
            );
        }

        let budget = sleep_ms(limits.wall_ms).fuse();
        futures::pin_mut!(budget);
        loop {
            let event = match select(worker.events.next(), &mut budget).await {
                Either::Left((event, _)) => event,
                Either::Right(_) => {
                    // Boa has no interrupt hook: ending the worker is how a run stops.
                    drop(worker);
                    self.warm_up();
                    let elapsed = now_ms() - started;
                    return RunReport::stopped(RunError::wall_budget(limits.wall_ms), elapsed);
                }
            };
            match event {
                Some(Event::Message(FromSandbox::Report {
                    run_id: id, report, ..
                })) if id == run_id => {
                    self.keep_idle(worker);
                    return report;
                }
                Some(Event::Message(FromSandbox::ToolCall {
                    run_id: id,
                    call_number,
                    tool,
                    args,
                })) if id == run_id => {
                    let reply = tools.call(&tool, args);
                    let target = worker.worker.clone();
                    wasm_bindgen_futures::spawn_local(async move {
                        let reply = reply.await;
                        let message = encode(ToSandbox::ToolReply {
                            run_id,
                            call_number,
                            reply,
                        });
                        // A worker terminated meanwhile drops the reply, as it should.
                        let _ = target.post_message(&JsValue::from_str(&message));
                    });
                }
                // A stale report or call, or a repeated `ready`: not ours, keep waiting.
                Some(Event::Message(
                    FromSandbox::Report { .. } | FromSandbox::ToolCall { .. } | FromSandbox::Ready,
                )) => {}
                Some(
                    Event::Message(FromSandbox::Rejected { problem }) | Event::Failed(problem),
                ) => {
                    drop(worker);
                    self.warm_up();
                    return engine_failure(problem, started);
                }
                None => {
                    self.warm_up();
                    let problem = "the sandbox worker went away during the run".to_owned();
                    return engine_failure(problem, started);
                }
            }
        }
    }

    fn keep_idle(&self, worker: SandboxWorker) {
        let mut idle = self.idle.borrow_mut();
        if idle.is_none() {
            *idle = Some(worker);
        }
    }
}

fn engine_failure(problem: String, started: f64) -> RunReport {
    RunReport::stopped(
        RunError::new(RunErrorKind::Engine, problem),
        now_ms() - started,
    )
}

fn describe(error: &JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|error| String::from(error.message()))
        .or_else(|| error.as_string())
        .unwrap_or_else(|| "unknown error".into())
}

/// Milliseconds on the page's monotonic clock.
pub fn now_ms() -> f64 {
    web_sys::window()
        .and_then(|window| window.performance())
        .map_or(0.0, |performance| performance.now())
}

/// A future that resolves after `ms` milliseconds on the page's timer.
pub(crate) async fn sleep_ms(ms: u64) {
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        if let Some(window) = web_sys::window() {
            let ms = i32::try_from(ms).unwrap_or(i32::MAX);
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}
