//! Loading: the GGUF's weights and metadata, the tokenizer, the stop tokens.

use std::io::Cursor;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::{MAX_SEQ_LEN, ModelWeights};
use tokenizers::Tokenizer;

use crate::LlmError;
use crate::template::Template;

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
}

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
    /// Loads the model from its GGUF bytes and its `tokenizer.json`.
    pub fn load(gguf: &[u8], tokenizer_json: &[u8]) -> Result<Self, LlmError> {
        let device = Device::Cpu;
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
        let architecture = text("general.architecture").unwrap_or_default();
        if architecture != "llama" {
            return Err(LlmError::Weights(format!(
                "`general.architecture` is `{architecture}`, and only `llama` (SmolLM2's) is supported"
            )));
        }
        let chat_template = text("tokenizer.chat_template").ok_or_else(|| {
            LlmError::Weights("the GGUF has no `tokenizer.chat_template`".to_owned())
        })?;
        let eos = number("tokenizer.ggml.eos_token_id").ok_or_else(|| {
            LlmError::Weights("the GGUF has no `tokenizer.ggml.eos_token_id`".to_owned())
        })?;
        let trained_context = number("llama.context_length").unwrap_or(2048) as usize;
        let name = text("general.name").unwrap_or_else(|| crate::MODEL_ID.to_owned());

        let weights =
            ModelWeights::from_gguf(content, &mut reader, &device).map_err(LlmError::weights)?;
        let tokenizer = Tokenizer::from_bytes(tokenizer_json)
            .map_err(|error| LlmError::Tokenizer(error.to_string()))?;
        let template = Template::new(chat_template, &tokenizer)?;
        let mut stops = vec![eos];
        if let Some(end) = template.end_of_turn_token(&tokenizer)
            && !stops.contains(&end)
        {
            stops.push(end);
        }
        Ok(Self {
            weights,
            tokenizer,
            template,
            stops,
            facts: ModelFacts {
                name,
                context_tokens: trained_context.min(MAX_SEQ_LEN),
                weights_bytes: gguf.len(),
            },
            device,
        })
    }

    pub fn facts(&self) -> &ModelFacts {
        &self.facts
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
        let input = Tensor::new(tokens, &self.device)
            .and_then(|tensor| tensor.unsqueeze(0))
            .map_err(LlmError::inference)?;
        let logits = self
            .weights
            .forward(&input, position)
            .and_then(|logits| logits.squeeze(0))
            .and_then(|logits| logits.to_vec1::<f32>())
            .map_err(LlmError::inference)?;
        let mut best: Option<(usize, f32)> = None;
        for (index, &logit) in logits.iter().enumerate() {
            if !logit.is_nan() && best.is_none_or(|(_, top)| logit > top) {
                best = Some((index, logit));
            }
        }
        let (index, _) =
            best.ok_or_else(|| LlmError::Inference("the model gave no usable logits".to_owned()))?;
        u32::try_from(index).map_err(LlmError::inference)
    }

    pub(crate) fn reset(&mut self) {
        self.weights.clear_kv_cache();
    }
}
