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
    /// Where the prompt's first message (the system's) ends, when it has one:
    /// the model keeps its state there for the next conversation.
    boundary: Option<usize>,
    /// Whether the turn ended (its state is then kept for the next turn).
    ended: bool,
    /// How many of the prompt's tokens the model held already.
    reused: usize,
    /// Whether the prompt is being fed (a chunk a step).
    prefilling: bool,
}

/// The first of the highest logits.
pub(crate) fn greedy(logits: &[f32]) -> Result<u32, LlmError> {
    let mut best: Option<(usize, f32)> = None;
    for (index, &logit) in logits.iter().enumerate() {
        if !logit.is_nan() && best.is_none_or(|(_, top)| logit > top) {
            best = Some((index, logit));
        }
    }
    let (index, _) =
        best.ok_or_else(|| LlmError::Inference("the model gave no usable logits".to_owned()))?;
    u32::try_from(index).map_err(LlmError::inference)
}

/// How long a repeated stretch must be before a reply is stopped for it: a
/// small model decoding greedily falls into loops it never leaves.
const REPEATED_SPAN: usize = 48;
/// The longest period looked for, in tokens.
const MAX_PERIOD: usize = 64;

/// The period of the loop `tokens` end in, when their last stretch is one
/// block of tokens said at least three times and at least [`REPEATED_SPAN`]
/// tokens long.
fn repeating(tokens: &[u32]) -> Option<usize> {
    (1..=MAX_PERIOD).find(|&period| {
        let span = (period * 3).max(REPEATED_SPAN.div_ceil(period) * period);
        span <= tokens.len() && {
            let tail = &tokens[tokens.len() - span..];
            tail.iter()
                .zip(&tail[period..])
                .all(|(earlier, later)| earlier == later)
        }
    })
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
        let (mut messages, mode) = tools::prompt_messages(request);
        for message in &mut messages {
            message.content = model.neutralize(&message.content);
        }
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
        let boundary = model.message_boundary(&prompt);
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
            boundary,
            ended: false,
            reused: 0,
            prefilling: false,
        })
    }

    /// Keeps the model's state after this turn, so that the next turn of the
    /// conversation (whose prompt starts with this one's and its reply) is
    /// fed only what is new. Call it after the turn finished, on the model it
    /// ran on.
    pub fn keep_state(&self, model: &mut Model) {
        if self.ended {
            model.keep(false);
        }
    }

    /// How many of the prompt's tokens the model held from an earlier turn
    /// (known once the first step ran): the rest was fed.
    pub fn reused_tokens(&self) -> usize {
        self.reused
    }

    /// How much of the prompt the model has read, of how much, while it reads
    /// it (`None` before the first step and once the reply began).
    pub fn reading(&self, model: &Model) -> Option<(usize, usize)> {
        (self.prefilling && self.generated.is_empty())
            .then(|| (model.fed_tokens().min(self.prompt.len()), self.prompt.len()))
    }

    /// The prompt's tokens.
    pub fn prompt_tokens(&self) -> &[u32] {
        &self.prompt
    }

    /// The reply's tokens so far, a stop token included.
    pub fn tokens(&self) -> &[u32] {
        &self.generated
    }

    /// Runs one forward pass (the first steps each feed a chunk of the prompt
    /// and produce nothing) and answers what it produced. A finished turn
    /// answers `Finished` with no events.
    pub fn step(&mut self, model: &mut Model) -> Result<Step, LlmError> {
        if self.finished {
            return Ok(Step::Finished(Vec::new()));
        }
        let token = match self.generated.last() {
            None => {
                if !self.prefilling {
                    self.prefilling = true;
                    self.reused = model.resume(&self.prompt);
                }
                match model.prefill_chunk(&self.prompt, self.boundary)? {
                    Some(logits) => greedy(&logits)?,
                    None => return Ok(Step::Events(Vec::new())),
                }
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
        if let Some(period) = repeating(&self.generated) {
            return self.finish(
                StopReason::Other("repetition".to_owned()),
                Some(format!(
                    "the model repeated the same {period} tokens over and over, and was stopped"
                )),
            );
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
        self.ended = true;
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

#[cfg(test)]
mod tests {
    use super::repeating;

    #[test]
    fn loops_are_found_and_prose_is_not() {
        let block: Vec<u32> = (100..118).collect();
        let mut looped: Vec<u32> = (1..40).collect();
        for _ in 0..3 {
            looped.extend(&block);
        }
        assert_eq!(repeating(&looped), Some(18));
        // Twice is not yet a loop.
        assert_eq!(repeating(&looped[..looped.len() - 18]), None);
        // One token said 48 times is; 47 times is not.
        assert_eq!(repeating(&[7; 48]), Some(1));
        assert_eq!(repeating(&[7; 47]), None);
        let prose: Vec<u32> = (0..500).map(|n| (n * 7919) % 1009).collect();
        assert_eq!(repeating(&prose), None);
    }
}
