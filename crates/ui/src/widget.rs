//! The embedded widget's page (`widget.html`, in the iframe `widget.js` makes on a
//! host page): the app's chat, compact, over a runtime worker, store and model of its
//! own on Kiln's origin, which the host page cannot reach. It talks to the host page
//! only through the widget protocol (`kiln_types::widget`).
//!
//! Before anything else it reads the deployment's `widget.json` beside it, then takes
//! over the messages `widget-boot.js` kept while the wasm loaded. The first message
//! must be the parent window's `hello`, from an origin the deployment admits: that
//! origin is pinned, the host's options are settled within the deployment's
//! ([`Deployment::settle`]) and the chat starts. Every later message must come from
//! the same window and origin; any other, and any message that does not read, is
//! answered `rejected` (naming why) and changes nothing. A host the deployment does
//! not admit gets `refused` and a panel that says so; nothing starts.
//!
//! The host's tools reach the agent as page tools named `host_<name>` ([`host_call`]):
//! each call walks the ladder here (an approval card in the widget unless the tool is
//! read-only and the deployment lets such tools run without asking), crosses to the
//! host with a call id, and waits at most the deployment's tool timeout; an answer
//! naming a call id the widget is not waiting for is ignored (and said so).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use crate::said::said;
use futures::FutureExt as _;
use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Value, json};
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::Closure;

use kiln_types::records::DEFAULT_AGENT;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use kiln_types::widget::{
    Deployment, FromHost, HOST_TOOL_PREFIX, HostTool, MAX_HOST_TOOLS, MAX_TEXT, ProviderMode,
    Scheme, Settled, ToHost, decode, encode,
};

use crate::chat::{Chat, Embed, Session};
use crate::chat_model::{Origin, SavedProvider, sibling_url};
use crate::provider_store::{ProviderStore, Reach};
use crate::route::{Route, Router};
use crate::runtime::{PageCall, Runtime};
use crate::{POOL_SIZE, RuntimeStart, SANDBOX_WORKER_URL, storage};
use kiln_types::chat::ProviderKind;

/// The deployment's settings, beside `widget.html`.
const DEPLOYMENT_FILE: &str = "widget.json";

/// Whether this page is the widget's (`<body data-kiln="widget">`).
#[must_use]
pub fn is_widget_page() -> bool {
    web_sys::window()
        .and_then(|window| window.document())
        .and_then(|document| document.body())
        .and_then(|body| body.get_attribute("data-kiln"))
        .is_some_and(|kind| kind == "widget")
}

/// Where the widget is.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    /// Reading `widget.json`, or waiting for the host's `hello`.
    Waiting,
    /// This page is not in an iframe: there is no host to serve.
    Alone,
    /// The widget does not serve this host page, and says why.
    Refused(String),
    Ready(Box<Settled>),
}

/// The host page, once greeted: its window and pinned origin.
struct Host {
    window: web_sys::Window,
    origin: String,
}

/// What the message handler and the chat share.
struct Bridge {
    /// `widget.json` once read (`Err`: why it cannot be used).
    deployment: RefCell<Option<Result<Deployment, String>>>,
    host: RefCell<Option<Host>>,
    phase: RwSignal<Phase>,
    tools: RwSignal<Vec<HostTool>>,
    calls: RefCell<HashMap<u64, oneshot::Sender<ToolReply>>>,
    tokens: RefCell<HashMap<u64, oneshot::Sender<Result<String, String>>>>,
    next: Cell<u64>,
    inbox: RwSignal<std::collections::VecDeque<String>>,
    router: Router,
    /// Messages that came before `widget.json` was read.
    early: RefCell<Vec<web_sys::MessageEvent>>,
}

impl Bridge {
    fn post(&self, message: &ToHost) {
        if let Some(host) = &*self.host.borrow() {
            let _ = host
                .window
                .post_message(&encode(message).into(), &host.origin);
        }
    }

    fn reject(&self, reason: String) {
        web_sys::console::warn_1(&format!("Kiln widget: {reason}").into());
        self.post(&ToHost::Rejected { reason });
    }

    fn number(&self) -> u64 {
        let number = self.next.get() + 1;
        self.next.set(number);
        number
    }

