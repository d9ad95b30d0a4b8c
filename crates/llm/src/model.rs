//! Loading: the GGUF's weights and metadata, the tokenizer, the stop tokens;
//! and the key-value cache, kept across turns.
//!
//! candle's quantized kernels read a prompt no faster per token than they
//! decode, so an agent turn's contract (some 1,700 tokens) would cost about
//! 30 s on every turn. The model therefore keeps its state at the end of the
//! system message and at the end of its last turns ([`KEPT_STATES`]), and a
//! prompt that starts with a kept state's tokens is fed only the rest.

use std::io::Cursor;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::{MAX_SEQ_LEN, ModelWeights};
use tokenizers::Tokenizer;

use crate::LlmError;
use crate::template::Template;
pub use kiln_types::model::Scored;

/// The loaded model: weights, tokenizer, chat template and stop tokens. One turn
/// at a time (its key-value cache is the turn's).
pub struct Model {
    pub(crate) weights: ModelWeights,
    pub(crate) tokenizer: Tokenizer,
    pub(crate) template: Template,
    /// Token ids that end the model's message: the GGUF's end-of-sequence token
    /// and the template's end-of-turn marker.
    pub(crate) stops: Vec<u32>,
    pub(crate) facts: ModelFacts,
    pub(crate) device: Device,
    /// The texts of the special tokens (`<|im_end|>`, …): in a message's
    /// content they are text, never the control tokens they spell.
    specials: Vec<String>,
    /// The tokens the key-value cache of `weights` holds, in order.
    fed: Vec<u32>,
    /// Earlier states of the model (weights and cache are shared; only the
    /// cache differs) with the tokens each had been fed: a prompt that starts
    /// with one of them is fed only the rest. Newest last, at most
    /// [`KEPT_STATES`].
    kept: Vec<(Vec<u32>, ModelWeights)>,
    /// The state at the end of the last system message read, apart from
    /// `kept`.
    system: Option<(Vec<u32>, ModelWeights)>,
}

/// How many turn-end states [`Model`] keeps beside the one at the end of the
/// system message (a new conversation with the same instructions starts
/// there): the next turn of a conversation continues from its last. Each costs
/// the cache of its tokens, about 46 KB a token for SmolLM2-135M.
pub const KEPT_STATES: usize = 2;

/// The most bytes the key-value caches of the current state and every kept
/// one may hold for SmolLM2-135M (46,080 bytes a token: 30 layers, keys and
/// values, 3 heads of 64 f32), each at most the context: what a host that
/// budgets memory must leave the model besides its weights.
pub const STATE_BYTES_BOUND: usize = 46_080 * MAX_SEQ_LEN * (KEPT_STATES + 2);

/// How many prompt tokens one step feeds: a host yields between steps (the
/// browser reads a cancel there), and a long prompt takes this model a
/// second for about 60 tokens.
const PREFILL_CHUNK: usize = 32;

/// What the model says about itself, for logs and the provider's model list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFacts {
    /// `general.name`, e.g. `SmolLM2 135M Instruct`.
    pub name: String,
    /// How many tokens a turn may hold, prompt and reply together: the model's
    /// trained context, at most what candle's rotary table covers.
    pub context_tokens: usize,
    /// The weights' size in bytes, as loaded.
    pub weights_bytes: usize,
}

