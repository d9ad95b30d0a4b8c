//! One chat turn on the model, a step at a time: each [`Turn::step`] runs at most
//! one forward pass and answers the events it produced, so a host can stream
//! them, yield between tokens (the browser worker reads a cancel there) and
//! stop by dropping the turn.

use kiln_types::chat::{
    ChatRequest, Event, FinalMessage, Message, Stop, StopReason, ToolCall, Usage,
};

use crate::tools::{self, ToolMode};
use crate::{LlmError, Model};

/// What one [`Turn::step`] answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Events (none while a token is held back: a cut character, a reply that may
    /// be a tool call); the turn goes on.
    Events(Vec<Event>),
    /// The turn ended: its last events, `Stop` and `Done` among them.
    Finished(Vec<Event>),
}

/// A turn in progress.
pub struct Turn {
    prompt: Vec<u32>,
    generated: Vec<u32>,
    /// How many tokens the reply may have: the request's `max_tokens`, at most
    /// what the context leaves.
    reply_room: usize,
    /// Why `reply_room` is what it is, for the `MaxTokens` stop's message.
    context_bound: bool,
    mode: ToolMode,
    /// The reply's text so far, and how much of it was streamed.
    text: String,
    streamed: usize,
    /// Whether the reply is held back until it ends (it may be a call).
    holding: bool,
    message: FinalMessage,
    finished: bool,
}

impl Turn {
    /// Renders `request` with the model's chat template and tokenizes it. Nothing
    /// runs yet.
    pub fn start(model: &Model, request: &ChatRequest) -> Result<Self, LlmError> {
        if request.options.max_tokens == 0 {
            return Err(LlmError::Request(
                "`max_tokens` must be at least 1".to_owned(),
            ));
        }
        if !request
            .messages
            .iter()
            .any(|message| matches!(message, Message::User { .. }))
        {
            return Err(LlmError::Request(
                "the conversation has no user message".to_owned(),
            ));
        }
        let (messages, mode) = tools::prompt_messages(request);
        let rendered = model.template.render(&messages)?;
        let prompt = model.encode(&rendered)?;
        Self::from_tokens(model, prompt, request.options.max_tokens as usize, mode)
    }

    /// A turn over an already tokenized prompt, its reply read as text: what the
    /// benchmark and the platform comparison run.
    pub fn from_prompt_tokens(
        model: &Model,
        prompt: Vec<u32>,
        max_tokens: usize,
    ) -> Result<Self, LlmError> {
        Self::from_tokens(model, prompt, max_tokens, ToolMode::Off)
    }

    fn from_tokens(
        model: &Model,
        prompt: Vec<u32>,
        max_tokens: usize,
        mode: ToolMode,
    ) -> Result<Self, LlmError> {
        let context = model.facts.context_tokens;
        if prompt.is_empty() || prompt.len() >= context {
            return Err(LlmError::ContextFull {
                prompt_tokens: prompt.len(),
                context_tokens: context,
            });
        }
        let left = context - prompt.len();
        let holding = tools::may_be_call(&mode, "");
        Ok(Self {
            reply_room: max_tokens.min(left),
            context_bound: left < max_tokens,
            prompt,
            generated: Vec::new(),
            mode,
            text: String::new(),
            streamed: 0,
            holding,
            message: FinalMessage {
                model: Some(crate::MODEL_ID.to_owned()),
                ..FinalMessage::default()
            },
            finished: false,
        })
    }

    /// The prompt's tokens.
    pub fn prompt_tokens(&self) -> &[u32] {
        &self.prompt
    }

    /// The reply's tokens so far, a stop token included.
    pub fn tokens(&self) -> &[u32] {
        &self.generated
    }

    /// Runs one forward pass (the whole prompt at the first step) and answers
    /// what it produced. A finished turn answers `Finished` with no events.
    pub fn step(&mut self, model: &mut Model) -> Result<Step, LlmError> {
        if self.finished {
            return Ok(Step::Finished(Vec::new()));
        }
        let token = match self.generated.last() {
            None => {
                model.reset();
                model.next_token(&self.prompt, 0)?
            }
            Some(&last) => {
                let position = self.prompt.len() + self.generated.len() - 1;
                model.next_token(&[last], position)?
            }
        };
        self.generated.push(token);
        if model.stops.contains(&token) {
            return self.finish(StopReason::EndTurn, None);
        }
        let mut events = Vec::new();
        let reply = model.decode(&self.generated)?;
        // A character cut between tokens decodes as U+FFFD until its last byte comes.
        if !reply.ends_with('\u{FFFD}') {
            self.text = reply;
            if self.holding && !tools::may_be_call(&self.mode, &self.text) {
                self.holding = false;
            }
            if !self.holding && self.text.len() > self.streamed {
                events.push(self.delta());
            }
        }
        if self.generated.len() >= self.reply_room {
            let why = self
                .context_bound
                .then(|| "the model's context is full".to_owned());
            let mut last = self.finish(StopReason::MaxTokens, why)?;
            if let Step::Finished(rest) = &mut last {
                events.append(rest);
            }
            return Ok(Step::Finished(events));
        }
        Ok(Step::Events(events))
    }

    fn delta(&mut self) -> Event {
        let text = self.text[self.streamed..].to_owned();
        self.streamed = self.text.len();
        let event = Event::TextDelta { text };
        self.message.absorb(&event);
        event
    }

    fn finish(&mut self, reason: StopReason, why: Option<String>) -> Result<Step, LlmError> {
        self.finished = true;
        let mut events = Vec::new();
        let mut reason = reason;
        if self.holding {
            match tools::parse_call(&self.mode, &self.text) {
                Some((name, arguments)) if reason == StopReason::EndTurn => {
                    let id = format!("call_{}", self.prompt.len());
                    events.push(Event::ToolCallStart {
                        index: 0,
                        id: id.clone(),
                        name: name.clone(),
                    });
                    events.push(Event::ToolCallDelta {
                        index: 0,
                        fragment: arguments.to_string(),
                    });
                    events.push(Event::ToolCallEnd {
                        index: 0,
                        call: ToolCall {
                            id,
                            name,
                            arguments,
                        },
                    });
                    reason = StopReason::ToolUse;
                }
                _ => {
                    if self.text.len() > self.streamed {
                        events.push(self.delta());
                    }
                }
            }
        } else if self.text.len() > self.streamed {
            events.push(self.delta());
        }
        events.push(Event::Usage {
            usage: Usage {
                input_tokens: self.prompt.len() as u64,
                output_tokens: self.generated.len() as u64,
            },
        });
        events.push(Event::Stop {
            stop: Stop {
                reason,
                message: why,
            },
        });
        for event in &events {
            if !matches!(event, Event::TextDelta { .. }) {
                self.message.absorb(event);
            }
        }
        events.push(Event::Done {
            message: std::mem::take(&mut self.message),
        });
        Ok(Step::Finished(events))
    }
}
