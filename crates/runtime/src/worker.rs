//! The worker's message loop and the two seams that reach back to the page:
//! [`PageTools`] (the page tools of a run) and [`PageApprover`] (its
//! `approve` callback). Storage operations are `store_op`'s (`ops`,
//! `settings`); chat turns, run budgets and model lists are the providers'
//! (a chat request read by `kiln_agent::TurnRequest`); this only carries them.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use crate::ops::{OpError, store_op};
use futures::StreamExt as _;
use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use kiln_agent::{Person, TurnBudget, TurnRequest, new_budget};
use kiln_capabilities::gate::{Gate, GateSettings, Headless, SessionAllow};
use kiln_capabilities::{
    Answer, ApprovalRequest, Approver, CallContext, Dispatcher, HeldSignal, Implementation, Permit,
};
use kiln_host::SandboxPool;
use kiln_providers::budget::RunBudget;
use kiln_providers::{Event, ProviderError};
use kiln_run::Environment;
use kiln_run::provider_config;
use kiln_run::{Custody, RunHandle};
use kiln_run::{People, RunRequest, SandboxRunner, ToolBridge, Workspace};
use kiln_store::{Change, StoreError, Subscription};
use kiln_types::cancel::AbortSignal;
use kiln_types::runtime::{
    ExchangeEvent, FromRuntime, Problem, RunAnswer, RuntimeOptions, ToRuntime, Told, decode, encode,
};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply, ToolResult, error_result};
use kiln_types::{RunLimits, RunResult};
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

/// What the worker serves, once started.
struct Runtime {
    pool: SandboxPool,
    workspace: Rc<Result<Workspace, StoreError>>,
    /// "Allow for this session" answers, for every run of this page.
    session: SessionAllow,
    http: Rc<dyn kiln_http::HttpClient>,
    /// Page tool calls waiting for the page's reply, by (run, the call's
    /// key): an agent turn's actions each number their calls from 1, so the
    /// key, never given twice, is what a reply is matched by.
    calls: RefCell<HashMap<(u64, u64), PendingCall>>,
    next_call: Cell<u64>,
    /// Questions waiting for the page's answer, by ask number.
    asks: RefCell<HashMap<u64, oneshot::Sender<Answer>>>,
    /// `ask_user` questions waiting for the page's answer, by ask number
    /// (numbered with the approvals), with the agent turn that asked.
    questions: RefCell<HashMap<u64, (u64, Asked)>>,
    next_ask: Cell<u64>,
    /// The cancel switch of each run and chat turn in progress.
    runs: RefCell<HashMap<u64, AbortSignal>>,
    /// The page's change-feed subscriptions, by watch id.
    watches: RefCell<HashMap<u64, Subscription>>,
    /// Run budgets the page made, by its number for them.
    budgets: RefCell<HashMap<u32, RunBudget>>,
    /// The gate of each run going on, for the person's later settings.
    gates: RefCell<HashMap<u64, Rc<Gate>>>,
    /// The settings the page sent last ([`ToRuntime::Permission`]), and how
    /// many times it has sent them: a run received before the last change
    /// takes it when its gate is made.
    permission: RefCell<(u64, Option<GateSettings>)>,
    /// The keyed runs of this worker (`kiln.run({key})`), with the results
    /// the workspace's history kept from earlier ones.
    custody: Custody,
    /// The run id of each keyed exchange going on: its `cancel` withdraws it.
    keyed: RefCell<HashMap<u64, String>>,
    /// Kiln's own model's worker, started by the first turn that asks for it.
    model: Rc<crate::model::ModelWorker>,
}

/// Where the person's answer to one `ask_user` question goes.
type Asked = oneshot::Sender<Result<String, String>>;

struct PendingCall {
    reply: oneshot::Sender<ToolReply>,
    held: HeldSignal,
}

thread_local! {
    static RUNTIME: RefCell<Option<Rc<Runtime>>> = const { RefCell::new(None) };
    static SCOPE: Option<DedicatedWorkerGlobalScope> = js_sys::global().dyn_into().ok();
}

fn post(message: &FromRuntime) {
    SCOPE.with(|scope| {
        if let Some(scope) = scope {
            // A page that went away takes no answer.
            let _ = scope.post_message(&JsValue::from_str(&encode(message)));
        }
    });
}