    /// One message from any window.
    fn receive(self: &Rc<Self>, event: web_sys::MessageEvent) {
        if self.deployment.borrow().is_none() {
            self.early.borrow_mut().push(event);
            return;
        }
        let Some(parent) = parent() else {
            return;
        };
        let from_parent = event
            .source()
            .is_some_and(|source| js_sys::Object::is(&source, &parent));
        let origin = event.origin();
        let pinned = self.host.borrow().as_ref().map(|host| host.origin.clone());
        if let Some(pinned) = pinned {
            if !from_parent || origin != pinned {
                let who = if from_parent {
                    format!("the parent window at `{origin}`")
                } else {
                    format!("another window (origin `{origin}`)")
                };
                self.reject(format!(
                    "a message from {who} was refused: only the host page that opened this \
                     widget ({pinned}) may talk to it"
                ));
                return;
            }
            let Some(text) = event.data().as_string() else {
                self.reject(
                    "a message that is not JSON text was refused (widget messages are \
                     `JSON.stringify({v, msg})`)"
                        .to_owned(),
                );
                return;
            };
            match decode::<FromHost>(&text) {
                Ok(message) => self.handle(message),
                Err(error) => self.reject(format!("a message was refused: {error}")),
            }
            return;
        }
        if !matches!(self.phase.get_untracked(), Phase::Waiting) || !from_parent {
            return;
        }
        let answer = |message: &ToHost| {
            let _ = parent.post_message(&encode(message).into(), &origin);
        };
        let hello = event
            .data()
            .as_string()
            .ok_or_else(|| "the first message is not JSON text".to_owned())
            .and_then(|text| decode::<FromHost>(&text).map_err(|error| error.to_string()));
        let options = match hello {
            Ok(FromHost::Hello { options }) => options,
            Ok(_) => {
                answer(&ToHost::Rejected {
                    reason: "the first message must be `hello`".into(),
                });
                return;
            }
            Err(error) => {
                answer(&ToHost::Rejected {
                    reason: format!("a message was refused: {error}"),
                });
                return;
            }
        };
        let settled = match &*self.deployment.borrow() {
            Some(Ok(deployment)) if deployment.admits(&origin) => deployment.settle(&options),
            Some(Err(problem)) => Err(problem.clone()),
            _ => Err(format!(
                "this Kiln is not set up to be embedded on {origin}: its widget.json does not \
                 list that origin"
            )),
        };
        match settled {
            Ok(settled) => {
                *self.host.borrow_mut() = Some(Host {
                    window: parent,
                    origin,
                });
                self.tools.set(settled.tools.clone());
                let provider = settled.provider;
                self.phase.set(Phase::Ready(Box::new(settled)));
                self.post(&ToHost::Ready { provider });
            }
            Err(reason) => {
                answer(&ToHost::Refused {
                    reason: reason.clone(),
                });
                self.phase.set(Phase::Refused(reason));
            }
        }
    }

