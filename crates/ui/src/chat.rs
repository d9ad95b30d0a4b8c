//! The streaming Chat box: the person picks one of the providers the chat can use
//! (`provider_store`) and chats with it; the turn runs in this tab's
//! runtime worker, which streams its events back. Each turn is an agent turn
//! (`kiln_agent::run_agent`): the model acts by writing programs over the session's tools
//! (the editor's: the app's own tools, the MCP servers, the network setting, the
//! permissions), each shown as an action block with its code, console, calls and result;
//! approvals and the agent's questions appear as cards in the thread; a line under the
//! reply counts turns, tokens and spend against the job's guards.
//!
//! Beside the message box the person picks which of the workspace's agents answers
//! (`agents_panel::WorkspaceAgents`, followed live): each turn names it, a kept thread
//! remembers the agent it was made with, and a new conversation takes the one last
//! picked in this tab.
//!
//! When nothing else is there the chat uses Kiln's own small model, run in this
//! browser. While a turn waits on that model, the reply shows its download and loading
//! (the runtime worker's `model_status`), and a failure to load it offers Retry and Clear
//! cached model.

use crate::said::said;
use leptos::ev::KeyboardEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;

use std::rc::Rc;

use std::cell::RefCell;

use futures::channel::oneshot;

use crate::agent_view::{ActionResult, Step, TurnView, provider_failure, shown};
use crate::agents_panel::{WorkspaceAgents, for_agent, reply_header, settle_choice};
use crate::approval::PageApprover;
use crate::chat_model::{IN_BROWSER_NOTE, ModelLine, is_model_failure, usage_line};
use crate::demo_tools::Asker;
use crate::provider_store::ProviderStore;
use crate::route::{Route, Router};
use crate::runtime::{PageSide, Runtime};
use crate::storage::Stores;
use crate::storage_model::ErrorText;
use crate::{AppPage, ApprovalCard, QuestionCard};
use kiln_types::agent::{AgentEvent, AgentResult, Guards, StopReason};
use kiln_types::chat::{ChatOptions, Message, ProviderKind};
use kiln_types::model::ModelStatus;
use kiln_types::permission::{ApprovalRequest, card_text};
use kiln_types::records::{Conversation as Kept, DEFAULT_AGENT, Thread, ThreadMessage, TurnLimits};
use kiln_types::runtime::{ExchangeEvent, Problem, Told};
use serde_json::{Value, json};

/// What a chat turn works with beside its conversation: the app's own
/// tools, the MCP servers, the permission settings and the network, as of
/// when it is sent (a run request's fields, from the editor's settings).
pub(crate) type Session = Rc<dyn Fn() -> Value>;

/// A chat embedded in another page (the widget), where it differs from the app's.
#[derive(Clone)]
pub(crate) struct Embed {
    /// Answers the turn's page tool calls (the host page's tools) in place of the
    /// app's own.
    pub(crate) tools: crate::PageTools,
    /// What a new conversation shows, in place of the app's welcome.
    pub(crate) greeting: Option<String>,
    /// Told each finished reply: its text and the value `finish` gave.
    pub(crate) on_reply: Rc<dyn Fn(&AgentResult)>,
    /// Told each failed turn, in a sentence.
    pub(crate) on_error: Rc<dyn Fn(&str)>,
    /// Messages sent from outside (the host page's `send`), each taken as if typed, in
    /// order, when no turn is running.
    pub(crate) inbox: RwSignal<std::collections::VecDeque<String>>,
    /// A short-lived token for the site's endpoint (the list's `Local` row), asked
    /// before each turn that uses it; `Err` says why there is none.
    pub(crate) token: Option<TokenSource>,
}

/// Gives a short-lived token for the site's endpoint, or says why there is none.
pub(crate) type TokenSource =
    Rc<dyn Fn() -> futures::future::LocalBoxFuture<'static, Result<String, String>>>;

/// Who answers the agent's `ask_user` in the chat: its question card, which
/// takes a written answer.
#[derive(Clone)]
pub(crate) struct Person {
    question: RwSignal<Option<String>>,
    answer: Rc<RefCell<Option<oneshot::Sender<Told>>>>,
}

impl Person {
    fn new() -> Self {
        Self {
            question: RwSignal::new(None),
            answer: Rc::default(),
        }
    }

    /// Shows `question` until the person answers or the turn ends.
    pub(crate) async fn ask(&self, question: String) -> Told {
        if self.answer.borrow().is_some() {
            return Told::Unavailable {
                reason: "another question is already waiting for the person".into(),
            };
        }
        let (sender, receiver) = oneshot::channel();
        *self.answer.borrow_mut() = Some(sender);
        self.question.set(Some(question));
        receiver.await.unwrap_or(Told::Unavailable {
            reason: "the question was withdrawn before the person answered".into(),
        })
    }

    fn answer(&self, told: Told) {
        self.question.set(None);
        if let Some(answer) = self.answer.borrow_mut().take() {
            let _ = answer.send(told);
        }
    }

    /// The turn ended: an open question has no one left to answer.
    fn withdraw(&self) {
        self.question.set(None);
        self.answer.borrow_mut().take();
    }
}

/// An assistant reply as it grows: the agent turn's steps.
#[derive(Clone, Debug, PartialEq)]
struct Reply {
    provider: String,
    /// The model the turn asked for (the line says the one that answered).
    model: String,
    /// The turn asked the in-browser model, whose loading the reply shows.
    in_browser: bool,
    /// Where the in-browser model's loading stands, while the turn waits on it; once it
    /// is loaded, the short note that stays.
    loading: Option<ModelLine>,
    view: TurnView,
    /// The turn failed: what came is all there is.
    broken: bool,
}

#[derive(Clone)]
enum Item {
    /// The person's message.
    User(String),
    Assistant(RwSignal<Reply>),
    Error {
        text: String,
        hint: Option<String>,
    },
    ModelError(ModelError),
}

/// The in-browser model could not be loaded: said once (its status and the turn's own
/// failure are the same news), with Retry and Clear cached model.
#[derive(Clone)]
struct ModelError {
    text: String,
    hint: Option<String>,
    /// What the person sent, which Retry sends again.
    message: String,
    /// The item showing that message, which Retry replaces.
    user_id: usize,
}

/// One item of the conversation as shown; `id` keys it in the list.
#[derive(Clone)]
struct Entry {
    id: usize,
    item: Item,
}

/// How a turn ended, as the chat shows it.
enum TurnEnd {
    /// The turn ran (answered, finished, or stopped by a guard, the budget or
    /// the person), with the thread to continue from.
    Ended(Box<AgentResult>, Continued),
    Failed(Option<Problem>),
}

/// What a turn that ran leaves for the next one.
struct Continued {
    /// The thread as the model saw it last.
    messages: Option<Vec<Message>>,
    /// For a kept thread, what the next turn sends (`kiln_agent::continuation`).
    next: Option<Vec<Message>>,
    /// The turn ran but could not be kept in its thread: why.
    not_kept: Option<String>,
}

/// The cards a turn puts in the thread while it waits on the person.
#[derive(Clone, Copy)]
struct Cards {
    approval: ReadSignal<Option<ApprovalRequest>>,
    waiting: ReadSignal<usize>,
    /// The app's `ask` tool's yes/no question.
    yes_no: ReadSignal<Option<String>>,
}

