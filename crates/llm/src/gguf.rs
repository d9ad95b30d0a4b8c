//! The GGUF header, checked before candle reads it. candle's reader takes
//! the header's word for what it then divides by and allocates:
//! `general.alignment` (0 divides by zero), the llama hyper-parameters
//! (`head_count` and `head_count_kv` of 0 divide by zero; shapes that do not
//! agree fail or panic at the first token), counts and lengths (each array
//! value is some 30 bytes in memory for one on disk). So every count, length
//! and offset is checked against the file's size and against the limits of a
//! model Kiln runs, and the hyper-parameters against each other and against
//! the tensors' shapes. What is wrong is an [`LlmError::Weights`] naming it.
//! The check is Kiln's, not a second GGUF reader: it keeps nothing but what
//! it checks, and candle reads the file after it.

use std::collections::HashMap;

use candle_core::quantized::GgmlDType;

use crate::LlmError;

/// The most tensors a header may list (SmolLM2-135M has 272; a 70B llama 723).
const MAX_TENSORS: u64 = 16_384;
/// The most metadata entries a header may have (SmolLM2-135M's has 37).
const MAX_METADATA: u64 = 4_096;
/// The most values all the header's arrays may hold together (SmolLM2's
/// vocabulary, its types and its merges are some 147,000).
const MAX_ARRAY_VALUES: u64 = 1 << 22;
/// The longest key or tensor name (the GGUF specification's limit for keys).
const MAX_NAME_BYTES: u64 = 65_535;
/// The most layers a model may have.
const MAX_BLOCKS: u32 = 1_024;
/// The largest `general.alignment`.
const MAX_ALIGNMENT: u64 = 1 << 16;
/// The alignment of tensor data when the header names none (candle's too).
const DEFAULT_ALIGNMENT: u64 = 32;

/// GGUF's value types, by their number in the file.
const TYPE_U32: u32 = 4;
const TYPE_F32: u32 = 6;
const TYPE_BOOL: u32 = 7;
const TYPE_STRING: u32 = 8;
const TYPE_ARRAY: u32 = 9;

/// A metadata value as far as the check keeps it.
#[derive(Debug)]
enum Meta {
    /// An integer of at most 32 bits, with its GGUF type.
    Integer {
        kind: u32,
        value: i64,
    },
    F32(f32),
    Text(String),
    /// Anything else (64-bit numbers, booleans, arrays): not kept.
    Other,
}

/// One tensor as its header describes it, its dimensions in candle's order
/// (the file's reversed).
struct TensorEntry {
    shape: Vec<u64>,
    /// Where its data starts, from the start of the data section.
    offset: u64,
    bytes: u64,
}