    /// One message from the pinned host.
    fn handle(&self, message: FromHost) {
        match message {
            FromHost::Hello { .. } => {
                self.reject("`hello` came again; this widget was greeted already".into());
            }
            FromHost::Open {} => spawn_local(focus_message_box_soon()),
            FromHost::Close {} => {}
            FromHost::Send { text } => {
                if text.trim().is_empty() || text.chars().count() > MAX_TEXT {
                    self.reject(format!(
                        "`send` takes a message of 1 to {MAX_TEXT} characters"
                    ));
                } else {
                    self.inbox.update(|inbox| inbox.push_back(text));
                }
            }
            FromHost::NewConversation {} => self.router.go(Route::Chat(None), false),
            FromHost::RegisterTool { tool } => {
                if let Err(problem) = tool.check() {
                    self.reject(format!("`register_tool` was refused: {problem}"));
                    return;
                }
                let full = self.tools.with_untracked(|tools| {
                    tools.len() >= MAX_HOST_TOOLS && !tools.iter().any(|t| t.name == tool.name)
                });
                if full {
                    self.reject(format!(
                        "`register_tool` was refused: a host may register at most \
                         {MAX_HOST_TOOLS} tools"
                    ));
                    return;
                }
                self.tools.update(|tools| {
                    tools.retain(|kept| kept.name != tool.name);
                    tools.push(tool);
                });
            }
            FromHost::UnregisterTool { name } => {
                let had = self
                    .tools
                    .with_untracked(|tools| tools.iter().any(|t| t.name == name));
                if had {
                    self.tools
                        .update(|tools| tools.retain(|tool| tool.name != name));
                } else {
                    self.reject(format!("`unregister_tool`: there is no host tool `{name}`"));
                }
            }
            FromHost::ToolResult { call, value, error } => {
                let Some(waiting) = self.calls.borrow_mut().remove(&call) else {
                    self.reject(format!(
                        "a result for call {call} was ignored: the widget is not waiting for \
                         such a call"
                    ));
                    return;
                };
                let reply = match (error, value) {
                    (Some(message), _) => Err(ToolFailure {
                        code: "host_tool_error".into(),
                        message: format!("the host page's tool failed: {message}"),
                        detail: None,
                        outcome: CallOutcome::Error,
                    }),
                    (None, value) => Ok(value.unwrap_or(Value::Null)),
                };
                let _ = waiting.send(reply);
            }
            FromHost::Token {
                request,
                token,
                error,
            } => {
                let Some(waiting) = self.tokens.borrow_mut().remove(&request) else {
                    self.reject(format!(
                        "a token for request {request} was ignored: the widget is not waiting \
                         for one"
                    ));
                    return;
                };
                let _ = waiting.send(match (token, error) {
                    (Some(token), _) if !token.is_empty() => Ok(token),
                    (_, Some(error)) => Err(error),
                    _ => Err("the host page's getToken gave nothing".into()),
                });
            }
        }
    }
}

fn parent() -> Option<web_sys::Window> {
    let window = web_sys::window()?;
    let parent = window.parent().ok().flatten()?;
    // A top-level page is its own parent.
    (!js_sys::Object::is(&parent, &window)).then_some(parent)
}

/// Moves the focus to the message box; `false` when there is none (yet).
fn focus_message_box() -> bool {
    crate::focus_element("chat-input")
}

/// The panel was opened: the focus goes to the message box, once the chat has drawn it
/// (at most 5 s after).
async fn focus_message_box_soon() {
    for _ in 0..100 {
        if focus_message_box() {
            return;
        }
        crate::sleep_ms(50).await;
    }
}

/// Calls host tool `call` through the host page: at most `timeout_ms` of waiting.
fn host_call(
    bridge: &Rc<Bridge>,
    call: PageCall,
    timeout_ms: u64,
) -> LocalBoxFuture<'static, ToolReply> {
    let bridge = bridge.clone();
    Box::pin(async move {
        let Some(name) = call.tool.strip_prefix(HOST_TOOL_PREFIX).map(str::to_owned) else {
            return Err(ToolFailure {
                code: "tool_unavailable".into(),
                message: format!("the host page has no tool `{}`", call.tool),
                detail: None,
                outcome: CallOutcome::ToolUnavailable,
            });
        };
        let number = bridge.number();
        let (sender, answer) = oneshot::channel();
        bridge.calls.borrow_mut().insert(number, sender);
        bridge.post(&ToHost::ToolCall {
            call: number,
            name: name.clone(),
            args: call.args,
        });
        let waited = u32::try_from(timeout_ms).unwrap_or(u32::MAX);
        futures::select! {
            reply = answer.fuse() => match reply {
                Ok(reply) => reply,
                Err(_) => Err(ToolFailure {
                    code: "host_gone".into(),
                    message: "the host page went away before it answered".into(),
                    detail: None,
                    outcome: CallOutcome::OutcomeUnknown,
                }),
            },
            () = crate::sleep_ms(waited).fuse() => {
                bridge.calls.borrow_mut().remove(&number);
                Err(ToolFailure {
                    code: "host_timeout".into(),
                    message: format!(
                        "the host page did not answer `{name}` within {} s; it may or may not have acted",
                        timeout_ms / 1000
                    ),
                    detail: None,
                    outcome: CallOutcome::OutcomeUnknown,
                })
            }
        }
    })
}

