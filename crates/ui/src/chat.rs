//! The providers the chat can use (`ProviderStore`, which the Providers panel of
//! `providers_panel` edits) and a streaming Chat box: the person configures LLM providers
//! (OpenAI-compatible, Anthropic, Ollama), and chats with one; the turn runs in this tab's
//! runtime worker, which streams its events back. No tools yet: the chat that drives
//! programs comes later.
//!
//! Providers are kept in the workspace's configuration (in IndexedDB, through the runtime
//! worker's storage operations), each written at the version it was read (compare-and-swap),
//! and the pick in `Settings.selected_provider`; a kept provider's key stays in the worker,
//! which adds it to the requests it sends. Another tab's change reaches this one through the
//! change feed. A list an earlier Kiln kept in `localStorage` is imported once, when the store has
//! none, and the old key removed. The local model `cargo xtask serve` started is announced
//! in `local-provider.json` beside the page and is listed too, without being stored, so a
//! newcomer can chat without configuring anything.

use leptos::ev::KeyboardEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;

use std::rc::Rc;

use crate::RuntimeStart;
use crate::chat_model::{
    KeyChange, ProviderEntry, STORAGE_KEY, SavedProvider, StoredProviders, all_providers,
    parse_local_provider, selected_provider, sibling_url, stop_label, usage_line,
};
use crate::providers_panel::ProvidersPanel;
use crate::runtime::Runtime;
use crate::storage::{StorageSignals, Stores};
use crate::storage_model::ErrorText;
use kiln_types::chat::{ChatOptions, Event, FinalMessage, Message, ModelInfo};
use kiln_types::records::ConfigView;
use kiln_types::runtime::{Problem, ToRuntime};
use serde_json::{Value, json};

/// The file `cargo xtask serve` writes beside the page when it started the local model.
const LOCAL_PROVIDER_FILE: &str = "local-provider.json";

/// The providers the page knows and the one the chat uses, shared by the panel and the chat.
#[derive(Clone, Copy)]
pub(crate) struct ProviderStore {
    /// The person's own, as stored, by name.
    saved: RwSignal<Vec<SavedProvider>>,
    /// The local model, when `local-provider.json` announced one. Never stored: its port
    /// changes from one `cargo xtask serve` to the next, so it is read afresh at each load.
    local: RwSignal<Option<SavedProvider>>,
    /// Whether the look for `local-provider.json` is over (until then the chat does not say
    /// that there is no provider).
    local_checked: RwSignal<bool>,
    /// The person's pick, by name.
    picked: RwSignal<Option<String>>,
    /// A problem with the stored list or with `local-provider.json`, shown above the chat.
    notice: RwSignal<Option<String>>,
    /// Whether the stored list has been read (the chat waits for it).
    pub(crate) loaded: RwSignal<bool>,
    /// Where the list is kept, once storage is open; `None` keeps it in the page only.
    stores: RwSignal<Option<Stores>, LocalStorage>,
    /// This tab's runtime worker, which runs the turns and asks for model lists.
    runtime: StoredValue<RuntimeStart, LocalStorage>,
}