/// Checks the GGUF header of `bytes` (the whole file) as described in the
/// module's documentation.
pub(crate) fn check(bytes: &[u8]) -> Result<(), LlmError> {
    let mut header = Header { bytes, at: 0 };
    let magic = header.take(4, "the magic number")?;
    if magic != b"GGUF" {
        return Err(weights(format!(
            "this is not a GGUF file: it starts with {magic:02x?}, not `GGUF`"
        )));
    }
    let version = header.u32("the version")?;
    if !matches!(version, 2 | 3) {
        return Err(weights(format!(
            "the GGUF is version {version}, and Kiln reads versions 2 and 3"
        )));
    }
    let tensor_count = header.u64("the tensor count")?;
    let metadata_count = header.u64("the metadata count")?;
    if tensor_count > MAX_TENSORS {
        return Err(weights(format!(
            "the GGUF header says {tensor_count} tensors, and a model Kiln runs has at most {MAX_TENSORS}"
        )));
    }
    if metadata_count > MAX_METADATA {
        return Err(weights(format!(
            "the GGUF header says {metadata_count} metadata entries, and a model Kiln runs has at most {MAX_METADATA}"
        )));
    }
    // Each entry's least size on disk: a metadata key's length, its type and
    // a byte of value; a tensor's name length, dimension count, type, offset.
    let least = metadata_count * (8 + 4 + 1) + tensor_count * (8 + 4 + 4 + 8);
    if least > header.remaining() {
        return Err(weights(format!(
            "the GGUF header says {tensor_count} tensors and {metadata_count} metadata entries, more than its {} bytes hold",
            bytes.len()
        )));
    }

    let mut metadata: HashMap<String, Meta> = HashMap::new();
    let mut array_values = 0_u64;
    for _ in 0..metadata_count {
        let key = header.name("a metadata key")?;
        let kind = header.u32(&format!("the type of `{key}`"))?;
        let value = header.value(&key, kind, &mut array_values)?;
        if metadata.insert(key.clone(), value).is_some() {
            return Err(weights(format!("the metadata key `{key}` appears twice")));
        }
    }

    let alignment = alignment(metadata.get("general.alignment"))?;
    let mut tensors: HashMap<String, TensorEntry> = HashMap::new();
    for _ in 0..tensor_count {
        let name = header.name("a tensor's name")?;
        let entry = header.tensor(&name)?;
        if tensors.insert(name.clone(), entry).is_some() {
            return Err(weights(format!("the tensor `{name}` appears twice")));
        }
    }
    let data_start = (header.at as u64).div_ceil(alignment) * alignment;
    let file_bytes = bytes.len() as u64;
    for (name, entry) in &tensors {
        let end = data_start
            .checked_add(entry.offset)
            .and_then(|start| start.checked_add(entry.bytes));
        if end.is_none_or(|end| end > file_bytes) {
            return Err(weights(format!(
                "the tensor `{name}` ({} bytes at offset {} of the data) lies past the end of the file's {file_bytes} bytes",
                entry.bytes, entry.offset
            )));
        }
    }
    check_llama(&metadata, &tensors)
}

fn weights(problem: String) -> LlmError {
    LlmError::Weights(problem)
}

/// The alignment candle will use: the header's `general.alignment` when it
/// is an integer of at most 32 bits, not negative (candle ignores any other),
/// which must then be a power of two.
fn alignment(value: Option<&Meta>) -> Result<u64, LlmError> {
    match value {
        Some(Meta::Integer { value, .. }) if *value >= 0 => {
            let alignment = value.unsigned_abs();
            if !alignment.is_power_of_two() || alignment > MAX_ALIGNMENT {
                return Err(weights(format!(
                    "`general.alignment` is {alignment}, and it must be a power of two up to {MAX_ALIGNMENT}"
                )));
            }
            Ok(alignment)
        }
        _ => Ok(DEFAULT_ALIGNMENT),
    }
}