/// Asks the host page for a token for the site's endpoint.
fn host_token(
    bridge: &Rc<Bridge>,
    timeout_ms: u64,
) -> LocalBoxFuture<'static, Result<String, String>> {
    let bridge = bridge.clone();
    Box::pin(async move {
        let number = bridge.number();
        let (sender, answer) = oneshot::channel();
        bridge.tokens.borrow_mut().insert(number, sender);
        bridge.post(&ToHost::TokenWanted { request: number });
        let waited = u32::try_from(timeout_ms).unwrap_or(u32::MAX);
        futures::select! {
            token = answer.fuse() => token.unwrap_or_else(|_| Err("the host page went away".into())),
            () = crate::sleep_ms(waited).fuse() => {
                bridge.tokens.borrow_mut().remove(&number);
                Err(format!("the host page's getToken did not answer within {} s", timeout_ms / 1000))
            }
        }
    })
}

/// Sets the theme's variables on the page (through the CSS object model: the page's
/// policy allows no inline style).
fn apply_theme(settled: &Settled) {
    let Some(root) = web_sys::window()
        .and_then(|window| window.document())
        .and_then(|document| document.document_element())
        .and_then(|element| element.dyn_into::<web_sys::HtmlElement>().ok())
    else {
        return;
    };
    let style = root.style();
    let theme = &settled.theme;
    for (name, value) in [
        ("--accent", &theme.accent),
        ("--radius", &theme.radius),
        ("--font", &theme.font),
    ] {
        if let Some(value) = value {
            let _ = style.set_property(name, value);
        }
    }
    let scheme = match theme.scheme {
        Some(Scheme::Light) => Some("light"),
        Some(Scheme::Dark) => Some("dark"),
        Some(Scheme::Auto) | None => None,
    };
    if let Some(scheme) = scheme {
        let _ = root.set_attribute("data-scheme", scheme);
    }
}

/// The widget's page.
#[component]
pub fn Widget() -> impl IntoView {
    // A returning visitor finds the conversation they had open last.
    let start = Route::Chat(crate::chat::last_thread());
    let bridge = Rc::new(Bridge {
        deployment: RefCell::new(None),
        host: RefCell::new(None),
        phase: RwSignal::new(if parent().is_some() {
            Phase::Waiting
        } else {
            Phase::Alone
        }),
        tools: RwSignal::new(Vec::new()),
        calls: RefCell::default(),
        tokens: RefCell::default(),
        next: Cell::new(0),
        inbox: RwSignal::new(std::collections::VecDeque::new()),
        router: Router::detached(start),
        early: RefCell::default(),
    });
    listen(&bridge);
    let phase = bridge.phase;
    let shell = StoredValue::new_local(bridge.clone());
    view! {
        <div class="widget" data-testid="widget">
            {move || match phase.get() {
                Phase::Waiting => view! { <p class="hint loading" data-testid="widget-waiting">"Starting\u{2026}"</p> }.into_any(),
                Phase::Alone => view! {
                    <section class="widget-refused" data-testid="widget-alone">
                        <h1>"Kiln's widget"</h1>
                        <p>"This page is the chat a site embeds with Kiln's widget.js; opened by itself it has no site to serve. The app is at "<a href="./">"Kiln"</a>"."</p>
                    </section>
                }.into_any(),
                Phase::Refused(reason) => view! {
                    <section class="widget-refused" data-testid="widget-refused" role="alert">
                        <h1>"This chat is not available here"</h1>
                        <p>{said(reason)}</p>
                    </section>
                }.into_any(),
                Phase::Ready(settled) => view! { <Panel bridge=shell.get_value() settled=*settled /> }.into_any(),
            }}
        </div>
    }
}