impl ProviderStore {
    /// Reads the stored list once storage is open (importing an earlier Kiln's
    /// `localStorage` list the first time), follows the configuration's changes, and starts
    /// looking for the local model.
    pub(crate) fn load(storage: StorageSignals, runtime: RuntimeStart) -> Self {
        let store = Self {
            saved: RwSignal::new(Vec::new()),
            local: RwSignal::new(None),
            local_checked: RwSignal::new(false),
            picked: RwSignal::new(None),
            notice: RwSignal::new(None),
            loaded: RwSignal::new(false),
            stores: storage.stores,
            runtime: StoredValue::new_local(runtime),
        };
        store.look_for_local_model();
        let imported = StoredValue::new(false);
        // The stored configuration, read again at each of its changes; the answer to an
        // older read is dropped by the resource.
        let config = LocalResource::new(move || {
            let settled = storage.settled.get();
            storage.revisions.config.track();
            let stores = storage.stores.get();
            async move {
                if !settled {
                    return None;
                }
                let Some(stores) = stores else {
                    return Some(Err(
                        "Storage is not available: providers you add here last until the page \
                         is reloaded."
                            .to_owned(),
                    ));
                };
                let mut import_notice = None;
                if !imported.get_value() {
                    imported.set_value(true);
                    import_notice = import_legacy(&stores).await;
                }
                Some(
                    read_config(&stores)
                        .await
                        .map(|mut loaded| {
                            loaded.notice = import_notice.or(loaded.notice);
                            loaded
                        })
                        .map_err(|error| {
                            ErrorText::with_prefix(
                                "The saved providers could not be read: ",
                                &error,
                            )
                            .sentence()
                        }),
                )
            }
        });
        // The page's copy follows each answer; it also changes at once when the person
        // saves, picks or removes here.
        Effect::new(move || {
            let Some(Some(read)) = config.get() else {
                return;
            };
            match read {
                Ok(loaded) => {
                    store.saved.set(loaded.providers);
                    store.picked.set(loaded.selected);
                    if let Some(notice) = loaded.notice {
                        store.notice.set(Some(notice));
                    }
                }
                Err(notice) => store.notice.set(Some(notice)),
            }
            store.loaded.set(true);
        });
        store
    }

    pub(crate) fn entries(&self) -> Vec<ProviderEntry> {
        self.saved.with(|saved| {
            self.local
                .with(|local| all_providers(saved, local.as_ref()))
        })
    }

    fn current(&self) -> Option<ProviderEntry> {
        let entries = self.entries();
        self.picked
            .with(|picked| selected_provider(&entries, picked.as_deref()).cloned())
    }

    /// This tab's runtime worker, once it has started.
    async fn runtime(&self) -> Result<Rc<Runtime>, Problem> {
        self.runtime
            .get_value()
            .await
            .map_err(crate::storage::runtime_problem)
    }

    /// Reads the person's saved providers.
    pub(crate) fn with_saved<T>(&self, read: impl FnOnce(&[SavedProvider]) -> T) -> T {
        self.saved.with_untracked(|saved| read(saved))
    }

    /// The models `provider` (a `ProviderConfig` as the protocol carries it) lists.
    pub(crate) async fn models(&self, provider: Value) -> Result<Vec<ModelInfo>, Problem> {
        let runtime = self.runtime().await?;
        let value = runtime
            .call(move |id| ToRuntime::Models { id, provider })
            .await
            .unwrap_or_else(|_| {
                Err(crate::storage::runtime_problem(
                    "the runtime worker went away",
                ))
            })?;
        serde_json::from_value(value).map_err(|error| {
            crate::storage::runtime_problem(format!(
                "the runtime worker's model list is not readable: {error}"
            ))
        })
    }

    fn pick(&self, name: String) {
        self.picked.set(Some(name.clone()));
        let store = *self;
        spawn_local(async move {
            if let Err(error) = store.select(Some(name)).await {
                store.notice.set(Some(
                    ErrorText::with_prefix("The chosen provider was not kept: ", &error).sentence(),
                ));
            }
        });
    }

    /// Writes the pick into the settings, over another tab's (the pick is this person's
    /// latest word).
    async fn select(&self, name: Option<String>) -> Result<(), Problem> {
        match self.stores.get_untracked() {
            Some(stores) => stores.act("config.select", json!({"provider": name})).await,
            None => Ok(()),
        }
    }

