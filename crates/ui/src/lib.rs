//! Kiln's app, chat-first: the conversations on the left, the conversation in the
//! middle, and the other views (agents, skills, the program editor, code nodes,
//! memory, files, history, settings) each at its own URL, all over this tab's
//! runtime worker and the workspace it keeps (`kiln-store`, opened once at start).
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
//! - `editor`: the program editor with Run and Stop, and the result panel.
//! - `settings_panel`: the settings every run carries: permissions, MCP servers (kept as
//!   the default agent's), the network; whether agents may change their team.
//! - `secrets_panel`: Settings' secrets vault (never a value shown or sent back) and the
//!   web search agents' `web_search` asks.
//! - `cards`: the approval and question cards a run or a turn puts to the person.
//! - `approval`: the page's approver: one approval card at a time, with Approve, Deny and
//!   Allow for this session.
//! - `permissions`: the permission settings kept in the workspace's configuration.
//! - `view_model`: what the result panel says about a run report, as plain strings.
//! - `chat`: the providers the chat can use and the streaming Chat box, one agent turn a
//!   message; `chat_model`: what they keep and say, as plain data and strings.
//! - `provider_store`: the providers the chat can use, kept in the workspace's
//!   configuration, with the local and in-browser models listed beside them.
//! - `providers_panel`: the Providers panel: the providers the chat can use and the form
//!   that adds or edits one.
//! - `agent_view`: an agent turn as the chat shows it, folded from its events.
//! - `activity`: the chat's side panel: a reply's execution tree, live, and the details of
//!   the action or call picked there, with what the model reads of it.
//! - `said`: Kiln's own sentences (statuses, errors, hints) with the names they quote in
//!   backticks shown as code.
//! - `agents_panel`: the Agents view, the workspace's agent profiles and the form that
//!   writes one (its skills, secrets and MCP servers with their Authorization secret), and
//!   under it the agent's schedules (`agents_panel::schedules`); the list the chat's agent
//!   picker reads too.
//! - `skills_panel`: the Skills view, the shipped skills and the workspace's own, read as
//!   Markdown, and the form that writes one.
//! - `panel`: what the Agents and Skills views, an agent's schedules and Settings' secrets
//!   share: the status line (with Undo after a delete), the alerts, the form's open and
//!   saving state, and the storage check before a write.
//! - `plan_tree`: how a turn's plans and sub-agents show in the chat.
//! - `nodes_panel`: the Code nodes view, a graph of code nodes with typed handles;
//!   `nodes_model`: that graph as data, its checked changes and undo history.
//! - `author_dialog`: the Code nodes view's authoring dialog ("Write code with AI").
//! - `storage`: the workspace's storage as the page holds it, through the runtime worker,
//!   and the change feed as one revision signal per panel.
//! - `memory_panel`, `files_panel`, `history_panel`: the Memory, Files and History panels;
//!   `storage_model`: what they say, as plain data and strings.
//! - `route`: where the page is (the URL fragment) and the `Router` that follows it.
//! - `threads_panel`: the conversations list: new, search, rename, pin, delete with Undo.
//! - `markdown`: a reply's text as sanitized Markdown (pulldown-cmark's events to DOM).
//! - `highlight`: a program shown as code (the approval card, action blocks).
//! - `data_panel`: Settings' data: storage used, keep my data, export, import, delete.
//! - `widget`: the embedded widget's page (`widget.html` in a host page's iframe): the
//!   chat, compact, and the widget protocol with its host page.
//! - `browser_tests`: the app's components in headless Chromium (`wasm-bindgen-test`).

mod activity;
mod agent_view;
mod agents_panel;
mod approval;
mod author_dialog;
#[cfg(all(test, target_arch = "wasm32"))]
mod browser_tests;
mod cards;
mod chat;
mod chat_model;
mod data_panel;
pub mod demo_tools;
mod editor;
mod files_panel;
mod highlight;
mod history_panel;
mod markdown;
mod memory_panel;
mod nodes_model;
mod nodes_panel;
mod panel;
mod permissions;
mod plan_tree;
mod provider_store;
mod providers_panel;
mod route;
mod runtime;
mod said;
mod secrets_panel;
mod settings_panel;
mod skills_panel;
mod storage;
mod storage_model;
mod threads_panel;
mod view_model;
mod widget;

