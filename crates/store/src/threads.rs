//! The person's conversations: threads as the app and `kiln chat` keep them.
//!
//! A thread holds its messages as the thread shows them (an agent turn's
//! events, its failure) and as the model reads them (each turn's
//! [`ContextChange`], folded by [`Conversation::fold`]), so a reload reopens
//! it exactly as it was and the next message continues it. Deleting hides a
//! thread until [`Threads::purge`] removes it and its messages, so a delete
//! can be undone; renaming, pinning, truncating (regenerate) and forking
//! (edit and resend) are compare-and-swap writes that another tab racing them
//! makes read again. [`crate::history::History`] keeps the jobs and the
//! search over both.

use std::rc::Rc;

use crate::backend::{
    Backend, Expect, Op, Record, Scan, Table, Update, retry_on_conflict, stored_value,
};
use crate::clock::{epoch_ms, unique_ms};
use crate::error::StoreError;
use crate::history::{History, MAX_MESSAGE_CHARS, corrupt, keep, thread_from};
use crate::ids::random_suffix;
pub use kiln_types::records::{ContextChange, Conversation, Thread, ThreadMessage, TurnFailure};

/// The most of a thread's title kept, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// The most events one turn keeps (text deltas joined first); later ones
/// are left out with a note, the turn's end always kept.
pub const MAX_TURN_EVENTS: usize = 4096;
/// How long a deleted thread can be restored before [`Threads::purge`]
/// removes it.
pub const DELETED_KEPT_MS: u64 = 10 * 60 * 1000;
const ATTEMPTS: usize = 8;

/// What a new message says; the store numbers and times it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Draft {
    pub role: String,
    pub text: String,
    pub events: Vec<kiln_types::agent::AgentEvent>,
    pub context: Option<ContextChange>,
    pub failure: Option<TurnFailure>,
    pub provider: String,
    pub model: String,
}

impl Draft {
    /// The person's message.
    #[must_use]
    pub fn user(text: &str) -> Self {
        Self::said("user", text)
    }

    /// `text`, said by `role` (`user`, `assistant`, `tool` or `system`).
    #[must_use]
    pub fn said(role: &str, text: &str) -> Self {
        Self {
            role: role.to_owned(),
            text: text.to_owned(),
            ..Self::default()
        }
    }
}

/// The threads of one workspace.
#[derive(Clone)]
pub struct Threads {
    backend: Rc<dyn Backend>,
}

fn message_key(thread_id: &str, seq: u64) -> String {
    format!("{thread_id}/{seq:010}")
}

fn message_from(record: &Record) -> Result<ThreadMessage, StoreError> {
    serde_json::from_value(record.value.clone()).map_err(|error| corrupt("message", record, &error))
}

/// A thread's title from its first message: its first line that is not
/// blank, cut at a word near 80 characters.
#[must_use]
pub fn title_of_message(text: &str) -> String {
    const CHARS: usize = 80;
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    if line.is_empty() {
        return "New conversation".to_owned();
    }
    if line.chars().count() <= CHARS {
        return line.to_owned();
    }
    let cut: String = line.chars().take(CHARS).collect();
    let at_word = match cut.rfind(char::is_whitespace) {
        Some(space) if space > CHARS / 2 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}…", at_word.trim_end())
}