/// Reads `widget.json`, then takes over the host's messages from `widget-boot.js`.
fn listen(bridge: &Rc<Bridge>) {
    let Some(window) = web_sys::window() else {
        return;
    };
    let handler = {
        let bridge = bridge.clone();
        Closure::<dyn Fn(web_sys::MessageEvent)>::new(move |event| bridge.receive(event))
    };
    let inbox = js_sys::Reflect::get(&window, &"kilnWidgetInbox".into()).unwrap_or_default();
    // What came while the wasm loaded, in order; then the boot's listener hands each
    // message straight to `handler`.
    if let Some(kept) = inbox.dyn_ref::<js_sys::Array>() {
        for event in kept.iter() {
            if let Ok(event) = event.dyn_into::<web_sys::MessageEvent>() {
                bridge.early.borrow_mut().push(event);
            }
        }
    }
    let taker = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&taker, &"push".into(), handler.as_ref());
    let _ = js_sys::Reflect::set(&window, &"kilnWidgetInbox".into(), &taker);
    if inbox.is_undefined() {
        // Started without widget-boot.js: listen directly.
        let _ =
            window.add_event_listener_with_callback("message", handler.as_ref().unchecked_ref());
    }
    // The page's one listener lives as long as the page.
    handler.forget();
    let bridge = bridge.clone();
    spawn_local(async move {
        // A broken widget.json serves no host: the host's `hello` is refused with its problem.
        let deployment = read_deployment().await;
        if let Err(problem) = &deployment {
            web_sys::console::error_1(&problem.clone().into());
        }
        *bridge.deployment.borrow_mut() = Some(deployment);
        let early: Vec<_> = bridge.early.borrow_mut().drain(..).collect();
        for event in early {
            bridge.receive(event);
        }
    });
}

/// `widget.json` beside the page: the defaults when there is none (404), an error
/// naming the problem when it does not read.
async fn read_deployment() -> Result<Deployment, String> {
    let href = web_sys::window()
        .and_then(|window| window.location().href().ok())
        .unwrap_or_default();
    match crate::provider_store::fetch_text(&sibling_url(&href, DEPLOYMENT_FILE)).await {
        Ok(None) => Ok(Deployment::default()),
        Ok(Some(text)) => Deployment::parse(&text)
            .map_err(|problem| format!("This Kiln's settings are broken: {problem}")),
        Err(problem) => Err(format!("{DEPLOYMENT_FILE}: {problem}")),
    }
}