use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast as _;

use std::cell::RefCell;
use std::rc::Rc;

use crate::approval::PageApprover;
use crate::demo_tools::Asker;
use crate::storage_model::ErrorText;
use futures::FutureExt as _;
use futures::future::{LocalBoxFuture, Shared};
use kiln_types::permission::{Answer, ApprovalRequest, Category, GateSettings};
use kiln_types::records::DEFAULT_AGENT;
use kiln_types::tool_result::ToolReply;
use serde_json::{Value, json};

use crate::runtime::{PageCall, PageSide, Runtime};

pub(crate) use cards::{ApprovalCard, QuestionCard};
pub use editor::SAMPLE_PROGRAM;
use editor::{ProgramEditor, ResultPanel, RunState, performance_mark};
pub use widget::{Widget, is_widget_page};

/// Where the sandbox worker's bootstrap is served, relative to the page.
pub(crate) const SANDBOX_WORKER_URL: &str = "./workers/sandbox.js";

/// Started sandbox workers the runtime worker keeps between runs.
pub(crate) const POOL_SIZE: u32 = 2;

/// This tab's runtime worker, starting or started (or why it could not).
pub(crate) type RuntimeStart = Shared<LocalBoxFuture<'static, Result<Rc<Runtime>, String>>>;

/// Who answers a run's calls of the page's tools: the app's own ([`demo_tools`]) or,
/// in the widget, the host page's.
pub(crate) type PageTools =
    Rc<dyn Fn(PageCall, Rc<dyn Fn(bool)>) -> LocalBoxFuture<'static, ToolReply>>;

/// What a run asks of the page, answered here: the page's tools (the app's own,
/// the question tool among them, unless `tools` says otherwise) and the approval cards.
pub(crate) struct AppPage {
    /// The page's tools when they are not the app's own.
    pub(crate) tools: Option<PageTools>,
    pub(crate) asker: Asker,
    pub(crate) approver: PageApprover,
    /// Who answers an agent's `ask_user` (the chat's question card).
    pub(crate) person: Option<chat::Person>,
}