    /// Saves `provider` in place of `replacing` (or as a new one) and picks it for the chat:
    /// the person just set it up. `Err` is what the store said.
    pub(crate) async fn put(
        &self,
        replacing: Option<String>,
        mut provider: SavedProvider,
        key: KeyChange,
    ) -> Result<(), ErrorText> {
        let name = provider.name.clone();
        if let Some(stores) = self.stores.get_untracked() {
            // The worker writes the record (removing the one it renames) and picks it.
            let args = provider.put_args(&key, replacing.as_deref());
            #[derive(serde::Deserialize)]
            struct Put {
                version: u64,
            }
            let put: Put = stores
                .op("config.provider.put", args)
                .await
                .map_err(|error| {
                    ErrorText::with_prefix(&format!("`{name}` was not saved: "), &error)
                })?;
            provider.version = put.version;
            provider.stored = true;
            provider.key = None;
            // "Saving a provider replaces them": an earlier Kiln's unreadable list goes.
            forget_legacy();
        }
        self.saved.update(|saved| {
            if let Some(old) = replacing.as_deref() {
                saved.retain(|p| p.name != old);
            }
            saved.retain(|p| p.name != provider.name);
            saved.push(provider);
            saved.sort_by(|a, b| a.name.cmp(&b.name));
        });
        self.picked.set(Some(name));
        Ok(())
    }

    pub(crate) async fn remove(&self, name: String) -> Result<(), ErrorText> {
        let version = self
            .saved
            .with_untracked(|saved| saved.iter().find(|p| p.name == name).map(|p| p.version));
        if let (Some(stores), Some(version)) = (self.stores.get_untracked(), version) {
            stores
                .act(
                    "config.provider.remove",
                    json!({"name": name, "version": version}),
                )
                .await
                .map_err(|error| {
                    ErrorText::with_prefix(&format!("`{name}` was not removed: "), &error)
                })?;
        }
        self.saved
            .update(|saved| saved.retain(|provider| provider.name != name));
        if self
            .picked
            .with_untracked(|picked| picked.as_deref() == Some(name.as_str()))
        {
            self.picked.set(None);
        }
        Ok(())
    }

    fn look_for_local_model(self) {
        let Some(url) = web_sys::window()
            .and_then(|window| window.location().href().ok())
            .map(|href| sibling_url(&href, LOCAL_PROVIDER_FILE))
        else {
            self.local_checked.set(true);
            return;
        };
        // The query keeps a cached copy from being used: the port changes between serves.
        let url = format!("{url}?t={}", js_sys::Date::now() as u64);
        spawn_local(async move {
            // No file (404, the usual case) says nothing. Nor does a host that answers every
            // path with the page itself: only something that looks like JSON is read.
            if let Some(text) = fetch_text(&url).await
                && text.trim_start().starts_with('{')
            {
                match parse_local_provider(&text) {
                    Ok(provider) => self.local.set(Some(provider)),
                    Err(problem) => self
                        .notice
                        .set(Some(format!("The local model was not added: {problem}."))),
                }
            }
            self.local_checked.set(true);
        });
    }
}

/// The body of a `GET` of `url` when it answers 200, else nothing.
async fn fetch_text(url: &str) -> Option<String> {
    use wasm_bindgen::JsCast as _;
    let window = web_sys::window()?;
    let response = wasm_bindgen_futures::JsFuture::from(window.fetch_with_str(url))
        .await
        .ok()?
        .dyn_into::<web_sys::Response>()
        .ok()?;
    if response.status() != 200 {
        return None;
    }
    let text = wasm_bindgen_futures::JsFuture::from(response.text().ok()?)
        .await
        .ok()?;
    text.as_string()
}

/// What the configuration holds for the chat.
#[derive(Clone)]
struct Loaded {
    providers: Vec<SavedProvider>,
    selected: Option<String>,
    /// Records that could not be used, in a sentence.
    notice: Option<String>,
}

/// The providers (by name) and the pick; a record of an unknown kind is left out with a
/// notice.
async fn read_config(stores: &Stores) -> Result<Loaded, Problem> {
    let config: ConfigView = stores.op("config.get", json!({})).await?;
    let mut providers = Vec::new();
    let mut problems = Vec::new();
    for info in config.providers {
        match SavedProvider::from_info(info) {
            Ok(provider) => providers.push(provider),
            Err(problem) => problems.push(problem),
        }
    }
    Ok(Loaded {
        providers,
        selected: config.settings.selected_provider,
        notice: (!problems.is_empty()).then(|| problems.join(" ")),
    })
}

