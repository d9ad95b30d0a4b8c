//! What a streaming turn yields, and the final message assembled from it.

use serde::{Deserialize, Serialize};

use crate::chat::ToolCall;

/// Tokens one call used, as the provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Why a turn ended. The first five are the model's own; the rest are Kiln's refusals or
/// the caller's abort, each yielded as one visible [`Event::Stop`], never silently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its message.
    EndTurn,
    /// The model wants its tool calls answered.
    ToolUse,
    /// `max_tokens` cut the reply.
    MaxTokens,
    StopSequence,
    ContentFilter,
    /// The run's USD cap (or the unpriced token ceiling) refused the turn.
    Budget,
    /// The run's deadline passed.
    Deadline,
    /// The run's turn count was used up.
    Turns,
    /// The caller aborted the turn.
    Aborted,
    /// A reason the provider gave that is none of the above, kept verbatim.
    Other(String),
}

impl StopReason {
    /// The stable name used in events, logs and the page.
    pub fn as_str(&self) -> &str {
        match self {
            Self::EndTurn => "end_turn",
            Self::ToolUse => "tool_use",
            Self::MaxTokens => "max_tokens",
            Self::StopSequence => "stop_sequence",
            Self::ContentFilter => "content_filter",
            Self::Budget => "budget",
            Self::Deadline => "deadline",
            Self::Turns => "turns",
            Self::Aborted => "aborted",
            Self::Other(reason) => reason,
        }
    }

    /// Kiln stopped the turn (a budget or the caller), not the model.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::Budget | Self::Deadline | Self::Turns | Self::Aborted
        )
    }
}

/// The one stop of a turn, with a sentence for people when Kiln stopped it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    pub reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One item of a streaming turn. Order: deltas and tool calls as they come, usage when the
/// provider reports it, then exactly one `Stop`, then `Done` with the assembled message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    TextDelta {
        text: String,
    },
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolCallDelta {
        index: usize,
        fragment: String,
    },
    /// The call's arguments arrived whole and parsed as a JSON object.
    ToolCallEnd {
        index: usize,
        call: ToolCall,
    },
    Usage {
        usage: Usage,
    },
    Stop {
        stop: Stop,
    },
    Done {
        message: FinalMessage,
    },
}

/// The assistant message a turn produced, whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct FinalMessage {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// The largest of the turn's reports, field by field: providers that report more than
    /// once (Anthropic) report running totals.
    pub usage: Usage,
    /// `None` only when the stream never said (it is then an error before `Done`).
    pub stop: Option<Stop>,
    /// The model id the provider says answered.
    pub model: Option<String>,
}

impl FinalMessage {
    /// Folds one event in. `Done` is ignored.
    pub fn absorb(&mut self, event: &Event) {
        match event {
            Event::TextDelta { text } => self.text.push_str(text),
            Event::ToolCallEnd { call, .. } => self.tool_calls.push(call.clone()),
            Event::Usage { usage } => {
                self.usage.input_tokens = self.usage.input_tokens.max(usage.input_tokens);
                self.usage.output_tokens = self.usage.output_tokens.max(usage.output_tokens);
            }
            Event::Stop { stop } => self.stop = Some(stop.clone()),
            Event::ToolCallStart { .. } | Event::ToolCallDelta { .. } | Event::Done { .. } => {}
        }
    }
}
