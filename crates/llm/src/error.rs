//! What can go wrong loading or running the model.

/// A failure of the model: its files, its template, a request it cannot take, or
/// the inference itself.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum LlmError {
    /// The weights are not a GGUF this crate can run (corrupt, cut, another
    /// architecture).
    #[error("the model's weights are not usable: {0}")]
    Weights(String),
    #[error("the model's tokenizer is not usable: {0}")]
    Tokenizer(String),
    /// The chat template in the GGUF failed to render.
    #[error("the model's chat template failed: {0}")]
    Template(String),
    /// The prompt alone fills the model's context.
    #[error(
        "the conversation is {prompt_tokens} tokens, and this model's context holds {context_tokens}"
    )]
    ContextFull {
        prompt_tokens: usize,
        context_tokens: usize,
    },
    /// The request cannot be run as it is (no user message, `max_tokens` of 0).
    #[error("{0}")]
    Request(String),
    #[error("the model failed while generating: {0}")]
    Inference(String),
}

impl LlmError {
    pub(crate) fn weights(error: impl std::fmt::Display) -> Self {
        Self::Weights(error.to_string())
    }

    pub(crate) fn inference(error: impl std::fmt::Display) -> Self {
        Self::Inference(error.to_string())
    }
}

impl LlmError {
    /// The provider error code this failure is (`kiln_providers::in_process::error`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Weights(_) | Self::Tokenizer(_) => "model_corrupt",
            Self::Template(_) | Self::Inference(_) => "stream",
            Self::ContextFull { .. } => "context_overflow",
            Self::Request(_) => "bad_request",
        }
    }

    /// What to do about it, where there is something.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Weights(_) | Self::Tokenizer(_) => Some(
                "the model's files are damaged or from another build: build them again (`cargo xtask build`) or clear the cached copy"
                    .to_owned(),
            ),
            Self::ContextFull { .. } => {
                Some("start a new conversation, or compact this one".to_owned())
            }
            _ => None,
        }
    }
}