/// Imports the list an earlier Kiln kept in `localStorage`, when the configuration has no
/// providers yet, then removes it. Answers a notice when there is something to say: the old
/// text could not be read (it stays until a provider is saved), or the store refused.
async fn import_legacy(stores: &Stores) -> Option<String> {
    let text = match read_legacy() {
        Ok(Some(text)) => text,
        Ok(None) => return None,
        Err(notice) => return Some(notice),
    };
    match stores.op::<ConfigView>("config.get", json!({})).await {
        Ok(config) if config.providers.is_empty() => {}
        // The store has its own list (another tab imported it, or it was made here).
        Ok(_) => {
            forget_legacy();
            return None;
        }
        Err(error) => {
            return Some(
                ErrorText::with_prefix("The saved providers could not be read: ", &error)
                    .sentence(),
            );
        }
    }
    let stored = match StoredProviders::parse(&text) {
        Ok(stored) => stored,
        Err(notice) => return Some(notice),
    };
    for provider in &stored.providers {
        let key = match &provider.key {
            Some(key) => KeyChange::Typed(key.clone()),
            None => KeyChange::None,
        };
        match stores
            .act("config.provider.put", provider.put_args(&key, None))
            .await
        {
            // Another tab imported the same list at the same time.
            Ok(()) => {}
            Err(error) if error.code.as_deref() == Some("conflict") => {}
            Err(error) => {
                return Some(
                    ErrorText::with_prefix(
                        &format!(
                            "The providers kept by an earlier Kiln (`localStorage` key \
                             `{STORAGE_KEY}`) were not imported: "
                        ),
                        &error,
                    )
                    .sentence(),
                );
            }
        }
    }
    // Each put picked its provider; the earlier Kiln's own pick wins, else none (another
    // tab's pick, written since, would stand: this only runs when the list was empty).
    let _ = stores
        .act("config.select", json!({"provider": stored.selected}))
        .await;
    forget_legacy();
    None
}

// An earlier Kiln kept the list, keys included, in this browser's `localStorage`. It is read
// once to import it into the configuration and then removed.
fn local_storage() -> Result<web_sys::Storage, String> {
    let window = web_sys::window().ok_or("there is no window")?;
    match window.local_storage() {
        Ok(Some(storage)) => Ok(storage),
        Ok(None) => Err("this browser offers no `localStorage`".to_owned()),
        Err(error) => Err(crate::js_text(&error)),
    }
}

fn read_legacy() -> Result<Option<String>, String> {
    let problem = |why: String| {
        format!(
            "The providers an earlier Kiln kept (`localStorage` key `{STORAGE_KEY}`) could not \
             be read ({why}); they were not imported."
        )
    };
    local_storage()
        .map_err(problem)?
        .get_item(STORAGE_KEY)
        .map_err(|error| problem(crate::js_text(&error)))
}

fn forget_legacy() {
    if let Ok(storage) = local_storage() {
        let _ = storage.remove_item(STORAGE_KEY);
    }
}

/// How a reply ended: the stop, the tokens and the model.
#[derive(Clone, Debug, PartialEq)]
struct ReplyEnd {
    /// The stop reason's code (`end_turn`, `aborted`...), for the style.
    code: String,
    label: String,
    /// Kiln's sentence, when Kiln stopped the turn.
    detail: Option<String>,
    usage: String,
    model: String,
}

/// An assistant reply as it grows.
#[derive(Clone, Debug, Default, PartialEq)]
struct Reply {
    provider: String,
    text: String,
    tool_calls: Vec<String>,
    end: Option<ReplyEnd>,
    /// The turn failed: the text so far is all there is.
    broken: bool,
}