/// The chat's conversation and what Send, Stop and Clear do to it. Copy:
/// the buttons and the turn in flight each hold one.
#[derive(Clone, Copy)]
struct Conversation {
    store: ProviderStore,
    stores: RwSignal<Option<Stores>, LocalStorage>,
    session: StoredValue<Session, LocalStorage>,
    /// Set when the chat is embedded (the widget).
    embed: StoredValue<Option<Embed>, LocalStorage>,
    /// Answers the turn's page tool calls, approvals and questions.
    page: StoredValue<Rc<AppPage>, LocalStorage>,
    cards: Cards,
    /// What the model is sent: the thread as the agent left it.
    messages: RwSignal<Vec<Message>>,
    /// What the page shows.
    entries: RwSignal<Vec<Entry>>,
    next_id: StoredValue<usize>,
    input: RwSignal<String>,
    streaming: RwSignal<bool>,
    /// A kept thread is being read.
    opening: RwSignal<bool>,
    /// How many of the first entries are not drawn (yet).
    hidden: RwSignal<usize>,
    /// The message being edited (its entry), and the edit.
    editing: RwSignal<Option<usize>>,
    edit: RwSignal<String>,
    /// Unsent words per conversation (`new` for one not yet kept).
    drafts: StoredValue<std::collections::HashMap<String, String>>,
    /// The turn in flight, for Stop: its runtime worker and id there.
    abort: StoredValue<Option<(Rc<Runtime>, u64)>, LocalStorage>,
    /// The reply of the turn in flight when it asked the in-browser model: the model's
    /// statuses, broadcast by the runtime worker, go to it.
    loading: StoredValue<Option<RwSignal<Reply>>>,
    /// Which conversation this is: Clear starts another, and a turn of an
    /// earlier one writes nothing when it ends.
    epoch: StoredValue<usize>,
    /// The kept thread on show (`kiln_store::threads`), made with its first message.
    thread: RwSignal<Option<String>>,
    /// Where the page is: a new thread's id goes into the URL.
    router: Router,
    /// The chat's own reactive owner, which each reply's signal belongs to: a turn
    /// sent from a row of the list (Retry) must not die with that row.
    owner: StoredValue<Option<Owner>, LocalStorage>,
    /// The workspace's agents, which the picker lists; `None` when embedded (the
    /// widget's agent is its deployment's).
    agents: Option<WorkspaceAgents>,
    /// The agent the next turn goes to, by slug.
    agent: RwSignal<String>,
    /// A reply's limits as Settings keeps them (the app's chat; `None` inside:
    /// Kiln's defaults).
    limits: Option<RwSignal<Option<TurnLimits>>>,
    /// The agents picked in this tab for kept threads since they were opened, by
    /// thread id (a thread records the agent it was made with).
    picked: StoredValue<std::collections::HashMap<String, String>>,
    textarea: NodeRef<leptos::html::Textarea>,
    list: NodeRef<leptos::html::Ol>,
}

impl Conversation {
    fn new(
        store: ProviderStore,
        stores: RwSignal<Option<Stores>, LocalStorage>,
        session: StoredValue<Session, LocalStorage>,
        router: Router,
        embed: Option<Embed>,
        agents: Option<WorkspaceAgents>,
    ) -> Self {
        let (approval, set_approval) = signal(None::<ApprovalRequest>);
        let (waiting, set_waiting) = signal(0_usize);
        let (yes_no, set_yes_no) = signal(None::<String>);
        let embedded = embed.is_some();
        let page = AppPage {
            tools: embed.as_ref().map(|embed| embed.tools.clone()),
            asker: Asker::new(set_yes_no),
            approver: PageApprover::new(set_approval, set_waiting),
            person: Some(Person::new()),
        };
        Self {
            store,
            stores,
            session,
            embed: StoredValue::new_local(embed),
            page: StoredValue::new_local(Rc::new(page)),
            cards: Cards {
                approval,
                waiting,
                yes_no,
            },
            messages: RwSignal::new(Vec::new()),
            entries: RwSignal::new(Vec::new()),
            next_id: StoredValue::new(0),
            input: RwSignal::new(String::new()),
            streaming: RwSignal::new(false),
            opening: RwSignal::new(false),
            hidden: RwSignal::new(0),
            editing: RwSignal::new(None),
            edit: RwSignal::new(String::new()),
            drafts: StoredValue::new(std::collections::HashMap::new()),
            abort: StoredValue::new_local(None),
            loading: StoredValue::new(None),
            epoch: StoredValue::new(0),
            thread: RwSignal::new(None),
            router,
            owner: StoredValue::new_local(Owner::current()),
            agents: agents.filter(|_| !embedded),
            agent: RwSignal::new(if embedded {
                DEFAULT_AGENT.to_owned()
            } else {
                tab_agent()
            }),
            picked: StoredValue::new(std::collections::HashMap::new()),
            limits: use_context::<crate::settings_panel::Limits>().map(|limits| limits.0),
            textarea: NodeRef::new(),
            list: NodeRef::new(),
        }
    }

    fn person(self) -> Option<Person> {
        self.page.with_value(|page| page.person.clone())
    }

    /// Shows `items` after what is shown, in one change of the list (a thread
    /// reopened is drawn once, not once per message).
    fn push_all(self, items: Vec<Item>) {
        let first = self.next_id.get_value();
        self.next_id.set_value(first + items.len());
        self.entries.update(|entries| {
            entries.extend(items.into_iter().enumerate().map(|(n, item)| Entry {
                id: first + n,
                item,
            }));
        });
    }