/// The header being walked: the whole file and where the walk is.
struct Header<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Header<'a> {
    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }

    /// The next `count` bytes; `what` names them when the file ends first.
    fn take(&mut self, count: u64, what: &str) -> Result<&'a [u8], LlmError> {
        if count > self.remaining() {
            return Err(weights(format!(
                "the file ends after {} bytes, inside {what}",
                self.bytes.len()
            )));
        }
        let start = self.at;
        // `count` fits: it is at most what remains of a slice.
        self.at += count as usize;
        Ok(&self.bytes[start..self.at])
    }

    fn u32(&mut self, what: &str) -> Result<u32, LlmError> {
        let mut word = [0; 4];
        word.copy_from_slice(self.take(4, what)?);
        Ok(u32::from_le_bytes(word))
    }

    fn u64(&mut self, what: &str) -> Result<u64, LlmError> {
        let mut word = [0; 8];
        word.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(word))
    }

    /// A string as candle reads it: NULs at its end dropped, not UTF-8
    /// replaced.
    fn string(&mut self, what: &str) -> Result<String, LlmError> {
        let length = self.u64(what)?;
        let bytes = self.take(length, what)?;
        let end = bytes
            .iter()
            .rposition(|byte| *byte != 0)
            .map_or(0, |last| last + 1);
        Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }

    /// A key or a tensor's name: a string of at most [`MAX_NAME_BYTES`].
    fn name(&mut self, what: &str) -> Result<String, LlmError> {
        let start = self.at;
        let length = self.u64(what)?;
        if length > MAX_NAME_BYTES {
            return Err(weights(format!(
                "{what} at byte {start} is {length} bytes long, and a name is at most {MAX_NAME_BYTES}"
            )));
        }
        self.at = start;
        self.string(what)
    }

    /// The value of `key`, of GGUF type `kind`; array values are counted in
    /// `array_values`.
    fn value(&mut self, key: &str, kind: u32, array_values: &mut u64) -> Result<Meta, LlmError> {
        let what = format!("the value of `{key}`");
        Ok(match kind {
            0 => Meta::Integer {
                kind,
                value: i64::from(self.take(1, &what)?[0]),
            },
            1 => Meta::Integer {
                kind,
                value: i64::from(self.take(1, &what)?[0] as i8),
            },
            2 | 3 => {
                let mut word = [0; 2];
                word.copy_from_slice(self.take(2, &what)?);
                let value = if kind == 2 {
                    i64::from(u16::from_le_bytes(word))
                } else {
                    i64::from(i16::from_le_bytes(word))
                };
                Meta::Integer { kind, value }
            }
            TYPE_U32 => Meta::Integer {
                kind,
                value: i64::from(self.u32(&what)?),
            },
            5 => Meta::Integer {
                kind,
                value: i64::from(self.u32(&what)? as i32),
            },
            TYPE_F32 => Meta::F32(f32::from_bits(self.u32(&what)?)),
            TYPE_BOOL => match self.take(1, &what)?[0] {
                0 | 1 => Meta::Other,
                other => {
                    return Err(weights(format!(
                        "`{key}` is a boolean of value {other}, neither 0 nor 1"
                    )));
                }
            },
            TYPE_STRING => Meta::Text(self.string(&what)?),
            TYPE_ARRAY => {
                self.array(key, array_values)?;
                Meta::Other
            }
            10..=12 => {
                self.take(8, &what)?;
                Meta::Other
            }
            other => {
                return Err(weights(format!(
                    "`{key}` has value type {other}, which GGUF does not define"
                )));
            }
        })
    }

    /// Steps over the array that is `key`'s value.
    fn array(&mut self, key: &str, array_values: &mut u64) -> Result<(), LlmError> {
        let what = format!("the array `{key}`");
        let kind = self.u32(&what)?;
        let length = self.u64(&what)?;
        let size = match kind {
            0 | 1 | TYPE_BOOL => 1,
            2 | 3 => 2,
            TYPE_U32 | 5 | TYPE_F32 => 4,
            10..=12 => 8,
            // A string's length.
            TYPE_STRING => 8,
            TYPE_ARRAY => {
                return Err(weights(format!(
                    "`{key}` is an array of arrays, which no model Kiln runs has"
                )));
            }
            other => {
                return Err(weights(format!(
                    "`{key}` is an array of value type {other}, which GGUF does not define"
                )));
            }
        };
        *array_values = array_values.saturating_add(length);
        if *array_values > MAX_ARRAY_VALUES {
            return Err(weights(format!(
                "the header's arrays hold more than {MAX_ARRAY_VALUES} values (`{key}` has {length})"
            )));
        }
        if length.saturating_mul(size) > self.remaining() {
            return Err(weights(format!(
                "`{key}` has {length} values, more than the {} bytes left in the file hold",
                self.remaining()
            )));
        }
        if kind == TYPE_STRING {
            for _ in 0..length {
                let length = self.u64(&what)?;
                self.take(length, &what)?;
            }
        } else if kind == TYPE_BOOL {
            let values = self.take(length, &what)?;
            if values.iter().any(|value| *value > 1) {
                return Err(weights(format!("`{key}` holds a boolean neither 0 nor 1")));
            }
        } else {
            self.take(length * size, &what)?;
        }
        Ok(())
    }

    /// The rest of the entry of the tensor `name`: its dimensions, type and
    /// offset.
    fn tensor(&mut self, name: &str) -> Result<TensorEntry, LlmError> {
        let what = format!("the tensor `{name}`");
        let dimensions = self.u32(&what)?;
        if !(1..=4).contains(&dimensions) {
            return Err(weights(format!(
                "the tensor `{name}` has {dimensions} dimensions, and a tensor has 1 to 4"
            )));
        }
        let mut shape = Vec::with_capacity(dimensions as usize);
        for _ in 0..dimensions {
            shape.push(self.u64(&what)?);
        }
        shape.reverse();
        let kind = self.u32(&what)?;
        let dtype = dtype(kind).ok_or_else(|| {
            weights(format!(
                "the tensor `{name}` is of GGML type {kind}, and Kiln's weights hold F32, F16, Q4_0 and Q8_0 only"
            ))
        })?;
        let offset = self.u64(&what)?;
        let elements = shape
            .iter()
            .try_fold(1_u64, |count, dimension| count.checked_mul(*dimension))
            .filter(|count| usize::try_from(*count).is_ok());
        let block = dtype.block_size() as u64;
        let bytes =
            elements.and_then(|count| (count / block).checked_mul(dtype.type_size() as u64));
        let bytes = match bytes {
            Some(bytes) if shape.last().is_some_and(|last| last % block == 0) => bytes,
            Some(_) => {
                return Err(weights(format!(
                    "the tensor `{name}` of shape {shape:?} does not divide into {dtype:?}'s blocks of {block}"
                )));
            }
            None => {
                return Err(weights(format!(
                    "the tensor `{name}` of shape {shape:?} has more elements than a tensor can"
                )));
            }
        };
        Ok(TensorEntry {
            shape,
            offset,
            bytes,
        })
    }
}

