//! A pool of sandbox workers and the host's half of each run.
//!
//! The pool starts module workers from one bootstrap URL, keeps up to `size`
//! started workers idle between runs, and gives each run a worker of its own.
//! During a run it sends the worker's tool calls up the run's ladder
//! (`kiln_capabilities::Dispatcher`), forwards "held on a person" notices, and enforces the two
//! budgets that the sandbox cannot enforce from inside a guest that never
//! stops: wall time and JS CPU. Boa has no interrupt hook, so the run is ended
//! by terminating its worker, and a fresh one takes its place.
//!
//! **JS CPU on the host.** The worker says when the guest stops running
//! JavaScript ([`FromSandbox::Idle`], with its CPU total so far and when a
//! pending sleep ends). The guest runs again only when the host sends a tool
//! reply, or when that sleep ends. So the host knows, without shared memory,
//! from when the guest may be running, and a worker that runs longer than its
//! remaining CPU budget (plus a small grace for the message's way back) without
//! going idle is terminated with `budget_exhausted:js_cpu`.
//!
//! **Output.** The worker sends the guest's console lines as it prints them
//! ([`FromSandbox::Console`]), so a run the host ends by terminating its worker
//! (a Stop, a budget) keeps everything it printed, also in the middle of a loop
//! that never goes idle. They are the host's copy for that case only: a run
//! that answers has its whole console in its report, which the host reports
//! as it came, so nothing is counted twice.
//!
//! **Invariant:** this side never evaluates guest code; it posts text to
//! workers and reads their messages.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures::channel::mpsc;
use futures::future::{AbortHandle, FusedFuture, abortable};
use futures::future::{Either, select};
use futures::{FutureExt, StreamExt};
use kiln_types::cancel::AbortSignal;
use kiln_types::protocol::{CallRequest, FromSandbox, ToSandbox, decode, encode};
use kiln_types::tool_result::{CallOutcome, CallSummary, ToolReply};
use kiln_types::{ConsoleLine, RunError, RunErrorKind, RunLimits, RunReport, RunResult};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{ErrorEvent, MessageEvent, Worker, WorkerOptions, WorkerType};

use kiln_capabilities::{Dispatcher, HeldSignal};
use kiln_clock::{Clock as _, SystemClock, now_ms};

use crate::tools::PersonHold;

/// How long a new worker may take to fetch and instantiate its wasm.
const WORKER_START_MS: f64 = 30_000.0;
/// Slack on the host's JS CPU deadline for the worker's idle message to arrive.
const CPU_GRACE_MS: f64 = 100.0;

/// What a worker told us, or that it failed.
#[allow(
    clippy::large_enum_variant,
    reason = "events pass one at a time; boxing reports would buy nothing (the lint fires only on some targets)"
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
    fn start(url: &str) -> Result<Self, String> {
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        let worker = Worker::new_with_options(url, &options)
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
            event.prevent_default();
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
        let deadline = Box::pin(SystemClock.sleep_until(now_ms() + WORKER_START_MS));
        match select(next, deadline).await {
            Either::Left((Some(Event::Message(FromSandbox::Ready)), _)) => {
                self.ready = true;
                Ok(())
            }
            Either::Left((Some(Event::Message(FromSandbox::Rejected { problem })), _))
            | Either::Left((Some(Event::Failed(problem)), _)) => Err(problem),
            Either::Left((
                Some(Event::Message(
                    FromSandbox::Report { .. }
                    | FromSandbox::Idle { .. }
                    | FromSandbox::Console { .. }
                    | FromSandbox::Progress { .. }
                    | FromSandbox::Lost { .. },
                )),
                _,
            )) => Err("the sandbox worker answered before it was ready".into()),
            Either::Left((None, _)) => Err("the sandbox worker went away while starting".into()),
            Either::Right(_) => Err(format!(
                "the sandbox worker did not start within {} s",
                WORKER_START_MS / 1000.0
            )),
        }
    }

    fn post(&self, message: &ToSandbox) -> Result<(), String> {
        self.worker
            .post_message(&JsValue::from_str(&encode(message)))
            .map_err(|error| describe(&error))
    }
}

impl Drop for SandboxWorker {
    fn drop(&mut self) {
        // An event already queued (the error a dying worker raises after its
        // `lost`) must reach neither the dropped handlers nor, unhandled, the
        // scope that started the worker — in the runtime worker that would be
        // an error of the runtime itself.
        IGNORE_ERRORS.with(|ignore| {
            self.worker
                .set_onerror(Some(ignore.as_ref().unchecked_ref()));
        });
        self.worker.set_onmessage(None);
        self.worker.terminate();
    }
}

