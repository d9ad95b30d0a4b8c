//! An untrusted model folder (`kiln --provider local --base-url DIR`) and an
//! untrusted GGUF, without the real model: tiny files of the tests' own
//! making. A manifest's names stay inside the folder, links and devices are
//! refused before anything is read, each file is read only as far as its
//! manifest's size and must have its digest, and a malformed GGUF header is
//! `model_corrupt` naming the file, never a panic that ends the model's
//! thread. `Model::load` is what the browser's model worker runs too.

#![expect(clippy::expect_used, reason = "tests")]

use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use kiln_llm::native::LocalModel;
use kiln_llm::{LlmError, Manifest, Model};
use kiln_providers::{ErrorKind, ProviderError};
use sha2::{Digest as _, Sha256};

const WEIGHTS: &str = "tiny.gguf";
const TOKENIZER: &str = "tiny.tokenizer.json";

/// A chat template in the shape of SmolLM2's, short.
const TEMPLATE: &str = "{% for message in messages %}<|im_start|>{{ message.role }} {{ message.content }}<|im_end|> {% endfor %}<|im_start|>assistant";

/// A word-level tokenizer of eight tokens: the control tokens and a few words.
fn tokenizer() -> Vec<u8> {
    let special = |id: u32, content: &str| {
        serde_json::json!({
            "id": id, "content": content, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true
        })
    };
    serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [special(1, "<|im_start|>"), special(2, "<|im_end|>")],
        "normalizer": null,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": null,
        "decoder": null,
        "model": {
            "type": "WordLevel",
            "vocab": {
                "<unk>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "user": 3,
                "assistant": 4, "hi": 5, "there": 6, "system": 7
            },
            "unk_token": "<unk>"
        }
    })
    .to_string()
    .into_bytes()
}

/// The tensors of a one-layer llama with 4-wide embeddings, 2 heads, 1
/// key-value head, an 8-wide feed-forward and 8 tokens, in candle's order of
/// dimensions.
fn tiny_tensors() -> Vec<(String, Vec<usize>)> {
    [
        ("token_embd.weight", vec![8, 4]),
        ("output_norm.weight", vec![4]),
        ("blk.0.attn_q.weight", vec![4, 4]),
        ("blk.0.attn_k.weight", vec![2, 4]),
        ("blk.0.attn_v.weight", vec![2, 4]),
        ("blk.0.attn_output.weight", vec![4, 4]),
        ("blk.0.ffn_gate.weight", vec![8, 4]),
        ("blk.0.ffn_up.weight", vec![8, 4]),
        ("blk.0.ffn_down.weight", vec![4, 8]),
        ("blk.0.attn_norm.weight", vec![4]),
        ("blk.0.ffn_norm.weight", vec![4]),
    ]
    .into_iter()
    .map(|(name, shape)| (name.to_owned(), shape))
    .collect()
}

/// A tiny llama GGUF (version 2, as candle and `kiln-model-prepare` write it)
/// that loads, with `metadata` set over its own and the tensors `shapes` names
/// given those shapes (or left out, for `None`).
fn tiny_gguf(metadata: &[(&str, Value)], shapes: &[(&str, Option<Vec<usize>>)]) -> Vec<u8> {
    let mut entries: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String("llama".into())),
        ("general.name".into(), Value::String("tiny".into())),
        ("llama.attention.head_count".into(), Value::U32(2)),
        ("llama.attention.head_count_kv".into(), Value::U32(1)),
        ("llama.block_count".into(), Value::U32(1)),
        ("llama.embedding_length".into(), Value::U32(4)),
        ("llama.feed_forward_length".into(), Value::U32(8)),
        ("llama.rope.dimension_count".into(), Value::U32(2)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Value::F32(1e-5),
        ),
        ("llama.context_length".into(), Value::U32(64)),
        (
            "tokenizer.chat_template".into(),
            Value::String(TEMPLATE.into()),
        ),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(2)),
    ];
    for (key, value) in metadata {
        entries.retain(|(kept, _)| kept != key);
        entries.push(((*key).to_owned(), value.clone()));
    }
    let mut tensors = Vec::new();
    for (name, shape) in tiny_tensors() {
        let shape = match shapes.iter().find(|(changed, _)| *changed == name) {
            Some((_, changed)) => changed.clone(),
            None => Some(shape),
        };
        let Some(shape) = shape else { continue };
        let dense = Tensor::ones(shape, DType::F32, &Device::Cpu).expect("a tensor");
        tensors.push((
            name,
            QTensor::quantize(&dense, GgmlDType::F32).expect("quantized"),
        ));
    }
    let metadata: Vec<(&str, &Value)> = entries
        .iter()
        .map(|(key, value)| (key.as_str(), value))
        .collect();
    let tensors: Vec<(&str, &QTensor)> = tensors
        .iter()
        .map(|(name, tensor)| (name.as_str(), tensor))
        .collect();
    let mut out = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut out, &metadata, &tensors).expect("written");
    out.into_inner()
}

