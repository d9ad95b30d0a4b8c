//! An agent turn kept in a thread (`kiln_store::threads`): the person's
//! message as the turn starts, then what the turn showed (its events) and how
//! it changed what the model reads next, with the turn's job linked to the
//! thread. The runtime worker and `kiln chat`
//! both record through this, so a thread reopened anywhere is the one the
//! turn left.

use std::cell::RefCell;
use std::rc::Rc;

use kiln_store::StoreError;
use kiln_store::threads::{ContextChange, Draft, Threads, TurnFailure};
use kiln_types::agent::{AgentEvent, AgentResult, StopReason};
use kiln_types::chat::Message;

use crate::codeact::AgentOutcome;
use crate::codeact::tools::Sink;

/// What the next turn of a conversation sends after this one: the thread as
/// the model saw it last, or, when the turn left no answer (its provider
/// failed, or it stopped before the model said anything), what came before
/// the person's message, so that turns keep alternating.
#[must_use]
pub fn continuation(before: &[Message], view: &[Message], result: &AgentResult) -> Vec<Message> {
    let unanswered = matches!(view.last(), Some(Message::User { .. }) | None);
    if result.stop.reason == StopReason::Provider || unanswered {
        before.to_vec()
    } else {
        view.to_vec()
    }
}

/// How `after` differs from `before`, as a thread keeps it.
#[must_use]
pub fn context_change(before: &[Message], after: &[Message]) -> Option<ContextChange> {
    if after == before {
        None
    } else if after.starts_with(before) {
        Some(ContextChange::Append(after[before.len()..].to_vec()))
    } else {
        Some(ContextChange::Replace(after.to_vec()))
    }
}

/// One turn being kept in a thread.
pub struct ThreadTurn {
    threads: Threads,
    history: kiln_store::history::History,
    id: String,
    /// What the model read before the person's message.
    before: Vec<Message>,
    events: Rc<RefCell<Vec<AgentEvent>>>,
    provider: String,
    model: String,
}

impl ThreadTurn {
    /// Keeps the person's message, the last of `messages` (which must be
    /// theirs), in thread `id`.
    ///
    /// # Errors
    ///
    /// The thread is not there, the last message is not the person's, or
    /// the store failed.
    pub async fn begin(
        threads: Threads,
        id: &str,
        messages: &[Message],
        provider: &str,
        model: &str,
    ) -> Result<Self, StoreError> {
        let Some((Message::User { text }, before)) = messages.split_last() else {
            return Err(StoreError::Invalid(format!(
                "a turn kept in thread `{id}` must end with the person's message"
            )));
        };
        threads.append(id, Draft::user(text)).await?;
        Ok(Self {
            history: threads.history(),
            threads,
            id: id.to_owned(),
            before: before.to_vec(),
            events: Rc::default(),
            provider: provider.to_owned(),
            model: model.to_owned(),
        })
    }

    /// `inner`, keeping every event it is given for the thread too.
    #[must_use]
    pub fn sink(&self, inner: Sink) -> Sink {
        let events = self.events.clone();
        Rc::new(move |event: AgentEvent| {
            events.borrow_mut().push(event.clone());
            inner(event);
        })
    }

    /// The turn ran: keeps its steps and reply; answers what the next turn
    /// sends ([`continuation`]).
    ///
    /// # Errors
    ///
    /// The store failed (the turn's answer stands; only the thread lacks it).
    pub async fn ended(self, outcome: &AgentOutcome) -> Result<Vec<Message>, StoreError> {
        let next = continuation(&self.before, &outcome.view, &outcome.result);
        let context = context_change(&self.before, &next);
        let events = self.events.take();
        // The model that answered, which a provider may name more exactly
        // than the one asked for.
        let model = events
            .iter()
            .rev()
            .find_map(|event| match event {
                AgentEvent::LlmCall { model, .. } if !model.is_empty() => Some(model.clone()),
                _ => None,
            })
            .unwrap_or(self.model);
        self.threads
            .append(
                &self.id,
                Draft {
                    role: "assistant".into(),
                    text: outcome.result.text.clone(),
                    events,
                    context,
                    failure: None,
                    provider: self.provider,
                    model,
                },
            )
            .await?;
        // History opens the conversation from the turn's job; a link that cannot be
        // written leaves only that.
        if let Some(job) = &outcome.result.job_id {
            let _ = self.history.link_thread(job, &self.id).await;
        }
        Ok(next)
    }

    /// The turn could not run: keeps why, beside whatever it showed.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn failed(self, failure: TurnFailure) -> Result<(), StoreError> {
        let events = self.events.take();
        self.threads
            .append(
                &self.id,
                Draft {
                    role: "assistant".into(),
                    events,
                    failure: Some(failure),
                    provider: self.provider,
                    model: self.model,
                    ..Draft::default()
                },
            )
            .await
            .map(drop)
    }
}