/// Runs when `workers/runtime.js` instantiates the module.
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
    let Ok(scope) = js_sys::global().dyn_into::<DedicatedWorkerGlobalScope>() else {
        // Loaded outside a dedicated worker (a test page, say): nothing to serve.
        return;
    };
    let options = match serde_json::from_str::<RuntimeOptions>(&scope.name()) {
        Ok(options) => options,
        Err(error) => {
            post(&FromRuntime::Rejected {
                problem: format!("the runtime worker's options (its name) are not valid: {error}"),
            });
            return;
        }
    };
    let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let Some(text) = event.data().as_string() else {
            post(&FromRuntime::Rejected {
                problem: "a runtime message must be JSON text".into(),
            });
            return;
        };
        match decode::<ToRuntime>(&text) {
            Ok(message) => on_message(message),
            Err(error) => post(&FromRuntime::Rejected {
                problem: error.to_string(),
            }),
        }
    });
    scope.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
    // The handler lives as long as the worker does.
    onmessage.forget();
    wasm_bindgen_futures::spawn_local(async move {
        // The first sandbox worker starts now, while the workspace opens, and is
        // not waited for: `ready` says the storage is open, so the panels need
        // not wait for the sandbox's download; a run waits for its worker (and a
        // worker that cannot start fails that run, naming why).
        let pool = SandboxPool::new(options.sandbox_url, options.pool_size as usize);
        pool.warm_up();
        let workspace = Rc::new(open_workspace(&options.workspace).await);
        let storage = workspace.as_ref().as_ref().err().map(store_problem);
        let spawn: kiln_run::Spawn = Rc::new(wasm_bindgen_futures::spawn_local);
        let custody = Custody::new(Rc::new(kiln_http::SystemClock), spawn)
            .with_reply_due(options.reply_due_ms.unwrap_or(kiln_run::REPLY_DUE_MS));
        if let Ok(workspace) = workspace.as_ref() {
            // Keyed runs an earlier tab recorded answer retries and late
            // results from the record, never by running again; one that cannot
            // be read is only not adopted.
            let history = kiln_store::history::History::new(workspace.backend.clone());
            let _ = custody
                .adopt_history(&history, kiln_store::clock::epoch_ms())
                .await;
        }
        let model = crate::model::ModelWorker::new(Rc::new(|status| {
            post(&FromRuntime::ModelStatus {
                status: status.clone(),
            });
        }));
        model.install();
        RUNTIME.with(|runtime| {
            *runtime.borrow_mut() = Some(Rc::new(Runtime {
                pool,
                workspace,
                session: SessionAllow::default(),
                http: kiln_http::default_client(),
                calls: RefCell::default(),
                next_call: Cell::new(0),
                asks: RefCell::default(),
                questions: RefCell::default(),
                next_ask: Cell::new(0),
                runs: RefCell::default(),
                watches: RefCell::default(),
                budgets: RefCell::default(),
                gates: RefCell::default(),
                permission: RefCell::default(),
                custody,
                keyed: RefCell::default(),
                model,
            }));
        });
        post(&FromRuntime::Ready { storage });
    });
}

/// `workspace`'s database (`kiln-<workspace>`) and OPFS folder, under this
/// worker's owner lock; the jobs a closed tab left running are marked
/// `interrupted` before anything else reads them.
pub(crate) async fn open_workspace(workspace: &str) -> Result<Workspace, StoreError> {
    kiln_run::check_workspace_name(workspace).map_err(StoreError::Invalid)?;
    let custody = Rc::new(kiln_store::browser::WebLocks::acquire().await?);
    let backend: Rc<dyn kiln_store::Backend> =
        kiln_store::browser::IdbBackend::open(&format!("kiln-{workspace}")).await?;
    let files: Rc<dyn kiln_store::files::FileTree> =
        kiln_store::browser::OpfsTree::open(workspace).await?;
    let opened = Workspace {
        backend,
        files,
        custody,
    };
    opened.interrupt_abandoned().await?;
    Ok(opened)
}

pub(crate) fn store_problem(error: &StoreError) -> Problem {
    Problem {
        bad_request: false,
        message: error.to_string(),
        code: Some(error.code().to_owned()),
        hint: error.hint().map(str::to_owned),
        status: None,
    }
}

