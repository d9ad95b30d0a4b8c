//! What can go wrong loading or running the model.

/// A failure of the model: its files, its template, a request it cannot take, or
/// the inference itself.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum LlmError {
    /// The manifest beside the files is not one the build writes: not its
    /// JSON, a name that is not a plain file name in the folder, a size past
    /// the limit (`Manifest::parse`).
    #[error("the model's manifest is not usable: {0}")]
    Manifest(String),
    /// A file of the model is not the one its manifest describes: a link or
    /// not a regular file, another size, another digest. `file` is how the
    /// host names it (a path, a URL).
    #[error("the model's file {file} {problem}")]
    File { file: String, problem: String },
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
    pub(crate) fn weights(error: candle_core::Error) -> Self {
        Self::Weights(candle_message(&error))
    }

    pub(crate) fn inference(error: impl std::fmt::Display) -> Self {
        Self::Inference(error.to_string())
    }
}

/// A candle error's words without the backtrace candle attaches to it when
/// `RUST_BACKTRACE` is set: a message for a person, not a dump.
pub(crate) fn candle_message(error: &candle_core::Error) -> String {
    match error {
        candle_core::Error::WithBacktrace { inner, .. } => candle_message(inner),
        candle_core::Error::Context { inner, context } => {
            format!("{context}: {}", candle_message(inner))
        }
        other => other.to_string(),
    }
}

impl LlmError {
    /// The provider error code this failure is (`kiln_providers::in_process::error`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Manifest(_) | Self::File { .. } | Self::Weights(_) | Self::Tokenizer(_) => {
                "model_corrupt"
            }
            Self::Template(_) | Self::Inference(_) => "stream",
            Self::ContextFull { .. } => "context_overflow",
            Self::Request(_) => "bad_request",
        }
    }

    /// What to do about it, where there is something.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Manifest(_) | Self::File { .. } | Self::Weights(_) | Self::Tokenizer(_) => Some(
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