impl Reply {
    fn finish(&mut self, message: &FinalMessage, asked_model: &str) {
        let (code, label, detail) = match &message.stop {
            Some(stop) => (
                stop.reason.as_str().to_owned(),
                stop_label(&stop.reason),
                stop.message.clone(),
            ),
            None => ("unknown".to_owned(), "Ended".to_owned(), None),
        };
        self.end = Some(ReplyEnd {
            code,
            label,
            detail,
            usage: usage_line(message.usage),
            model: message
                .model
                .clone()
                .unwrap_or_else(|| asked_model.to_owned()),
        });
    }
}

#[derive(Clone)]
enum Item {
    User(String),
    Assistant(RwSignal<Reply>),
    Error { text: String, hint: Option<String> },
}

/// One item of the conversation as shown; `id` keys it in the list.
#[derive(Clone)]
struct Entry {
    id: usize,
    item: Item,
}

/// How a turn ended, as the chat shows it.
enum TurnEnd {
    Answered(FinalMessage),
    Failed(Option<Problem>),
}

/// The chat's conversation and what Send, Stop and Clear do to it. Copy:
/// the buttons and the turn in flight each hold one.
#[derive(Clone, Copy)]
struct Conversation {
    store: ProviderStore,
    stores: RwSignal<Option<Stores>, LocalStorage>,
    /// What the model is sent: the turns that were answered, and the one in flight.
    messages: RwSignal<Vec<Message>>,
    /// What the page shows.
    entries: RwSignal<Vec<Entry>>,
    next_id: StoredValue<usize>,
    input: RwSignal<String>,
    streaming: RwSignal<bool>,
    /// The turn in flight, for Stop: its runtime worker and id there.
    abort: StoredValue<Option<(Rc<Runtime>, u64)>, LocalStorage>,
    /// Which conversation this is: Clear starts another, and a turn of an
    /// earlier one writes nothing when it ends.
    epoch: StoredValue<usize>,
    /// The conversation's thread in the history, made with its first message.
    thread: StoredValue<Option<String>, LocalStorage>,
    textarea: NodeRef<leptos::html::Textarea>,
    list: NodeRef<leptos::html::Ol>,
}

impl Conversation {
    fn new(store: ProviderStore, stores: RwSignal<Option<Stores>, LocalStorage>) -> Self {
        Self {
            store,
            stores,
            messages: RwSignal::new(Vec::new()),
            entries: RwSignal::new(Vec::new()),
            next_id: StoredValue::new(0),
            input: RwSignal::new(String::new()),
            streaming: RwSignal::new(false),
            abort: StoredValue::new_local(None),
            epoch: StoredValue::new(0),
            thread: StoredValue::new_local(None),
            textarea: NodeRef::new(),
            list: NodeRef::new(),
        }
    }

    fn push(self, item: Item) -> usize {
        let id = self.next_id.get_value();
        self.next_id.set_value(id + 1);
        self.entries
            .update(|entries| entries.push(Entry { id, item }));
        id
    }

    fn scroll_to_end(self) {
        if let Some(list) = self.list.get_untracked() {
            list.set_scroll_top(list.scroll_height());
        }
    }

    /// Scrolls to the end on the next tick, once the text is drawn.
    fn scroll_soon(self) {
        request_animation_frame(move || self.scroll_to_end());
    }

    /// A reply follows its growing text only while the person has not scrolled up to read.
    fn at_end(self) -> bool {
        self.list
            .get_untracked()
            .is_none_or(|list| list.scroll_height() - list.scroll_top() - list.client_height() < 48)
    }

    fn focus_box(self) {
        if let Some(textarea) = self.textarea.get_untracked() {
            let _ = textarea.focus();
        }
    }

