//! Kiln's page: a program editor, a Run button and a result panel; below them the
//! providers and a chat box, the code nodes (graphs of typed JavaScript bodies,
//! written by hand or with AI), then what the workspace keeps: memory, files and
//! history (`kiln-store`, opened once at start).
//!
//! Programs run in this tab's runtime worker (`runtime.rs`, the runtime
//! protocol), which holds the ladder, the sandbox pool and the run's record;
//! the page answers its own tools' calls and the person's approvals. It
//! never evaluates guest code on the main thread.
//!
//! Each view is a module, with its plain data apart where it can be tested natively:
//!
//! - `runtime`: the app's side of the runtime protocol, over `kiln-runtime-client`: starts
//!   this tab's runtime worker and names the exchanges the app sends. The tool list is the
//!   worker's `catalog` answer for the request the next run would send, so no JSON Schema
//!   is compiled on the main thread; adding an MCP server is an `mcp_connect` there
//!   (connect, list, close: each run opens its own session).
//! - [`demo_tools`]: the page's own tools (`echo`, `add`, `clock`, `wait`, `ask`), offered
//!   to every run.
//! - `approval`: the page's approver: one approval card at a time, with Approve, Deny and
//!   Allow for this session.
//! - `permissions`: the permission settings kept in the workspace's configuration.
//! - `view_model`: what the result panel says about a run report, as plain strings.
//! - `chat`: the providers the chat can use and the streaming Chat box, one agent turn a
//!   message; `chat_model`: what they keep and say, as plain data and strings.
//! - `providers_panel`: the Providers panel: the providers the chat can use and the form
//!   that adds or edits one.
//! - `agent_view`: an agent turn as the chat shows it, folded from its events.
//! - `plan_tree`: how a turn's plans and sub-agents show in the chat.
//! - `nodes_panel`: the Code nodes view, a graph of code nodes with typed handles;
//!   `nodes_model`: that graph as data, its checked changes and undo history.
//! - `author_dialog`: the Code nodes view's authoring dialog ("Write code with AI").
//! - `storage`: the workspace's storage as the page holds it, through the runtime worker,
//!   and the change feed as one revision signal per panel.
//! - `memory_panel`, `files_panel`, `history_panel`: the Memory, Files and History panels;
//!   `storage_model`: what they say, as plain data and strings.
//! - `browser_tests`: the app's components in headless Chromium (`wasm-bindgen-test`).

mod agent_view;
mod approval;
mod author_dialog;
#[cfg(all(test, target_arch = "wasm32"))]
mod browser_tests;
mod chat;
mod chat_model;
pub mod demo_tools;
mod files_panel;
mod history_panel;
mod memory_panel;
mod nodes_model;
mod nodes_panel;
mod permissions;
mod plan_tree;
mod providers_panel;
mod runtime;
mod storage;
mod storage_model;
mod view_model;

use leptos::ev::KeyboardEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast as _;

use std::cell::RefCell;
use std::rc::Rc;

use crate::approval::PageApprover;
use crate::demo_tools::Asker;
use crate::storage_model::ErrorText;
use crate::view_model::{ResultView, Tone};
use futures::FutureExt as _;
use futures::future::{LocalBoxFuture, Shared};
use kiln_types::RunResult;
use kiln_types::permission::{
    Answer, ApprovalRequest, Autonomy, Category, GateSettings, Mode, RETURN_RESULT, card_json,
    card_text,
};
use kiln_types::records::DEFAULT_AGENT;
use kiln_types::runtime::{Problem, RunAnswer};
use kiln_types::tool_result::ToolReply;
use serde_json::{Value, json};

use crate::runtime::{PageCall, PageSide, Runtime};

/// Where the sandbox worker's bootstrap is served, relative to the page.
const SANDBOX_WORKER_URL: &str = "./workers/sandbox.js";
/// Tool calls the result panel lays out row by row.
const MAX_CALL_ROWS: usize = 50;

/// Started sandbox workers the runtime worker keeps between runs.
const POOL_SIZE: u32 = 2;

/// This tab's runtime worker, starting or started (or why it could not).
pub(crate) type RuntimeStart = Shared<LocalBoxFuture<'static, Result<Rc<Runtime>, String>>>;

/// What a run asks of the page, answered here: the app's own tools (the
/// question tool among them) and the approval cards.
pub(crate) struct AppPage {
    pub(crate) asker: Asker,
    pub(crate) approver: PageApprover,
    /// Who answers an agent's `ask_user` (the chat's question card).
    pub(crate) person: Option<chat::Person>,
}

impl PageSide for AppPage {
    fn call(&self, call: PageCall, held: Rc<dyn Fn(bool)>) -> LocalBoxFuture<'static, ToolReply> {
        let asker = self.asker.clone();
        Box::pin(async move { demo_tools::call(&call.tool, call.args, &asker, held).await })
    }

    fn approve(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        self.approver.ask(request)
    }

    fn can_ask(&self) -> bool {
        self.person.is_some()
    }

    fn ask(&self, question: String) -> LocalBoxFuture<'static, kiln_types::runtime::Told> {
        let person = self.person.clone();
        Box::pin(async move {
            match person {
                Some(person) => person.ask(question).await,
                None => kiln_types::runtime::Told::Unavailable {
                    reason: "nobody answers questions here".into(),
                },
            }
        })
    }
}