thread_local! {
    /// The handler of a terminated worker's late errors: handled, and nothing more.
    static IGNORE_ERRORS: Closure<dyn FnMut(ErrorEvent)> =
        Closure::new(|event: ErrorEvent| event.prevent_default());
}

/// Runs programs in sandbox workers.
#[derive(Clone)]
pub struct SandboxPool {
    inner: Rc<Inner>,
}

struct Inner {
    url: String,
    size: usize,
    idle: RefCell<Vec<SandboxWorker>>,
    next_run_id: Cell<u64>,
}

impl SandboxPool {
    /// A pool whose workers load `worker_url` (the module bootstrap,
    /// `workers/sandbox.js` in `pkg/`), keeping up to `size` of them started
    /// between runs. Runs beyond `size` at once each get a worker of their own.
    #[must_use]
    pub fn new(worker_url: impl Into<String>, size: usize) -> Self {
        Self {
            inner: Rc::new(Inner {
                url: worker_url.into(),
                size: size.max(1),
                idle: RefCell::new(Vec::new()),
                next_run_id: Cell::new(0),
            }),
        }
    }

    /// Starts one worker now, if none is idle, so that the next run does not
    /// pay for its start.
    pub fn warm_up(&self) {
        if self.inner.idle.borrow().is_empty()
            && let Ok(worker) = SandboxWorker::start(&self.inner.url)
        {
            self.inner.idle.borrow_mut().push(worker);
        }
    }

    /// Waits until a worker is started and ready.
    ///
    /// # Errors
    ///
    /// Why the worker could not start.
    pub async fn ready(&self) -> Result<(), String> {
        let worker = self.take_worker()?;
        let mut worker = worker;
        let ready = worker.ready().await;
        if ready.is_ok() {
            self.keep_idle(worker);
        }
        ready
    }

    fn take_worker(&self) -> Result<SandboxWorker, String> {
        let idle = self.inner.idle.borrow_mut().pop();
        idle.map_or_else(|| SandboxWorker::start(&self.inner.url), Ok)
    }

    fn keep_idle(&self, worker: SandboxWorker) {
        let mut idle = self.inner.idle.borrow_mut();
        if idle.len() < self.inner.size {
            idle.push(worker);
        }
    }