/// The chat for a greeted host.
#[component]
fn Panel(bridge: Rc<Bridge>, settled: Settled) -> impl IntoView {
    apply_theme(&settled);
    let deployment = bridge
        .deployment
        .borrow()
        .clone()
        .and_then(Result::ok)
        .unwrap_or_default();
    let starting: LocalBoxFuture<'static, Result<Rc<Runtime>, String>> = Box::pin(async {
        let runtime = Runtime::start(storage::WORKSPACE, SANDBOX_WORKER_URL, POOL_SIZE).await?;
        Ok(Rc::new(runtime))
    });
    let runtime: RuntimeStart = starting.shared();
    let storage = storage::open(runtime.clone());
    let site = deployment.site.as_ref().map(|site| SavedProvider {
        name: site.name.clone(),
        kind: ProviderKind::OpenAi,
        base_url: site.base_url.clone(),
        key: None,
        model: site.model.clone(),
        has_key: false,
        stored: false,
        version: 0,
    });
    let modes = &settled.providers;
    let reach = Reach {
        browser: modes.contains(&ProviderMode::Browser),
        visitor: modes.contains(&ProviderMode::Visitor),
        site: site.filter(|_| modes.contains(&ProviderMode::Site)),
        first: match settled.provider {
            ProviderMode::Browser => Origin::InBrowser,
            ProviderMode::Visitor => Origin::Saved,
            ProviderMode::Site => Origin::Local,
        },
    };
    let visitor = reach.visitor;
    let providers = ProviderStore::load(storage, runtime, Some(reach));
    let timeout = deployment.tool_timeout_ms;
    let read_only_run = deployment.read_only_tools_run_without_asking;
    let tools = bridge.tools;
    let preamble = settled
        .agent
        .as_ref()
        .and_then(|agent| agent.preamble.clone());
    let session: Session = Rc::new(move || {
        let (catalog, mut autonomy) =
            kiln_types::widget::run_request_tools(&tools.get_untracked(), read_only_run);
        // The agent's programs run without asking: the sandbox is the bound, and each call
        // of a host tool, the one thing that reaches outside the widget, asks (or not) on
        // its own.
        autonomy[kiln_types::agent::EXECUTE_CODE] = "auto".into();
        let mut request = json!({
            "agent": DEFAULT_AGENT,
            "tools": catalog,
            "permission": {"mode": "default", "autonomy": autonomy},
        });
        if let Some(preamble) = &preamble {
            request["system"] = preamble.clone().into();
        }
        request
    });
    let embed = {
        let calls = bridge.clone();
        let replies = bridge.clone();
        let errors = bridge.clone();
        let tokens = bridge.clone();
        Embed {
            tools: Rc::new(move |call, _held| host_call(&calls, call, timeout)),
            greeting: settled.greeting.clone(),
            on_reply: Rc::new(move |result| {
                replies.post(&ToHost::Message {
                    text: result.text.clone(),
                    value: (!result.value.is_null()).then(|| result.value.clone()),
                });
            }),
            on_error: Rc::new(move |message| {
                errors.post(&ToHost::Error {
                    message: message.to_owned(),
                });
            }),
            inbox: bridge.inbox,
            token: settled.token.then(|| {
                let source: crate::chat::TokenSource =
                    Rc::new(move || host_token(&tokens, timeout));
                source
            }),
        }
    };
    let embed = StoredValue::new_local(embed);
    let router = bridge.router;
    let closer = bridge.clone();
    let close = move || closer.post(&ToHost::CloseRequested {});
    let escape = bridge.clone();
    let _keys = window_event_listener(leptos::ev::keydown, move |event| {
        // An approval card's Escape denies its call, not closes the panel.
        if event.key() == "Escape" && !event.default_prevented() {
            escape.post(&ToHost::CloseRequested {});
        }
    });
    let session = StoredValue::new_local(session);
    let title = settled.title.clone();
    // What the bench times from the launcher's click: the chat drawn and usable.
    Effect::new(move |marked: Option<bool>| {
        if marked == Some(true) {
            return true;
        }
        let loaded = providers.loaded.get();
        if loaded {
            crate::editor::performance_mark("kiln:widget-interactive");
        }
        loaded
    });
    let storage_note = RwSignal::new(
        local_storage()
            .and_then(|storage| storage.get_item(NOTE_SEEN).ok().flatten())
            .is_none(),
    );
    view! {
        <div class="widget-panel" data-testid="widget-panel">
            <header class="widget-header">
                <h1>{title}</h1>
                <button type="button" class="icon" data-testid="widget-new" aria-label="New conversation" title="New conversation"
                    on:click=move |_| { router.go(Route::Chat(None), false); focus_message_box(); }>"+"</button>
                <button type="button" class="icon" data-testid="widget-close" aria-label="Close" title="Close (Esc)"
                    on:click=move |_| close()>"\u{00d7}"</button>
            </header>
            {move || (storage_note.get() && storage.settled.get()).then(|| view! {
                <p class="widget-note hint" data-testid="widget-note">
                    {if storage.stores.with(Option::is_some) {
                        "Runs in your browser. What you say here is kept in this browser, for this site only."
                    } else {
                        "Runs in your browser. This browser keeps nothing for chats embedded in other sites, so this conversation lasts until you leave the page."
                    }}
                    <button type="button" class="secondary small" on:click=move |_| {
                        if let Some(storage) = local_storage() {
                            let _ = storage.set_item(NOTE_SEEN, "yes");
                        }
                        storage_note.set(false);
                    }>"OK"</button>
                </p>
            })}
            <Show when=move || providers.loaded.get() fallback=|| view! { <p class="hint loading">"Starting\u{2026}"</p> }>
                <Chat store=providers stores=storage.stores session=session router=router embed=embed.get_value() />
            </Show>
            {visitor.then(|| view! {
                <crate::providers_panel::ProvidersPanel store=providers />
            })}
            <p class="widget-foot hint">"Kiln runs this chat in your browser."</p>
        </div>
    }
}

/// Whether the visitor has dismissed the note on what this widget keeps.
const NOTE_SEEN: &str = "kiln:widget-note-seen";

fn local_storage() -> Option<web_sys::Storage> {
    web_sys::window().and_then(|window| window.local_storage().ok().flatten())
}