/// The request of one run from the editor: the program and its session.
fn run_request(program: String, sources: &Sources, settings: &GateSettings) -> Value {
    let mut request = session_request(sources, settings);
    request["code"] = program.into();
    request
}

/// What every run and chat turn of this page works with: the app's own
/// tools, the person's permission settings, the MCP servers they added and
/// the network setting.
fn session_request(sources: &Sources, settings: &GateSettings) -> Value {
    let autonomy: serde_json::Map<String, Value> = settings
        .autonomy
        .iter()
        .map(|(tool, setting)| (tool.clone(), Value::from(setting.as_str())))
        .collect();
    let mcp: serde_json::Map<String, Value> = sources
        .servers
        .borrow()
        .iter()
        .map(|server| {
            (
                server.name.clone(),
                json!({"url": server.url, "category": Category::External.as_str()}),
            )
        })
        .collect();
    let mut request = json!({
        "agent": DEFAULT_AGENT,
        "tools": demo_tools::catalog(),
        "permission": {"mode": settings.mode.as_str(), "autonomy": autonomy, "brake": settings.brake},
        "mcp": mcp,
    });
    permissions::ask(&sources.network.borrow(), &mut request);
    request
}

/// The worker's answer to a run: the sandbox's report and the model's text,
/// and why the run is not (fully) in the history, if it is not.
fn ran(answer: Result<Value, Problem>) -> (RunResult, String, Option<ErrorText>) {
    let stopped = |message: String| RunResult {
        report: kiln_types::RunReport::stopped(
            kiln_types::RunError::new(kiln_types::RunErrorKind::Engine, message),
            0.0,
        ),
        warnings: Vec::new(),
        catalog_digest: String::new(),
    };
    let value = match answer {
        Ok(value) => value,
        Err(problem) => return (stopped(problem.message), String::new(), None),
    };
    let answer = match serde_json::from_value::<RunAnswer>(value) {
        Ok(answer) => answer,
        Err(error) => {
            return (
                stopped(format!(
                    "the runtime worker's answer is not readable: {error}"
                )),
                String::new(),
                None,
            );
        }
    };
    let run = RunResult {
        report: answer.report,
        warnings: answer.warnings,
        catalog_digest: answer.catalog_digest,
    };
    let notice = match answer.record_error {
        Some(problem) => Some(ErrorText::with_prefix(
            &format!(
                "The run's record `{}` was not finished: ",
                answer.job_id.unwrap_or_default()
            ),
            &problem,
        )),
        None => run
            .warnings
            .iter()
            .find(|warning| warning.code == "storage_unavailable")
            .map(|warning| ErrorText {
                message: format!(
                    "This run is not recorded in the history and has no storage tools: {}",
                    warning.message
                ),
                hint: None,
                code: "storage_unavailable".into(),
            }),
    };
    let text = answer.text;
    (run, text, notice)
}

/// The program shown on first load.
pub const SAMPLE_PROGRAM: &str = r#"// A program is the body of an async function: await, return, console.log.
// It calls the page's tools through `tools` (listed below the editor).
const squares = [1, 2, 3, 4].map((n) => n * n);
console.log("squares:", squares);
const answer = await tools.add({ a: 20, b: 22 });
await sleep(100);
return { squares, answer, at: (await tools.clock()).iso };
"#;

#[derive(Clone, Debug, PartialEq)]
enum RunState {
    Idle,
    Running,
    /// The run and its `tool-result/v1` model text, made once when it ended.
    Done(Box<RunResult>, String),
}

/// One row of the tool list.
#[derive(Clone, Debug, PartialEq)]
struct ToolRow {
    name: String,
    description: String,
    category: Category,
    module: String,
}

/// An MCP server the person added: every run mounts it by name.
#[derive(Clone, Debug, PartialEq)]
struct McpMount {
    name: String,
    url: String,
}

/// What a run is given besides the program: the MCP servers the person
/// added and the network setting (the page's own tools and the storage tools
/// are always there). Shared by the page's handlers (single-threaded), with
/// the tool list, which the runtime worker draws up from the same request.
#[derive(Clone)]
struct Sources {
    servers: Rc<RefCell<Vec<McpMount>>>,
    /// Whether programs get `http_request` (the workspace's setting, off
    /// until the person turns it on), and for which origins.
    network: Rc<RefCell<permissions::Network>>,
    runtime: RuntimeStart,
    set_tools: WriteSignal<Vec<ToolRow>>,
    /// Whether the tool list has come (`Ok(true)`), is coming (`Ok(false)`),
    /// or could not be drawn up (`Err`, why).
    catalog: RwSignal<Result<bool, String>>,
    /// The newest tool-list request: an older answer arriving late is dropped.
    asked: Rc<std::cell::Cell<u64>>,
}