    /// Sends what is typed to the chosen provider, as the next turn.
    fn send(self) {
        if self.streaming.get_untracked() {
            return;
        }
        let text = self.input.get_untracked();
        if text.trim().is_empty() {
            return;
        }
        let Some(entry) = self.store.current() else {
            return;
        };
        let provider = entry.provider;
        self.input.set(String::new());
        self.messages
            .update(|messages| messages.push(Message::User { text: text.clone() }));
        self.push(Item::User(text.clone()));
        let reply = RwSignal::new(Reply {
            provider: provider.name.clone(),
            ..Reply::default()
        });
        let reply_id = self.push(Item::Assistant(reply));
        self.streaming.set(true);
        let epoch = self.epoch.get_value();
        let request = json!({
            "provider": provider.wire(),
            "messages": self.messages.get_untracked(),
            "options": ChatOptions::new(provider.model.clone()),
        });
        self.focus_box();
        self.scroll_soon();
        spawn_local(async move {
            let history = self.stores.get_untracked();
            // Kept for `search_history`; a store that fails does not stop the chat.
            let recorded = match &history {
                Some(history) => self.record(history, epoch, "user", &text).await,
                None => None,
            };
            let end = self.turn(request, reply).await;
            let following = self.at_end();
            if self.epoch.get_value() != epoch {
                return;
            }
            match end {
                TurnEnd::Answered(message) => {
                    // Recorded before anything shows the turn ended, so that the end, the
                    // Stop button going and Send coming back are one change on the page
                    // (a test once saw the end drawn while Stop was still there).
                    if !message.text.is_empty()
                        && let Some(history) = &history
                        && recorded.is_some()
                    {
                        let _ = self
                            .record(history, epoch, "assistant", &message.text)
                            .await;
                    }
                    if self.epoch.get_value() != epoch {
                        return;
                    }
                    reply.update(|reply| reply.finish(&message, &provider.model));
                    self.answered(message);
                }
                TurnEnd::Failed(failure) => self.failed(reply, reply_id, failure),
            }
            self.abort.set_value(None);
            self.streaming.set(false);
            if following {
                self.scroll_soon();
            }
        });
    }

    /// Runs the turn `request` in the runtime worker, `reply` following its text.
    async fn turn(self, request: Value, reply: RwSignal<Reply>) -> TurnEnd {
        let on_event = Rc::new(move |event: Value| {
            let following = self.at_end();
            match serde_json::from_value::<Event>(event) {
                Ok(Event::TextDelta { text }) => {
                    reply.update(|reply| reply.text.push_str(&text));
                }
                Ok(Event::ToolCallEnd { call, .. }) => reply.update(|reply| {
                    reply
                        .tool_calls
                        .push(format!("{}({})", call.name, call.arguments));
                }),
                _ => {}
            }
            if following {
                self.scroll_soon();
            }
        });
        let runtime = match self.store.runtime().await {
            Ok(runtime) => runtime,
            Err(problem) => return TurnEnd::Failed(Some(problem)),
        };
        let (id, done) = runtime.chat(request, on_event);
        self.abort.set_value(Some((runtime.clone(), id)));
        match done.await {
            Ok(Ok(value)) => match serde_json::from_value::<FinalMessage>(value) {
                Ok(message) => TurnEnd::Answered(message),
                Err(error) => TurnEnd::Failed(Some(crate::storage::runtime_problem(format!(
                    "the runtime worker's reply is not readable: {error}"
                )))),
            },
            Ok(Err(problem)) => TurnEnd::Failed(Some(problem)),
            Err(_) => TurnEnd::Failed(Some(crate::storage::runtime_problem(
                "the runtime worker went away during the reply",
            ))),
        }
    }

    /// The turn was answered: the answer joins what the model is sent next.
    fn answered(self, message: FinalMessage) {
        self.messages.update(|messages| {
            if message.text.is_empty() {
                // Nothing was answered (stopped at once): the question leaves the
                // history too, so that turns keep alternating.
                messages.pop();
            } else {
                // Tool calls are not kept: no tools were offered, so none can be
                // answered, and a call without its answer would break the next turn.
                messages.push(Message::Assistant {
                    text: message.text,
                    tool_calls: Vec::new(),
                });
            }
        });
    }