    /// Draws `WINDOW` more of the earlier messages, keeping in view what the person
    /// was reading.
    fn show_earlier(self) {
        let hidden = self.hidden.get_untracked();
        if hidden == 0 {
            return;
        }
        // What is below the top of the view stays where it is: its distance from the
        // list's end is kept once the earlier messages are drawn above it.
        let from_end = self
            .list
            .get_untracked()
            .map(|list| list.scroll_height() - list.scroll_top());
        self.hidden.set(hidden.saturating_sub(WINDOW));
        request_animation_frame(move || {
            if let (Some(list), Some(from_end)) = (self.list.get_untracked(), from_end) {
                list.set_scroll_top(list.scroll_height() - from_end);
            }
        });
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

    /// Follows the in-browser model's loading, which the runtime worker broadcasts, into
    /// the reply of the turn waiting on it.
    fn follow_model(self) {
        let store = self.store;
        spawn_local(async move {
            // Without a runtime worker no turn runs, and the send says why.
            if let Ok(runtime) = store.runtime().await {
                runtime.on_model_status(Rc::new(move |status| self.model_status(&status)));
            }
        });
    }

    fn model_status(self, status: &ModelStatus) {
        // Statuses that come while no turn of this chat waits on the model (another
        // exchange asked for it) are not this chat's to show.
        let Some(Some(reply)) = self.loading.try_get_value() else {
            return;
        };
        let line = ModelLine::new(status);
        // Progress comes in small steps: only a change of the text is drawn.
        if reply.try_with_untracked(|reply| reply.loading.as_ref() == Some(&line)) != Some(false) {
            return;
        }
        let following = self.at_end();
        reply.update(|reply| reply.loading = Some(line));
        if following {
            self.scroll_soon();
        }
    }

    /// Sends what is typed to the chosen provider, as the next agent turn.
    fn send(self) {
        if self.streaming.get_untracked() {
            return;
        }
        let text = self.input.get_untracked();
        if text.trim().is_empty() || self.store.current().is_none() {
            return;
        }
        self.input.set(String::new());
        self.keep_draft();
        self.send_text(text);
    }

    /// The draft's key: the conversation on show.
    fn draft_key(self) -> String {
        self.thread
            .get_untracked()
            .unwrap_or_else(|| "new".to_owned())
    }

    /// Keeps what is typed for this conversation, for when the person comes back to it.
    fn keep_draft(self) {
        let key = self.draft_key();
        let text = self.input.get_untracked();
        self.drafts.update_value(|drafts| {
            if text.is_empty() {
                drafts.remove(&key);
            } else {
                drafts.insert(key, text);
            }
        });
    }

    /// Shows the draft kept for the conversation now on show.
    fn show_draft(self) {
        let key = self.draft_key();
        let text = self
            .drafts
            .with_value(|drafts| drafts.get(&key).cloned())
            .unwrap_or_default();
        self.input.set(text);
    }

    /// Which of the person's messages entry `id` is (0 for the first).
    fn user_turn(self, id: usize) -> usize {
        self.entries.with_untracked(|entries| {
            entries
                .iter()
                .take_while(|entry| entry.id != id)
                .filter(|entry| matches!(entry.item, Item::User(_)))
                .count()
        })
    }

    /// Sends `text` again in place of the person's message number `turn` (and all
    /// after it): in a new thread that keeps what came before (`fork`: editing a
    /// message leaves the original conversation as it was), or in this one, cut there
    /// (regenerating the last reply, retrying a failed one). An unkept conversation
    /// (its store unavailable) is cut on the page only.
    fn redo(self, turn: usize, text: String, fork: bool) {
        if self.streaming.get_untracked() {
            return;
        }
        let (Some(thread), Some(stores)) =
            (self.thread.get_untracked(), self.stores.get_untracked())
        else {
            // Nothing kept: the page's own list is all there is.
            let cut = self.entries.with_untracked(|entries| {
                entries
                    .iter()
                    .filter(|entry| matches!(entry.item, Item::User(_)))
                    .nth(turn)
                    .map(|entry| entry.id)
            });
            if let Some(cut) = cut {
                self.entries
                    .update(|entries| entries.retain(|entry| entry.id < cut));
            }
            self.send_text(text);
            return;
        };
        self.streaming.set(true);
        let epoch = self.epoch.get_value();
        spawn_local(async move {
            let redone = async {
                let kept: Kept = stores.op("threads.open", json!({"id": thread})).await?;
                let seq = kept
                    .messages
                    .iter()
                    .filter(|message| message.role == "user")
                    .nth(turn)
                    .map_or(kept.thread.n_messages + 1, |message| message.seq);
                if fork {
                    stores
                        .op::<Kept>("threads.fork", json!({"id": thread, "seq": seq}))
                        .await
                } else {
                    stores
                        .act("threads.truncate", json!({"id": thread, "seq": seq}))
                        .await?;
                    stores
                        .op::<Kept>("threads.open", json!({"id": thread}))
                        .await
                }
            }
            .await;
            if self.epoch.get_value() != epoch {
                return;
            }
            self.streaming.set(false);
            match redone {
                Ok(kept) => {
                    let id = kept.thread.id.clone();
                    self.show(kept);
                    if fork {
                        remember_thread(Some(&id));
                        self.router.go(Route::Chat(Some(id)), false);
                    }
                    self.send_text(text);
                }
                Err(problem) => {
                    let error =
                        ErrorText::with_prefix("The message was not sent again: ", &problem);
                    self.push(Item::Error {
                        text: error.message,
                        hint: error.hint,
                    });
                }
            }
        });
    }

    /// Whether entry `id` is the last reply of the conversation.
    fn is_last(self, id: usize) -> bool {
        self.entries.with(|entries| {
            entries
                .iter()
                .rev()
                .find(|entry| matches!(entry.item, Item::Assistant(_)))
                .is_some_and(|entry| entry.id == id)
        })
    }

    /// Asks for the last reply again: the person's last message is sent again in
    /// its place.
    fn regenerate(self) {
        let last = self.entries.with_untracked(|entries| {
            entries.iter().rev().find_map(|entry| match &entry.item {
                Item::User(text) => Some((entry.id, text.clone())),
                _ => None,
            })
        });
        if let Some((id, text)) = last {
            self.redo(self.user_turn(id), text, false);
        }
    }

    /// Shows kept conversation `kept` in place of what is on show.
    fn show(self, kept: Kept) {
        self.clear();
        self.thread.set(Some(kept.thread.id.clone()));
        // The agent picked for it in this tab, else the one it was made with.
        let agent = self
            .picked
            .with_value(|picked| picked.get(&kept.thread.id).cloned())
            .unwrap_or_else(|| kept.thread.agent.clone());
        if self.agents.is_some() {
            self.agent.set(agent);
        }
        let owner = self.owner.get_value();
        let items = restored(kept.messages, owner.as_ref());
        // A long thread opens on its last messages; the earlier ones are drawn when
        // the person asks for them.
        self.hidden.set(items.len().saturating_sub(WINDOW));
        self.push_all(items);
        self.messages.set(kept.context);
        self.show_draft();
        self.scroll_soon();
    }

    /// Sends the message of a turn the in-browser model failed again, in its place.
    fn retry(self, error_id: usize, failed: &ModelError) {
        if self.streaming.get_untracked() || self.store.current().is_none() {
            return;
        }
        let turn = self.user_turn(failed.user_id);
        self.entries.update(|entries| {
            entries.retain(|entry| entry.id != error_id && entry.id != failed.user_id);
        });
        self.redo(turn, failed.message.clone(), false);
    }

    /// Sends `text` to the chosen provider, as the next agent turn.
    fn send_text(self, text: String) {
        let Some(entry) = self.store.current() else {
            return;
        };
        let provider = entry.provider;
        let token = self
            .embed
            .with_value(|embed| embed.as_ref().and_then(|embed| embed.token.clone()))
            .filter(|_| entry.origin == crate::chat_model::Origin::Local);
        let slug = self.agent.get_untracked();
        let agent = self.agents.and_then(|agents| agents.find(&slug));
        // An agent that names its own provider or model is answered by them.
        let (provider_name, model) =
            reply_header(agent.as_ref(), &provider.name, &provider.model, |name| {
                self.store.with_saved(|saved| {
                    saved
                        .iter()
                        .find(|saved| saved.name == name)
                        .map(|saved| saved.model.clone())
                })
            });
        let own_provider = agent
            .as_ref()
            .is_some_and(|agent| !agent.provider.is_empty());
        let in_browser = provider.kind == ProviderKind::InProcess && !own_provider;
        // A reply's limits: Settings' (the app's), else Kiln's defaults.
        let limits = self.limits.and_then(|limits| limits.get_untracked());
        let guards = limits.map_or_else(Guards::default, TurnLimits::guards);
        let before = self.messages.get_untracked();
        self.messages
            .update(|messages| messages.push(Message::User { text: text.clone() }));
        let user_id = self.push(Item::User(text.clone()));
        let reply = Reply {
            provider: provider_name,
            model,
            in_browser,
            loading: None,
            view: TurnView::new(guards),
            broken: false,
        };
        let reply = match self.owner.get_value() {
            Some(owner) => owner.with(|| RwSignal::new(reply)),
            None => RwSignal::new(reply),
        };
        let reply_id = self.push(Item::Assistant(reply));
        self.loading.set_value(in_browser.then_some(reply));
        self.streaming.set(true);
        let epoch = self.epoch.get_value();
        let mut request = self.session.with_value(|session| session());
        request["provider"] = provider.wire();
        request["messages"] = json!(self.messages.get_untracked());
        request["options"] = json!(ChatOptions::new(provider.model.clone()));
        if limits.is_some() {
            request["guards"] = json!(guards);
        }
        for_agent(&mut request, &slug);
        self.focus_box();
        self.scroll_soon();
        spawn_local(async move {
            // The turn is kept in the thread on show, or a new one made with this
            // message; a store that fails does not stop the chat.
            if let Some(thread) = self.kept_thread(epoch, &text, &slug).await {
                request["thread"] = thread.into();
            }
            let end = match token {
                None => self.turn(request, reply).await,
                Some(token) => match token().await {
                    Ok(token) => {
                        request["provider"]["key"] = token.into();
                        self.turn(request, reply).await
                    }
                    Err(why) => TurnEnd::Failed(Some(crate::storage::runtime_problem(format!(
                        "the page gave no token for the site's model: {why}"
                    )))),
                },
            };
            let following = self.at_end();
            if self.epoch.get_value() != epoch {
                return;
            }
            self.loading.set_value(None);
            self.withdraw_cards();
            // The model's status line goes with the turn (a turn stopped during the
            // download leaves none behind); the note that it loaded stays.
            let mut model_failure = None;
            reply.update(|reply| match reply.loading.take() {
                Some(ModelLine::Failed { message, hint }) => model_failure = Some((message, hint)),
                Some(ModelLine::Working(_)) | None => {}
                ready @ Some(ModelLine::Ready { .. }) => reply.loading = ready,
            });
            let text_sent = text;
            match end {
                TurnEnd::Ended(result, _) if result.stop.reason == StopReason::Provider => {
                    self.messages.set(before);
                    let mended =
                        model_failure.is_some() || is_model_failure(result.stop.code.as_deref());
                    // The model's own words when it said why it could not load: they name the
                    // file and the cause without the provider's address around them.
                    let (text, hint) =
                        model_failure.unwrap_or_else(|| provider_failure(&result.stop));
                    let item = if in_browser && mended {
                        Item::ModelError(ModelError {
                            text,
                            hint,
                            message: text_sent,
                            user_id,
                        })
                    } else {
                        Item::Error { text, hint }
                    };
                    self.failed(reply, reply_id, item);
                }
                TurnEnd::Ended(result, continued) => {
                    reply.update(|reply| reply.view.done(&result));
                    self.embed.with_value(|embed| {
                        if let Some(embed) = embed {
                            (embed.on_reply)(&result);
                        }
                    });
                    if let Some(why) = &continued.not_kept {
                        self.push(Item::Error {
                            text: format!("This reply was not kept in the conversation: {why}"),
                            hint: Some("It stays on this page until you reload.".into()),
                        });
                    }
                    self.continue_from(before, continued, &result);
                }
                TurnEnd::Failed(failure) => {
                    let (text, hint) = match failure {
                        Some(error) => {
                            let error = ErrorText::new(&error);
                            (error.message, error.hint)
                        }
                        None => ("The reply ended without its last part.".to_owned(), None),
                    };
                    self.messages.set(before);
                    self.failed(reply, reply_id, Item::Error { text, hint });
                }
            }
            self.abort.set_value(None);
            self.streaming.set(false);
            if following {
                self.scroll_soon();
            }
        });
    }

    /// Runs the agent turn `request` in the runtime worker, `reply` following its events.
    async fn turn(self, request: Value, reply: RwSignal<Reply>) -> TurnEnd {
        let on_event = Rc::new(move |event: ExchangeEvent| {
            // The model's loading shows through the chat's own status line;
            // a program's progress on its running action.
            let event = match event {
                ExchangeEvent::Agent(event) => event,
                ExchangeEvent::Progress {
                    node: None,
                    progress,
                } => {
                    reply.update(|reply| reply.view.progressed(progress));
                    return;
                }
                _ => return,
            };
            let following = self.at_end();
            reply.update(|reply| reply.view.apply(event));
            if following {
                self.scroll_soon();
            }
        });
        let runtime = match self.store.runtime().await {
            Ok(runtime) => runtime,
            Err(problem) => return TurnEnd::Failed(Some(problem)),
        };
        let page: Rc<dyn PageSide> = self.page.get_value();
        let (id, done) = runtime.agent(request, on_event, page);
        self.abort.set_value(Some((runtime.clone(), id)));
        match done.await {
            Ok(Ok(mut value)) => {
                let mut take = |field: &str| {
                    value
                        .as_object_mut()
                        .and_then(|object| object.remove(field))
                };
                let messages = take("messages")
                    .and_then(|messages| serde_json::from_value::<Vec<Message>>(messages).ok());
                let next = take("next")
                    .and_then(|messages| serde_json::from_value::<Vec<Message>>(messages).ok());
                let not_kept =
                    take("thread_problem").and_then(|problem| problem.as_str().map(str::to_owned));
                let continued = Continued {
                    messages,
                    next,
                    not_kept,
                };
                match serde_json::from_value::<AgentResult>(value) {
                    Ok(result) => TurnEnd::Ended(Box::new(result), continued),
                    Err(error) => TurnEnd::Failed(Some(crate::storage::runtime_problem(format!(
                        "the runtime worker's answer is not readable: {error}"
                    )))),
                }
            }
            Ok(Err(problem)) => TurnEnd::Failed(Some(problem)),
            Err(_) => TurnEnd::Failed(Some(crate::storage::runtime_problem(
                "the runtime worker went away during the reply",
            ))),
        }
    }

    /// The turn ran: the next one continues from its thread. A turn stopped
    /// before anything was answered leaves the question out too, so that
    /// turns keep alternating.
    fn continue_from(self, before: Vec<Message>, continued: Continued, result: &AgentResult) {
        if let Some(next) = continued.next {
            self.messages.set(next);
            return;
        }
        let thread = continued.messages.unwrap_or_else(|| {
            let mut messages = self.messages.get_untracked();
            if !result.text.is_empty() {
                messages.push(Message::Assistant {
                    text: result.text.clone(),
                    tool_calls: Vec::new(),
                });
            }
            messages
        });
        if matches!(thread.last(), Some(Message::User { .. }) | None) {
            self.messages.set(before);
        } else {
            self.messages.set(thread);
        }
    }

    /// The turn failed: the exchange leaves what the model is sent, and the
    /// error (`Item::Error` or `Item::ModelError`) is shown.
    fn failed(self, reply: RwSignal<Reply>, reply_id: usize, error: Item) {
        // A reply that never started is only the error; one cut short keeps
        // what came.
        if reply.with_untracked(|reply| reply.view.is_empty()) {
            self.entries
                .update(|entries| entries.retain(|entry| entry.id != reply_id));
        } else {
            // The error below says how the turn ended; the reply's own end line would say
            // it a second time.
            reply.update(|reply| {
                reply.broken = true;
                reply.view.end = None;
            });
        }
        if let Item::Error { text, .. } | Item::ModelError(ModelError { text, .. }) = &error {
            self.embed.with_value(|embed| {
                if let Some(embed) = embed {
                    (embed.on_error)(text);
                }
            });
        }
        self.push(error);
    }

    /// The turn ended: its open cards have nobody to answer for.
    fn withdraw_cards(self) {
        self.page.with_value(|page| {
            page.asker.withdraw();
            page.approver.withdraw();
            if let Some(person) = &page.person {
                person.withdraw();
            }
        });
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
        self.keep_draft();
        self.input.set(String::new());
        self.editing.set(None);
        self.stop();
        self.withdraw_cards();
        self.abort.set_value(None);
        self.loading.set_value(None);
        self.epoch.set_value(self.epoch.get_value() + 1);
        self.thread.set(None);
        self.opening.set(false);
        self.hidden.set(0);
        self.streaming.set(false);
        self.messages.set(Vec::new());
        self.entries.set(Vec::new());
        // A new conversation goes to the agent last picked in this tab.
        if self.agents.is_some() {
            self.agent.set(tab_agent());
        }
    }

    /// The person picked agent `slug`: for the conversation on show, and for the
    /// next new one in this tab.
    fn pick_agent(self, slug: String) {
        if let Some(thread) = self.thread.get_untracked() {
            self.picked.update_value(|picked| {
                picked.insert(thread, slug.clone());
            });
        }
        remember_tab_agent(&slug);
        self.agent.set(slug);
    }

    /// The kept thread this turn goes in: the one on show, or a new one titled after
    /// `first` and recording `agent`, which the URL then names. `None` when the store
    /// is unavailable or refuses (the chat goes on unkept), or the conversation changed
    /// meanwhile.
    async fn kept_thread(self, epoch: usize, first: &str, agent: &str) -> Option<String> {
        if let Some(thread) = self.thread.get_untracked() {
            return Some(thread);
        }
        let stores = self.stores.get_untracked()?;
        let made: Result<Thread, _> = stores
            .op(
                "threads.create",
                json!({"first_message": first, "agent": agent}),
            )
            .await;
        let thread = match made {
            Ok(thread) => thread,
            Err(problem) => {
                let error =
                    ErrorText::with_prefix("This conversation is not being kept: ", &problem);
                self.push(Item::Error {
                    text: error.message,
                    hint: error.hint,
                });
                return None;
            }
        };
        if self.epoch.get_value() != epoch {
            return None;
        }
        self.thread.set(Some(thread.id.clone()));
        remember_thread(Some(&thread.id));
        self.router.go(Route::Chat(Some(thread.id.clone())), true);
        Some(thread.id)
    }

    /// Shows kept thread `id`: its messages as they were, and what the model reads
    /// next. A thread that cannot be opened says why, and a new conversation starts.
    fn open(self, id: String) {
        self.clear();
        self.thread.set(Some(id.clone()));
        let epoch = self.epoch.get_value();
        let Some(stores) = self.stores.get_untracked() else {
            return;
        };
        self.opening.set(true);
        spawn_local(async move {
            let opened: Result<Kept, _> = stores.op("threads.open", json!({"id": id})).await;
            if self.epoch.get_value() != epoch {
                return;
            }
            self.opening.set(false);
            match opened {
                Ok(conversation) => {
                    remember_thread(Some(&id));
                    self.show(conversation);
                    // Drawn on the next frame: `cargo xtask bench` reads the time to it.
                    request_animation_frame(|| {
                        crate::editor::performance_mark("kiln:thread-shown")
                    });
                }
                Err(problem) => {
                    remember_thread(None);
                    self.thread.set(None);
                    let error =
                        ErrorText::with_prefix("This conversation could not be opened: ", &problem);
                    self.push(Item::Error {
                        text: error.message,
                        hint: Some(error.hint.unwrap_or_else(|| "It may have been deleted in another tab; the list on the left has the ones kept.".into())),
                    });
                }
            }
        });
    }
}

/// How many messages of a reopened thread are drawn at first, and each time
/// the person asks for the earlier ones.
const WINDOW: usize = 60;

/// The thread a bare visit reopens (`localStorage`), or none.
pub(crate) fn remember_thread(id: Option<&str>) {
    let Some(storage) = web_sys::window().and_then(|window| window.local_storage().ok().flatten())
    else {
        return;
    };
    let _ = match id {
        Some(id) => storage.set_item(LAST_THREAD, id),
        None => storage.remove_item(LAST_THREAD),
    };
}

/// The thread the person had open last in this browser.
pub(crate) fn last_thread() -> Option<String> {
    web_sys::window()
        .and_then(|window| window.local_storage().ok().flatten())
        .and_then(|storage| storage.get_item(LAST_THREAD).ok().flatten())
}

const LAST_THREAD: &str = "kiln:last-thread";

/// The agent last picked in this tab (`sessionStorage`): a reload keeps it.
const TAB_AGENT: &str = "kiln:agent";

fn tab_agent() -> String {
    web_sys::window()
        .and_then(|window| window.session_storage().ok().flatten())
        .and_then(|storage| storage.get_item(TAB_AGENT).ok().flatten())
        .filter(|slug| kiln_types::profile::check_slug(slug).is_ok())
        .unwrap_or_else(|| DEFAULT_AGENT.to_owned())
}

fn remember_tab_agent(slug: &str) {
    if let Some(storage) =
        web_sys::window().and_then(|window| window.session_storage().ok().flatten())
    {
        // A full sessionStorage costs the pick across a reload, nothing else.
        let _ = storage.set_item(TAB_AGENT, slug);
    }
}

/// A kept thread's messages as the chat shows them: the person's words, each
/// agent turn folded from its events exactly as it streamed, and each failure.
fn restored(messages: Vec<ThreadMessage>, owner: Option<&Owner>) -> Vec<Item> {
    let mut items = Vec::new();
    for message in messages {
        if message.role == "user" {
            items.push(Item::User(message.text));
            continue;
        }
        let provider_stop = message.events.iter().rev().find_map(|event| match event {
            AgentEvent::Done { result } if result.stop.reason == StopReason::Provider => {
                Some(provider_failure(&result.stop))
            }
            _ => None,
        });
        let mut view = TurnView::new(Guards::default());
        if message.events.is_empty() && !message.text.is_empty() {
            // A message kept without a turn's steps (a page's `kiln.threads.append`).
            view.steps.push(Step::Text(message.text.clone()));
        }
        for event in message.events {
            view.apply(event);
        }
        let shows_reply = !view.is_empty();
        let broken = provider_stop.is_some() || message.failure.is_some();
        if shows_reply {
            if broken {
                view.end = None;
            }
            let reply = Reply {
                provider: message.provider.clone(),
                model: message.model.clone(),
                in_browser: false,
                loading: None,
                view,
                broken,
            };
            items.push(Item::Assistant(match owner {
                Some(owner) => owner.with(|| RwSignal::new(reply)),
                None => RwSignal::new(reply),
            }));
        }
        if let Some(failure) = message.failure {
            items.push(Item::Error {
                text: failure.message,
                hint: failure.hint,
            });
        } else if let Some((text, hint)) = provider_stop {
            items.push(Item::Error { text, hint });
        }
    }
    items
}

/// The chat: the provider, the conversation, the message box. Each turn is
/// an agent turn: the model acts by writing programs over the session's tools.
#[component]
pub(crate) fn Chat(
    store: ProviderStore,
    stores: RwSignal<Option<crate::storage::Stores>, LocalStorage>,
    session: StoredValue<Session, LocalStorage>,
    router: Router,
    /// Set when the chat is embedded (the widget).
    #[prop(optional)]
    embed: Option<Embed>,
    /// The workspace's agents, for the agent picker (the app's chat).
    #[prop(optional)]
    agents: Option<WorkspaceAgents>,
) -> impl IntoView {
    let greeting = embed.as_ref().map(|embed| embed.greeting.clone());
    let embedded = embed.is_some();
    let inbox = embed.as_ref().map(|embed| embed.inbox);
    let chat = Conversation::new(store, stores, session, router, embed, agents);
    chat.follow_model();
    // An agent deleted (in another tab, say) while picked: the default agent answers.
    if let Some(agents) = chat.agents {
        Effect::new(move || {
            let wanted = chat.agent.get();
            let settled = agents
                .list
                .with(|list| settle_choice(&wanted, list, agents.loaded.get()));
            if settled != wanted {
                chat.agent.set(settled);
            }
        });
    }
    // The Activity panel (the app's) follows the newest reply of the conversation on
    // show: a new turn, or another conversation opened, shows there as it comes.
    if let Some(activity) = use_context::<crate::activity::Activity>() {
        Effect::new(move |shown: Option<Option<usize>>| {
            let newest = chat.entries.with(|entries| {
                entries.iter().rev().find_map(|entry| match &entry.item {
                    Item::Assistant(reply) => Some((entry.id, *reply)),
                    _ => None,
                })
            });
            let id = newest.map(|(id, _)| id);
            if shown.flatten() != id {
                match newest {
                    Some((_, reply)) => activity.show(reply_turn(reply), None),
                    None => {
                        activity.turn.set(None);
                        activity.picked.set(None);
                    }
                }
            }
            id
        });
    }
    // The conversation follows the URL: `#/chat/ID` shows kept thread ID (once the
    // store is open), `#/chat` a new one; other views leave it as it is.
    Effect::new(move |before: Option<()>| {
        let route = router.route.get();
        let Route::Chat(wanted) = route else {
            return;
        };
        match wanted {
            // The store is waited for (and followed) only when a kept thread is wanted.
            Some(id) => {
                if chat
                    .thread
                    .with_untracked(|thread| thread.as_ref() != Some(&id))
                    && stores.with(Option::is_some)
                {
                    chat.open(id);
                }
            }
            // A new conversation; a New chat asked while an unkept one is on show
            // (its store unavailable) starts afresh too.
            None => {
                // A new conversation is what a chat starts with: nothing to clear then
                // (and a message sent from outside before this first run stays).
                if before.is_none()
                    || (chat.thread.with_untracked(Option::is_none)
                        && chat.entries.with_untracked(Vec::is_empty))
                {
                    return;
                }
                chat.clear();
                chat.show_draft();
                remember_thread(None);
            }
        }
    });
    // A message sent from outside goes as if typed, once a provider is there and no
    // turn is running. Made after the route's effect, which runs first: its first run
    // settles which conversation is on show, and must not clear a message sent meanwhile.
    if let Some(inbox) = inbox {
        Effect::new(move || {
            let waiting = inbox.with(|inbox| !inbox.is_empty());
            if waiting
                && !chat.streaming.get()
                && chat.store.current().is_some()
                && let Some(text) = inbox
                    .try_update(std::collections::VecDeque::pop_front)
                    .flatten()
            {
                chat.send_text(text);
            }
        });
    }
    let cards = chat.cards;
    let approver = chat.page.with_value(|page| page.approver.clone());
    let asker = chat.page.with_value(|page| page.asker.clone());
    let person = chat.person();
    view! {
        <section class="chat" data-testid="chat" aria-labelledby="chat-title">
            <h2 id="chat-title" class="md-sr-only">"Chat"</h2>
            {move || store.notice.get().map(|notice| view! {
                <p class="chat-notice" data-testid="providers-notice" role="status">{said(notice)}</p>
            })}
            <ChatBar chat=chat />
            {move || (chat.entries.with(Vec::is_empty) && !chat.opening.get()).then(|| match greeting.clone() {
                None => view! { <ChatWelcome chat=chat /> }.into_any(),
                Some(greeting) => view! {
                    <div class="chat-welcome" data-testid="chat-welcome">
                        <p class="welcome-title">{greeting.unwrap_or_else(|| "How can I help?".to_owned())}</p>
                    </div>
                }.into_any(),
            })}
            <ol class="chat-messages" data-testid="chat-messages" aria-live="polite" aria-label="Conversation" node_ref=chat.list
                class:empty=move || chat.entries.with(Vec::is_empty) aria-busy=move || chat.opening.get().to_string()>
                // One element while there is more to draw, so the focus stays on it.
                <li class="earlier" hidden=move || chat.hidden.get() == 0>
                    <button type="button" class="secondary small" data-testid="chat-earlier"
                        on:click=move |_| chat.show_earlier()>{move || format!("Show earlier messages ({} more)", chat.hidden.get())}</button>
                </li>
                <For each=move || {
                    let hidden = chat.hidden.get();
                    chat.entries.with(|entries| entries[hidden.min(entries.len())..].to_vec())
                } key=|entry| entry.id let:entry>
                    {entry_view(entry, chat)}
                </For>
            </ol>
            {move || chat.opening.get().then(|| view! { <p class="hint loading" data-testid="chat-opening">"Opening the conversation\u{2026}"</p> })}
            <div class="chat-cards" data-testid="chat-cards">
                <ApprovalCard request=cards.approval waiting=cards.waiting approver=approver id="chat-approval" />
                <QuestionCard question=cards.yes_no asker=asker id="chat-question" />
                {person.map(|person| view! { <AskCard person=person /> })}
            </div>
            {(!embedded).then(|| view! {
                <crate::data_panel::KeepOffer kept=Signal::derive(move || chat.thread.with(Option::is_some)) />
            })}
            <MessageBox chat=chat />
        </section>
    }
}

/// A reply's turn, live, for the Activity panel.
fn reply_turn(reply: RwSignal<Reply>) -> Signal<TurnView> {
    Signal::derive(move || reply.with(|reply| reply.view.clone()))
}

/// What a new conversation shows: what the agent is, and a few first messages
/// that show it act (each sends itself with the provider chosen).
#[component]
fn ChatWelcome(chat: Conversation) -> impl IntoView {
    const STARTERS: [&str; 3] = [
        "What is 6 × 7? Work it out with a program.",
        "What time is it? Use the clock tool.",
        "Remember that my favourite colour is green.",
    ];
    view! {
        <div class="chat-welcome" data-testid="chat-welcome">
            <p class="welcome-title">"What should the agent do?"</p>
            <p class="hint">"It answers by writing JavaScript that calls its tools (the app\u{2019}s own, your MCP servers, the workspace\u{2019}s memory and files). Each program runs in a sandbox in this browser, within the permissions under "<a href="#/settings">"Settings"</a>"."</p>
            <ul class="starters">
                {STARTERS.iter().map(|text| view! {
                    <li><button type="button" class="starter" data-testid="chat-starter"
                        disabled=move || chat.streaming.get() || chat.store.current().is_none()
                        on:click=move |_| chat.send_text((*text).to_owned())>{*text}</button></li>
                }).collect_view()}
            </ul>
        </div>
    }
}

/// The agent's `ask_user` question, answered in writing.
#[component]
fn AskCard(person: Person) -> impl IntoView {
    let question = person.question;
    let person = StoredValue::new_local(person);
    let answer = RwSignal::new(String::new());
    let field = NodeRef::<leptos::html::Input>::new();
    Effect::new(move || {
        if let Some(field) = field.get() {
            let _ = field.focus();
            field.scroll_into_view();
        }
    });
    move || {
        question.get().map(|text| {
            let said = move || {
                let text = answer.get_untracked();
                answer.set(String::new());
                person.with_value(|person| person.answer(Told::Said { text }));
            };
            let dismiss = move || {
                answer.set(String::new());
                person.with_value(|person| {
                    person.answer(Told::Unavailable {
                        reason: "the person chose not to answer".into(),
                    });
                });
            };
            view! {
                <section class="question ask" data-testid="chat-ask" role="alertdialog" aria-labelledby="chat-ask-title" aria-describedby="chat-ask-text">
                    <h2 id="chat-ask-title">"The agent asks you"</h2>
                    <p id="chat-ask-text" data-testid="chat-ask-text">{text}</p>
                    <form on:submit=move |event| { event.prevent_default(); said(); }>
                        <label for="chat-ask-answer">"Your answer"</label>
                        <input id="chat-ask-answer" data-testid="chat-ask-answer" type="text" autocomplete="off" node_ref=field
                            prop:value=answer on:input=move |event| answer.set(event_target_value(&event)) />
                        <div class="actions">
                            <button type="submit" data-testid="chat-ask-send">"Answer"</button>
                            <button type="button" class="secondary" data-testid="chat-ask-dismiss" on:click=move |_| dismiss()>"Don\u{2019}t answer"</button>
                        </div>
                    </form>
                    <p class="hint">"While you decide, the turn waits; the wait counts as person wait, not CPU."</p>
                </section>
            }
        })
    }
}

/// The provider the chat uses, and Clear.
#[component]
fn ChatBar(chat: Conversation) -> impl IntoView {
    let store = chat.store;
    let no_provider = move || store.entries().is_empty();
    let provider_options = move || store.options();
    view! {
        <div class="chat-bar" hidden=move || no_provider() && chat.entries.with(Vec::is_empty)>
            <label for="chat-provider">"Provider"</label>
            <select id="chat-provider" data-testid="chat-provider" disabled=move || chat.streaming.get() || no_provider()
                on:change=move |event| store.pick(event_target_value(&event))>
                {provider_options}
            </select>
            <button type="button" class="secondary small" data-testid="chat-clear"
                disabled=move || chat.entries.with(Vec::is_empty) && chat.thread.with(Option::is_none)
                on:click=move |_| { chat.router.go(Route::Chat(None), false); chat.focus_box(); }>"New chat"</button>
            {use_context::<crate::activity::Activity>().map(|activity| view! {
                <button type="button" class="secondary small activity-toggle" id="activity-toggle" data-testid="activity-toggle"
                    aria-controls="activity" aria-expanded=move || activity.open.get().to_string()
                    on:click=move |_| activity.open.update(|open| *open = !*open)>"Activity"</button>
            })}
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
    let in_browser = move || {
        chat.store
            .current()
            .is_some_and(|entry| entry.provider.kind == ProviderKind::InProcess)
    };
    view! {
        <form class="chat-form" on:submit=move |event| { event.prevent_default(); chat.send(); }>
            <label for="chat-input">"Message"</label>
            <textarea id="chat-input" data-testid="chat-input" rows="3" node_ref=chat.textarea
                placeholder="Ask something. Enter sends, Shift+Enter starts a new line."
                prop:value=chat.input on:input=move |event| chat.input.set(event_target_value(&event))
                on:keydown=on_keydown></textarea>
            <div class="actions">
                {chat.agents.map(|agents| view! { <AgentPicker chat=chat agents=agents /> })}
                <button type="submit" data-testid="chat-send" disabled=move || chat.streaming.get() || no_provider()>"Send"</button>
                {move || chat.streaming.get().then(|| view! {
                    <button type="button" class="secondary" data-testid="chat-stop" on:click=move |_| chat.stop()>"Stop"</button>
                })}
            </div>
            {move || in_browser().then(|| view! {
                <p class="hint" data-testid="chat-model-note">{IN_BROWSER_NOTE}</p>
            })}
        </form>
    }
}

/// Which of the workspace's agents answers: its badge and name; and, when it names
/// its own provider or model, which.
#[component]
fn AgentPicker(chat: Conversation, agents: WorkspaceAgents) -> impl IntoView {
    let options = move || {
        let chosen = chat.agent.get();
        let mut listed: Vec<(String, String)> = agents.list.with(|list| {
            list.iter()
                .map(|agent| {
                    (
                        agent.slug.clone(),
                        format!("{} {}", agent.badge(), agent.name),
                    )
                })
                .collect()
        });
        // Until the list is read: the agent a thread names, by its slug.
        if !listed.iter().any(|(slug, _)| *slug == chosen) {
            listed.push((chosen.clone(), chosen.clone()));
        }
        listed
            .into_iter()
            .map(|(slug, label)| {
                let selected = slug == chosen;
                view! { <option value=slug prop:selected=selected>{label}</option> }
            })
            .collect_view()
    };
    let own_model = move || {
        let slug = chat.agent.get();
        agents.list.with(|list| {
            list.iter()
                .find(|agent| agent.slug == slug)
                .filter(|agent| !(agent.provider.is_empty() && agent.model.is_empty()))
                .map(
                    |agent| match (agent.provider.as_str(), agent.model.as_str()) {
                        ("", model) => format!("model {model}"),
                        (provider, "") => provider.to_owned(),
                        (provider, model) => format!("{provider} · {model}"),
                    },
                )
        })
    };
    view! {
        <span class="chat-agent">
            <label for="chat-agent">"Agent"</label>
            <select id="chat-agent" data-testid="chat-agent" aria-describedby="chat-agent-model"
                disabled=move || chat.streaming.get()
                on:change=move |event| chat.pick_agent(event_target_value(&event))>{options}</select>
            <span class="hint" id="chat-agent-model" data-testid="chat-agent-model">{move || own_model().map(|line| format!("uses {line}"))}</span>
        </span>
    }
}

/// A reply's words: its text steps, one paragraph each.
fn reply_text(turn: &TurnView) -> String {
    turn.steps
        .iter()
        .filter_map(|step| match step {
            Step::Text(text) => Some(text.trim()),
            _ => None,
        })
        .filter(|text| !text.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// One item of the conversation as the list shows it.
fn entry_view(entry: Entry, chat: Conversation) -> AnyView {
    let streaming = chat.streaming;
    match entry.item {
        Item::User(text) => {
            let id = entry.id;
            let editing = move || chat.editing.get() == Some(id);
            let start_edit = {
                let text = text.clone();
                move |_| {
                    chat.edit.set(text.clone());
                    chat.editing.set(Some(id));
                }
            };
            let resend = move || {
                let edited = chat.edit.get_untracked();
                if edited.trim().is_empty() {
                    return;
                }
                chat.editing.set(None);
                chat.redo(chat.user_turn(id), edited, true);
            };
            let on_key = move |event: KeyboardEvent| match event.key().as_str() {
                "Enter" if !event.shift_key() && !event.is_composing() => {
                    event.prevent_default();
                    resend();
                }
                "Escape" => chat.editing.set(None),
                _ => {}
            };
            let shown = text.clone();
            view! {
                <li class="chat-message user" data-testid="chat-user">
                    <span class="who">"You"</span>
                    {move || if editing() {
                        view! {
                            <form class="edit-message" on:submit=move |event| { event.prevent_default(); resend(); }>
                                <textarea data-testid="chat-edit-input" aria-label="Edit your message" rows="3"
                                    prop:value=chat.edit on:input=move |event| chat.edit.set(event_target_value(&event))
                                    on:keydown=on_key autofocus></textarea>
                                <div class="actions">
                                    <button type="submit" class="small" data-testid="chat-edit-send">"Send"</button>
                                    <button type="button" class="secondary small" data-testid="chat-edit-cancel"
                                        on:click=move |_| chat.editing.set(None)>"Cancel"</button>
                                </div>
                                <p class="hint">"Sending starts a new conversation from here; this one stays as it is."</p>
                            </form>
                        }.into_any()
                    } else {
                        view! { <div class="text">{shown.clone()}</div> }.into_any()
                    }}
                    <div class="message-actions" hidden=move || editing() || streaming.get()>
                        <crate::markdown::CopyButton code=text.clone() name="Copy message" testid="chat-copy" />
                        <button type="button" class="md-copy" data-testid="chat-edit" aria-label="Edit and send again"
                            on:click=start_edit>"Edit"</button>
                    </div>
                </li>
            }
            .into_any()
        }
        Item::Assistant(reply) => {
            let waiting = move || {
                reply.with(|reply| {
                    reply.view.is_empty()
                        && reply.view.end.is_none()
                        && !reply.broken
                        && !matches!(reply.loading, Some(ModelLine::Working(_)))
                }) && streaming.get()
            };
            let opened = crate::plan_tree::Opened::new();
            // Its action blocks' "Details" show this reply in the Activity panel.
            provide_context(crate::activity::ReplyTurn(reply_turn(reply)));
            let steps = move || reply.with(|reply| turn_steps(&reply.view, "", opened));
            view! {
                <li class="chat-message assistant" data-testid="chat-assistant"
                    class:stopped=move || reply.with(|reply| reply.view.end.as_ref().is_some_and(|end| end.class == "cancelled"))
                    class:broken=move || reply.with(|reply| reply.broken)>
                    <span class="who">{move || reply.with(|reply| reply.provider.clone())}</span>
                    {reply.with_untracked(|reply| reply.in_browser).then(|| model_status_view(reply))}
                    {steps}
                    {move || waiting().then(|| view! { <p class="waiting hint">"Waiting for the reply…"</p> })}
                    {move || reply.with(|reply| reply.view.end.clone()).and_then(|end| end.value).map(|value| view! {
                        <pre class="finish-value" data-testid="chat-value" aria-label="The value it finished with">{card_lines(&value)}</pre>
                    })}
                    {move || reply.with(|reply| (reply.view.caps.turns > 0).then(|| reply.view.caps.line())).map(|line| view! {
                        <p class="caps" data-testid="chat-caps">{line}</p>
                    })}
                    {move || reply.with(|reply| {
                        reply.view.end.clone().map(|end| (end, usage_line(reply.view.usage), reply.view.model.clone().unwrap_or_else(|| reply.model.clone())))
                    }).map(|(end, usage, model)| {
                        view! {
                            <p class="chat-end" data-testid="chat-end">
                                <span class=format!("stop stop-{}", end.class) data-testid="chat-stop-reason">{end.label}</span>
                                {end.detail.map(|detail| view! { <span class="detail">" ("{detail}")"</span> })}
                                " · "<span data-testid="chat-usage">{usage}</span>
                                " · "<code>{model}</code>
                            </p>
                        }
                    })}
                    {move || reply.with(|reply| reply.view.end.is_some().then(|| reply_text(&reply.view))).map(|text| {
                        let id = entry.id;
                        view! {
                            <div class="message-actions" hidden=move || streaming.get()>
                                <crate::markdown::CopyButton code=text name="Copy reply" testid="chat-copy" />
                                {move || chat.is_last(id).then(|| view! {
                                    <button type="button" class="md-copy" data-testid="chat-regenerate"
                                        aria-label="Regenerate the reply" on:click=move |_| chat.regenerate()>"Regenerate"</button>
                                })}
                            </div>
                        }
                    })}
                </li>
            }
            .into_any()
        }
        Item::Error { text, hint } => view! {
            <li class="chat-message error" data-testid="chat-error" role="alert">
                <span class="who">"Error"</span>
                <p class="text">{said(text)}</p>
                {hint.map(|hint| view! { <p class="hint" data-testid="chat-error-hint">{said(hint)}</p> })}
                <p class="hint">"This exchange is left out of the conversation sent next time."</p>
            </li>
        }
        .into_any(),
        Item::ModelError(failed) => model_error_view(entry.id, failed, chat),
    }
}

/// The in-browser model's status line in a reply that waits on it (a live region, there
/// before the first status, so that each change is read out), then the note that it
/// loaded, with what could not be kept when something could not. A failure is left to
/// the error the turn ends with, which says it once.
fn model_status_view(reply: RwSignal<Reply>) -> impl IntoView {
    let line = move || reply.with(|reply| reply.loading.clone());
    let text = move || match line() {
        Some(ModelLine::Working(text)) => text,
        Some(ModelLine::Ready { note, .. }) => note,
        Some(ModelLine::Failed { .. }) | None => String::new(),
    };
    let warning = move || match line() {
        Some(ModelLine::Ready { warning, .. }) => warning,
        _ => None,
    };
    view! {
        <p class="hint" data-testid="chat-model-status" role="status" aria-live="polite"
            class:waiting=move || matches!(line(), Some(ModelLine::Working(_)))
            class:note=move || matches!(line(), Some(ModelLine::Ready { .. }))>{text}</p>
        {move || warning().map(|warning| view! {
            <p class="hint note" data-testid="chat-model-warning">{said(warning)}</p>
        })}
    }
}

/// The in-browser model could not be loaded: why, the hint, Retry (the same message
/// again) and Clear cached model (its files download afresh at the next message).
fn model_error_view(id: usize, failed: ModelError, chat: Conversation) -> AnyView {
    let cleared = RwSignal::new(None::<String>);
    let clearing = RwSignal::new(false);
    let clear = move || {
        clearing.set(true);
        cleared.set(Some("Deleting the cached model\u{2026}".to_owned()));
        spawn_local(async move {
            let said = match chat.store.clear_model().await {
                Ok(()) => "The cached model was deleted from this browser; it downloads again \
                           at the next message."
                    .to_owned(),
                Err(problem) => {
                    ErrorText::with_prefix("The cached model was not deleted: ", &problem)
                        .sentence()
                }
            };
            // The row may have gone meanwhile (Clear, or a retry).
            cleared.try_set(Some(said));
            clearing.try_set(false);
        });
    };
    let ModelError { text, hint, .. } = failed.clone();
    let failed = StoredValue::new(failed);
    // After the click is handled: the retry takes this row out of the list.
    let retry = move || {
        let failed = failed.get_value();
        spawn_local(async move { chat.retry(id, &failed) });
    };
    view! {
        <li class="chat-message error" data-testid="chat-error" role="alert">
            <span class="who">"Error"</span>
            <p class="text">{said(text)}</p>
            {hint.map(|hint| view! { <p class="hint" data-testid="chat-error-hint">{said(hint)}</p> })}
            <div class="actions">
                <button type="button" class="small" data-testid="chat-model-retry"
                    disabled=move || chat.streaming.get()
                    on:click=move |_| retry()>"Retry"</button>
                <button type="button" class="secondary small" data-testid="chat-model-clear"
                    disabled=move || chat.streaming.get() || clearing.get()
                    on:click=move |_| clear()>"Clear cached model"</button>
            </div>
            <p class="hint" data-testid="chat-model-cleared" role="status">{cleared}</p>
            <p class="hint">"This exchange is left out of the conversation sent next time."</p>
        </li>
    }
    .into_any()
}

/// What a model or a program wrote, shown line by line with its acting
/// characters escaped (its line breaks kept).
pub(crate) fn card_lines(text: &str) -> String {
    text.split('\n')
        .map(card_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A turn's steps (the person's turn, or a child's), numbering its actions;
/// `scope` keys the blocks a person opens.
pub(crate) fn turn_steps(
    turn: &TurnView,
    scope: &str,
    opened: crate::plan_tree::Opened,
) -> AnyView {
    let mut action = 0;
    turn.steps
        .iter()
        .cloned()
        .map(|step| {
            if matches!(step, Step::Action { .. }) {
                action += 1;
            }
            step_view(step, action, turn, scope, opened)
        })
        .collect_view()
        .into_any()
}

/// An action's program and what came of it (its refusal, console, calls,
/// error and result), as its block in the thread and the Activity panel
/// show them; `prefix` starts their test ids (`chat-action`, `activity`).
pub(crate) fn action_body(
    code: String,
    refused: Option<String>,
    result: Option<ActionResult>,
    prefix: &'static str,
) -> AnyView {
    let in_panel = prefix == "activity";
    let code_id = if in_panel {
        "activity-code"
    } else {
        "chat-action-code"
    };
    // Under the thread's h2 an action's parts are h3; under the panel's action title, h4.
    let heading = move |text: &'static str| {
        if in_panel {
            view! { <h4>{text}</h4> }.into_any()
        } else {
            view! { <h3>{text}</h3> }.into_any()
        }
    };
    view! {
        {crate::highlight::code_view(&code, card_lines, "The program", code_id)}
        {refused.map(|why| view! { <p class="refused" data-testid=format!("{prefix}-refused")>{why}</p> })}
        {result.map(|result| view! {
            {(!result.console.is_empty()).then(|| view! {
                {heading("Console")}
                <pre class="console" tabindex="0" aria-label="Console" data-testid=format!("{prefix}-console")>{card_lines(&result.console)}</pre>
            })}
            {(!result.calls.is_empty()).then(|| view! {
                {heading("Calls")}
                <table class="calls" data-testid=format!("{prefix}-calls")>
                    <thead><tr><th>"Tool"</th><th>"Outcome"</th><th>"ms"</th></tr></thead>
                    <tbody>
                        {result.calls.iter().map(|call| view! {
                            <tr class=format!("outcome-{}", call.outcome)>
                                <td><code>{call.tool.clone()}</code></td><td>{call.outcome.clone()}</td><td>{call.duration_ms}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            })}
            {result.error.clone().map(|error| view! {
                {heading("Error")}
                <pre class="error" tabindex="0" aria-label="Error" data-testid=format!("{prefix}-error")>{card_lines(&error)}</pre>
            })}
            {result.value.clone().map(|value| view! {
                {heading("Result")}
                <pre class="value" tabindex="0" aria-label="Result" data-testid=format!("{prefix}-result")>{card_lines(&value)}</pre>
            })}
        })}
    }
    .into_any()
}

/// One step of an agent turn: the model's words, an action block, a direct
/// call, a compaction card, a question, a note, a plan's card or tree; the
/// sub-agents a call spawned under it. `number` counts the actions.
fn step_view(
    step: Step,
    number: usize,
    turn: &TurnView,
    scope: &str,
    opened: crate::plan_tree::Opened,
) -> AnyView {
    use crate::plan_tree::{children_view, plan_card, plan_tree};
    match step {
        Step::Planned { plan, summary } => plan_card(plan, summary),
        Step::PlanRun { plan, answer, .. } => plan_tree(plan, answer, turn, scope, opened),
        Step::Text(text) => crate::markdown::markdown_view(&text),
        Step::Action { call_id, code, result, refused } => {
            let key = format!("{scope}/{call_id}");
            let children = children_view(turn.children_of(&call_id), &key, opened);
            let summary = match (&result, &refused) {
                (Some(result), _) => {
                    let calls = match result.calls.len() {
                        0 => "no tool calls".to_owned(),
                        1 => format!("1 call ({})", result.calls[0].tool),
                        count => format!("{count} calls"),
                    };
                    format!("Action {number} · {} · {calls} · {} ms", result.status, result.duration_ms)
                }
                (None, Some(why)) if why.starts_with("stopped") => format!("Action {number} · stopped"),
                (None, Some(_)) => format!("Action {number} · not run"),
                (None, None) => match &turn.progress {
                    Some(progress) => format!(
                        "Action {number} · running… {:.0}%{}",
                        progress.percent,
                        progress.message.as_ref().map(|message| format!(" · {message}")).unwrap_or_default()
                    ),
                    None => format!("Action {number} · running…"),
                },
            };
            let bar = (result.is_none() && refused.is_none())
                .then(|| turn.progress.as_ref().map(|progress| progress.percent))
                .flatten()
                .map(|percent| view! {
                    <progress max="100" value=percent aria-label="How far the program has come" data-testid="chat-action-progress"></progress>
                });
            // "Details" shows the action in the Activity panel (the app's chat only).
            let inspect = use_context::<crate::activity::Activity>()
                .zip(use_context::<crate::activity::ReplyTurn>())
                .map(|(activity, reply)| {
                    let key = key.clone();
                    view! {
                        <button type="button" class="secondary small inspect" data-testid="chat-action-inspect"
                            aria-controls="activity" on:click=move |_| {
                                activity.show(reply.0, Some(key.clone()));
                                // Beside the thread it is already on show; narrower, its drawer opens.
                                activity.open.set(!crate::activity::beside());
                            }>"Details in Activity"</button>
                    }
                });
            let status = match (&result, &refused) {
                (Some(result), _) => result.status.clone(),
                (None, Some(why)) if why.starts_with("stopped") => "cancelled".to_owned(),
                (None, Some(_)) => "refused".to_owned(),
                (None, None) => "running".to_owned(),
            };
            view! {
                <details class=format!("action action-{status}") data-testid="chat-action" data-status=status.clone()
                    prop:open=opened.is_open(&key) on:toggle=opened.on_toggle(key.clone())>
                    <summary data-testid="chat-action-summary">{summary}{bar}</summary>
                    {action_body(code, refused, result, "chat-action")}
                    {inspect}
                    {children}
                </details>
            }
            .into_any()
        }
        Step::Call { call_id, name, args, answer } => {
            let answer = answer.map(|(text, is_error)| (shown(&text, 300), is_error));
            let children = children_view(turn.children_of(&call_id), &format!("{scope}/{call_id}"), opened);
            view! {
                <p class="tool-call" data-testid="chat-tool-call">
                    "Called "<code>{format!("{}({})", shown(&name, 80), shown(&args, 300))}</code>
                    {answer.map(|(text, is_error)| view! {
                        " → "<code class:failed=is_error>{text}</code>
                    })}
                </p>
                {children}
            }
            .into_any()
        }
        Step::Compaction { summary, replaced } => view! {
            <div class="compaction" data-testid="chat-compaction">
                <strong>"Earlier conversation summarized"</strong>
                <details>
                    <summary>{format!("{replaced} earlier messages, as the model now sees them")}</summary>
                    <p class="summary">{summary}</p>
                </details>
                <p class="hint">"The whole conversation stays in the history."</p>
            </div>
        }
        .into_any(),
        Step::Question(question) => view! {
            <p class="asked" data-testid="chat-asked">"Asked you: "{card_text(&question)}</p>
        }
        .into_any(),
        Step::Note(note) => view! { <p class="note hint" data-testid="chat-note">{said(note)}</p> }.into_any(),
    }
}