fn on_message(message: ToRuntime) {
    let Some(runtime) = RUNTIME.with(|runtime| runtime.borrow().clone()) else {
        post(&FromRuntime::Rejected {
            problem: "the runtime worker is not ready yet: wait for its `ready`".into(),
        });
        return;
    };
    match message {
        ToRuntime::Run {
            id,
            request,
            approve,
            report,
        } => {
            let seen = runtime.permission.borrow().0;
            wasm_bindgen_futures::spawn_local(run(runtime, id, request, approve, report, seen));
        }
        ToRuntime::Cancel { id } => {
            if let Some(cancel) = runtime.runs.borrow().get(&id) {
                cancel.abort();
            }
            runtime.watches.borrow_mut().remove(&id);
            let keyed = runtime.keyed.borrow().get(&id).cloned();
            if let Some(run_id) = keyed {
                // A keyed run's signal withdraws it; its exchange answers how it ended.
                let custody = runtime.custody.clone();
                wasm_bindgen_futures::spawn_local(async move {
                    let _ = custody.withdraw(&run_id).await;
                });
            }
        }
        ToRuntime::LateResult { id, run_id } => {
            wasm_bindgen_futures::spawn_local(kept_run(runtime, id, run_id, false));
        }
        ToRuntime::Withdraw { id, run_id } => {
            wasm_bindgen_futures::spawn_local(kept_run(runtime, id, run_id, true));
        }
        ToRuntime::Store { id, op, args } => {
            wasm_bindgen_futures::spawn_local(store(runtime, id, op, args));
        }
        ToRuntime::Watch { id } => watch(&runtime, id),
        ToRuntime::Chat { id, request } => {
            wasm_bindgen_futures::spawn_local(chat(runtime, id, request))
        }
        ToRuntime::Agent {
            id,
            request,
            approve,
            ask,
        } => {
            let seen = runtime.permission.borrow().0;
            let asks = Asks { approve, ask, seen };
            wasm_bindgen_futures::spawn_local(agent(runtime, id, request, asks));
        }
        ToRuntime::Node {
            id,
            request,
            approve,
        } => {
            let seen = runtime.permission.borrow().0;
            wasm_bindgen_futures::spawn_local(node(runtime, id, request, approve, seen));
        }
        ToRuntime::Graph {
            id,
            request,
            approve,
        } => {
            let seen = runtime.permission.borrow().0;
            wasm_bindgen_futures::spawn_local(graph(runtime, id, request, approve, seen));
        }
        ToRuntime::AuthorCode {
            id,
            request,
            preview,
        } => {
            wasm_bindgen_futures::spawn_local(author_code(runtime, id, request, preview));
        }
        ToRuntime::Told { ask, told } => {
            let waiting = runtime.questions.borrow_mut().remove(&ask);
            if let Some((_, waiting)) = waiting {
                let _ = waiting.send(match told {
                    Told::Said { text } => Ok(text),
                    Told::Unavailable { reason } => Err(reason),
                });
            }
        }
        ToRuntime::Budget { budget, limits } => {
            let made = new_budget(&limits, Rc::new(kiln_http::SystemClock));
            runtime.budgets.borrow_mut().insert(budget, made);
        }
        ToRuntime::Models { id, provider } => {
            wasm_bindgen_futures::spawn_local(models(runtime, id, provider));
        }
        ToRuntime::ClearModel { id } => {
            let model = Rc::clone(&runtime.model);
            wasm_bindgen_futures::spawn_local(async move {
                let cleared = model
                    .clear()
                    .await
                    .map(|()| Value::Null)
                    .map_err(|failure| Problem {
                        bad_request: false,
                        message: failure.message,
                        code: Some(failure.code),
                        hint: failure.hint,
                        status: None,
                    });
                answer(id, cleared);
            });
        }
        ToRuntime::Permission { settings } => {
            if let Err(problem) = settings.check() {
                post(&FromRuntime::Rejected {
                    problem: format!("the permission settings were not applied: {problem}"),
                });
                return;
            }
            for gate in runtime.gates.borrow().values() {
                // Checked above: the gate takes them.
                let _ = gate.set_settings(&settings);
            }
            let mut permission = runtime.permission.borrow_mut();
            permission.0 += 1;
            permission.1 = Some(settings);
        }
        ToRuntime::Catalog { id, request } => {
            wasm_bindgen_futures::spawn_local(catalog(runtime, id, request));
        }
        ToRuntime::McpConnect { id, name, url } => {
            wasm_bindgen_futures::spawn_local(mcp_connect(runtime, id, name, url));
        }
        ToRuntime::Bench { id, hook, args } => {
            wasm_bindgen_futures::spawn_local(async move {
                answer(
                    id,
                    crate::bench::run(&runtime.http, &runtime.pool, &hook, args).await,
                );
            });
        }
        ToRuntime::ToolReply { id, key, reply, .. } => {
            let pending = runtime.calls.borrow_mut().remove(&(id, key));
            if let Some(pending) = pending {
                // A run that ended meanwhile takes no reply.
                let _ = pending.reply.send(reply);
            }
        }
        ToRuntime::ToolHeld { id, key, held, .. } => {
            let signal = runtime
                .calls
                .borrow()
                .get(&(id, key))
                .map(|pending| pending.held.clone());
            if let Some(signal) = signal {
                signal(held);
            }
        }
        ToRuntime::Answer { ask, approval } => {
            let waiting = runtime.asks.borrow_mut().remove(&ask);
            if let Some(waiting) = waiting {
                let _ = waiting.send(approval);
            }
        }
    }
}

