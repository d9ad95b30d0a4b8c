//! LLM providers reached over HTTP (`fetch` in the browser, `ureq` natively, through
//! `kiln-http`): one streaming chat trait, [`Provider`], with three adapters —
//! OpenAI-compatible Chat Completions, Anthropic Messages and Ollama `/api/chat` — plus the
//! price catalog and the run budget that admits turns.
//!
//! - [`chat`]: what one chat turn asks for (messages, tool definitions, options).
//! - [`event`]: what a streaming turn yields, and the final message assembled from it.
//! - [`error`]: typed provider errors, each naming the provider, the URL and the model.
//! - `provider`: [`HttpProvider`], the one [`Provider`] implementation, over `kiln-http`.
//! - `openai`, `anthropic`, `ollama`: the three adapters, each a wire format.
//! - `drive`: the part every adapter shares: the request and its retries, framing the body
//!   (SSE or NDJSON), and closing the turn with one [`Event::Stop`] and [`Event::Done`].
//! - `assemble`: tool calls put back together from their pieces, their arguments checked.
//! - `scrub`: the provider's own key kept out of everything it answers (an echo in a
//!   reply, an error, a model list).
//! - `failure`: from a provider's answer (or its failure to answer) to a [`ProviderError`].
//! - `turn`: one turn under the run's bounds: the budget, the caller's abort signal, the
//!   deadline.
//! - [`budget`]: the run budget, shared by every loop of a run, that admits or refuses each
//!   model turn and records what was spent.
//! - [`cost`]: what a model call costs: the price catalog and the prompt-size estimate.
//! - [`permits`]: the run's concurrency permit pool, one permit per open conversation.
//! - [`in_process`]: Kiln's own model as a provider, whichever host the entrance installed.
//! - [`scripted`]: a provider that answers from a script, for testing what drives one.
//! - `bench` (feature `bench`): the figures `cargo xtask bench` prints.
//!
//! Everything a peer sends is input: a status, a header, a stream piece or a tool call's
//! arguments that do not parse become a [`ProviderError`] naming the provider, URL and model
//! (and where in the stream), never a panic.

use futures::future::LocalBoxFuture;
use futures::stream::LocalBoxStream;

#[cfg(feature = "bench")]
pub mod bench;
pub mod budget;
pub mod chat;
pub mod cost;
pub mod error;
pub mod event;
pub mod in_process;
pub mod permits;
pub mod scripted;

pub use chat::{ChatOptions, ChatRequest, Message, ResponseFormat, ToolCall, ToolChoice, ToolDef};
pub use error::{ErrorKind, ProviderError};
pub use event::{Event, FinalMessage, Stop, StopReason, Usage};
pub use kiln_types::chat::{ApiKey, ModelInfo, ProviderConfig, ProviderKind};
pub use scrub::{KEY_MARKER, MIN_KEY_CHARS};

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

    /// Whether `model` can call tools, when the provider says: Ollama lists a
    /// model's capabilities (`POST /api/show`); OpenAI-compatible servers and
    /// Anthropic do not. `None` when it does not say or could not be asked,
    /// which callers take as "it may".
    fn calls_tools(&self, model: &str) -> LocalBoxFuture<'static, Option<bool>> {
        let _ = model;
        Box::pin(async { None })
    }

    /// How many tokens `model` holds at once, prompt and reply together, when
    /// it is known: Kiln's own model's [`kiln_types::chat::IN_PROCESS_CONTEXT_TOKENS`];
    /// `None` for a provider that does not say (hosted models hold far more
    /// than a contract needs). The agent writes a shorter contract for a
    /// small context.
    fn context_tokens(&self, model: &str) -> Option<usize> {
        let _ = model;
        (self.kind() == ProviderKind::InProcess)
            .then_some(kiln_types::chat::IN_PROCESS_CONTEXT_TOKENS)
    }
}

mod anthropic;
mod assemble;
mod drive;
mod failure;
mod ollama;
mod openai;
mod provider;
mod scrub;
mod turn;

pub use drive::{RetryPolicy, Timeouts};
pub use provider::{HttpProvider, connect, connect_with};
pub use turn::{AbortSignal, final_message, turn};