/// A turn's events as a thread keeps them: each run of text deltas (of the
/// turn, or of one child) joined, at most [`MAX_TURN_EVENTS`], its end kept.
#[must_use]
pub fn kept_events(
    events: Vec<kiln_types::agent::AgentEvent>,
) -> Vec<kiln_types::agent::AgentEvent> {
    use kiln_types::agent::AgentEvent;
    fn join(last: &mut AgentEvent, next: &AgentEvent) -> bool {
        match (last, next) {
            (AgentEvent::TextDelta { text }, AgentEvent::TextDelta { text: more }) => {
                text.push_str(more);
                true
            }
            (
                AgentEvent::Child {
                    child,
                    parent,
                    parent_call_id,
                    event,
                    ..
                },
                AgentEvent::Child {
                    child: next_child,
                    parent: next_parent,
                    parent_call_id: next_call,
                    event: next_event,
                    ..
                },
            ) if child == next_child && parent == next_parent && parent_call_id == next_call => {
                join(event, next_event)
            }
            _ => false,
        }
    }
    let mut kept: Vec<AgentEvent> = Vec::new();
    let mut left_out = 0_usize;
    for event in events {
        if let Some(last) = kept.last_mut()
            && join(last, &event)
        {
            continue;
        }
        if matches!(event, AgentEvent::Done { .. }) || kept.len() < MAX_TURN_EVENTS {
            kept.push(event);
        } else {
            left_out += 1;
        }
    }
    if left_out > 0 {
        let note = AgentEvent::LogUpdate {
            message: format!("{left_out} later steps of this turn were not kept."),
        };
        match kept
            .iter()
            .position(|event| matches!(event, AgentEvent::Done { .. }))
        {
            Some(done) => kept.insert(done, note),
            None => kept.push(note),
        }
    }
    kept
}

impl Threads {
    #[must_use]
    pub fn new(backend: Rc<dyn Backend>) -> Self {
        Self { backend }
    }

    /// The history over the same store (its jobs and search).
    #[must_use]
    pub fn history(&self) -> History {
        History::new(self.backend.clone())
    }

    /// A new, empty thread titled after `first_message`.
    pub async fn create(&self, first_message: &str, agent: &str) -> Result<Thread, StoreError> {
        self.insert(&title_of_message(first_message), agent).await
    }

    /// A new, empty thread titled `title`.
    async fn insert(&self, title: &str, agent: &str) -> Result<Thread, StoreError> {
        let now = unique_ms();
        let agent = if agent.is_empty() {
            crate::durable::DEFAULT_AGENT.into()
        } else {
            agent.to_owned()
        };
        let mut thread = Thread::new(
            format!("t-{now:013}-{}", random_suffix()),
            keep(title, MAX_TITLE_CHARS),
            agent,
            now,
        );
        self.backend
            .commit(vec![Op::put(
                Table::Threads,
                thread.id.clone(),
                stored_value(&thread),
                Expect::Absent,
            )])
            .await?;
        thread.version = 1;
        Ok(thread)
    }

    pub async fn get(&self, id: &str) -> Result<Thread, StoreError> {
        match self.backend.get(Table::Threads, id).await? {
            Some(record) => thread_from(record),
            None => Err(StoreError::NotFound {
                what: "thread",
                key: id.to_owned(),
            }),
        }
    }

    /// The threads not deleted: pinned first, then the most recently
    /// updated; at most `limit`.
    pub async fn list(&self, limit: usize) -> Result<Vec<Thread>, StoreError> {
        let mut threads: Vec<Thread> = self
            .backend
            .scan(Table::Threads, Scan::default())
            .await?
            .into_iter()
            .map(thread_from)
            .filter(|thread| {
                thread
                    .as_ref()
                    .map_or(true, |thread| thread.deleted_ms.is_none())
            })
            .collect::<Result<_, _>>()?;
        threads.sort_by(|a, b| {
            b.pinned
                .cmp(&a.pinned)
                .then_with(|| b.updated_ms.cmp(&a.updated_ms))
                .then_with(|| b.id.cmp(&a.id))
        });
        threads.truncate(limit);
        Ok(threads)
    }

    /// The thread, its messages in order, and what the model reads next.
    pub async fn open(&self, id: &str) -> Result<Conversation, StoreError> {
        let thread = self.get(id).await?;
        let messages = self.messages(id).await?;
        let context = Conversation::fold(&messages);
        Ok(Conversation {
            thread,
            messages,
            context,
        })
    }

    /// The thread's messages, in order.
    pub async fn messages(&self, id: &str) -> Result<Vec<ThreadMessage>, StoreError> {
        let prefix = format!("{id}/");
        let scan = Scan {
            prefix: &prefix,
            ..Scan::default()
        };
        self.backend
            .scan(Table::Messages, scan)
            .await?
            .iter()
            .map(message_from)
            .collect()
    }