/// A GGUF header written by hand: magic, `version`, the counts, then `rest`.
fn raw_gguf(version: u32, tensors: u64, entries: u64, rest: &[u8]) -> Vec<u8> {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(version.to_le_bytes());
    bytes.extend(tensors.to_le_bytes());
    bytes.extend(entries.to_le_bytes());
    bytes.extend(rest);
    bytes
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// One entry of a manifest: `name`, described as `bytes` are.
fn entry(name: &str, bytes: &[u8]) -> serde_json::Value {
    serde_json::json!({"file": name, "bytes": bytes.len(), "sha256": sha256(bytes)})
}

fn manifest_json(weights: serde_json::Value, tokenizer: serde_json::Value) -> String {
    serde_json::json!({
        "id": kiln_llm::MODEL_ID, "dtype": "f32", "weights": weights, "tokenizer": tokenizer
    })
    .to_string()
}

fn write_manifest(dir: &Path, weights: serde_json::Value, tokenizer: serde_json::Value) {
    std::fs::write(
        dir.join(kiln_llm::MANIFEST_FILE),
        manifest_json(weights, tokenizer),
    )
    .expect("written");
}

/// A folder holding `weights` and the tokenizer, and a manifest that
/// describes them truly.
fn folder(weights: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a folder");
    let tokenizer = tokenizer();
    std::fs::write(dir.path().join(WEIGHTS), weights).expect("written");
    std::fs::write(dir.path().join(TOKENIZER), &tokenizer).expect("written");
    write_manifest(
        dir.path(),
        entry(WEIGHTS, weights),
        entry(TOKENIZER, &tokenizer),
    );
    dir
}

/// Asserts that `loaded` is `model_corrupt`, its message holding every one of
/// `needles`.
fn assert_corrupt(case: &str, loaded: Result<(), ProviderError>, needles: &[&str]) {
    let error = match loaded {
        Ok(()) => panic!("{case}: the folder loaded"),
        Err(error) => error,
    };
    assert_eq!(
        error.kind,
        ErrorKind::ModelCorrupt,
        "{case}: {}",
        error.message
    );
    for needle in needles {
        assert!(
            error.message.contains(needle),
            "{case}: {:?} does not say {needle:?}",
            error.message
        );
    }
    assert!(error.hint.is_some(), "{case}: no hint");
}

#[test]
fn a_well_formed_folder_loads() {
    let dir = folder(&tiny_gguf(&[], &[]));
    LocalModel::open(dir.path())
        .load()
        .expect("the tiny model loads");
}

#[test]
fn manifest_names_stay_inside_the_folder() {
    // A well-formed model outside the folder: only the name is wrong.
    let outside = folder(&tiny_gguf(&[], &[]));
    let weights = std::fs::read(outside.path().join(WEIGHTS)).expect("read");
    let absolute = outside.path().join(WEIGHTS).display().to_string();
    let parent = tempfile::tempdir().expect("a folder");
    std::fs::write(parent.path().join(WEIGHTS), &weights).expect("written");
    let inner = parent.path().join("model");
    std::fs::create_dir(&inner).expect("a folder");
    let tokenizer = tokenizer();
    std::fs::write(inner.join(TOKENIZER), &tokenizer).expect("written");
    let cases = [
        ("an absolute name", absolute.as_str()),
        ("a name in the parent folder", "../tiny.gguf"),
        ("a name in a sub-folder", "sub/tiny.gguf"),
        ("a hidden name", ".tiny.gguf"),
        ("the manifest itself", kiln_llm::MANIFEST_FILE),
    ];
    std::fs::create_dir(inner.join("sub")).expect("a folder");
    std::fs::write(inner.join("sub").join(WEIGHTS), &weights).expect("written");
    std::fs::write(inner.join(".tiny.gguf"), &weights).expect("written");
    for (case, name) in cases {
        write_manifest(&inner, entry(name, &weights), entry(TOKENIZER, &tokenizer));
        assert_corrupt(
            case,
            LocalModel::open(&inner).load(),
            &[kiln_llm::MANIFEST_FILE, "not a plain file name"],
        );
    }
}

/// What the browser's model worker runs on the manifest it fetched and on
/// each file it downloads or finds cached (it digests with the browser's own
/// SHA-256, and names a file by its URL): the native host's checks.
#[test]
fn the_model_workers_checks_are_the_native_ones() {
    let weights = tiny_gguf(&[], &[]);
    let tokenizer = tokenizer();
    let manifest = Manifest::parse(
        manifest_json(entry(WEIGHTS, &weights), entry(TOKENIZER, &tokenizer)).as_bytes(),
    )
    .expect("the manifest parses");
    let url = "https://kiln.example/models/tiny.gguf";
    let length = weights.len() as u64;
    assert_eq!(manifest.weights.check_length(url, length), Ok(()));
    assert_eq!(
        manifest.weights.check_digest(url, &sha256(&weights)),
        Ok(())
    );
    let longer = manifest.weights.check_length(url, length + 1);
    assert_eq!(
        longer,
        Err(LlmError::File {
            file: url.to_owned(),
            problem: format!("is {} bytes, and its manifest says {length}", length + 1),
        })
    );
    let other = sha256(b"another file");
    let digest = manifest
        .weights
        .check_digest(url, &other)
        .expect_err("another digest");
    assert_eq!(digest.code(), "model_corrupt");
    assert!(digest.to_string().contains(&other), "{digest}");
    assert!(digest.hint().is_some());

    let weights_entry = |file: &str, bytes: u64, sha256: &str| serde_json::json!({"file": file, "bytes": bytes, "sha256": sha256});
    let digest = sha256(&weights);
    let cases = [
        (
            "an absolute name",
            manifest_json(
                weights_entry("/etc/passwd", length, &digest),
                entry(TOKENIZER, &tokenizer),
            ),
            "not a plain file name",
        ),
        (
            "a parent folder",
            manifest_json(
                weights_entry("../x", length, &digest),
                entry(TOKENIZER, &tokenizer),
            ),
            "not a plain file name",
        ),
        (
            "a URL",
            manifest_json(
                weights_entry("https://evil.example/x.gguf", length, &digest),
                entry(TOKENIZER, &tokenizer),
            ),
            "not a plain file name",
        ),
        (
            "a Windows path",
            manifest_json(
                weights_entry("..\\x.gguf", length, &digest),
                entry(TOKENIZER, &tokenizer),
            ),
            "not a plain file name",
        ),
        (
            "one file twice",
            manifest_json(entry(WEIGHTS, &weights), entry(WEIGHTS, &tokenizer)),
            "both",
        ),
        (
            "weights past the limit",
            manifest_json(
                weights_entry(WEIGHTS, kiln_llm::MAX_WEIGHTS_BYTES + 1, &digest),
                entry(TOKENIZER, &tokenizer),
            ),
            "at most",
        ),
        (
            "a tokenizer past the limit",
            manifest_json(
                entry(WEIGHTS, &weights),
                weights_entry(TOKENIZER, kiln_llm::MAX_TOKENIZER_BYTES + 1, &digest),
            ),
            "at most",
        ),
        (
            "an upper-case digest",
            manifest_json(
                weights_entry(WEIGHTS, length, &digest.to_uppercase()),
                entry(TOKENIZER, &tokenizer),
            ),
            "64 lower-case hex digits",
        ),
        (
            "a short digest",
            manifest_json(
                weights_entry(WEIGHTS, length, &digest[..63]),
                entry(TOKENIZER, &tokenizer),
            ),
            "64 lower-case hex digits",
        ),
        ("not JSON", "{\"id\": ".to_owned(), "JSON"),
        (
            "a huge manifest",
            format!("{}{}", " ".repeat(70_000), "{}"),
            "at most",
        ),
    ];
    for (case, json, needle) in cases {
        match Manifest::parse(json.as_bytes()) {
            Err(error @ LlmError::Manifest(_)) => {
                assert_eq!(error.code(), "model_corrupt", "{case}");
                assert!(error.to_string().contains(needle), "{case}: {error}");
            }
            other => panic!("{case}: {other:?}"),
        }
    }
}

#[cfg(unix)]
#[test]
fn links_and_devices_are_refused_before_anything_is_read() {
    let weights = tiny_gguf(&[], &[]);
    let tokenizer = tokenizer();
    // A link to a well-formed model: refused for being a link.
    let outside = folder(&weights);
    let dir = tempfile::tempdir().expect("a folder");
    std::os::unix::fs::symlink(outside.path().join(WEIGHTS), dir.path().join(WEIGHTS))
        .expect("a link");
    std::fs::write(dir.path().join(TOKENIZER), &tokenizer).expect("written");
    write_manifest(
        dir.path(),
        entry(WEIGHTS, &weights),
        entry(TOKENIZER, &tokenizer),
    );
    assert_corrupt(
        "a link to a model",
        LocalModel::open(dir.path()).load(),
        &[WEIGHTS, "symbolic link"],
    );

    // A link to /dev/zero, as the weights and as the manifest: refused
    // without a byte read (reading it would never end).
    let dir = tempfile::tempdir().expect("a folder");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join(WEIGHTS)).expect("a link");
    std::fs::write(dir.path().join(TOKENIZER), &tokenizer).expect("written");
    write_manifest(
        dir.path(),
        entry(WEIGHTS, &weights),
        entry(TOKENIZER, &tokenizer),
    );
    assert_corrupt(
        "a link to /dev/zero",
        LocalModel::open(dir.path()).load(),
        &[WEIGHTS, "symbolic link"],
    );
    let dir = tempfile::tempdir().expect("a folder");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join(kiln_llm::MANIFEST_FILE))
        .expect("a link");
    assert_corrupt(
        "a manifest linked to /dev/zero",
        LocalModel::open(dir.path()).load(),
        &[kiln_llm::MANIFEST_FILE, "symbolic link"],
    );

    // A folder where a file should be.
    let dir = folder(&weights);
    std::fs::remove_file(dir.path().join(WEIGHTS)).expect("removed");
    std::fs::create_dir(dir.path().join(WEIGHTS)).expect("a folder");
    assert_corrupt(
        "a folder as the weights",
        LocalModel::open(dir.path()).load(),
        &[WEIGHTS, "not a regular file"],
    );
}