impl Model {
    /// Loads the model from its GGUF bytes and its `tokenizer.json`. The
    /// GGUF's header is checked first (`gguf`), so that candle reads only a
    /// file whose counts, offsets and hyper-parameters hold; a panic in candle
    /// or the tokenizer all the same is an [`LlmError::Weights`] or
    /// [`LlmError::Tokenizer`] natively (in the browser a panic still ends
    /// the worker: the checks are what stands there).
    pub fn load(gguf: &[u8], tokenizer_json: &[u8]) -> Result<Self, LlmError> {
        let device = Device::Cpu;
        let read = caught(LlmError::Weights, "reading the weights", || {
            crate::gguf::check(gguf)?;
            read_weights(gguf, &device)
        })?;
        let (tokenizer, template) = caught(LlmError::Tokenizer, "reading the tokenizer", || {
            let tokenizer = Tokenizer::from_bytes(tokenizer_json)
                .map_err(|error| LlmError::Tokenizer(error.to_string()))?;
            let template = Template::new(read.chat_template.clone(), &tokenizer)?;
            Ok((tokenizer, template))
        })?;
        let mut specials: Vec<String> = tokenizer
            .get_added_tokens_decoder()
            .into_values()
            .filter(|token| token.special && token.content.chars().count() > 1)
            .map(|token| token.content)
            .collect();
        specials.sort();
        let mut stops = vec![read.eos];
        if let Some(end) = template.end_of_turn_token(&tokenizer)
            && !stops.contains(&end)
        {
            stops.push(end);
        }
        Ok(Self {
            weights: read.weights,
            tokenizer,
            template,
            stops,
            facts: ModelFacts {
                name: read.name,
                context_tokens: read.trained_context.min(MAX_SEQ_LEN),
                weights_bytes: gguf.len(),
            },
            device,
            fed: Vec::new(),
            kept: Vec::new(),
            system: None,
            specials,
        })
    }

    pub fn facts(&self) -> &ModelFacts {
        &self.facts
    }

    /// `text` with every special token's spelling broken by a word joiner after
    /// its first character, so that a message (a tool's result, a fetched
    /// page) cannot end its turn or open another with the control tokens.
    pub(crate) fn neutralize(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for special in &self.specials {
            if text.contains(special.as_str()) {
                let mut chars = special.chars();
                let first = chars.next().map(String::from).unwrap_or_default();
                text = text.replace(
                    special.as_str(),
                    &format!("{first}\u{2060}{}", chars.as_str()),
                );
            }
        }
        text
    }

    /// How many tokens the key-value cache holds.
    pub fn fed_tokens(&self) -> usize {
        self.fed.len()
    }