    /// Runs `code` under `limits`; every tool call walks `tools`' ladder.
    /// Reports the sandbox's outcome and admission's warnings (the agent
    /// layer puts the ladder's own ahead of them).
    /// Never fails: a worker that cannot start or dies becomes an `engine`
    /// failure, a budget the host enforces becomes a budget stop.
    ///
    /// `cancel` ends the run at once: its worker is terminated and replaced
    /// (a pending sleep ends with it), the run is `cancelled` with the output
    /// and call outcomes so far — a call still in the ladder (never sent to
    /// its tool) `cancelled`, one its tool had `outcome_unknown`.
    pub async fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> RunResult {
        let tools = &tools;
        let mut cancelled = cancel.aborted().fuse();
        let limits = limits.clamped();
        let started = now_ms();
        let mut worker = match self.take_worker() {
            Ok(worker) => worker,
            Err(problem) => return engine_failure(problem, started),
        };
        if let Err(problem) = worker.ready().await {
            self.warm_up();
            return engine_failure(problem, started);
        }
        let run_id = self.inner.next_run_id.get() + 1;
        self.inner.next_run_id.set(run_id);
        let run = ToSandbox::Run {
            run_id,
            code,
            limits,
            catalog: tools.catalog(),
        };
        if let Err(problem) = worker.post(&run) {
            return engine_failure(format!("could not send the program: {problem}"), started);
        }
        let mut watch = Watch::new(started, &limits);
        let calls = Rc::new(RefCell::new(Vec::<CallSummary>::new()));
        // The call number of each entry of `calls`.
        let mut numbers = Vec::<u32>::new();
        // The output so far, kept in case the worker has to be terminated.
        let mut console = Printed::default();
        let (replies, mut replied) = mpsc::unbounded::<(u32, ToolReply)>();
        // Calls still out when the run ends, however it ends, are given up:
        // an answer after that (an approval, say) runs nothing.
        let outstanding = Outstanding::default();

        // One timer at a time, set for the earliest moment a budget could run
        // out. Deadlines move later as the guest goes idle and runs again, so
        // the timer is re-armed only when it fires early or a deadline moves
        // earlier (the guest became busy after an idle spell).
        let mut armed = watch.deadline();
        let mut timer = Box::pin(SystemClock.sleep_until(armed).fuse());
        loop {
            let deadline = watch.deadline();
            if deadline < armed || timer.is_terminated() {
                armed = deadline;
                timer = Box::pin(SystemClock.sleep_until(armed).fuse());
            }
            let step = loop {
                futures::select_biased! {
                    reply = replied.next() => if let Some((call_number, reply)) = reply {
                        watch.busy(now_ms());
                        // A worker that cannot take the reply is about to say why.
                        let _ = worker.post(&ToSandbox::ToolReply { run_id, call_number, reply });
                        let deadline = watch.deadline();
                        if deadline < armed {
                            armed = deadline;
                            timer = Box::pin(SystemClock.sleep_until(armed).fuse());
                        }
                    },
                    event = worker.events.next() => break Step::Event(event),
                    () = timer => break Step::Timer,
                    () = cancelled => break Step::Cancelled,
                }
            };
            let event = match step {
                // Boa has no interrupt hook: ending the worker ends the run.
                Step::Timer => match watch.overrun(now_ms()) {
                    Some(error) => {
                        return self.replace(worker, error, started, &calls.borrow(), console);
                    }
                    None => continue,
                },
                Step::Cancelled => {
                    for (summary, number) in calls.borrow_mut().iter_mut().zip(&numbers) {
                        if summary.outcome == CallOutcome::OutcomeUnknown
                            && !tools.run_state().started(*number)
                        {
                            // Held on the person's consent, it provably never
                            // started: withdrawn; else it was never sent.
                            summary.outcome = if tools.run_state().awaiting_consent(*number) {
                                CallOutcome::Withdrawn
                            } else {
                                CallOutcome::Cancelled
                            };
                        }
                    }
                    let error = RunError::cancelled("the run was stopped before it finished");
                    return self.replace(worker, error, started, &calls.borrow(), console);
                }
                Step::Event(event) => event,
            };
            match event {
                Some(Event::Message(FromSandbox::Report {
                    run_id: id,
                    report,
                    warnings,
                    catalog_digest,
                })) if id == run_id => {
                    self.keep_idle(worker);
                    return RunResult {
                        report,
                        warnings,
                        catalog_digest,
                    };
                }
                Some(Event::Message(FromSandbox::Console {
                    run_id: id,
                    lines,
                    dropped,
                })) if id == run_id => {
                    console.lines.extend(lines);
                    console.dropped = dropped;
                }
                Some(Event::Message(FromSandbox::Progress {
                    run_id: id,
                    progress,
                })) if id == run_id => tools.run_state().progress(&progress),
                Some(Event::Message(FromSandbox::Idle {
                    run_id: id,
                    calls: requests,
                    cpu_ms,
                    wake_in_ms,
                })) if id == run_id => {
                    watch.idle(now_ms(), cpu_ms, wake_in_ms);
                    for request in requests {
                        numbers.push(request.call_number);
                        let call =
                            dispatch(request, tools, &worker.worker, run_id, &calls, &replies);
                        outstanding.0.borrow_mut().push(call);
                    }
                }
                // The worker's wasm is aborting: it takes no further run.
                Some(Event::Message(FromSandbox::Lost { run_id: id, error })) if id == run_id => {
                    return self.replace(worker, error, started, &calls.borrow(), console);
                }
                // A stale report or call, or a repeated `ready`: not ours, keep waiting.
                Some(Event::Message(
                    FromSandbox::Report { .. }
                    | FromSandbox::Idle { .. }
                    | FromSandbox::Console { .. }
                    | FromSandbox::Progress { .. }
                    | FromSandbox::Lost { .. }
                    | FromSandbox::Ready,
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
}

impl SandboxPool {
    /// Ends a run by terminating its worker, and starts a fresh one: the run's
    /// result is `error` with the calls the host saw and the output the worker
    /// sent before it was stopped.
    fn replace(
        &self,
        worker: SandboxWorker,
        error: RunError,
        started: f64,
        calls: &[CallSummary],
        console: Printed,
    ) -> RunResult {
        drop(worker);
        self.warm_up();
        let mut report = RunReport::stopped(error, now_ms() - started);
        report.calls = calls.to_vec();
        report.console = console.lines;
        report.console_dropped = console.dropped;
        RunResult {
            report,
            warnings: Vec::new(),
            catalog_digest: String::new(),
        }
    }
}

#[allow(
    clippy::large_enum_variant,
    reason = "one step at a time on the stack (the lint fires only on some targets)"
)]
enum Step {
    Event(Option<Event>),
    Timer,
    Cancelled,
}

/// Starts one tool call up the ladder; its reply comes back through `replies`.
fn dispatch(
    request: CallRequest,
    tools: &Rc<Dispatcher>,
    worker: &Worker,
    run_id: u64,
    calls: &Rc<RefCell<Vec<CallSummary>>>,
    replies: &mpsc::UnboundedSender<(u32, ToolReply)>,
) -> AbortHandle {
    let call_number = request.call_number;
    let index = calls.borrow().len();
    calls.borrow_mut().push(CallSummary {
        tool: request.tool.clone(),
        outcome: CallOutcome::OutcomeUnknown,
        waited_on_person: false,
        duration_ms: 0,
    });
    let person = PersonHold::new(worker.clone(), run_id, call_number);
    let held = person.was_held();
    let signal: HeldSignal = Rc::new(move |on| person.held(on));
    let reply = tools.call(request, signal);
    let started = now_ms();
    let calls = calls.clone();
    let replies = replies.clone();
    let (reply, handle) = abortable(reply);
    wasm_bindgen_futures::spawn_local(async move {
        let Ok(reply) = reply.await else {
            return;
        };
        if let Some(summary) = calls.borrow_mut().get_mut(index) {
            summary.outcome = match &reply {
                Ok(_) => CallOutcome::Ok,
                Err(failure) => failure.outcome,
            };
            summary.waited_on_person = held.get();
            // Non-negative and far below 2^53: the cast is exact after rounding.
            summary.duration_ms = (now_ms() - started).max(0.0).round() as u64;
        }
        // The run may have ended; then nobody is listening.
        let _ = replies.unbounded_send((call_number, reply));
    });
    handle
}

/// What the worker said its guest printed so far ([`FromSandbox::Console`]):
/// the run's output if the host has to end it by terminating the worker.
#[derive(Default)]
struct Printed {
    lines: Vec<ConsoleLine>,
    /// Lines the console budget cut, as last told (exact up to 1,024, at
    /// least half the count past that: see `kiln_sandbox`'s `console`).
    dropped: usize,
}

/// The run's calls still out; dropping it gives every one of them up.
#[derive(Default)]
struct Outstanding(RefCell<Vec<AbortHandle>>);

impl Drop for Outstanding {
    fn drop(&mut self) {
        for call in self.0.borrow().iter() {
            call.abort();
        }
    }
}

/// The host's view of a run's wall and JS CPU time.
struct Watch {
    wall_deadline: f64,
    wall_ms: u64,
    js_cpu_ms: u64,
    /// The CPU spent so far: the larger of the worker's figure and the host's
    /// own measure, so a worker that under-reports buys nothing.
    cpu_used: f64,
    /// The host's own measure: the time from each moment the guest may run
    /// (the run's start, a reply sent, a sleep's end) to the next idle report.
    host_cpu: f64,
    /// From when the guest may be running JavaScript, if it may.
    busy_since: Option<f64>,
}

impl Watch {
    fn new(started: f64, limits: &RunLimits) -> Self {
        Self {
            // The wall budget in ms is at most 30 minutes: exact as f64.
            wall_deadline: started + limits.wall_ms as f64,
            wall_ms: limits.wall_ms,
            js_cpu_ms: limits.js_cpu_ms,
            cpu_used: 0.0,
            host_cpu: 0.0,
            busy_since: Some(started),
        }
    }

    /// A reply went to the guest: it may run from now.
    fn busy(&mut self, now: f64) {
        // Earlier than a sleep's end the guest was waiting for: it runs now.
        self.busy_since = Some(self.busy_since.map_or(now, |since| since.min(now)));
    }

    /// The guest stopped; when a sleep is pending it runs again by itself then.
    fn idle(&mut self, now: f64, cpu_ms: f64, wake_in_ms: Option<f64>) {
        if let Some(since) = self.busy_since {
            // A sleep's end still to come spent nothing yet.
            self.host_cpu += (now - since).max(0.0);
        }
        self.cpu_used = cpu_ms.max(self.host_cpu).max(self.cpu_used);
        self.busy_since = wake_in_ms.map(|wake_in| now + wake_in.max(0.0));
    }

    /// The earliest moment a budget could run out.
    fn deadline(&self) -> f64 {
        let cpu = self.busy_since.map_or(f64::INFINITY, |since| {
            // At most 30 minutes in ms: exact as f64.
            since + (self.js_cpu_ms as f64 - self.cpu_used).max(0.0) + CPU_GRACE_MS
        });
        cpu.min(self.wall_deadline)
    }

    /// The budget that ran out by `now`, if one did.
    fn overrun(&self, now: f64) -> Option<RunError> {
        if now >= self.wall_deadline {
            Some(RunError::wall_budget(self.wall_ms))
        } else if now >= self.deadline() {
            Some(RunError::js_cpu_budget(self.js_cpu_ms))
        } else {
            None
        }
    }
}

fn engine_failure(problem: String, started: f64) -> RunResult {
    RunResult {
        report: RunReport::stopped(
            RunError::new(RunErrorKind::Engine, problem),
            now_ms() - started,
        ),
        warnings: Vec::new(),
        catalog_digest: String::new(),
    }
}

pub(crate) fn describe(error: &JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|error| String::from(error.message()))
        .or_else(|| error.as_string())
        .unwrap_or_else(|| "unknown error".into())
}