#[test]
fn each_file_is_the_size_and_digest_its_manifest_says() {
    let weights = tiny_gguf(&[], &[]);
    let tokenizer = tokenizer();

    // A tokenizer longer than its manifest says (still a tokenizer: spaces
    // after the JSON).
    let dir = folder(&weights);
    let mut longer = tokenizer.clone();
    longer.extend(b" ".repeat(4096));
    std::fs::write(dir.path().join(TOKENIZER), &longer).expect("written");
    assert_corrupt(
        "a longer tokenizer",
        LocalModel::open(dir.path()).load(),
        &[TOKENIZER, "bytes, and its manifest says"],
    );

    // Weights shorter than the manifest says.
    let dir = folder(&weights);
    std::fs::write(dir.path().join(WEIGHTS), &weights[..weights.len() - 1]).expect("written");
    assert_corrupt(
        "shorter weights",
        LocalModel::open(dir.path()).load(),
        &[WEIGHTS, "bytes, and its manifest says"],
    );

    // A manifest past any model's size.
    let dir = folder(&weights);
    write_manifest(
        dir.path(),
        serde_json::json!({"file": WEIGHTS, "bytes": 1_u64 << 40, "sha256": sha256(&weights)}),
        entry(TOKENIZER, &tokenizer),
    );
    assert_corrupt(
        "a terabyte of weights",
        LocalModel::open(dir.path()).load(),
        &[kiln_llm::MANIFEST_FILE, "at most"],
    );

    // Weights of the right size whose bytes differ (another model of the same
    // shape: it would load).
    let dir = folder(&weights);
    let other = tiny_gguf(&[("general.name", Value::String("tinx".into()))], &[]);
    assert_eq!(other.len(), weights.len());
    std::fs::write(dir.path().join(WEIGHTS), &other).expect("written");
    assert_corrupt(
        "another model's weights",
        LocalModel::open(dir.path()).load(),
        &[WEIGHTS, "SHA-256", &sha256(&other), &sha256(&weights)],
    );
}

