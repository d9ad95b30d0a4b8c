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
//! - `manifest`: the manifest beside the model's files and the checks every
//!   host makes of it and of each file (plain names, sizes, digests).
//! - `gguf`: the GGUF header checked before candle reads it: counts, lengths
//!   and offsets within the file, the hyper-parameters and shapes agreeing.
//! - `model`: loading the GGUF's weights and metadata, the tokenizer, the stop
//!   tokens; a panic in candle or the tokenizer is an error, natively.
//! - `template`: the model's own chat template from the GGUF, rendered with
//!   minijinja under a fuel bound.
//! - `tools`: tools for a model that was not trained on them: described in the
//!   system message, with one JSON shape to answer a call in.
//! - `turn`: one chat turn, a step (at most one forward pass) at a time.
//! - `error`: what can go wrong loading or running the model.
//! - `native` (feature `provider`): natively, the model as a provider on a
//!   thread of its own (the CLI's `--provider local`), its files read from a
//!   folder no further than their manifest says.
//! - `prepare` (feature `prepare`): the build's step (`kiln-model-prepare`):
//!   re-quantizes the GGUF, derives the tokenizer and writes their manifest.

mod error;
mod gguf;
mod manifest;
mod model;
mod template;
mod tools;
mod turn;

#[cfg(feature = "provider")]
pub mod native;
#[cfg(feature = "prepare")]
pub mod prepare;

pub use error::LlmError;
pub use manifest::{
    MANIFEST_FILE, MAX_MANIFEST_BYTES, MAX_TOKENIZER_BYTES, MAX_WEIGHTS_BYTES, Manifest,
    ManifestFile,
};
pub use model::{KEPT_STATES, Model, ModelFacts, STATE_BYTES_BOUND, Scored};
pub use turn::{Step, Turn};

/// The model id the provider answers to and reports.
pub const MODEL_ID: &str = kiln_types::chat::IN_PROCESS_MODEL_ID;
