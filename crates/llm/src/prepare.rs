//! The build's step (`kiln-model-prepare`): re-quantizes the shipped GGUF to a
//! type candle has SIMD kernels for, derives the tokenizer.json from the GGUF's
//! own vocabulary, and writes both with a manifest of their sizes and digests.

use std::collections::HashMap;
use std::io::Cursor;

use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::{LlmError, Manifest, ManifestFile};

/// The quantizations the build may choose between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Q8_0,
    Q4_0,
}

impl Target {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "q8_0" => Some(Self::Q8_0),
            "q4_0" => Some(Self::Q4_0),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Q8_0 => "q8_0",
            Self::Q4_0 => "q4_0",
        }
    }

    fn dtype(self) -> GgmlDType {
        match self {
            Self::Q8_0 => GgmlDType::Q8_0,
            Self::Q4_0 => GgmlDType::Q4_0,
        }
    }

    /// llama.cpp's `general.file_type` for "mostly" this type.
    fn file_type(self) -> u32 {
        match self {
            Self::Q8_0 => 7,
            Self::Q4_0 => 2,
        }
    }
}

/// The prepared files' bytes and their manifest.
pub struct Prepared {
    pub weights: Vec<u8>,
    pub tokenizer: Vec<u8>,
    pub manifest: Manifest,
}

/// Re-quantizes `gguf` to `target` (F32 tensors, the norms, stay as they are;
/// so does a tensor already of the target type) and derives its tokenizer.
pub fn prepare(gguf: &[u8], target: Target) -> Result<Prepared, LlmError> {
    let mut reader = Cursor::new(gguf);
    let content = gguf_file::Content::read(&mut reader).map_err(LlmError::weights)?;
    let tokenizer = tokenizer_json(&content.metadata)?.to_string().into_bytes();

    // In the file's own order, so that the output reads like the input.
    let mut names: Vec<(&String, u64)> = content
        .tensor_infos
        .iter()
        .map(|(name, info)| (name, info.offset))
        .collect();
    names.sort_by_key(|(_, offset)| *offset);
    let mut tensors: Vec<(String, QTensor)> = Vec::with_capacity(names.len());
    for (name, _) in names {
        let tensor = content
            .tensor(&mut reader, name, &Device::Cpu)
            .map_err(LlmError::weights)?;
        let keep = matches!(tensor.dtype(), GgmlDType::F32 | GgmlDType::F16)
            || tensor.dtype() == target.dtype();
        let tensor = if keep {
            tensor
        } else {
            let dense = tensor.dequantize(&Device::Cpu).map_err(LlmError::weights)?;
            QTensor::quantize(&dense, target.dtype()).map_err(LlmError::weights)?
        };
        tensors.push((name.clone(), tensor));
    }

    let file_type = gguf_file::Value::U32(target.file_type());
    let mut metadata: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .filter(|(key, _)| key.as_str() != "general.file_type")
        .map(|(key, value)| (key.as_str(), value))
        .collect();
    metadata.sort_by_key(|(key, _)| *key);
    metadata.push(("general.file_type", &file_type));
    let tensor_refs: Vec<(&str, &QTensor)> = tensors
        .iter()
        .map(|(name, tensor)| (name.as_str(), tensor))
        .collect();
    let mut out = Cursor::new(Vec::new());
    gguf_file::write(&mut out, &metadata, &tensor_refs).map_err(LlmError::weights)?;
    let weights = out.into_inner();

    let stem = format!("{}.{}", crate::MODEL_ID, target.name());
    let manifest = Manifest {
        id: crate::MODEL_ID.to_owned(),
        dtype: target.name().to_owned(),
        weights: describe(format!("{stem}.gguf"), &weights),
        tokenizer: describe(format!("{stem}.tokenizer.json"), &tokenizer),
    };
    Ok(Prepared {
        weights,
        tokenizer,
        manifest,
    })
}

fn describe(file: String, bytes: &[u8]) -> ManifestFile {
    let digest = Sha256::digest(bytes);
    ManifestFile {
        file,
        bytes: bytes.len() as u64,
        sha256: digest.iter().map(|byte| format!("{byte:02x}")).collect(),
    }
}

/// The Hugging Face `tokenizer.json` of a GGUF whose vocabulary is GPT-2's
/// byte-level BPE (`tokenizer.ggml.model` `gpt2`) with SmolLM's pre-tokenizer
/// (digits one by one, then GPT-2's split): tokens, merges, and the control
/// tokens as special added tokens.
pub fn tokenizer_json(metadata: &HashMap<String, gguf_file::Value>) -> Result<Value, LlmError> {
    let text = |key: &str| {
        metadata
            .get(key)
            .and_then(|value| value.to_string().ok())
            .cloned()
            .ok_or_else(|| LlmError::Tokenizer(format!("the GGUF has no `{key}`")))
    };
    let list = |key: &str| {
        metadata
            .get(key)
            .and_then(|value| value.to_vec().ok())
            .ok_or_else(|| LlmError::Tokenizer(format!("the GGUF has no `{key}`")))
    };
    let model = text("tokenizer.ggml.model")?;
    let pre = text("tokenizer.ggml.pre")?;
    if model != "gpt2" || pre != "smollm" {
        return Err(LlmError::Tokenizer(format!(
            "the vocabulary is `{model}` with the `{pre}` pre-tokenizer; only `gpt2` with `smollm` (SmolLM2's) is supported"
        )));
    }
    let tokens = list("tokenizer.ggml.tokens")?;
    let merges = list("tokenizer.ggml.merges")?;
    let types = list("tokenizer.ggml.token_type")?;
    let mut vocab = serde_json::Map::with_capacity(tokens.len());
    let mut added = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        let token = token
            .to_string()
            .map_err(|error| LlmError::Tokenizer(format!("token {id}: {error}")))?;
        vocab.insert(token.clone(), json!(id));
        // llama.cpp's token types: 3 is a control token.
        let control = types
            .get(id)
            .and_then(|kind| kind.to_i32().ok())
            .is_some_and(|kind| kind == 3);
        if control {
            added.push(json!({
                "id": id, "content": token, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true
            }));
        }
    }
    let merges: Vec<Value> = merges
        .iter()
        .map(|merge| merge.to_string().map(|merge| json!(merge)))
        .collect::<Result<_, _>>()
        .map_err(|error| LlmError::Tokenizer(format!("a merge: {error}")))?;
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Digits", "individual_digits": true},
                {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
            ]
        },
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": false, "vocab": vocab, "merges": merges
        }
    }))
}