/// Run `id`; `seen` counts the permission changes the page had sent when it
/// sent the run (its request carries the settings as of then).
async fn run(
    runtime: Rc<Runtime>,
    id: u64,
    request: Value,
    approve: bool,
    report: bool,
    seen: u64,
) {
    let request = match RunRequest::from_value(request) {
        Ok(request) => request,
        Err(error) => {
            post(&FromRuntime::Failed {
                id,
                problem: Problem::bad_request(error.0),
            });
            return;
        }
    };
    if request.key.is_some() && !report {
        keyed_run(runtime, id, request, approve, seen).await;
        return;
    }
    let environment = watched_environment(&runtime, id, approve, seen, "kiln.run");
    let cancel = AbortSignal::new();
    runtime.runs.borrow_mut().insert(id, cancel.clone());
    let runner = PoolRunner(runtime.pool.clone());
    let ran = kiln_run::run_program(request, &environment, &runner, cancel).await;
    // Calls of this run still waiting on the page are given up.
    settle(&runtime, id);
    match ran {
        Ok(ran) => {
            let value = if report {
                serde_json::to_value(RunAnswer {
                    job_id: ran.job_id,
                    text: ran.result.text(),
                    record_error: ran.record_error.as_ref().map(store_problem),
                    report: ran.run.report,
                    warnings: ran.run.warnings,
                    catalog_digest: ran.run.catalog_digest,
                })
                .unwrap_or(Value::Null)
            } else {
                serde_json::to_value(&ran.result).unwrap_or(Value::Null)
            };
            post(&FromRuntime::Done { id, value });
        }
        Err(error) => post(&FromRuntime::Failed {
            id,
            problem: Problem::bad_request(error.0),
        }),
    }
}

/// Keyed run `id` (`kiln.run({key})`), in custody: a retry with the same key
/// attaches and gets that run's result; a run not ended when its answer is
/// due answers the interim ([`FromRuntime::Interim`]) and goes on, its page
/// tools and `approve` still this exchange's, until its own `Done`.
async fn keyed_run(runtime: Rc<Runtime>, id: u64, request: RunRequest, approve: bool, seen: u64) {
    let run_id = kiln_run::RunId::for_request(&request, &kiln_store::ids::random_bytes).id;
    if !runtime.custody.keeps(&run_id)
        && let Some(recorded) = recorded(&runtime, &run_id).await
    {
        // Another tab's run of this key (going, or ended since this worker
        // started): answered from its record, never run again here.
        if recorded.structured_content["status"] != "running" {
            runtime.custody.adopt(&run_id, recorded.clone(), 0);
        }
        post(&FromRuntime::Done {
            id,
            value: serde_json::to_value(recorded.for_page()).unwrap_or(Value::Null),
        });
        return;
    }
    runtime.keyed.borrow_mut().insert(id, run_id.clone());
    let start = {
        let runtime = runtime.clone();
        move |handle: RunHandle| -> LocalBoxFuture<'static, ToolResult> {
            Box::pin(async move {
                let mut environment = watched_environment(&runtime, id, approve, seen, "kiln.run");
                // A call held on the person's consent is what the interim names.
                if let People::Approver { approver, .. } = &mut environment.people {
                    *approver = kiln_run::holding(approver.clone(), handle.clone());
                }
                let runner = PoolRunner(runtime.pool.clone());
                let ran =
                    kiln_run::run_program(request, &environment, &runner, handle.cancel.clone())
                        .await;
                settle(&runtime, id);
                runtime.keyed.borrow_mut().remove(&id);
                // The exchange that started the run ends with it, whether it
                // answered already (the interim) or not.
                match ran {
                    Ok(ran) => {
                        post(&FromRuntime::Done {
                            id,
                            value: serde_json::to_value(&ran.result).unwrap_or(Value::Null),
                        });
                        ran.result
                    }
                    Err(error) => {
                        post(&FromRuntime::Failed {
                            id,
                            problem: Problem::bad_request(error.0.clone()),
                        });
                        error_result(
                            None,
                            "invalid_request",
                            &error.0,
                            json!({"status": "refused"}),
                        )
                    }
                }
            })
        }
    };
    let (result, attached) = runtime.custody.call(&run_id, start).await;
    let result = result.for_page();
    if attached {
        // A retry: its answer is the kept run's, and it ends here.
        runtime.keyed.borrow_mut().remove(&id);
        post(&FromRuntime::Done {
            id,
            value: serde_json::to_value(&result).unwrap_or(Value::Null),
        });
    } else if result.structured_content["status"] == "running" {
        post(&FromRuntime::Interim {
            id,
            value: serde_json::to_value(&result).unwrap_or(Value::Null),
        });
    }
    // Else the run ended in time and its own `Done` went out.
}

/// `kiln.lateResult(runId)`, or with `withdraw` `kiln.withdraw(runId)`: from
/// custody, else from the history's record.
async fn kept_run(runtime: Rc<Runtime>, id: u64, run_id: String, withdraw: bool) {
    let kept = if withdraw {
        runtime.custody.withdraw(&run_id).await
    } else {
        runtime.custody.late_result(&run_id).await
    };
    let answer = match kept {
        Ok(result) => result,
        Err(error) => recorded(&runtime, &run_id)
            .await
            .unwrap_or_else(|| error.to_result()),
    };
    post(&FromRuntime::Done {
        id,
        value: serde_json::to_value(answer.for_page()).unwrap_or(Value::Null),
    });
}

