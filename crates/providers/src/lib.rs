//! LLM providers reached over HTTP (`fetch` in the browser, `ureq` natively, through
//! `kiln-http`): one streaming chat trait, [`Provider`], with three adapters —
//! OpenAI-compatible Chat Completions, Anthropic Messages and Ollama `/api/chat` — plus the
//! price catalog and the run budget that admits turns.
//!
//! Everything a peer sends is input: a status, a header, a stream piece or a tool call's
//! arguments that do not parse become a [`ProviderError`] naming the provider, URL and model
//! (and where in the stream), never a panic.

use std::fmt;

use futures::future::LocalBoxFuture;
use futures::stream::LocalBoxStream;
use serde::{Deserialize, Serialize};

#[cfg(feature = "bench")]
pub mod bench;
pub mod budget;
pub mod chat;
pub mod cost;
pub mod error;
pub mod event;

pub use chat::{ChatOptions, ChatRequest, Message, ResponseFormat, ToolCall, ToolChoice, ToolDef};
pub use error::{ErrorKind, ProviderError, ProviderKind};
pub use event::{Event, FinalMessage, Stop, StopReason, Usage};

/// An API key. Prints `<redacted>` however it is printed; [`ApiKey::expose`] is the one way
/// to its text, used only where the request to its own provider is built.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

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
    /// `http://127.0.0.1:11434`. A trailing `/` is ignored.
    pub base_url: String,
    #[serde(default)]
    pub key: Option<ApiKey>,
}

/// The stream of one turn.
pub type EventStream = LocalBoxStream<'static, Result<Event, ProviderError>>;

/// An LLM provider. One turn at a time per call; calls may overlap.
pub trait Provider {
    fn kind(&self) -> ProviderKind;

    /// The API root this provider talks to.
    fn base_url(&self) -> &str;

    /// Streams one turn. The stream ends after [`Event::Done`], or after the first `Err`.
    /// Dropping the stream cancels the request.
    fn stream(&self, request: ChatRequest) -> EventStream;

    /// The models this provider offers (`/v1/models`, `/api/tags`, Anthropic's list).
    fn models(&self) -> LocalBoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>>;
}

mod anthropic;
mod assemble;
mod drive;
mod failure;
mod ollama;
mod openai;
mod provider;
mod turn;

pub use drive::{RetryPolicy, Timeouts};
pub use provider::{HttpProvider, connect};
pub use turn::{AbortSignal, turn};
