//! The model protocol: what the runtime worker and the model worker (Kiln's own
//! model, `kiln-llm`, in a Web Worker of its own) say to each other, as JSON
//! strings in a versioned envelope like the other two protocols.
//!
//! The runtime worker starts the model worker only when a turn asks for the
//! in-process provider. The model worker fetches the files the build prepared
//! (`models/manifest.json`, the weights, the tokenizer) with progress, keeps
//! them in the Cache API, checks each against the manifest's size and
//! SHA-256, and runs one turn at a time.

use serde::{Deserialize, Serialize};

use crate::chat::{ChatRequest, Event};
use crate::protocol::DecodeError;

/// Bumped on any incompatible change; distinct from the other protocols'.
/// Shape: 0xe3b0d717a78c9c71 at version 2001 (the hash of this file's message types; the
/// tidy test `protocol_shapes` fails when they change and this version does not).
pub const MODEL_PROTOCOL_VERSION: u32 = 2001;

/// The Cache API cache the model's files are kept in, by URL. A file that no
/// longer matches the manifest (another build's) is replaced there.
pub const MODEL_CACHE: &str = "kiln-model";

/// Runtime worker → model worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToModel {
    /// Run one turn on the model at `base_url` (the folder of `manifest.json`,
    /// absolute), loading it first if it is not loaded. Turns queue.
    Turn {
        id: u64,
        base_url: String,
        request: Box<ChatRequest>,
    },
    /// Stop turn `id` at its next token (or drop it from the queue); it then
    /// answers `failed` with code `aborted`, or nothing if it had ended.
    Cancel { id: u64 },
    /// Delete the cached files (every build's) and forget the loaded model;
    /// answers `cleared`.
    Clear { id: u64 },
    /// Run `continuation` after `prompt` teacher-forced and answer `scored`:
    /// at each step, the token the model would pick and how far the given one
    /// was from it. For tests and benchmarks that compare this build of the
    /// model with another (the native one) token by token.
    Score {
        id: u64,
        base_url: String,
        prompt: Vec<u32>,
        continuation: Vec<u32>,
    },
}

/// One step of a teacher-forced run ([`ToModel::Score`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    /// The token greedy decoding picks here, and its logit.
    pub best: u32,
    pub best_logit: f32,
    /// The token that was given here, and its logit.
    pub given: u32,
    pub given_logit: f32,
}

/// Model worker → runtime worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromModel {
    /// The worker's wasm is running.
    Ready,
    /// Where loading the model stands (for every turn waiting on it).
    Status { status: ModelStatus },
    /// One event of turn `id`; the last is `done`.
    Event { id: u64, event: Event },
    /// Turn `id` failed (or was cancelled: code `aborted`).
    Failed { id: u64, failure: ModelFailure },
    /// The cached files are gone.
    Cleared { id: u64 },
    /// The answer to [`ToModel::Score`].
    Scored { id: u64, steps: Vec<Scored> },
    /// A message the worker could not read.
    Rejected { problem: String },
}

/// Where the model's loading stands, as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ModelStatus {
    /// Downloading the files: bytes so far of all.
    Downloading { loaded_bytes: u64, total_bytes: u64 },
    /// Reading the files from the cache and checking them.
    Reading { total_bytes: u64 },
    /// Building the model from its files.
    Loading,
    /// Reading a turn's prompt (before its first token): a small model's long
    /// prompt takes seconds, and says how far it is.
    Prompt { read_tokens: u64, total_tokens: u64 },
    /// Ready: loaded in `load_ms`, from the cache or a download.
    Ready {
        from_cache: bool,
        load_ms: f64,
        weights_bytes: u64,
        /// The model worker's wasm memory once loaded.
        memory_bytes: u64,
        /// What could not be kept, when something could not (a quota): the model
        /// runs, and is downloaded again next time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warning: Option<String>,
    },
    /// Loading failed; the next turn tries again.
    Failed { failure: ModelFailure },
}

/// A failure of the model worker, in the provider errors' words: `code` is a
/// `kiln_providers::ErrorKind` code (`model_unavailable`, `model_corrupt`,
/// `context_overflow`, `bad_request`, `stream`, `network`) or `aborted`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFailure {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Encodes a model message for the wire.
#[must_use]
pub fn encode<M: Serialize>(msg: M) -> String {
    crate::protocol::encode_versioned(msg, MODEL_PROTOCOL_VERSION)
}

/// Decodes a model message, refusing other versions and malformed messages by
/// name.
pub fn decode<M: for<'de> Deserialize<'de>>(text: &str) -> Result<M, DecodeError> {
    crate::protocol::decode_versioned(text, MODEL_PROTOCOL_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ChatOptions;

    #[test]
    fn messages_round_trip_and_other_versions_are_refused() {
        let turn = ToModel::Turn {
            id: 3,
            base_url: "http://127.0.0.1:8080/models".into(),
            request: Box::new(ChatRequest {
                messages: Vec::new(),
                tools: Vec::new(),
                options: ChatOptions::new("smollm2-135m-instruct"),
            }),
        };
        assert_eq!(decode::<ToModel>(&encode(&turn)).ok(), Some(turn));
        let status = FromModel::Status {
            status: ModelStatus::Downloading {
                loaded_bytes: 1,
                total_bytes: 2,
            },
        };
        assert_eq!(decode::<FromModel>(&encode(&status)).ok(), Some(status));
        let other = r#"{"v": 1001, "msg": {"type": "ready"}}"#;
        assert!(matches!(
            decode::<FromModel>(other),
            Err(DecodeError::Version { found: 1001, .. })
        ));
    }
}