/// A keyed run this worker keeps nothing for, as the workspace's history
/// recorded it: another tab's, ended (its result) or still going there (the
/// interim; a job a closed tab left was marked `interrupted` when this worker
/// opened the workspace).
async fn recorded(runtime: &Runtime, run_id: &str) -> Option<ToolResult> {
    let workspace = runtime.workspace.as_ref().as_ref().ok()?;
    let history = kiln_store::history::History::new(workspace.backend.clone());
    let jobs = history.jobs(400).await.ok()?;
    let job = jobs
        .into_iter()
        .find(|job| job.run_id.as_deref() == Some(run_id))?;
    match job.result.map(serde_json::from_value::<ToolResult>) {
        Some(Ok(result)) => Some(result),
        _ if job.status == "interrupted" => Some(kiln_run::interrupted(run_id, &job.output)),
        _ if job.status == "running" => Some(kiln_types::tool_result::interim(run_id, &[])),
        _ => None,
    }
}

/// Ends exchange `id` with its answer or why there is none.
fn answer(id: u64, answered: Result<Value, Problem>) {
    post(&match answered {
        Ok(value) => FromRuntime::Done { id, value },
        Err(problem) => FromRuntime::Failed { id, problem },
    });
}

/// The workspace's stores, or the problem of their not being open.
fn opened(runtime: &Runtime) -> Result<&Workspace, Problem> {
    runtime.workspace.as_ref().as_ref().map_err(store_problem)
}

async fn store(runtime: Rc<Runtime>, id: u64, op: String, args: Value) {
    let answered = match opened(&runtime) {
        Ok(workspace) => store_op(workspace, &op, &args)
            .await
            .map_err(|error| op_problem(&error)),
        Err(problem) => Err(problem),
    };
    answer(id, answered);
}

fn op_problem(error: &OpError) -> Problem {
    match error {
        OpError::BadRequest(message) => Problem::bad_request(message.clone()),
        OpError::Store(error) => store_problem(error),
    }
}

/// Posts every committed change under `id` until the page cancels it.
fn watch(runtime: &Runtime, id: u64) {
    match opened(runtime) {
        Ok(workspace) => {
            let subscription = workspace
                .backend
                .subscribe(Rc::new(move |changes: &[Change]| {
                    post(&FromRuntime::Changed {
                        id,
                        changes: serde_json::to_value(changes).unwrap_or(Value::Null),
                    });
                }));
            runtime.watches.borrow_mut().insert(id, subscription);
        }
        Err(problem) => post(&FromRuntime::Failed { id, problem }),
    }
}

/// The workspace's configuration, when its stores opened.
fn stored_config(runtime: &Runtime) -> Option<kiln_store::config::Config> {
    runtime
        .workspace
        .as_ref()
        .as_ref()
        .ok()
        .map(|workspace| kiln_store::config::Config::new(workspace.backend.clone()))
}

fn provider_problem(error: &ProviderError) -> Problem {
    Problem {
        bad_request: false,
        message: error.sentence(),
        code: Some(error.code().to_owned()),
        hint: error.hint.clone(),
        status: error.status,
    }
}

/// One streamed chat turn: its events posted as they come, then its final
/// message (with the budget's spend when it had one).
async fn chat(runtime: Rc<Runtime>, id: u64, request: Value) {
    let answered = async {
        let turn = TurnRequest::from_value(&request).map_err(Problem::bad_request)?;
        let budget = match turn.budget {
            None => None,
            Some(TurnBudget::Own(limits)) => {
                Some(new_budget(&limits, Rc::new(kiln_http::SystemClock)))
            }
            Some(TurnBudget::Shared(number)) => Some(
                runtime
                    .budgets
                    .borrow()
                    .get(&number)
                    .cloned()
                    .ok_or_else(|| {
                        Problem::bad_request(format!(
                            "`budget` names budget {number}, which this Kiln did not make"
                        ))
                    })?,
            ),
        };
        let config = stored_config(&runtime);
        let provider = provider_config(config.as_ref(), &turn.provider)
            .await
            .map_err(|error| op_problem(&error.into()))?;
        let provider = kiln_providers::connect_with(provider, runtime.http.clone());
        let abort = AbortSignal::new();
        runtime.runs.borrow_mut().insert(id, abort.clone());
        let mut stream =
            kiln_providers::turn(&*provider, turn.request, budget.clone(), Some(abort));
        let mut done = None;
        while let Some(item) = stream.next().await {
            let event = item.map_err(|error| provider_problem(&error))?;
            if let Event::Done { message } = &event {
                done = Some(message.clone());
            }
            post(&FromRuntime::Event {
                id,
                event: ExchangeEvent::Chat(event),
            });
        }
        let mut value = serde_json::to_value(done.unwrap_or_default()).unwrap_or_default();
        if let (Some(budget), Some(object)) = (budget, value.as_object_mut()) {
            object.insert(
                "spend".into(),
                serde_json::to_value(budget.spend()).unwrap_or_default(),
            );
        }
        Ok::<Value, Problem>(value)
    }
    .await;
    runtime.runs.borrow_mut().remove(&id);
    answer(id, answered);
}