    /// The token ids of `text`, special tokens read as such (a rendered prompt).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LlmError> {
        self.tokenizer
            .encode(text, false)
            .map(|encoding| encoding.get_ids().to_vec())
            .map_err(|error| LlmError::Tokenizer(error.to_string()))
    }

    /// The text of `tokens`, special tokens left out.
    pub fn decode(&self, tokens: &[u32]) -> Result<String, LlmError> {
        self.tokenizer
            .decode(tokens, true)
            .map_err(|error| LlmError::Tokenizer(error.to_string()))
    }

    /// Runs `tokens` at positions from `position` and answers the next token,
    /// greedily: the first of the highest logits, so that the same weights give
    /// the same tokens on every platform whose arithmetic agrees.
    pub(crate) fn next_token(&mut self, tokens: &[u32], position: usize) -> Result<u32, LlmError> {
        crate::turn::greedy(&self.logits(tokens, position)?)
    }

    /// Where the first message of a rendered prompt ends (after the template's
    /// end-of-turn token and the newline after it), when the prompt has more
    /// than one.
    pub(crate) fn message_boundary(&self, prompt: &[u32]) -> Option<usize> {
        let end = prompt.iter().position(|token| self.stops.contains(token))?;
        let newline = self.tokenizer.token_to_id("\u{010a}");
        let after = match (prompt.get(end + 1), newline) {
            (Some(next), Some(newline)) if *next == newline => end + 2,
            _ => end + 1,
        };
        (after < prompt.len()).then_some(after)
    }

    /// The logits after running `tokens` at positions from `position` (the
    /// key-value cache holds what came before; position 0 starts afresh).
    pub fn logits(&mut self, tokens: &[u32], position: usize) -> Result<Vec<f32>, LlmError> {
        if position == 0 {
            self.reset();
        }
        if position != self.fed.len() {
            return Err(LlmError::Inference(format!(
                "tokens at position {position}, and the cache holds {}",
                self.fed.len()
            )));
        }
        let input = Tensor::new(tokens, &self.device)
            .and_then(|tensor| tensor.unsqueeze(0))
            .map_err(LlmError::inference)?;
        let weights = &mut self.weights;
        let logits = caught(LlmError::Weights, "running the weights", || {
            weights
                .forward(&input, position)
                .and_then(|logits| logits.squeeze(0))
                .and_then(|logits| logits.to_vec1::<f32>())
                .map_err(|error| LlmError::Inference(crate::error::candle_message(&error)))
        });
        // A failed pass leaves the cache in no known state.
        let logits = logits.inspect_err(|_| self.reset())?;
        self.fed.extend_from_slice(tokens);
        Ok(logits)
    }

    /// Makes the cache hold the longest beginning of `prompt` that it or a
    /// kept state holds (nothing, when none does) and answers its length: the
    /// rest is what [`Model::prefill_chunk`] feeds.
    pub(crate) fn resume(&mut self, prompt: &[u32]) -> usize {
        let starts = |fed: &[u32]| fed.len() < prompt.len() && prompt.starts_with(fed);
        if !starts(&self.fed) {
            let best = self
                .kept
                .iter()
                .chain(self.system.as_ref())
                .filter(|(fed, _)| starts(fed))
                .max_by_key(|(fed, _)| fed.len())
                .cloned();
            match best {
                Some((fed, weights)) => {
                    self.weights = weights;
                    self.fed = fed;
                }
                None => self.reset(),
            }
        }
        self.fed.len()
    }

    /// Feeds the next at most `PREFILL_CHUNK` tokens of `prompt` (stopping at
    /// `boundary`, the end of the system message, to keep the state there) and
    /// answers the logits once the whole prompt is in.
    pub(crate) fn prefill_chunk(
        &mut self,
        prompt: &[u32],
        boundary: Option<usize>,
    ) -> Result<Option<Vec<f32>>, LlmError> {
        let from = self.fed.len();
        let mut to = prompt.len().min(from + PREFILL_CHUNK);
        if let Some(boundary) = boundary
            && from < boundary
            && boundary < to
        {
            to = boundary;
        }
        let logits = self.logits(&prompt[from..to], from)?;
        if Some(to) == boundary {
            self.keep(true);
        }
        Ok((to == prompt.len()).then_some(logits))
    }

    /// Keeps the model's present state for a later prompt that starts with
    /// what it was fed. A state this one continues is dropped first (the next
    /// turn of a conversation supersedes the last), then the oldest; the
    /// state at the end of a system message (`boundary`) is kept apart, so
    /// that a loop of turns never pushes out the contract they share.
    pub(crate) fn keep(&mut self, boundary: bool) {
        if self.fed.is_empty() {
            return;
        }
        let state = (self.fed.clone(), self.weights.clone());
        if boundary {
            self.system = Some(state);
            return;
        }
        let fed = &self.fed;
        self.kept
            .retain(|(kept, _)| !(fed.starts_with(kept) || kept.starts_with(fed)));
        if self.kept.len() >= KEPT_STATES {
            self.kept.remove(0);
        }
        self.kept.push(state);
    }

    /// Runs `continuation` after `prompt` one token at a time (teacher-forced)
    /// and says at each step which token the model itself would have picked
    /// and how far the given one was from it: how two builds of the model (the
    /// browser's and the native one, whose kernels add in another order) are
    /// compared token by token.
    pub fn score(&mut self, prompt: &[u32], continuation: &[u32]) -> Result<Vec<Scored>, LlmError> {
        if prompt.is_empty() || prompt.len() + continuation.len() > self.facts.context_tokens {
            return Err(LlmError::ContextFull {
                prompt_tokens: prompt.len() + continuation.len(),
                context_tokens: self.facts.context_tokens,
            });
        }
        let mut scored = Vec::with_capacity(continuation.len());
        let mut logits = self.logits(prompt, 0)?;
        for (step, &given) in continuation.iter().enumerate() {
            let (best, best_logit) = logits
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, logit)| !logit.is_nan())
                .fold((0, f32::NEG_INFINITY), |top, (index, logit)| {
                    if logit > top.1 { (index, logit) } else { top }
                });
            let given_logit = logits.get(given as usize).copied().ok_or_else(|| {
                LlmError::Request(format!("token {given} is not in the vocabulary"))
            })?;
            scored.push(Scored {
                best: u32::try_from(best).map_err(LlmError::inference)?,
                best_logit,
                given,
                given_logit,
            });
            if step + 1 < continuation.len() {
                logits = self.logits(&[given], prompt.len() + step)?;
            }
        }
        Ok(scored)
    }

    pub(crate) fn reset(&mut self) {
        self.weights.clear_kv_cache();
        self.fed.clear();
    }
}

