//! A chat turn as it crosses to the page: the provider it asks (which wire
//! format, where, with which key), the messages, tool definitions and
//! options it sends, the events it streams, and the message it ends with.
//! Provider-neutral; `kiln-providers` maps it onto each wire format and the
//! runtime worker streams it to the page.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which wire format a provider speaks, or Kiln's own model run in-process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI Chat Completions, and every server that speaks it (OpenRouter, llama.cpp...).
    #[serde(rename = "openai")]
    OpenAi,
    Anthropic,
    Ollama,
    /// Kiln's own small model (SmolLM2-135M-Instruct, `kiln-llm`), run by Kiln
    /// itself with no server: in the browser's model worker (the page's
    /// `{kind: "browser"}`), natively on a thread of the CLI (`--provider
    /// local`). Its `base_url` is where the prepared model files are: a URL
    /// (relative to the site) in the browser, a folder natively; empty means
    /// the build's `models/`.
    #[serde(rename = "browser", alias = "local")]
    InProcess,
}

impl ProviderKind {
    /// The providers reached over HTTP: the wire formats a person configures
    /// with an address and a key.
    pub const ALL: [Self; 3] = [Self::OpenAi, Self::Anthropic, Self::Ollama];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Ollama => "ollama",
            Self::InProcess => "browser",
        }
    }

    /// People's name for it, in messages.
    pub fn label(self) -> &'static str {
        match self {
            Self::OpenAi => "OpenAI-compatible",
            Self::Anthropic => "Anthropic",
            Self::Ollama => "Ollama",
            Self::InProcess => "Kiln's own SmolLM2 (135M)",
        }
    }

    /// A kind by its name; Kiln's own model answers to `browser` (the page's
    /// name) and `local` (the CLI's).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "browser" | "local" => Some(Self::InProcess),
            _ => Self::ALL.into_iter().find(|kind| kind.as_str() == text),
        }
    }

    /// The API root this kind usually has: the app's placeholder, and the
    /// address an empty base URL means.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAi => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com",
            Self::Ollama => "http://127.0.0.1:11434",
            Self::InProcess => IN_PROCESS_MODELS,
        }
    }
}

/// What the app calls Kiln's own model.
pub const IN_PROCESS_LABEL: &str = "In-browser SmolLM2 (135M)";

/// Where the build puts Kiln's own model, beside the app (`pkg/models/`).
pub const IN_PROCESS_MODELS: &str = "models";

/// The model id Kiln's own model answers to.
pub const IN_PROCESS_MODEL_ID: &str = "smollm2-135m-instruct";

/// How many tokens Kiln's own model holds at once, its prompt and its reply
/// together (candle's rotary table; the model was trained on 8,192): what the
/// agent sizes its contract to.
pub const IN_PROCESS_CONTEXT_TOKENS: usize = 4_096;

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `scheme://host[:port]` of a URL, lower-cased (credentials dropped):
/// where a key may be sent.
pub fn origin(url: &str) -> String {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or(authority);
    format!(
        "{}://{}",
        scheme.to_ascii_lowercase(),
        host.to_ascii_lowercase()
    )
}

/// Whether a key saved for a provider of `saved_kind` at `saved_url` may go
/// to one of `kind` at `url`: only to the same kind at the same origin (an
/// empty URL is the kind's default), so changing the kind or the address of
/// a provider being edited never sends its key to another server.
pub fn key_goes_to(saved_kind: &str, saved_url: &str, kind: &str, url: &str) -> bool {
    let at = |kind: &str, url: &str| match (url.trim(), ProviderKind::parse(kind)) {
        ("", Some(kind)) => origin(kind.default_base_url()),
        (url, _) => origin(url),
    };
    saved_kind == kind && at(saved_kind, saved_url) == at(kind, url)
}

/// An API key: the one redacting string ([`crate::Redacted`]).
pub type ApiKey = crate::Redacted;

/// A model a provider offers, from its model list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub id: String,
    /// A name for people, where the provider gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

/// One configured provider: which wire format, where, and with which key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    /// The API root, e.g. `https://api.openai.com/v1`, `https://api.anthropic.com`,
    /// `http://127.0.0.1:11434`. A trailing `/` is ignored; empty is the kind's
    /// default ([`ProviderKind::default_base_url`]).
    #[serde(default)]
    pub base_url: String,
    #[serde(default)]
    pub key: Option<ApiKey>,
}

/// A tool result longer than this is cut before it enters a request, with a notice telling
/// the model so (the reference's `MAX_TOOL_RESULT_CHARS`).
pub const MAX_TOOL_RESULT_CHARS: usize = 25_000;

/// One message of the conversation, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    System {
        #[serde(alias = "content")]
        text: String,
    },
    User {
        #[serde(alias = "content")]
        text: String,
    },
    Assistant {
        #[serde(default, alias = "content")]
        text: String,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    },
    /// The answer to one tool call of the assistant message before it.
    Tool {
        call_id: String,
        /// The tool's name (Ollama and some servers want it beside the id).
        name: String,
        #[serde(alias = "text")]
        content: String,
        #[serde(default)]
        is_error: bool,
    },
}

/// One complete tool call: its arguments are a JSON object, already parsed and checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// A JSON Schema for the arguments object.
    pub input_schema: Value,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "type", content = "name")]
pub enum ToolChoice {
    #[default]
    Auto,
    None,
    /// Some tool, the model picks which.
    Required,
    /// This one tool.
    Tool(String),
}

/// Ask for a reply that is JSON matching a schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseFormat {
    /// A name for the schema (OpenAI requires one).
    pub name: String,
    pub schema: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatOptions {
    pub model: String,
    pub max_tokens: u32,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub tool_choice: ToolChoice,
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
}

impl ChatOptions {
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            max_tokens: 1024,
            temperature: None,
            tool_choice: ToolChoice::Auto,
            response_format: None,
        }
    }
}

/// One turn: everything a provider needs to stream the next assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<ToolDef>,
    pub options: ChatOptions,
}

impl ChatRequest {
    /// The system text (all system messages joined by a blank line), for the wire formats
    /// that carry it outside the message list.
    pub fn system_text(&self) -> Option<String> {
        let parts: Vec<&str> = self
            .messages
            .iter()
            .filter_map(|message| match message {
                Message::System { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }
}

/// A tool result as it enters a request: cut at [`MAX_TOOL_RESULT_CHARS`] characters with a
/// notice that says so and how to get less.
pub fn bounded_tool_result(content: &str) -> std::borrow::Cow<'_, str> {
    match content.char_indices().nth(MAX_TOOL_RESULT_CHARS) {
        None => std::borrow::Cow::Borrowed(content),
        Some((cut, _)) => std::borrow::Cow::Owned(format!(
            "{}\n\n[output cut: {} characters shown of {}. Ask for a smaller slice \
             (a narrower query, a range, a limit) to see the rest.]",
            &content[..cut],
            MAX_TOOL_RESULT_CHARS,
            content.chars().count()
        )),
    }
}

// What a streaming turn yields, and the final message assembled from it.

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