    /// The turn failed: the exchange leaves what the model is sent, and the
    /// error is shown.
    fn failed(self, reply: RwSignal<Reply>, reply_id: usize, failure: Option<Problem>) {
        let (text, hint) = match failure {
            Some(error) => {
                let error = ErrorText::new(&error);
                (error.message, error.hint)
            }
            None => ("The reply ended without its last part.".to_owned(), None),
        };
        // A reply that never started is only the error; one cut short keeps
        // what came.
        if reply.with_untracked(|reply| reply.text.is_empty() && reply.tool_calls.is_empty()) {
            self.entries
                .update(|entries| entries.retain(|entry| entry.id != reply_id));
        } else {
            reply.update(|reply| reply.broken = true);
        }
        self.messages.update(|messages| {
            messages.pop();
        });
        self.push(Item::Error { text, hint });
    }

    fn stop(self) {
        self.abort.with_value(|abort| {
            if let Some((runtime, id)) = abort {
                runtime.cancel(*id);
            }
        });
        self.focus_box();
    }

    fn clear(self) {
        self.stop();
        self.abort.set_value(None);
        self.epoch.set_value(self.epoch.get_value() + 1);
        self.thread.set_value(None);
        self.streaming.set(false);
        self.messages.set(Vec::new());
        self.entries.set(Vec::new());
    }

    /// Appends a message to the conversation's thread, making the thread with the
    /// first one; answers the thread's id. Nothing when the conversation was
    /// cleared meanwhile or the store refuses.
    async fn record(self, stores: &Stores, epoch: usize, role: &str, text: &str) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Appended {
            thread: String,
        }
        let known = self.thread.get_value();
        let appended: Appended = stores
            .op(
                "history.append",
                json!({"thread": known, "role": role, "text": text}),
            )
            .await
            .ok()?;
        if known.is_none() {
            if self.epoch.get_value() != epoch {
                return None;
            }
            self.thread.set_value(Some(appended.thread.clone()));
        }
        Some(appended.thread)
    }
}

/// The chat: the provider, the conversation, the message box.
#[component]
pub(crate) fn Chat(
    store: ProviderStore,
    stores: RwSignal<Option<crate::storage::Stores>, LocalStorage>,
) -> impl IntoView {
    let chat = Conversation::new(store, stores);
    let no_provider = move || store.entries().is_empty();
    view! {
        <section class="chat" data-testid="chat" aria-labelledby="chat-title">
            <h2 id="chat-title">"Chat"</h2>
            {move || store.notice.get().map(|notice| view! {
                <p class="chat-notice" data-testid="providers-notice" role="status">{notice}</p>
            })}
            <ProvidersPanel store=store />
            <ChatBar chat=chat />
            {move || (no_provider() && store.local_checked.get()).then(|| view! {
                <p class="hint chat-empty" data-testid="chat-empty">"Add a provider in Providers to chat."</p>
            })}
            <ol class="chat-messages" data-testid="chat-messages" aria-live="polite" aria-label="Conversation" node_ref=chat.list
                class:empty=move || chat.entries.with(Vec::is_empty)>
                <For each=move || chat.entries.get() key=|entry| entry.id let:entry>
                    {entry_view(entry.item, chat.streaming)}
                </For>
            </ol>
            <MessageBox chat=chat />
        </section>
    }
}

/// The provider the chat uses, and Clear.
#[component]
fn ChatBar(chat: Conversation) -> impl IntoView {
    let store = chat.store;
    let no_provider = move || store.entries().is_empty();
    let provider_options = move || {
        let current = store.current().map(|entry| entry.provider.name);
        store
            .entries()
            .into_iter()
            .map(|entry| {
                let name = entry.provider.name;
                let label = format!("{} — {}", name, entry.provider.model);
                let selected = current.as_deref() == Some(name.as_str());
                view! { <option value=name selected=selected>{label}</option> }
            })
            .collect_view()
    };
    view! {
        <div class="chat-bar" hidden=move || no_provider() && chat.entries.with(Vec::is_empty)>
            <label for="chat-provider">"Provider"</label>
            <select id="chat-provider" data-testid="chat-provider" disabled=move || chat.streaming.get() || no_provider()
                on:change=move |event| store.pick(event_target_value(&event))>
                {provider_options}
            </select>
            <button type="button" class="secondary small" data-testid="chat-clear"
                disabled=move || chat.entries.with(Vec::is_empty) on:click=move |_| { chat.clear(); chat.focus_box(); }>"Clear"</button>
        </div>
    }
}