    /// Changes the thread with `change`, again on a conflict with another writer.
    async fn update(
        &self,
        id: &str,
        change: impl Fn(&mut Thread) -> Result<(), StoreError>,
    ) -> Result<Thread, StoreError> {
        let change = &change;
        retry_on_conflict(ATTEMPTS, || async move {
            let mut thread = self.get(id).await?;
            change(&mut thread)?;
            let version = thread.version;
            self.backend
                .commit(vec![Op::put(
                    Table::Threads,
                    id,
                    stored_value(&thread),
                    Expect::Version(version),
                )])
                .await?;
            thread.version = version + 1;
            Ok(thread)
        })
        .await
    }

    /// Names the thread; a later title from its first message leaves it alone.
    pub async fn rename(&self, id: &str, title: &str) -> Result<Thread, StoreError> {
        let title = title.trim();
        if title.is_empty() {
            return Err(StoreError::Invalid(
                "a thread's title cannot be empty".into(),
            ));
        }
        let title = keep(title, MAX_TITLE_CHARS);
        self.update(id, |thread| {
            thread.title.clone_from(&title);
            thread.titled = true;
            Ok(())
        })
        .await
    }

    pub async fn pin(&self, id: &str, pinned: bool) -> Result<Thread, StoreError> {
        self.update(id, |thread| {
            thread.pinned = pinned;
            Ok(())
        })
        .await
    }

    /// Hides the thread from the list; [`Threads::restore`] brings it back
    /// until [`Threads::purge`] removes it.
    pub async fn delete(&self, id: &str) -> Result<Thread, StoreError> {
        let now = epoch_ms();
        self.update(id, |thread| {
            thread.deleted_ms.get_or_insert(now);
            Ok(())
        })
        .await
    }

    pub async fn restore(&self, id: &str) -> Result<Thread, StoreError> {
        self.update(id, |thread| {
            thread.deleted_ms = None;
            Ok(())
        })
        .await
    }

