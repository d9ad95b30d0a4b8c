//! Kiln's own small model: SmolLM2-135M-Instruct run on the CPU with candle, one
//! thread, with no server. The same code runs in the browser's model worker and
//! natively (`kiln --provider local`).
//!
//! [`Model::load`] takes the GGUF the build prepared (re-quantized to a type candle
//! has SIMD kernels for) and the tokenizer the build derived from it; a
//! [`Turn`] renders a chat request with the model's own chat template (read from
//! the GGUF), decodes greedily until one of the model's stop tokens, and yields
//! the provider events (`kiln_types::chat::Event`) an HTTP provider would.
//! Everything here is input from a file or a request: a bad one is an
//! [`LlmError`] naming what was wrong, never a panic.
//!
//! - `model`: loading the GGUF's weights and metadata, the tokenizer, the stop
//!   tokens.
//! - `template`: the model's own chat template from the GGUF, rendered with
//!   minijinja under a fuel bound.
//! - `tools`: tools for a model that was not trained on them: described in the
//!   system message, with one JSON shape to answer a call in.
//! - `turn`: one chat turn, a step (at most one forward pass) at a time.
//! - `error`: what can go wrong loading or running the model.
//! - `native` (feature `provider`): natively, the model as a provider on a
//!   thread of its own (the CLI's `--provider local`).
//! - `prepare` (feature `prepare`): the build's step (`kiln-model-prepare`):
//!   re-quantizes the GGUF, derives the tokenizer and writes their manifest.

mod error;
mod model;
mod template;
mod tools;
mod turn;

#[cfg(feature = "provider")]
pub mod native;
#[cfg(feature = "prepare")]
pub mod prepare;

pub use error::LlmError;
pub use model::{KEPT_STATES, Model, ModelFacts, STATE_BYTES_BOUND, Scored};
pub use turn::{Step, Turn};

/// The model id the provider answers to and reports.
pub const MODEL_ID: &str = kiln_types::chat::IN_PROCESS_MODEL_ID;

/// What `kiln-model-prepare` writes beside the weights: the files' names, sizes
/// and SHA-256 digests, which the browser checks a download and a cached copy
/// against.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// [`MODEL_ID`].
    pub id: String,
    /// The weights' quantization, e.g. `q8_0`.
    pub dtype: String,
    pub weights: ManifestFile,
    pub tokenizer: ManifestFile,
}

/// One file of the [`Manifest`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ManifestFile {
    /// The file's name beside `manifest.json`.
    pub file: String,
    pub bytes: u64,
    /// Lower-case hex.
    pub sha256: String,
}

/// The manifest's file name, beside the weights and the tokenizer.
pub const MANIFEST_FILE: &str = "manifest.json";
