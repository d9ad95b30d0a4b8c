//! What one chat turn asks for: messages, tool definitions and options
//! (`kiln_types::chat`, which the page shares). Provider-neutral; each
//! adapter maps it onto its wire format.

pub use kiln_types::chat::{
    ChatOptions, ChatRequest, MAX_TOOL_RESULT_CHARS, Message, ResponseFormat, ToolCall, ToolChoice,
    ToolDef, bounded_tool_result,
};