    /// Removes the threads deleted more than [`DELETED_KEPT_MS`] before
    /// `now_ms`, with their messages; answers how many.
    pub async fn purge(&self, now_ms: u64) -> Result<usize, StoreError> {
        let threads: Vec<Thread> = self
            .backend
            .scan(Table::Threads, Scan::default())
            .await?
            .into_iter()
            .map(thread_from)
            .collect::<Result<_, _>>()?;
        let mut purged = 0;
        for thread in threads {
            let Some(deleted) = thread.deleted_ms else {
                continue;
            };
            if now_ms.saturating_sub(deleted) < DELETED_KEPT_MS {
                continue;
            }
            let mut ops: Vec<Op> = self
                .messages(&thread.id)
                .await?
                .iter()
                .map(|message| {
                    Op::delete(
                        Table::Messages,
                        message_key(&thread.id, message.seq),
                        Expect::Any,
                    )
                })
                .collect();
            // Restored meanwhile in another tab: the version check keeps it.
            ops.push(Op::delete(
                Table::Threads,
                thread.id.clone(),
                Expect::Version(thread.version),
            ));
            match self.backend.commit(ops).await {
                Ok(_) => purged += 1,
                Err(StoreError::Conflict { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(purged)
    }

    /// Appends a message: the message and the thread's count, time, provider
    /// and model change in one transaction; a writer in another tab appending
    /// at once makes this read again and take the next number.
    pub async fn append(&self, id: &str, draft: Draft) -> Result<ThreadMessage, StoreError> {
        if !["user", "assistant", "tool", "system"].contains(&draft.role.as_str()) {
            return Err(StoreError::Invalid(format!(
                "message role `{}` is not one of `user`, `assistant`, `tool`, `system`",
                draft.role
            )));
        }
        let draft = &Draft {
            text: keep(&draft.text, MAX_MESSAGE_CHARS),
            events: kept_events(draft.events),
            ..draft
        };
        retry_on_conflict(ATTEMPTS, || async move {
            // Made from the thread as the transaction reads it.
            let made = std::cell::RefCell::new(None);
            let update: Update<'_> = Box::new(|found| {
                let mut thread = match found {
                    Some(record) => thread_from(record)?,
                    None => {
                        return Err(StoreError::NotFound {
                            what: "thread",
                            key: id.to_owned(),
                        });
                    }
                };
                let now = epoch_ms();
                let message = ThreadMessage {
                    thread_id: id.to_owned(),
                    seq: thread.n_messages + 1,
                    role: draft.role.clone(),
                    text: draft.text.clone(),
                    created_ms: now,
                    events: draft.events.clone(),
                    context: draft.context.clone(),
                    failure: draft.failure.clone(),
                    provider: draft.provider.clone(),
                    model: draft.model.clone(),
                };
                let version = thread.version;
                thread.n_messages = message.seq;
                thread.updated_ms = now;
                if !draft.provider.is_empty() {
                    thread.provider.clone_from(&draft.provider);
                    thread.model.clone_from(&draft.model);
                }
                let ops = vec![
                    Op::put(
                        Table::Threads,
                        id,
                        stored_value(&thread),
                        Expect::Version(version),
                    ),
                    Op::put(
                        Table::Messages,
                        message_key(id, message.seq),
                        stored_value(&message),
                        Expect::Absent,
                    ),
                ];
                *made.borrow_mut() = Some(message);
                Ok(ops)
            });
            self.backend
                .update(
                    &[Table::Threads, Table::Messages],
                    Table::Threads,
                    id,
                    update,
                )
                .await?;
            made.take().ok_or_else(|| {
                StoreError::Io("the thread's update committed without its message".into())
            })
        })
        .await
    }

    /// Removes the messages from `from_seq` on (regenerating a reply, or
    /// sending an edited message again in place).
    pub async fn truncate(&self, id: &str, from_seq: u64) -> Result<Thread, StoreError> {
        if from_seq == 0 {
            return Err(StoreError::Invalid(
                "messages are numbered from 1: there is no message 0 to cut from".into(),
            ));
        }
        retry_on_conflict(ATTEMPTS, || async move {
            let mut thread = self.get(id).await?;
            let version = thread.version;
            let mut ops: Vec<Op> = (from_seq..=thread.n_messages)
                .map(|seq| Op::delete(Table::Messages, message_key(id, seq), Expect::Any))
                .collect();
            thread.n_messages = thread.n_messages.min(from_seq - 1);
            thread.updated_ms = epoch_ms();
            ops.push(Op::put(
                Table::Threads,
                id,
                stored_value(&thread),
                Expect::Version(version),
            ));
            self.backend.commit(ops).await?;
            thread.version = version + 1;
            Ok(thread)
        })
        .await
    }

    /// A new thread holding copies of the messages before `before_seq`
    /// (editing message `before_seq` and sending it again: the original
    /// thread stays as it was).
    pub async fn fork(&self, id: &str, before_seq: u64) -> Result<Conversation, StoreError> {
        let original = self.get(id).await?;
        if before_seq == 0 || before_seq > original.n_messages + 1 {
            return Err(StoreError::Invalid(format!(
                "thread `{id}` has {} messages: it cannot fork before message {before_seq}",
                original.n_messages
            )));
        }
        let kept: Vec<ThreadMessage> = self
            .messages(id)
            .await?
            .into_iter()
            .filter(|message| message.seq < before_seq)
            .collect();
        let mut thread = self.insert(&original.title, &original.agent).await?;
        let version = thread.version;
        let now = epoch_ms();
        thread.titled = original.titled;
        thread.provider.clone_from(&original.provider);
        thread.model.clone_from(&original.model);
        thread.updated_ms = now;
        let mut messages = Vec::with_capacity(kept.len());
        let mut ops = Vec::with_capacity(kept.len() + 1);
        for (seq, message) in (1..).zip(kept) {
            let message = ThreadMessage {
                thread_id: thread.id.clone(),
                seq,
                ..message
            };
            ops.push(Op::put(
                Table::Messages,
                message_key(&thread.id, seq),
                stored_value(&message),
                Expect::Absent,
            ));
            messages.push(message);
        }
        thread.n_messages = messages.len() as u64;
        ops.push(Op::put(
            Table::Threads,
            thread.id.clone(),
            stored_value(&thread),
            Expect::Version(version),
        ));
        self.backend.commit(ops).await?;
        thread.version = version + 1;
        let context = Conversation::fold(&messages);
        Ok(Conversation {
            thread,
            messages,
            context,
        })
    }
}