/// What the GGUF gives besides the tensors: the metadata Kiln reads.
struct ReadWeights {
    weights: ModelWeights,
    chat_template: String,
    eos: u32,
    trained_context: usize,
    name: String,
}

/// The weights and metadata of a GGUF whose header `gguf::check` passed.
fn read_weights(gguf: &[u8], device: &Device) -> Result<ReadWeights, LlmError> {
    let mut reader = Cursor::new(gguf);
    let content = gguf_file::Content::read(&mut reader).map_err(LlmError::weights)?;
    let text = |key: &str| -> Option<String> {
        content
            .metadata
            .get(key)
            .and_then(|value| value.to_string().ok())
            .cloned()
    };
    let number = |key: &str| -> Option<u32> {
        content
            .metadata
            .get(key)
            .and_then(|value| value.to_u32().ok())
    };
    let chat_template = text("tokenizer.chat_template")
        .ok_or_else(|| LlmError::Weights("the GGUF has no `tokenizer.chat_template`".to_owned()))?;
    let eos = number("tokenizer.ggml.eos_token_id").ok_or_else(|| {
        LlmError::Weights("the GGUF has no `tokenizer.ggml.eos_token_id`".to_owned())
    })?;
    let trained_context = number("llama.context_length").unwrap_or(2048) as usize;
    let name = text("general.name").unwrap_or_else(|| crate::MODEL_ID.to_owned());
    let weights =
        ModelWeights::from_gguf(content, &mut reader, device).map_err(LlmError::weights)?;
    Ok(ReadWeights {
        weights,
        chat_template,
        eos,
        trained_context,
        name,
    })
}

/// Runs `work`, a panic in it (in candle or the tokenizer, on a file the
/// checks let through) answered as `error` saying it happened `doing` what,
/// so that the thread that loads or runs the model outlives a bad file.
/// Where panics abort (wasm32) this is only a call.
fn caught<T>(
    error: fn(String) -> LlmError,
    doing: &str,
    work: impl FnOnce() -> Result<T, LlmError>,
) -> Result<T, LlmError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|text| (*text).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        Err(error(format!("{doing} panicked: {why}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_loading_is_an_error_naming_it() {
        let failed: Result<(), LlmError> = caught(LlmError::Weights, "reading the weights", || {
            panic!("attempt to divide by zero")
        });
        assert_eq!(
            failed,
            Err(LlmError::Weights(
                "reading the weights panicked: attempt to divide by zero".to_owned()
            ))
        );
        assert_eq!(
            failed.err().map(|error| error.code()),
            Some("model_corrupt")
        );
        let formatted: Result<(), LlmError> =
            caught(LlmError::Tokenizer, "reading the tokenizer", || {
                panic!("token {} is out of range", 7)
            });
        assert_eq!(
            formatted,
            Err(LlmError::Tokenizer(
                "reading the tokenizer panicked: token 7 is out of range".to_owned()
            ))
        );
        assert_eq!(
            caught(LlmError::Weights, "reading", || Ok(3)),
            Ok(3),
            "no panic, the work's own answer"
        );
    }
}