/// Who an agent turn can ask: the page's `approve` and `ask` callbacks, and
/// how many permission changes the page had sent when it sent the turn.
struct Asks {
    approve: bool,
    ask: bool,
    seen: u64,
}

/// One agent turn: its events posted as they come, then its result and the
/// thread to continue from.
async fn agent(runtime: Rc<Runtime>, id: u64, request: Value, asks: Asks) {
    let Asks { approve, ask, seen } = asks;
    let answered = async {
        let spec = kiln_agent::AgentSpec::from_value(request)
            .map_err(|error| Problem::bad_request(error.0))?;
        let config = stored_config(&runtime);
        let provider = provider_config(config.as_ref(), &spec.provider)
            .await
            .map_err(|error| op_problem(&error.into()))?;
        let provider = kiln_providers::connect_with(provider, runtime.http.clone());
        let environment = watched_environment(&runtime, id, approve, seen, "kiln.agent");
        let cancel = AbortSignal::new();
        runtime.runs.borrow_mut().insert(id, cancel.clone());
        let setup = kiln_agent::AgentSetup {
            environment: &environment,
            runner: Rc::new(PoolRunner(runtime.pool.clone())),
            person: ask.then(|| {
                Rc::new(PagePerson {
                    runtime: runtime.clone(),
                    run: id,
                }) as Rc<dyn Person>
            }),
            clock: Rc::new(kiln_http::SystemClock),
            sink: Rc::new(move |event| {
                post(&FromRuntime::Event {
                    id,
                    event: ExchangeEvent::Agent(event),
                });
            }),
            cancel,
        };
        let outcome = kiln_agent::run_agent(spec.with_provider(provider), setup)
            .await
            .map_err(|error| Problem::bad_request(error.0))?;
        let mut value = serde_json::to_value(&outcome.result).unwrap_or(Value::Null);
        if let Some(object) = value.as_object_mut() {
            object.insert(
                "messages".into(),
                serde_json::to_value(&outcome.view).unwrap_or_default(),
            );
        }
        Ok::<Value, Problem>(value)
    }
    .await;
    settle(&runtime, id);
    // A question left open has nobody to ask it any more.
    runtime
        .questions
        .borrow_mut()
        .retain(|_, (run, _)| *run != id);
    answer(id, answered);
}

async fn models(runtime: Rc<Runtime>, id: u64, provider: Value) {
    let answered = async {
        let config = stored_config(&runtime);
        let provider = provider_config(config.as_ref(), &provider)
            .await
            .map_err(|error| op_problem(&error.into()))?;
        let provider = kiln_providers::connect_with(provider, runtime.http.clone());
        let models = provider
            .models()
            .await
            .map_err(|error| provider_problem(&error))?;
        Ok::<Value, Problem>(serde_json::to_value(models).unwrap_or_default())
    }
    .await;
    answer(id, answered);
}

/// What a run (or its catalog) of exchange `id` is assembled in: the page's
/// tools across the protocol, its `approve` callback when it gave one (else
/// the headless gate), the workspace, this worker's session allow-set.
/// [`environment`] for run `id` whose gate takes the person's later
/// settings: `seen` counts the permission changes the page had sent when it
/// sent the exchange (its request carries the settings as of then).
fn watched_environment(
    runtime: &Rc<Runtime>,
    id: u64,
    approve: bool,
    seen: u64,
    entrance: &str,
) -> Environment {
    let mut environment = environment(runtime, id, approve);
    entrance.clone_into(&mut environment.entrance);
    environment.on_gate = Some(Rc::new({
        let runtime = runtime.clone();
        move |gate: Rc<Gate>| {
            if let (count, Some(settings)) = &*runtime.permission.borrow()
                && *count > seen
            {
                let _ = gate.set_settings(settings);
            }
            runtime.gates.borrow_mut().insert(id, gate);
        }
    }));
    environment
}

/// Forgets what exchange `id` held: its cancel switch, its gate, its calls
/// still waiting on the page.
fn settle(runtime: &Runtime, id: u64) {
    runtime.runs.borrow_mut().remove(&id);
    runtime.gates.borrow_mut().remove(&id);
    runtime.calls.borrow_mut().retain(|(run, _), _| *run != id);
}

/// One code node's run (`kiln.codeNode(spec).run(values)`).
async fn node(runtime: Rc<Runtime>, id: u64, request: Value, approve: bool, seen: u64) {
    let answered = async {
        let request = kiln_nodes::NodeRequest::from_value(request)
            .map_err(|error| Problem::bad_request(error.0))?;
        let environment = watched_environment(&runtime, id, approve, seen, "kiln.codeNode");
        let cancel = AbortSignal::new();
        runtime.runs.borrow_mut().insert(id, cancel.clone());
        let runner = PoolRunner(runtime.pool.clone());
        let ran = kiln_nodes::run_node(
            &request.node,
            &request.values,
            request.run,
            &environment,
            &runner,
            cancel,
        )
        .await
        .map_err(|error| Problem::bad_request(error.0))?;
        Ok::<Value, Problem>(serde_json::to_value(&ran).unwrap_or(Value::Null))
    }
    .await;
    settle(&runtime, id);
    answer(id, answered);
}

