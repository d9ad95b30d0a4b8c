//! What one chat turn asks for: messages, tool definitions and options. Provider-neutral;
//! each adapter maps it onto its wire format.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
