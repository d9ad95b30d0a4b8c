//! The worker's message loop: each [`ToRuntime`] message becomes one exchange
//! under the page's id, in the module of its concern:
//!
//! - `runs`: a page's program runs, keyed runs in custody, late results.
//! - `turns`: a streamed chat turn, an agent turn, a provider's model list.
//! - `nodes`: a code node's run, a graph's, a node written by a model.
//! - `page`: the seams that reach back to the page: its tools
//!   ([`PageTools`]), its `approve` callback ([`PageApprover`]), its `ask`
//!   callback.
//!
//! Here: the worker's state, its start, storage operations (`store_op`'s,
//! `ops` and `settings`) and the change feed, a run's environment, the tool
//! catalog and MCP checks. Chat turns, run budgets and model lists are the
//! providers' (a chat request read by `kiln_agent::TurnRequest`); this only
//! carries them.

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
use kiln_types::{Progress, RunLimits, RunResult};
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

mod nodes;
mod page;
mod runs;
mod turns;

use nodes::{author_code, check_node, graph, node};
use page::{PageApprover, PagePerson, PageTools};
use runs::{kept_run, run};
use turns::{Asks, agent, chat, models, stored_config};

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
    /// The workspace's secrets vault, sealed with this browser's key; the
    /// problem when there is none (no workspace, no WebCrypto).
    vault: Result<kiln_store::vault::Vault, StoreError>,
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
        let vault = match workspace.as_ref() {
            Ok(opened) => kiln_store::browser::sealer::BrowserSealer::open(&options.workspace)
                .await
                .map(|sealer| kiln_store::vault::Vault::new(opened.backend.clone(), sealer)),
            Err(error) => Err(error.clone()),
        };
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
                vault,
            }));
        });
        post(&FromRuntime::Ready { storage });
        // Due schedules fire while this tab is open.
        if let Some(runtime) = RUNTIME.with(|runtime| runtime.borrow().clone()) {
            wasm_bindgen_futures::spawn_local(turns::schedules(runtime));
        }
    });
}

/// `workspace`'s database (`kiln-<workspace>`) and OPFS folder, under this
/// worker's owner lock; the jobs a closed tab left running are marked
/// `interrupted` before anything else reads them.
pub(crate) async fn open_workspace(workspace: &str) -> Result<Workspace, StoreError> {
    kiln_run::check_workspace_name(workspace).map_err(StoreError::Invalid)?;
    let owners = Rc::new(kiln_store::browser::WebLocks::acquire().await?);
    let backend: Rc<dyn kiln_store::Backend> =
        kiln_store::browser::IdbBackend::open(&format!("kiln-{workspace}")).await?;
    let files: Rc<dyn kiln_store::files::FileTree> =
        kiln_store::browser::OpfsTree::open(workspace).await?;
    let opened = Workspace {
        backend,
        files,
        owners,
    };
    opened.interrupt_abandoned().await?;
    // Threads deleted long enough ago that no undo can reach them; one that
    // cannot be purged now is tried again at the next open.
    let _ = kiln_store::threads::Threads::new(opened.backend.clone())
        .purge(kiln_store::clock::epoch_ms())
        .await;
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
        ToRuntime::CheckNode { id, node } => {
            wasm_bindgen_futures::spawn_local(check_node(runtime, id, node));
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
    let answered = if op.starts_with("secrets.") {
        match &runtime.vault {
            Ok(vault) => crate::ops::vault_op(vault, &op, &args)
                .await
                .map_err(|error| op_problem(&error)),
            Err(error) => Err(store_problem(error)),
        }
    } else {
        match opened(&runtime) {
            Ok(workspace) => store_op(workspace, &op, &args)
                .await
                .map_err(|error| op_problem(&error)),
            Err(problem) => Err(problem),
        }
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
    environment.on_progress = Some(Rc::new(move |progress: &Progress| {
        post(&FromRuntime::Event {
            id,
            event: ExchangeEvent::Progress {
                node: None,
                progress: progress.clone(),
            },
        });
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
        on_progress: None,
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

/// The worker's pool as the agent layer's sandbox runner. A program written
/// in TypeScript runs too: when a sandbox would not parse it, its types are
/// blanked by `kiln_ts.js` (loaded then) and it runs again.
pub(crate) struct PoolRunner(pub(crate) SandboxPool);

impl SandboxRunner for PoolRunner {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        kiln_run::TypeScript {
            runner: Rc::new(JavaScript(self.0.clone())),
            stripper: Rc::new(crate::typescript::LoadedOnNeed),
        }
        .run(code, limits, tools, cancel)
    }

    fn stripper(&self) -> Option<Rc<dyn kiln_run::Stripper>> {
        Some(Rc::new(crate::typescript::LoadedOnNeed))
    }
}

/// The pool, given the program as it is.
struct JavaScript(SandboxPool);

impl SandboxRunner for JavaScript {
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