/// One graph's run (`kiln.graph(spec).run(inputs)`): each node's report
/// posted as it settles.
async fn graph(runtime: Rc<Runtime>, id: u64, request: Value, approve: bool, seen: u64) {
    let refused = |issues: Vec<String>| Problem {
        bad_request: false,
        message: issues.join("; "),
        code: Some("invalid_graph".into()),
        hint: None,
        status: None,
    };
    let answered = async {
        let request = kiln_nodes::GraphRequest::from_value(request)
            .map_err(|error| Problem::bad_request(error.0))?;
        let built = kiln_nodes::build_graph(request.spec).map_err(refused)?;
        let environment = watched_environment(&runtime, id, approve, seen, "kiln.graph");
        let cancel = AbortSignal::new();
        runtime.runs.borrow_mut().insert(id, cancel.clone());
        let runner = PoolRunner(runtime.pool.clone());
        let ran = kiln_nodes::run_graph(
            &built,
            &request.inputs,
            &request.run,
            kiln_nodes::GraphSetup {
                environment: &environment,
                runner: &runner,
                cancel: &cancel,
            },
            request.max_concurrent,
            |report| {
                post(&FromRuntime::Event {
                    id,
                    event: ExchangeEvent::Node(report.clone()),
                });
            },
        )
        .await
        .map_err(refused)?;
        Ok::<Value, Problem>(serde_json::to_value(&ran).unwrap_or(Value::Null))
    }
    .await;
    settle(&runtime, id);
    answer(id, answered);
}

/// One authoring (`kiln.authorCode`): the model resolved from the request,
/// the code-model setting, the chat's model and the kept provider's
/// default; with `preview`, what would be sent, and nothing sent.
async fn author_code(runtime: Rc<Runtime>, id: u64, request: Value, preview: bool) {
    let answered = async {
        let spec = kiln_nodes::AuthorSpec::from_value(request)
            .map_err(|error| Problem::bad_request(error.0))?;
        let config = stored_config(&runtime);
        let setting = match &config {
            Some(config) => config
                .settings()
                .await
                .ok()
                .and_then(|settings| settings.code_model),
            None => None,
        };
        let kept = kiln_run::kept_model(config.as_ref(), &spec.provider).await;
        let candidates = [
            spec.model.as_deref().or(setting.as_deref()),
            spec.chat_model.as_deref(),
            kept.as_deref(),
        ];
        let provider = provider_config(config.as_ref(), &spec.provider)
            .await
            .map(|provider| kiln_providers::connect_with(provider, runtime.http.clone()));
        // A model the provider says cannot call tools is skipped; a provider
        // that cannot be set up (a preview may come before its key) is not asked.
        let model = match &provider {
            Ok(provider) => kiln_nodes::pick_model(&**provider, &candidates).await,
            Err(_) => kiln_nodes::resolve_model(&candidates, &[]),
        }
        .map_err(|why| Problem {
            bad_request: false,
            message: why,
            code: Some("no_model".into()),
            hint: None,
            status: None,
        })?;
        if preview {
            return Ok(json!({"messages": spec.request.payload(), "model": model}));
        }
        let provider = provider.map_err(|error| op_problem(&error.into()))?;
        let cancel = AbortSignal::new();
        runtime.runs.borrow_mut().insert(id, cancel.clone());
        let authored = kiln_nodes::author(
            &*provider,
            &model,
            &spec.request,
            &kiln_http::SystemClock,
            &cancel,
        )
        .await;
        Ok::<Value, Problem>(kiln_nodes::authored_answer(&authored))
    }
    .await;
    settle(&runtime, id);
    answer(id, answered);
}

fn environment(runtime: &Rc<Runtime>, id: u64, approve: bool) -> Environment {
    let (host, approver): (String, Rc<dyn Approver>) = if approve {
        (
            "page".into(),
            Rc::new(PageApprover {
                runtime: runtime.clone(),
                run: id,
            }),
        )
    } else {
        let host = "kiln.run (no approve callback)";
        (host.into(), Rc::new(Headless::new(host)))
    };
    Environment {
        entrance: "kiln.run".into(),
        tools_host: "page".into(),
        http: runtime.http.clone(),
        people: People::Approver {
            host,
            approver,
            session: runtime.session.clone(),
        },
        own_tools: crate::bench::own_tools(),
        bridge: Some(Rc::new(PageTools {
            runtime: runtime.clone(),
            run: id,
        })),
        workspace: Some(runtime.workspace.clone()),
        random: Rc::new(kiln_store::ids::random_bytes),
        on_gate: None,
    }
}