impl PageSide for AppPage {
    fn call(&self, call: PageCall, held: Rc<dyn Fn(bool)>) -> LocalBoxFuture<'static, ToolReply> {
        if let Some(tools) = &self.tools {
            return tools(call, held);
        }
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
            let mut mount = json!({"url": server.url, "category": Category::External.as_str()});
            // The token goes by reference: the job's secrets fill it in.
            if let Some(secret) = &server.auth_secret {
                mount["headers"] = json!({"Authorization": format!("Bearer ${{{secret}}}")});
            }
            (server.name.clone(), mount)
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

/// One row of the tool list.
#[derive(Clone, Debug, PartialEq)]
struct ToolRow {
    name: String,
    description: String,
    category: Category,
    module: String,
}

/// An MCP server of the default agent's: every run mounts it by name.
#[derive(Clone, Debug, PartialEq)]
struct McpMount {
    name: String,
    url: String,
    /// A vault secret sent as its `Authorization: Bearer` token.
    auth_secret: Option<String>,
}

/// What a run is given besides the program: the MCP servers the person
/// added (the default agent's, read from the workspace) and the network
/// setting (the page's own tools and the storage tools are always there).
/// Shared by the page's handlers (single-threaded), with the tool list, which
/// the runtime worker draws up from the same request.
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

/// Moves the focus to the element with id `id`; `false` when there is none.
pub(crate) fn focus_element(id: &str) -> bool {
    web_sys::window()
        .and_then(|window| window.document())
        .and_then(|document| document.get_element_by_id(id))
        .and_then(|element| element.dyn_into::<web_sys::HtmlElement>().ok())
        .is_some_and(|element| element.focus().is_ok())
}

/// Whether the person is typing (a text field or an editable element has the
/// focus), when a key is theirs and not a shortcut.
fn typing() -> bool {
    let Some(element) = web_sys::window()
        .and_then(|window| window.document())
        .and_then(|document| document.active_element())
    else {
        return false;
    };
    matches!(element.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT")
        || element
            .dyn_ref::<web_sys::HtmlElement>()
            .is_some_and(web_sys::HtmlElement::is_content_editable)
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
    let providers = provider_store::ProviderStore::load(storage, runtime.clone(), None);
    let agents = agents_panel::WorkspaceAgents::follow(storage);
    // Code node and graph runs answer page tools and approvals as the editor's runs do.
    let nodes_page: Rc<dyn PageSide> = Rc::new(AppPage {
        tools: None,
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
    let router = route::Router::start();
    // A bare visit reopens the conversation this browser had open last.
    if router.route.get_untracked() == route::Route::Chat(None)
        && web_sys::window()
            .and_then(|window| window.location().hash().ok())
            .unwrap_or_default()
            .is_empty()
        && let Some(last) = chat::last_thread()
    {
        router.go(route::Route::Chat(Some(last)), true);
    }
    let showing = move |view: &'static str| move || router.route.with(|route| route.view() != view);
    // Below 700 px the conversations are a drawer; going anywhere closes it (and
    // the Activity panel's drawer, below 1,100 px).
    let drawer = RwSignal::new(false);
    let activity = activity::Activity::new();
    provide_context(activity);
    // A reply's limits, as Settings keeps them: the chat sends them with each message.
    provide_context(settings_panel::follow_limits(storage));
    Effect::new(move || {
        router.route.track();
        drawer.set(false);
        activity.open.set(false);
    });
    // The drawer takes the focus on its first control when it opens, and gives it
    // back to its toggle when it closes.
    let toggle = NodeRef::<leptos::html::Button>::new();
    Effect::new(move |was_open: Option<bool>| {
        let open = drawer.get();
        let document = web_sys::window().and_then(|window| window.document());
        if open {
            if let Some(first) = document
                .and_then(|document| {
                    document
                        .query_selector("#conversations a, #conversations button")
                        .ok()
                        .flatten()
                })
                .and_then(|element| element.dyn_into::<web_sys::HtmlElement>().ok())
            {
                let _ = first.focus();
            }
        } else if was_open == Some(true)
            && let Some(toggle) = toggle.get_untracked()
        {
            let _ = toggle.focus();
        }
        open
    });
    // `?` lists the shortcuts; `/` goes to the message box. Neither while typing.
    let shortcuts = NodeRef::<leptos::html::Dialog>::new();
    let _keys = window_event_listener(leptos::ev::keydown, move |event| {
        if event.ctrl_key() || event.meta_key() || event.alt_key() || typing() {
            return;
        }
        match event.key().as_str() {
            "?" => {
                event.prevent_default();
                if let Some(dialog) = shortcuts.get_untracked() {
                    let _ = dialog.show_modal();
                }
            }
            "/" if router.route.with_untracked(|route| route.view() == "chat") => {
                event.prevent_default();
                focus_element("chat-input");
            }
            _ => {}
        }
    });
    let on_escape = move |event: leptos::ev::KeyboardEvent| {
        if event.key() == "Escape" && drawer.get_untracked() {
            drawer.set(false);
        }
        if event.key() == "Escape" && activity.open.get_untracked() {
            activity.open.set(false);
        }
    };
    let editor_sources = sources.clone();

    view! {
        <div class="app" data-testid="app" class:chat-view=move || router.route.with(|route| route.view() == "chat")
            class:drawer-open=drawer class:activity-open=move || activity.open.get() on:keydown=on_escape>
            // The fragment is the route: the link moves the focus itself, leaving it be.
            <a class="skip-link" href="#main" on:click=move |event| {
                event.prevent_default();
                focus_element("main");
            }>"Skip to content"</a>
            <header class="app-header">
                <button type="button" class="icon drawer-toggle" data-testid="drawer-toggle" aria-controls="conversations" node_ref=toggle
                    aria-expanded=move || drawer.get().to_string() aria-label="Conversations"
                    hidden=showing("chat") on:click=move |_| drawer.update(|open| *open = !*open)>"\u{2630}"</button>
                <h1><a href="#/chat" class="brand">"Kiln"</a></h1>
                <nav class="views" aria-label="Views" data-testid="views">
                    {route::VIEWS.iter().map(|(view, label)| {
                        let current = move || router.route.with(|route| route.view() == *view);
                        // Chat goes back to the conversation it showed last.
                        let href = move || if *view == "chat" { router.chat.with(route::Route::hash) } else { format!("#/{view}") };
                        view! {
                            <a href=href data-testid=format!("nav-{view}")
                                aria-current=move || current().then_some("page")>{*label}</a>
                        }
                    }).collect_view()}
                </nav>
                <button type="button" class="icon shortcuts-button" data-testid="shortcuts-button" aria-label="Keyboard shortcuts" title="Keyboard shortcuts (?)"
                    on:click=move |_| if let Some(dialog) = shortcuts.get_untracked() { let _ = dialog.show_modal(); }>"?"</button>
            </header>
            <dialog class="shortcuts" data-testid="shortcuts" aria-labelledby="shortcuts-title" node_ref=shortcuts>
                <h2 id="shortcuts-title">"Keyboard shortcuts"</h2>
                <dl>
                    <dt><kbd>"?"</kbd></dt><dd>"This list"</dd>
                    <dt><kbd>"/"</kbd></dt><dd>"Go to the message box"</dd>
                    <dt><kbd>"Enter"</kbd></dt><dd>"Send the message (Shift+Enter starts a new line)"</dd>
                    <dt><kbd>"Ctrl+Enter"</kbd></dt><dd>"Run the program (Program view)"</dd>
                    <dt><kbd>"Enter"</kbd>" / "<kbd>"Esc"</kbd></dt><dd>"Approve / deny the call an approval card asks about"</dd>
                    <dt><kbd>"Esc"</kbd></dt><dd>"Close this list, the conversations or Activity drawer, or an edit"</dd>
                    <dt><kbd>"Tab"</kbd></dt><dd>"Move between controls; the first Tab reaches Skip to content"</dd>
                </dl>
                <form method="dialog"><button type="submit" data-testid="shortcuts-close">"Close"</button></form>
            </dialog>
            <storage::StorageBanner storage=storage />
            <div class="layout">
                <aside class="sidebar" id="conversations" hidden=showing("chat") aria-label="Conversations">
                    <threads_panel::ThreadList storage=storage router=router />
                </aside>
                <main id="main" class="view" tabindex="-1">
                    // What a run from any view asks the person: shown wherever they are.
                    <div class="page-cards">
                        <ApprovalCard request=approval waiting=waiting approver=card_approver />
                        <QuestionCard question=question asker=card_asker />
                    </div>
                    <div class="view-chat" hidden=showing("chat")>
                        <Show when=move || providers.loaded.get() fallback=|| view! {
                            <section class="chat" aria-busy="true"><h2>"Chat"</h2><p class="hint">"Reading the saved providers…"</p></section>
                        }>
                            <chat::Chat store=providers stores=storage.stores session=chat_session router=router agents=agents />
                        </Show>
                    </div>
                    <div class="view-agents" hidden=showing("agents")>
                        <agents_panel::AgentsPanel storage=storage agents=agents providers=providers tools=tools />
                    </div>
                    <div class="view-skills" hidden=showing("skills")>
                        <skills_panel::SkillsPanel storage=storage agents=agents />
                    </div>
                    <div class="view-editor" hidden=showing("editor")>
                        <ProgramEditor sources=editor_sources.clone() gate=gate.clone() asker=asker approver=approver state=state
                            set_state=set_state set_run_notice=set_run_notice />
                        {move || run_notice.get().map(|error| storage::error_alert("run-storage-error", error))}
                        <ResultPanel state=state />
                    </div>
                    <div class="view-nodes" hidden=showing("nodes")>
                        <nodes_panel::NodesPanel storage=storage runtime=runtime.clone() page=nodes_page
                            session=nodes_session providers=providers />
                    </div>
                    <div class="view-memory" hidden=showing("memory")><memory_panel::MemoryPanel storage=storage /></div>
                    <div class="view-files" hidden=showing("files")><files_panel::FilesPanel storage=storage /></div>
                    <div class="view-history" hidden=showing("history")><history_panel::HistoryPanel storage=storage /></div>
                    <div class="view-settings" hidden=showing("settings")>
                        <settings_panel::Settings sources=sources gate=gate tools=tools storage=storage providers=providers agents=agents />
                    </div>
                </main>
                <activity::ActivityPanel activity=activity hidden=Signal::derive(showing("chat")) />
            </div>
        </div>
    }
}

pub(crate) use kiln_runtime_client::{error_text, sleep_ms};
