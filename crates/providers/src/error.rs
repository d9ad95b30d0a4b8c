//! Typed provider errors. Every message names the provider, the URL and the model, and says
//! what to do where there is something to do.

use std::fmt;

use serde::{Deserialize, Serialize};

pub use kiln_types::chat::ProviderKind;

/// What went wrong, as a caller must tell it apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ErrorKind {
    /// 401 or 403: the key is missing, wrong or not allowed.
    KeyRejected,
    /// The provider does not know the model.
    ModelNotFound,
    /// 429. `retry_after_ms` is what the provider asked for, if it did.
    RateLimited { retry_after_ms: Option<u64> },
    /// 5xx (Anthropic's 529 "overloaded" among them).
    Server,
    /// The prompt does not fit the model's context window: compact and retry.
    ContextOverflow,
    /// Any other 4xx: the request itself is wrong.
    BadRequest,
    /// No response at all: refused, DNS, TLS, or in the browser a CORS refusal.
    Network,
    /// No response, or no next chunk, in time.
    Timeout,
    /// The response started and then broke: cut off, or a piece that does not parse.
    Stream,
    /// A tool call whose arguments are not a JSON object.
    InvalidToolCall,
    /// Kiln's own model could not be had: its files failed to download (or to
    /// be read), or this entrance has none.
    ModelUnavailable,
    /// Kiln's own model's files are not what the build wrote (a cut download,
    /// a damaged cached copy): cleared, so that the next try downloads them anew.
    ModelCorrupt,
}

impl ErrorKind {
    /// The stable code (`error.code` in events and on the page).
    pub fn code(&self) -> &'static str {
        match self {
            Self::KeyRejected => "key_rejected",
            Self::ModelNotFound => "model_not_found",
            Self::RateLimited { .. } => "rate_limited",
            Self::Server => "server_error",
            Self::ContextOverflow => "context_overflow",
            Self::BadRequest => "bad_request",
            Self::Network => "network",
            Self::Timeout => "timeout",
            Self::Stream => "stream",
            Self::InvalidToolCall => "invalid_tool_call",
            Self::ModelUnavailable => "model_unavailable",
            Self::ModelCorrupt => "model_corrupt",
        }
    }

    /// Worth sending the same request again (after a wait).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::RateLimited { .. } | Self::Server)
    }
}

/// One failed provider call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub struct ProviderError {
    pub kind: ErrorKind,
    pub provider: ProviderKind,
    /// The endpoint, without user info or query (never a key).
    pub url: String,
    pub model: Option<String>,
    /// The HTTP status, when there was one.
    pub status: Option<u16>,
    /// What happened, in one sentence (the provider's own words where it gave some).
    pub message: String,
    /// What to do about it, when there is something.
    pub hint: Option<String>,
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sentence())?;
        if let Some(hint) = &self.hint {
            write!(f, "\nhint: {hint}")?;
        }
        Ok(())
    }
}

impl ProviderError {
    /// What went wrong, naming the provider, the URL and the model; the hint
    /// is [`ProviderError::hint`], apart.
    pub fn sentence(&self) -> String {
        let mut text = format!("{} at {}", self.provider.label(), self.url);
        if let Some(model) = &self.model {
            text.push_str(&format!(" (model `{model}`)"));
        }
        text.push_str(": ");
        text.push_str(&self.message);
        text
    }

    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}