async fn catalog(runtime: Rc<Runtime>, id: u64, request: Value) {
    let answered = match RunRequest::from_value(request) {
        Ok(request) => {
            let environment = environment(&runtime, id, true);
            let (specs, warnings) = kiln_run::catalog(&request, &environment).await;
            let tools: Vec<Value> = specs
                .iter()
                .map(|spec| {
                    json!({
                        "name": spec.name,
                        "description": spec.description,
                        "category": spec.category,
                        "module": spec.source.module(),
                    })
                })
                .collect();
            Ok(json!({"tools": tools, "warnings": warnings}))
        }
        Err(error) => Err(Problem::bad_request(error.0)),
    };
    answer(id, answered);
}

async fn mcp_connect(runtime: Rc<Runtime>, id: u64, name: String, url: String) {
    let connected = kiln_capabilities::mcp::try_connect(
        &name,
        &url,
        kiln_capabilities::Category::External,
        runtime.http.clone(),
    )
    .await;
    post(&match connected {
        Ok(server) => {
            let tools: Vec<Value> = server
                .tools
                .iter()
                .map(|tool| json!({"name": tool.name, "description": tool.description}))
                .collect();
            let value = json!({
                "server": {"name": server.info.name, "version": server.info.version},
                "tools": tools,
            });
            // Listed only: each run opens its own session.
            let _ = server.client.close().await;
            FromRuntime::Done { id, value }
        }
        Err(error) => FromRuntime::Failed {
            id,
            problem: Problem {
                bad_request: false,
                message: error.to_string(),
                code: Some("unreachable".into()),
                hint: None,
                status: None,
            },
        },
    });
}

/// The worker's pool as the agent layer's sandbox runner.
pub(crate) struct PoolRunner(pub(crate) SandboxPool);

impl SandboxRunner for PoolRunner {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        let pool = self.0.clone();
        Box::pin(async move { pool.run(code, limits, tools, cancel).await })
    }
}

/// A run's page tools: each call crosses to the page and back.
struct PageTools {
    runtime: Rc<Runtime>,
    run: u64,
}

impl ToolBridge for PageTools {
    fn implementation(&self, _name: &str) -> Option<Rc<dyn Implementation>> {
        Some(Rc::new(PageTool {
            runtime: self.runtime.clone(),
            run: self.run,
        }))
    }
}

struct PageTool {
    runtime: Rc<Runtime>,
    run: u64,
}

impl Implementation for PageTool {
    fn call(
        &self,
        args: Value,
        context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let (reply, replied) = oneshot::channel();
        let number = self.runtime.next_call.get() + 1;
        self.runtime.next_call.set(number);
        let key = (self.run, number);
        self.runtime.calls.borrow_mut().insert(
            key,
            PendingCall {
                reply,
                held: context.held.clone(),
            },
        );
        post(&FromRuntime::ToolCall {
            id: self.run,
            call_number: context.call_number,
            key: number,
            tool: context.tool.clone(),
            args,
        });
        let tool = context.tool;
        let forget = Forget {
            runtime: self.runtime.clone(),
            key,
        };
        Box::pin(async move {
            let _forget = forget;
            replied.await.unwrap_or_else(|_| {
                Err(ToolFailure {
                    code: "tool_error".into(),
                    message: format!("{tool} got no answer: the page went away"),
                    detail: None,
                    outcome: CallOutcome::OutcomeUnknown,
                })
            })
        })
    }
}

/// Drops a page tool call's entry when its call is dropped (its run ended):
/// a reply that comes later finds nothing to answer.
struct Forget {
    runtime: Rc<Runtime>,
    key: (u64, u64),
}

impl Drop for Forget {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.runtime.calls.try_borrow_mut() {
            calls.remove(&self.key);
        }
    }
}

/// An agent turn's `ask_user`, answered on the page.
struct PagePerson {
    runtime: Rc<Runtime>,
    run: u64,
}

impl Person for PagePerson {
    fn ask(&self, question: String) -> LocalBoxFuture<'static, Result<String, String>> {
        let ask = self.runtime.next_ask.get() + 1;
        self.runtime.next_ask.set(ask);
        let (answer, answered) = oneshot::channel();
        self.runtime
            .questions
            .borrow_mut()
            .insert(ask, (self.run, answer));
        post(&FromRuntime::Question {
            id: self.run,
            ask,
            question,
        });
        Box::pin(async move {
            answered
                .await
                .unwrap_or_else(|_| Err("the page went away before the person answered".into()))
        })
    }
}

/// A run's `approve` callback, on the page.
struct PageApprover {
    runtime: Rc<Runtime>,
    run: u64,
}

impl Approver for PageApprover {
    fn ask(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        let ask = self.runtime.next_ask.get() + 1;
        self.runtime.next_ask.set(ask);
        let (answer, answered) = oneshot::channel();
        self.runtime.asks.borrow_mut().insert(ask, answer);
        post(&FromRuntime::Approve {
            id: self.run,
            ask,
            request,
        });
        Box::pin(async move {
            answered.await.unwrap_or(Answer::Unavailable {
                reason: "the page went away before it answered".into(),
            })
        })
    }
}