/// The tensor types Kiln's prepared weights hold: the norms as they came
/// (F32, F16), the rest quantized to Q8_0 or Q4_0 (`kiln-model-prepare`).
fn dtype(kind: u32) -> Option<GgmlDType> {
    match kind {
        0 => Some(GgmlDType::F32),
        1 => Some(GgmlDType::F16),
        2 => Some(GgmlDType::Q4_0),
        8 => Some(GgmlDType::Q8_0),
        _ => None,
    }
}

/// The llama hyper-parameters candle's `ModelWeights` divides and shapes by,
/// and the shapes of the tensors it reads, agreeing with each other.
fn check_llama(
    metadata: &HashMap<String, Meta>,
    tensors: &HashMap<String, TensorEntry>,
) -> Result<(), LlmError> {
    let architecture = match metadata.get("general.architecture") {
        Some(Meta::Text(text)) => text.as_str(),
        _ => "",
    };
    if architecture != "llama" {
        return Err(weights(format!(
            "`general.architecture` is `{architecture}`, and only `llama` (SmolLM2's) is supported"
        )));
    }
    // candle reads these as u32 exactly.
    let number = |key: &str| -> Result<u64, LlmError> {
        match metadata.get(key) {
            Some(Meta::Integer {
                kind: TYPE_U32,
                value,
            }) => Ok(value.unsigned_abs()),
            Some(_) => Err(weights(format!("`{key}` is not a 32-bit unsigned integer"))),
            None => Err(weights(format!("the GGUF has no `{key}`"))),
        }
    };
    let positive = |key: &str| -> Result<u64, LlmError> {
        let value = number(key)?;
        if value == 0 {
            return Err(weights(format!("`{key}` is 0")));
        }
        Ok(value)
    };
    let heads = positive("llama.attention.head_count")?;
    let kv_heads = positive("llama.attention.head_count_kv")?;
    let blocks = positive("llama.block_count")?;
    let embedding = positive("llama.embedding_length")?;
    let rope = number("llama.rope.dimension_count")?;
    if heads % kv_heads != 0 {
        return Err(weights(format!(
            "`llama.attention.head_count` {heads} is not a multiple of `llama.attention.head_count_kv` {kv_heads}"
        )));
    }
    if embedding % heads != 0 {
        return Err(weights(format!(
            "`llama.embedding_length` {embedding} does not divide into `llama.attention.head_count` {heads} heads"
        )));
    }
    if blocks > u64::from(MAX_BLOCKS) {
        return Err(weights(format!(
            "`llama.block_count` is {blocks}, and a model Kiln runs has at most {MAX_BLOCKS} layers"
        )));
    }
    let head_width = embedding / heads;
    if rope != head_width || rope % 2 != 0 {
        return Err(weights(format!(
            "`llama.rope.dimension_count` is {rope}, and candle rotates whole heads: it must be the head width {head_width}, even"
        )));
    }
    match metadata.get("llama.attention.layer_norm_rms_epsilon") {
        Some(Meta::F32(epsilon)) if epsilon.is_finite() && *epsilon > 0.0 => {}
        _ => {
            return Err(weights(
                "`llama.attention.layer_norm_rms_epsilon` is not a positive 32-bit float"
                    .to_owned(),
            ));
        }
    }
    if let Some(Meta::Integer {
        kind: TYPE_U32,
        value,
    }) = metadata.get("llama.expert_count")
        && *value > 1
    {
        return Err(weights(format!(
            "`llama.expert_count` is {value}, and Kiln runs dense llama models only"
        )));
    }

    let shape_of = |name: &str| -> Result<&[u64], LlmError> {
        tensors
            .get(name)
            .map(|entry| entry.shape.as_slice())
            .ok_or_else(|| weights(format!("the GGUF has no tensor `{name}`")))
    };
    let expect = |name: &str, wanted: &[u64]| -> Result<(), LlmError> {
        let shape = shape_of(name)?;
        if shape != wanted {
            return Err(weights(format!(
                "the tensor `{name}` has shape {shape:?}, and the header's hyper-parameters make it {wanted:?}"
            )));
        }
        Ok(())
    };
    let vocabulary = match shape_of("token_embd.weight")? {
        [rows, width] if *width == embedding && *rows > 0 => *rows,
        shape => {
            return Err(weights(format!(
                "the tensor `token_embd.weight` has shape {shape:?}, and the header's hyper-parameters make it [vocabulary, {embedding}]"
            )));
        }
    };
    expect("output_norm.weight", &[embedding])?;
    if tensors.contains_key("output.weight") {
        expect("output.weight", &[vocabulary, embedding])?;
    }
    let kv_width = head_width * kv_heads;
    for block in 0..blocks {
        let name = |part: &str| format!("blk.{block}.{part}.weight");
        expect(&name("attn_q"), &[embedding, embedding])?;
        expect(&name("attn_k"), &[kv_width, embedding])?;
        expect(&name("attn_v"), &[kv_width, embedding])?;
        expect(&name("attn_output"), &[embedding, embedding])?;
        expect(&name("attn_norm"), &[embedding])?;
        expect(&name("ffn_norm"), &[embedding])?;
        let gate = name("ffn_gate");
        let feed_forward = match shape_of(&gate)? {
            [rows, width] if *width == embedding && *rows > 0 => *rows,
            shape => {
                return Err(weights(format!(
                    "the tensor `{gate}` has shape {shape:?}, and the header's hyper-parameters make it [feed-forward, {embedding}]"
                )));
            }
        };
        expect(&name("ffn_up"), &[feed_forward, embedding])?;
        expect(&name("ffn_down"), &[embedding, feed_forward])?;
    }
    Ok(())
}