/// The message box: Enter or Send sends, Shift+Enter starts a line, Stop cuts the reply.
#[component]
fn MessageBox(chat: Conversation) -> impl IntoView {
    let on_keydown = move |event: KeyboardEvent| {
        if event.key() == "Enter" && !event.shift_key() && !event.is_composing() {
            event.prevent_default();
            chat.send();
        }
    };
    let no_provider = move || chat.store.entries().is_empty();
    view! {
        <form class="chat-form" on:submit=move |event| { event.prevent_default(); chat.send(); }>
            <label for="chat-input">"Message"</label>
            <textarea id="chat-input" data-testid="chat-input" rows="3" node_ref=chat.textarea
                placeholder="Ask something. Enter sends, Shift+Enter starts a new line."
                prop:value=chat.input on:input=move |event| chat.input.set(event_target_value(&event))
                on:keydown=on_keydown></textarea>
            <div class="actions">
                <button type="submit" data-testid="chat-send" disabled=move || chat.streaming.get() || no_provider()>"Send"</button>
                {move || chat.streaming.get().then(|| view! {
                    <button type="button" class="secondary" data-testid="chat-stop" on:click=move |_| chat.stop()>"Stop"</button>
                })}
            </div>
        </form>
    }
}

/// One item of the conversation as the list shows it.
fn entry_view(item: Item, streaming: RwSignal<bool>) -> AnyView {
    match item {
        Item::User(text) => view! {
            <li class="chat-message user" data-testid="chat-user">
                <span class="who">"You"</span>
                <div class="text">{text}</div>
            </li>
        }
        .into_any(),
        Item::Assistant(reply) => {
            let waiting = move || {
                reply.with(|reply| reply.text.is_empty() && reply.end.is_none() && !reply.broken)
                    && streaming.get()
            };
            view! {
                <li class="chat-message assistant" data-testid="chat-assistant"
                    class:stopped=move || reply.with(|reply| reply.end.as_ref().is_some_and(|end| end.code == "aborted"))
                    class:broken=move || reply.with(|reply| reply.broken)>
                    <span class="who">{move || reply.with(|reply| reply.provider.clone())}</span>
                    <div class="text" data-testid="chat-reply-text">{move || reply.with(|reply| reply.text.clone())}</div>
                    {move || waiting().then(|| view! { <p class="waiting hint">"Waiting for the reply…"</p> })}
                    {move || reply.with(|reply| reply.tool_calls.clone()).into_iter().map(|call| view! {
                        <p class="tool-call" data-testid="chat-tool-call">"Tool call: "<code>{call}</code></p>
                    }).collect_view()}
                    {move || reply.with(|reply| reply.end.clone()).map(|end| {
                        view! {
                            <p class="chat-end" data-testid="chat-end">
                                <span class=format!("stop stop-{}", end.code) data-testid="chat-stop-reason">{end.label}</span>
                                {end.detail.map(|detail| view! { <span class="detail">" ("{detail}")"</span> })}
                                " · "<span data-testid="chat-usage">{end.usage}</span>
                                " · "<code>{end.model}</code>
                            </p>
                        }
                    })}
                </li>
            }
            .into_any()
        }
        Item::Error { text, hint } => view! {
            <li class="chat-message error" data-testid="chat-error" role="alert">
                <span class="who">"Error"</span>
                <p class="text">{text}</p>
                {hint.map(|hint| view! { <p class="hint" data-testid="chat-error-hint">{hint}</p> })}
                <p class="hint">"This exchange is left out of the conversation sent next time."</p>
            </li>
        }
        .into_any(),
    }
}