impl Sources {
    /// Asks the runtime worker for the tools a run would have now, and shows them.
    fn refresh_tools(&self) {
        let request = run_request(String::new(), self, &GateSettings::default());
        let runtime = self.runtime.clone();
        let set_tools = self.set_tools;
        let catalog_state = self.catalog;
        let asked = self.asked.clone();
        let number = asked.get() + 1;
        asked.set(number);
        spawn_local(async move {
            let answer = match runtime.await {
                Ok(runtime) => runtime
                    .call(move |id| kiln_types::runtime::ToRuntime::Catalog { id, request })
                    .await
                    .unwrap_or_else(|_| {
                        Err(storage::runtime_problem("the runtime worker went away"))
                    })
                    .map_err(|problem| problem.message),
                Err(problem) => Err(problem),
            };
            if asked.get() != number {
                return;
            }
            // The page may be going away (the signals disposed).
            match answer {
                Ok(catalog) => {
                    set_tools.try_set(tool_rows(&catalog));
                    catalog_state.try_set(Ok(true));
                }
                Err(problem) => {
                    catalog_state.try_set(Err(format!(
                        "The tool list could not be drawn up: {problem}"
                    )));
                }
            }
        });
    }
}

/// The rows of the runtime worker's catalog answer.
fn tool_rows(catalog: &Value) -> Vec<ToolRow> {
    catalog["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| {
                    Some(ToolRow {
                        name: tool["name"].as_str()?.to_owned(),
                        description: tool["description"].as_str().unwrap_or_default().to_owned(),
                        category: serde_json::from_value(tool["category"].clone()).ok()?,
                        module: tool["module"].as_str().unwrap_or_default().to_owned(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The whole page.
#[component]
pub fn App() -> impl IntoView {
    let starting: LocalBoxFuture<'static, Result<Rc<Runtime>, String>> = Box::pin(async {
        let runtime = Runtime::start(storage::WORKSPACE, SANDBOX_WORKER_URL, POOL_SIZE).await?;
        Ok(Rc::new(runtime))
    });
    let runtime: RuntimeStart = starting.shared();
    let storage = storage::open(runtime.clone());
    // Started now, so the first run finds it warm.
    spawn_local({
        let runtime = runtime.clone();
        async move {
            if let Err(problem) = runtime.await {
                web_sys::console::error_1(&wasm_bindgen::JsValue::from_str(&problem));
            }
        }
    });
    // Why the last run was not recorded, or its record not finished.
    let (run_notice, set_run_notice) = signal(None::<ErrorText>);
    let (state, set_state) = signal(RunState::Idle);
    let (question, set_question) = signal(None::<String>);
    let asker = Asker::new(set_question);
    let card_asker = asker.clone();
    let (approval, set_approval) = signal(None::<ApprovalRequest>);
    let (waiting, set_waiting) = signal(0_usize);
    let approver = PageApprover::new(set_approval, set_waiting);
    // The page's permission settings, which each run carries to the runtime
    // worker's gate ("allow for this session" lasts for the worker's life,
    // which is the tab's).
    let gate = permissions::PageSettings::default();
    let (tools, set_tools) = signal(Vec::<ToolRow>::new());
    let sources = Sources {
        servers: Rc::default(),
        network: Rc::default(),
        runtime: runtime.clone(),
        set_tools,
        catalog: RwSignal::new(Ok(false)),
        asked: Rc::default(),
    };
    sources.refresh_tools();
    let card_approver = approver.clone();
    let providers = chat::ProviderStore::load(storage, runtime.clone());
    // Code node and graph runs answer page tools and approvals as the editor's runs do.
    let nodes_page: Rc<dyn PageSide> = Rc::new(AppPage {
        asker: asker.clone(),
        approver: approver.clone(),
        person: None,
    });
    let nodes_session: chat::Session = {
        let sources = sources.clone();
        let gate = gate.clone();
        Rc::new(move || session_request(&sources, &gate.settings()))
    };
    // A chat turn works with what a run from the editor has, as of when it is sent.
    let chat_session = {
        let sources = sources.clone();
        let gate = gate.clone();
        let session: chat::Session = Rc::new(move || session_request(&sources, &gate.settings()));
        StoredValue::new_local(session)
    };

    Effect::new(|| performance_mark("kiln:interactive"));

    view! {
        <main class="app" data-testid="app">
            <header class="app-header">
                <h1>"Kiln"</h1>
                <p class="tagline">
                    "Write a JavaScript program and run it in a Boa sandbox inside a Web Worker, or chat with a model below."
                </p>
            </header>
            <storage::StorageBanner storage=storage />
            <ProgramEditor sources=sources gate=gate asker=asker approver=approver state=state
                set_state=set_state set_run_notice=set_run_notice tools=tools storage=storage />
            <ApprovalCard request=approval waiting=waiting approver=card_approver />
            <QuestionCard question=question asker=card_asker />
            {move || run_notice.get().map(|error| storage::error_alert("run-storage-error", error))}
            <ResultPanel state=state />
            <Show when=move || providers.loaded.get() fallback=|| view! {
                <section class="chat" aria-busy="true"><h2>"Chat"</h2><p class="hint">"Reading the saved providers…"</p></section>
            }>
                <chat::Chat store=providers stores=storage.stores session=chat_session />
            </Show>
            <nodes_panel::NodesPanel storage=storage runtime=runtime.clone() page=nodes_page
                session=nodes_session providers=providers />
            <memory_panel::MemoryPanel storage=storage />
            <files_panel::FilesPanel storage=storage />
            <history_panel::HistoryPanel storage=storage />
        </main>
    }
}

/// The program editor with Run and Stop, and the settings a run carries:
/// permissions, the network, MCP servers.
#[allow(
    clippy::too_many_arguments,
    reason = "a Leptos component's props are its arguments: each is one setting the editor shows"
)]
#[component]
fn ProgramEditor(
    sources: Sources,
    gate: permissions::PageSettings,
    asker: Asker,
    approver: PageApprover,
    state: ReadSignal<RunState>,
    set_state: WriteSignal<RunState>,
    set_run_notice: WriteSignal<Option<ErrorText>>,
    tools: ReadSignal<Vec<ToolRow>>,
    storage: storage::StorageSignals,
) -> impl IntoView {
    let (code, set_code) = signal(SAMPLE_PROGRAM.to_owned());
    let running = move || state.with(|state| *state == RunState::Running);
    let runtime = sources.runtime.clone();
    let panel_sources = sources.clone();
    let panel_gate = gate.clone();
    // The running program's id in the runtime worker, for Stop; and whether
    // Stop was pressed before the worker had the run (it was still starting).
    let stop_switch = StoredValue::new_local(None::<(Rc<Runtime>, u64)>);
    let stop_early = StoredValue::new(false);
    let run = move || {
        if running() {
            return;
        }
        set_state.set(RunState::Running);
        stop_early.set_value(false);
        let program = code.get_untracked();
        let page: Rc<dyn PageSide> = Rc::new(AppPage {
            asker: asker.clone(),
            approver: approver.clone(),
            person: None,
        });
        let asker = asker.clone();
        let approver = approver.clone();
        let request = run_request(program, &sources, &gate.settings());
        let runtime = runtime.clone();
        set_run_notice.set(None);
        spawn_local(async move {
            let answer = match runtime.await {
                Ok(runtime) => {
                    let (id, answered) = runtime.run(request, page);
                    if stop_early.get_value() {
                        runtime.cancel(id);
                    }
                    stop_switch.set_value(Some((runtime, id)));
                    answered.await.unwrap_or_else(|_| {
                        Err(Problem::bad_request(
                            "the runtime worker went away during the run",
                        ))
                    })
                }
                Err(problem) => Err(Problem::bad_request(problem)),
            };
            stop_switch.set_value(None);
            asker.withdraw();
            approver.withdraw();
            let (run, text, notice) = ran(answer);
            if notice.is_some() {
                set_run_notice.set(notice);
            }
            set_state.set(RunState::Done(Box::new(run), text));
            performance_mark("kiln:result");
        });
    };
    let run_on_click = run.clone();
    let on_keydown = move |event: KeyboardEvent| {
        if event.key() == "Enter" && (event.ctrl_key() || event.meta_key()) {
            event.prevent_default();
            run();
        }
    };
    let stop = move |_| {
        stop_switch.with_value(|running| match running {
            Some((runtime, id)) => runtime.cancel(*id),
            None => stop_early.set_value(true),
        })
    };

    view! {
        <section class="editor">
            <label for="program">"Program"</label>
            <textarea
                id="program"
                data-testid="code-editor"
                spellcheck="false"
                autocomplete="off"
                prop:value=code
                on:input=move |event| set_code.set(event_target_value(&event))
                on:keydown=on_keydown
            ></textarea>
            <div class="actions">
                <button data-testid="run-button" on:click=move |_| run_on_click() disabled=running>
                    {move || if running() { "Running…" } else { "Run" }}
                </button>
                <Show when=running>
                    <button class="secondary" data-testid="stop-run" on:click=stop>"Stop"</button>
                </Show>
                <span class="hint">"Ctrl+Enter runs · a program gets 10 s of JavaScript CPU and 30 min in all"</span>
            </div>
            <Permissions gate=panel_gate tools=tools catalog=panel_sources.catalog
                runtime=panel_sources.runtime.clone() storage=storage />
            <NetworkSetting sources=panel_sources.clone() storage=storage />
            <McpServers sources=panel_sources />
        </section>
    }
}

/// A program's question to the person (`tools.ask`), while it waits for them;
/// `id` prefixes its element ids (the editor's and the chat's can show at once).
#[component]
pub(crate) fn QuestionCard(
    question: ReadSignal<Option<String>>,
    asker: Asker,
    #[prop(default = "question")] id: &'static str,
) -> impl IntoView {
    // The asker holds the run's answer channel, which is not `Send`.
    let asker = StoredValue::new_local(asker);
    // The question takes the keyboard focus on its heading, as an approval
    // card does: Tab reaches Yes and No.
    let heading = NodeRef::<leptos::html::H2>::new();
    Effect::new(move || {
        if let Some(heading) = heading.get() {
            let _ = heading.focus();
            heading.scroll_into_view();
        }
    });
    move || {
        question.get().map(|text| {
            let yes = move || asker.with_value(|asker| asker.answer(true));
            let no = move || asker.with_value(|asker| asker.answer(false));
            view! {
                <section class="question" data-testid="question" role="alertdialog" aria-labelledby=format!("{id}-title") aria-describedby=format!("{id}-text")>
                    <h2 id=format!("{id}-title") tabindex="-1" node_ref=heading>"The program asks you"</h2>
                    <p id=format!("{id}-text") data-testid="question-text">{text}</p>
                    <div class="actions">
                        <button data-testid="answer-yes" on:click=move |_| yes()>"Yes"</button>
                        <button class="secondary" data-testid="answer-no" on:click=move |_| no()>"No"</button>
                    </div>
                </section>
            }
        })
    }
}

/// A call waiting for the person's approval; `id` prefixes its element ids.
#[component]
pub(crate) fn ApprovalCard(
    request: ReadSignal<Option<ApprovalRequest>>,
    waiting: ReadSignal<usize>,
    approver: PageApprover,
    #[prop(default = "approval")] id: &'static str,
) -> impl IntoView {
    let approver = StoredValue::new_local(approver);
    // Each new card takes the keyboard focus on its heading (so a key meant
    // for the editor cannot answer it): Tab reaches Approve, Deny and Allow
    // for this session; Escape denies. When the last card closes, the focus
    // goes back where it was.
    let heading = NodeRef::<leptos::html::H2>::new();
    let before = StoredValue::new_local(None::<web_sys::HtmlElement>);
    Effect::new(move || {
        if let Some(heading) = heading.get() {
            if before.with_value(Option::is_none) {
                let active = web_sys::window()
                    .and_then(|window| window.document())
                    .and_then(|document| document.active_element())
                    .and_then(|element| element.dyn_into::<web_sys::HtmlElement>().ok());
                before.set_value(active);
            }
            let _ = heading.focus();
            heading.scroll_into_view();
        }
    });
    Effect::new(move || {
        if request.with(Option::is_none)
            && let Some(element) = before.try_update_value(Option::take).flatten()
        {
            let _ = element.focus();
        }
    });
    move || {
        request.get().map(|request| {
            let call_number = request.call_number;
            // An answer is for the card it was given on: a click that lands
            // after that card was replaced answers nothing.
            let answer = move |answer: Answer| {
                approver.with_value(|approver| approver.answer(call_number, answer));
            };
            // What came from the program or a server is shown with its control
            // characters and bidi overrides escaped, never acting on the page.
            let args = card_json(&request.args);
            let tool = card_text(&request.tool);
            let title = format!("Allow {tool} (call {})?", request.call_number);
            let on_keydown = move |event: KeyboardEvent| {
                if event.key() == "Escape" {
                    event.prevent_default();
                    answer(Answer::Deny);
                }
            };
            let session_label = format!("Allow {tool} for this session");
            view! {
                <section
                    class="approval"
                    data-testid="approval"
                    role="alertdialog"
                    aria-modal="false"
                    aria-labelledby=format!("{id}-title")
                    aria-describedby=format!("{id}-why")
                    on:keydown=on_keydown
                >
                    <h2 id=format!("{id}-title") data-testid="approval-title" tabindex="-1" node_ref=heading>{title}</h2>
                    <p id=format!("{id}-why")>
                        <span class=format!("category category-{}", request.category) data-testid="approval-category">{request.category.as_str()}</span>
                        " tool from "<code>{card_text(&request.module)}</code>" — "{request.reason.sentence()}"."
                    </p>
                    <p class="description">{card_text(&request.description)}</p>
                    {match serde_json::from_value::<kiln_types::plan::Plan>(request.args.clone()).ok().filter(|_| request.tool == "execute_plan") {
                        // Approving a plan approves every step of it: the card
                        // shows what will run, then the arguments as sent.
                        Some(plan) => {
                            let shown = agent_view::PlanView::of(&plan);
                            let summary = format!("{} tasks, {} steps; each step is a sub-agent", plan.tasks.len(), plan.step_count());
                            view! {
                                {plan_tree::plan_card(shown, summary)}
                                <details class="args-sent">
                                    <summary>"The arguments as sent"</summary>
                                    <pre class="args" data-testid="approval-args" aria-label="Arguments">{args}</pre>
                                </details>
                            }.into_any()
                        }
                        None => view! { <pre class="args" data-testid="approval-args" aria-label="Arguments">{args}</pre> }.into_any(),
                    }}
                    <div class="actions">
                        <button data-testid="approve" on:click=move |_| answer(Answer::Approve)>"Approve"</button>
                        <button class="secondary" data-testid="deny" on:click=move |_| answer(Answer::Deny)>"Deny"</button>
                        <button class="secondary" data-testid="allow-session" on:click=move |_| answer(Answer::AllowForSession)>{session_label}</button>
                    </div>
                    {move || (waiting.get() > 0).then(|| {
                        let count = waiting.get();
                        let text = format!(
                            "{count} more call{} waiting for an answer after this one.",
                            if count == 1 { "" } else { "s" }
                        );
                        view! { <p class="waiting" data-testid="approval-waiting">{text}</p> }
                    })}
                    <p class="hint">"Esc denies. While you decide, the program's CPU clock is stopped; the wait counts as person wait (10 min at most)."</p>
                </section>
            }
        })
    }
}

fn mode_from(value: &str) -> Mode {
    value.parse().unwrap_or(Mode::Default)
}

/// The permission mode, the auto-run brake, and the tools with their
/// category and per-tool setting.
#[component]
fn Permissions(
    gate: permissions::PageSettings,
    tools: ReadSignal<Vec<ToolRow>>,
    catalog: RwSignal<Result<bool, String>>,
    runtime: RuntimeStart,
    storage: storage::StorageSignals,
) -> impl IntoView {
    let gate = StoredValue::new_local(gate);
    let runtime = StoredValue::new_local(runtime);
    // Runs going on take the new settings at their next call.
    let publish = move || {
        let settings = gate.with_value(permissions::PageSettings::settings);
        let runtime = runtime.get_value();
        spawn_local(async move {
            if let Ok(runtime) = runtime.await {
                runtime.permission(settings);
            }
        });
    };
    let mode = RwSignal::new(gate.with_value(|gate| gate.settings().mode));
    let brake = RwSignal::new(gate.with_value(|gate| gate.settings().brake));
    // Bumped when stored settings were applied, so the rows show them.
    let applied = RwSignal::new(0_u64);
    let settings_error = RwSignal::new(None::<String>);
    // The mode, the brake and each tool's setting are the workspace's: read when
    // storage opens and again when another tab changes them.
    Effect::new(move |_| {
        storage.revisions.config.track();
        let Some(stores) = storage.stores.get() else {
            return;
        };
        spawn_local(async move {
            let Ok((stored, _)) = permissions::load(&stores).await else {
                return;
            };
            gate.with_value(|gate| gate.apply(&stored));
            publish();
            mode.set(stored.mode);
            brake.set(stored.brake);
            applied.update(|n| *n += 1);
        });
    });
    // `autonomy`: the tools' settings changed, else the mode or the brake.
    let save = move |autonomy: bool| {
        publish();
        let Some(stores) = storage.stores.get_untracked() else {
            return;
        };
        let settings = gate.with_value(|gate| gate.settings());
        spawn_local(async move {
            let saved = if autonomy {
                permissions::save_autonomy(&stores, &settings).await
            } else {
                permissions::save_settings(&stores, &settings).await
            };
            settings_error.set(saved.err());
        });
    };
    let on_mode = move |event: leptos::ev::Event| {
        let chosen = mode_from(&event_target_value(&event));
        gate.with_value(|gate| gate.set_mode(chosen));
        mode.set(chosen);
        save(false);
    };
    let on_brake = move |event: leptos::ev::Event| {
        let engaged = event_target_checked(&event);
        gate.with_value(|gate| gate.set_brake(engaged));
        brake.set(engaged);
        save(false);
    };
    let rows = move || {
        applied.track();
        tools
            .get()
            .into_iter()
            .map(|row| {
                let name = row.name.clone();
                let on_setting = move |event: leptos::ev::Event| {
                    let value = event_target_value(&event);
                    let setting = value.parse::<Autonomy>().ok();
                    gate.with_value(|gate| {
                        gate.set_autonomy(&name, setting);
                    });
                    save(true);
                };
                let current = gate.with_value(|gate| gate.settings().autonomy.get(&row.name).copied());
                let selected = |value: Option<Autonomy>| current == value;
                let blockable = row.name != RETURN_RESULT;
                view! {
                    <tr data-testid=format!("tool-{}", row.name)>
                        <td><code>{format!("tools.{}", row.name)}</code><div class="description">{row.description.clone()}</div></td>
                        <td><span class=format!("category category-{}", row.category)>{row.category.as_str()}</span></td>
                        <td class="module">{row.module.clone()}</td>
                        <td>
                            <select aria-label=format!("Setting for {}", row.name) data-testid=format!("setting-{}", row.name) on:change=on_setting>
                                <option value="" selected=selected(None)>"Follow the mode"</option>
                                <option value="auto" selected=selected(Some(Autonomy::Auto))>"Run without asking"</option>
                                <option value="ask" selected=selected(Some(Autonomy::Ask))>"Ask"</option>
                                {blockable.then(|| view! { <option value="block" selected=selected(Some(Autonomy::Block))>"Block"</option> })}
                            </select>
                        </td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <details class="tools" data-testid="tool-list">
            <summary>{move || match catalog.get() {
                Ok(true) => format!("Tools and permissions ({} tools)", tools.with(Vec::len)),
                Ok(false) => "Tools and permissions (loading…)".to_owned(),
                Err(_) => "Tools and permissions (unavailable)".to_owned(),
            }}</summary>
            {move || catalog.get().err().map(|text| view! { <p class="failure" role="alert" data-testid="tools-error">{text}</p> })}
            <div class="permission-settings">
                <label>
                    "Mode "
                    <select data-testid="permission-mode" on:change=on_mode>
                        <option value="plan" prop:selected=move || mode.get() == Mode::Plan>"Plan — only read calls run"</option>
                        <option value="default" prop:selected=move || mode.get() == Mode::Default>"Default — ask before anything else"</option>
                        <option value="auto" prop:selected=move || mode.get() == Mode::Auto>"Auto — run without asking"</option>
                    </select>
                </label>
                <label class="brake">
                    <input type="checkbox" data-testid="brake" on:change=on_brake prop:checked=move || brake.get() />
                    " Auto-run brake (code-execution tools always ask)"
                </label>
            </div>
            {move || settings_error.get().map(|text| view! { <p class="failure" role="alert" data-testid="settings-error">{text}</p> })}
            <table class="tool-table">
                <thead><tr><th>"Tool"</th><th>"Category"</th><th>"From"</th><th>"Setting"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </details>
    }
}

/// MCP servers the person added by URL; their tools join the list.
#[component]
fn McpServers(sources: Sources) -> impl IntoView {
    let (name, set_name) = signal(String::from("everything"));
    let (url, set_url) = signal(String::new());
    let (status, set_status) = signal(None::<(bool, String)>);
    let (listed, set_listed) = signal(Vec::<(String, String, usize)>::new());
    // One server at a time: a second submit while connecting would add it twice.
    let (connecting, set_connecting) = signal(false);
    let sources = StoredValue::new_local(sources);
    let add = move || {
        let name = name.get_untracked().trim().to_owned();
        let url = url.get_untracked().trim().to_owned();
        if !kiln_types::words::is_identifier(&name) {
            set_status.set(Some((false, format!("The server name `{name}` must be a JavaScript identifier (letters, digits, _), since it prefixes its tools' names."))));
            return;
        }
        if sources.with_value(|s| s.servers.borrow().iter().any(|server| server.name == name)) {
            set_status.set(Some((
                false,
                format!("A server named `{name}` is already added."),
            )));
            return;
        }
        if connecting.get_untracked() {
            return;
        }
        set_connecting.set(true);
        set_status.set(Some((true, format!("Connecting to {url}…"))));
        let sources = sources.get_value();
        spawn_local(async move {
            // The runtime worker connects, lists the tools and closes: each
            // run then opens its own session.
            let connected = match sources.runtime.clone().await {
                Ok(runtime) => {
                    let (server, address) = (name.clone(), url.clone());
                    runtime
                        .call(move |id| kiln_types::runtime::ToRuntime::McpConnect {
                            id,
                            name: server,
                            url: address,
                        })
                        .await
                        .unwrap_or_else(|_| {
                            Err(Problem::bad_request("the runtime worker went away"))
                        })
                }
                Err(problem) => Err(Problem::bad_request(problem)),
            };
            match connected.map_err(|problem| problem.message) {
                Ok(answer) => {
                    let count = answer["tools"].as_array().map_or(0, Vec::len);
                    set_status.set(Some((
                        true,
                        format!(
                            "{name}: {} {} — {count} tools",
                            answer["server"]["name"].as_str().unwrap_or_default(),
                            answer["server"]["version"].as_str().unwrap_or_default()
                        ),
                    )));
                    sources.servers.borrow_mut().push(McpMount {
                        name: name.clone(),
                        url: url.clone(),
                    });
                    set_listed.update(|listed| listed.push((name, url, count)));
                    sources.refresh_tools();
                }
                Err(error) => set_status.set(Some((
                    false,
                    format!(
                        "Could not add `{name}`: {error}. Check the URL, that the server is \
                         running, and that it allows this page's origin (CORS)."
                    ),
                ))),
            }
            set_connecting.set(false);
        });
    };
    let remove = move |name: String| {
        let sources = sources.get_value();
        sources
            .servers
            .borrow_mut()
            .retain(|server| server.name != name);
        set_listed.update(|listed| listed.retain(|(n, _, _)| *n != name));
        sources.refresh_tools();
    };
    view! {
        <details class="mcp" data-testid="mcp-servers">
            <summary>"MCP servers"</summary>
            <form class="mcp-form" on:submit=move |event| { event.prevent_default(); add(); }>
                <label>"Name "<input data-testid="mcp-name" prop:value=name on:input=move |e| set_name.set(event_target_value(&e)) /></label>
                <label>"URL "<input data-testid="mcp-url" type="url" placeholder="http://127.0.0.1:3001/mcp" prop:value=url on:input=move |e| set_url.set(event_target_value(&e)) /></label>
                <button type="submit" data-testid="mcp-add" disabled=connecting>"Add server"</button>
            </form>
            <p class="mcp-status" data-testid="mcp-status" role="status">
                {move || status.get().map(|(ok, text)| view! { <span class=if ok { "ok" } else { "failure" }>{text}</span> })}
            </p>
            <ul>
                {move || listed.get().into_iter().map(|(name, url, count)| {
                    let label = format!("Remove {name}");
                    let target = name.clone();
                    view! {
                        <li data-testid=format!("mcp-server-{name}")>
                            <code>{name.clone()}</code>" at "{url}" — "{count}" tools "
                            <button class="secondary small" aria-label=label on:click=move |_| remove(target.clone())>"Remove"</button>
                        </li>
                    }
                }).collect_view()}
            </ul>
        </details>
    }
}

/// What programs may reach with `http_request`: off (a new workspace's
/// setting), any public address, or exactly the named origins. Kept in the
/// workspace's settings and followed from other tabs.
#[component]
fn NetworkSetting(sources: Sources, storage: storage::StorageSignals) -> impl IntoView {
    let sources = StoredValue::new_local(sources);
    let reach = RwSignal::new("off".to_owned());
    let origins = RwSignal::new(String::new());
    let problem = RwSignal::new(None::<String>);
    let show = move |network: &permissions::Network| {
        let (kind, list) = match network {
            permissions::Network::Off => ("off", String::new()),
            permissions::Network::Public => ("public", String::new()),
            permissions::Network::Only(list) => ("only", list.join(", ")),
        };
        reach.set(kind.to_owned());
        if kind == "only" {
            origins.set(list);
        }
    };
    let adopt = move |network: permissions::Network| {
        sources.with_value(|sources| {
            *sources.network.borrow_mut() = network;
            sources.refresh_tools();
        });
    };
    Effect::new(move |_| {
        storage.revisions.config.track();
        let Some(stores) = storage.stores.get() else {
            return;
        };
        spawn_local(async move {
            if let Ok((_, config)) = permissions::load(&stores).await {
                show(&config.settings.network);
                adopt(config.settings.network);
            }
        });
    });
    let apply = move || {
        let network = match reach.get_untracked().as_str() {
            "public" => permissions::Network::Public,
            "only" => match permissions::parse_origins(&origins.get_untracked()) {
                Ok(list) => permissions::Network::Only(list),
                Err(why) => {
                    problem.set(Some(why));
                    return;
                }
            },
            _ => permissions::Network::Off,
        };
        problem.set(None);
        // Adopted once it is kept (the worker checks the origins first); with
        // no storage, for this page only.
        match storage.stores.get_untracked() {
            Some(stores) => spawn_local(async move {
                match permissions::save_network(&stores, &network).await {
                    Ok(()) => adopt(network),
                    Err(why) => problem.set(Some(why)),
                }
            }),
            None => adopt(network),
        }
    };
    view! {
        <div class="network" data-testid="network">
            <div class="mcp-form">
                <label for="network-reach">"Network for programs"</label>
                <select
                    id="network-reach"
                    data-testid="network-reach"
                    prop:value=move || reach.get()
                    on:change=move |event| {
                        reach.set(event_target_value(&event));
                        if reach.get_untracked() != "only" {
                            apply();
                        }
                    }
                >
                    <option value="off">"Off: programs have no http_request"</option>
                    <option value="public">"Public addresses (never this machine or the local network)"</option>
                    <option value="only">"Only these origins…"</option>
                </select>
                <Show when=move || reach.get() == "only">
                    <input
                        type="text"
                        aria-label="Origins http_request may reach"
                        data-testid="network-origins"
                        placeholder="https://api.example.com, http://127.0.0.1:8080"
                        prop:value=move || origins.get()
                        on:input=move |event| origins.set(event_target_value(&event))
                    />
                    <button class="secondary small" data-testid="network-save" on:click=move |_| apply()>"Allow these"</button>
                </Show>
            </div>
            {move || problem.get().map(|why| view! {
                <p class="mcp-status" role="alert"><span class="failure" data-testid="network-error">{why}</span></p>
            })}
        </div>
    }
}

pub(crate) use kiln_runtime_client::{error_text, sleep_ms};

/// Marks a moment on the page's performance timeline, for `cargo xtask bench`.
fn performance_mark(name: &str) {
    if let Some(performance) = web_sys::window().and_then(|window| window.performance()) {
        let _ = performance.mark(name);
    }
}

#[component]
fn ResultPanel(state: ReadSignal<RunState>) -> impl IntoView {
    view! {
        <section class="result" data-testid="result-panel" aria-live="polite">
            <h2>"Result"</h2>
            {move || match state.get() {
                RunState::Idle => view! {
                    <p class="status idle" data-testid="run-status">"Press Run to start."</p>
                }.into_any(),
                RunState::Running => view! {
                    <p class="status running" data-testid="run-status">"Running…"</p>
                }.into_any(),
                RunState::Done(result, text) => {
                    report_view(&ResultView::from_report(&result.report), text).into_any()
                }
            }}
        </section>
    }
}

fn report_view(result: &ResultView, model_text: String) -> impl IntoView + use<> {
    let tone = match result.tone {
        Tone::Success => "status success",
        Tone::Failure => "status failure",
    };
    let value = result.value.clone().map(|value| {
        view! {
            <h3>"Return value"</h3>
            <pre class="value" data-testid="result-value">{value}</pre>
        }
    });
    let detail = result.detail.clone().map(|detail| {
        view! { <pre class="error" data-testid="run-error">{detail}</pre> }
    });
    let calls = (!result.calls.is_empty()).then(|| {
        // A program of hundreds of calls would take the main thread for a
        // long task to lay them all out; the model text below has them all.
        let more = result.calls.len().saturating_sub(MAX_CALL_ROWS);
        let rows = result
            .calls
            .iter()
            .take(MAX_CALL_ROWS)
            .enumerate()
            .map(|(index, (tool, outcome, waited, duration))| {
                view! {
                    <tr class=format!("outcome-{outcome}")>
                        <td>{index + 1}</td>
                        <td><code>{tool.clone()}</code></td>
                        <td>{*outcome}</td>
                        <td>{if *waited { "yes" } else { "no" }}</td>
                        <td>{duration.clone()}</td>
                    </tr>
                }
            })
            .collect_view();
        let more = (more > 0).then(|| {
            let text = format!(
                "{more} more call{} — every call is in the model text below.",
                if more == 1 { "" } else { "s" }
            );
            view! { <p class="hint" data-testid="more-calls">{text}</p> }
        });
        view! {
            <h3>{format!("Tool calls ({})", result.calls.len())}</h3>
            <table class="calls" data-testid="tool-calls">
                <thead><tr><th>"#"</th><th>"Tool"</th><th>"Outcome"</th><th>"Waited on a person"</th><th>"Duration"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            {more}
        }
    });
    let console = (!result.console.is_empty()).then(|| {
        let lines = result
            .console
            .iter()
            .map(|(level, text)| view! { <li class=format!("console-{level}")>{text.clone()}</li> })
            .collect_view();
        view! {
            <h3>"Console"</h3>
            <ol class="console" data-testid="console-output">{lines}</ol>
        }
    });
    view! {
        <p class=tone data-testid="run-status">{result.status.clone()}</p>
        {detail}
        {value}
        {console}
        {calls}
        <details class="model-text">
            <summary>"What the model reads (tool-result/v1 text)"</summary>
            <pre data-testid="model-text">{model_text}</pre>
        </details>
    }
}