/// GGUF headers that candle's reader refuses, panics on, or takes though
/// the model could not run: each `(case, bytes, what the message says)`.
fn malformed_headers() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let whole = tiny_gguf(&[], &[]);
    // One F32 tensor of 4 × 2⁶¹ elements: 2⁶⁵ bytes, past what 64 bits count.
    let mut tensor = 1_u64.to_le_bytes().to_vec();
    tensor.extend(b"x");
    tensor.extend(2_u32.to_le_bytes());
    tensor.extend(4_u64.to_le_bytes());
    tensor.extend((1_u64 << 61).to_le_bytes());
    tensor.extend(0_u32.to_le_bytes());
    tensor.extend(0_u64.to_le_bytes());
    tensor.extend([0; 64]);
    let huge_tensor = raw_gguf(3, 1, 0, &tensor);
    let mut garbage = b"GGUF".to_vec();
    garbage.extend((0..60_u8).map(|byte| byte.wrapping_mul(37).wrapping_add(200)));
    vec![
        ("garbage after the magic", garbage, "version"),
        (
            "not a GGUF",
            b"PK\x03\x04 a zip file".to_vec(),
            "not a GGUF",
        ),
        ("a header cut short", whole[..600].to_vec(), "ends"),
        (
            "huge tensor counts",
            raw_gguf(3, u64::MAX / 2, 0, &[0; 64]),
            "tensors",
        ),
        (
            "huge metadata counts",
            raw_gguf(3, 0, 1 << 40, &[0; 64]),
            "metadata",
        ),
        ("a tensor too large to count", huge_tensor, "more elements"),
        (
            "tensors past the end of the file",
            whole[..whole.len() - 24].to_vec(),
            "past the end",
        ),
        (
            "an alignment of 0",
            tiny_gguf(&[("general.alignment", Value::U32(0))], &[]),
            "general.alignment",
        ),
        (
            "no attention heads",
            tiny_gguf(&[("llama.attention.head_count", Value::U32(0))], &[]),
            "llama.attention.head_count",
        ),
        (
            "no key-value heads",
            tiny_gguf(&[("llama.attention.head_count_kv", Value::U32(0))], &[]),
            "llama.attention.head_count_kv",
        ),
        (
            "heads that do not divide the embedding",
            tiny_gguf(&[("llama.attention.head_count", Value::U32(3))], &[]),
            "llama.embedding_length",
        ),
        (
            "a key tensor of the wrong shape",
            tiny_gguf(&[], &[("blk.0.attn_k.weight", Some(vec![4, 4]))]),
            "blk.0.attn_k.weight",
        ),
        (
            "a missing layer tensor",
            tiny_gguf(&[], &[("blk.0.ffn_down.weight", None)]),
            "blk.0.ffn_down.weight",
        ),
        (
            "a mixture of experts",
            tiny_gguf(&[("llama.expert_count", Value::U32(4))], &[]),
            "llama.expert_count",
        ),
    ]
}

#[test]
fn malformed_gguf_headers_are_named_never_a_panic() {
    let tokenizer = tokenizer();
    for (case, weights, needle) in malformed_headers() {
        match Model::load(&weights, &tokenizer) {
            Err(LlmError::Weights(why)) => assert!(why.contains(needle), "{case}: {why}"),
            Err(other) => panic!("{case}: {other}"),
            Ok(_) => panic!("{case}: loaded"),
        }
    }
}

#[test]
fn the_model_thread_outlives_a_malformed_gguf() {
    for (case, weights, needle) in malformed_headers() {
        let dir = folder(&weights);
        let model = LocalModel::open(dir.path());
        let path = dir.path().join(WEIGHTS).display().to_string();
        assert_corrupt(case, model.load(), &[&path, needle]);
        // The same thread answers again, the same way.
        assert_corrupt(case, model.load(), &[&path, needle]);
    }
}
