//! What a model call costs: the price catalog (USD per million tokens, by model id), the cost
//! of one call's usage, and the prompt-size estimate the run budget reserves against.
//!
//! The catalog answers only for models it names. A model it does not name is *unpriced*,
//! which the budget treats as unknown, never as free: a wrong price is worse than none,
//! because a price that is too low lets a USD cap admit turns it cannot pay for.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::{ChatRequest, Message, bounded_tool_result};
use crate::event::Usage;

/// The catalog shipped with Kiln, as JSON: `{"model-id": {"input_per_mtok": 2.5,
/// "output_per_mtok": 10.0}, ...}`. Keys starting with `$` are comments; an entry may carry
/// a `"note"` string.
pub const BUILTIN_PRICES_JSON: &str = include_str!("prices.json");

const TOKENS_PER_MTOK: f64 = 1_000_000.0;

/// The two rates of one model, in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl Price {
    /// What a call with this usage cost, in USD.
    pub fn cost_usd(&self, usage: Usage) -> f64 {
        (usage.input_tokens as f64 * self.input_per_mtok
            + usage.output_tokens as f64 * self.output_per_mtok)
            / TOKENS_PER_MTOK
    }

    /// The most a call can cost before it is made: the whole prompt plus every token
    /// `max_tokens` allows the model to write.
    pub fn worst_case_usd(&self, prompt_tokens: u64, max_tokens: u32) -> f64 {
        self.cost_usd(Usage {
            input_tokens: prompt_tokens,
            output_tokens: u64::from(max_tokens),
        })
    }
}

/// Prices by model id.
///
/// [`PriceCatalog::price`] finds a model by its exact id, by its id without a provider
/// prefix, or by its id without a trailing release date, and by nothing looser: no prefix
/// or fuzzy matching, because `gpt-4o` is not `gpt-4o-mini` and a wrong price is worse than
/// none (an unpriced model is bounded by the budget's token ceiling instead).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceCatalog {
    prices: BTreeMap<String, Price>,
}

impl PriceCatalog {
    /// The catalog shipped with Kiln ([`BUILTIN_PRICES_JSON`]).
    ///
    /// A test pins that it parses; were it ever not to, the catalog is empty, which leaves
    /// every model unpriced (bounded by the token ceiling) rather than mispriced.
    pub fn builtin() -> Self {
        Self::from_json(BUILTIN_PRICES_JSON).unwrap_or_default()
    }

    /// Parses a catalog. The error names the entry and the field that is wrong: not an
    /// object, a rate missing, not a number, negative, or a field the catalog does not know.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let root: Value = serde_json::from_str(text)
            .map_err(|error| format!("the price catalog is not valid JSON: {error}"))?;
        let Value::Object(entries) = root else {
            return Err(format!(
                "the price catalog must be a JSON object of model id → price, found {}",
                kiln_types::words::json_type(&root)
            ));
        };
        let mut prices = BTreeMap::new();
        for (model, entry) in &entries {
            if model.starts_with('$') {
                continue;
            }
            prices.insert(model.clone(), parse_entry(model, entry)?);
        }
        Ok(Self { prices })
    }

    /// Adds or replaces one model's price.
    pub fn with(mut self, model: impl Into<String>, price: Price) -> Self {
        self.prices.insert(model.into(), price);
        self
    }

    /// The price of `model`: its exact id; else the id without a provider prefix
    /// (`openai/gpt-4o` → `gpt-4o`, as OpenRouter names models); else without a trailing
    /// date (`claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`, `gpt-4o-2024-08-06` →
    /// `gpt-4o`). Nothing looser.
    pub fn price(&self, model: &str) -> Option<Price> {
        let unprefixed = model.split_once('/').map(|(_, rest)| rest);
        [
            Some(model),
            unprefixed,
            without_date(model),
            unprefixed.and_then(without_date),
        ]
        .into_iter()
        .flatten()
        .find_map(|id| self.prices.get(id).copied())
    }
}

/// One settled call: its model, the usage the provider reported, and what that cost
/// (`None` when the model is unpriced — unknown, not free).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallCost {
    pub model: String,
    pub usage: Usage,
    pub usd: Option<f64>,
    /// The provider reported no usage, or left a side of it at zero (or the turn was cut
    /// before it said): that part of `usage` is Kiln's estimate of what it charges for.
    /// Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

/// Tokens added for each message and each tool definition: the role, separators and JSON
/// structure every wire format wraps around the text.
const PER_ITEM_OVERHEAD_TOKENS: u64 = 4;

/// An estimate of the prompt tokens `request` will send, for the worst case the budget
/// reserves before the call (the provider reports the real count only afterwards).
///
/// It counts a token per 4 bytes of UTF-8, rounded up for each message (its text, its tool
/// calls' names and serialized arguments, a tool result as [`bounded_tool_result`] cuts it)
/// and each tool definition (name, description, serialized schema), plus the response
/// format's schema, plus `PER_ITEM_OVERHEAD_TOKENS` per message and per tool. It is an
/// estimate, made to err high: English runs near 4 characters a token, and counting bytes
/// rather than characters keeps scripts that take about a token per character (CJK, 3 bytes
/// each) from being under-counted fourfold. Over-estimating only reserves headroom that
/// commit hands back; under-estimating would let a turn past the cap.
pub fn estimate_prompt_tokens(request: &ChatRequest) -> u64 {
    let messages: u64 = request
        .messages
        .iter()
        .map(|message| PER_ITEM_OVERHEAD_TOKENS + tokens_for_bytes(message_bytes(message)))
        .sum();
    let tools: u64 = request
        .tools
        .iter()
        .map(|tool| {
            let bytes = tool.name.len() + tool.description.len() + json_len(&tool.input_schema);
            PER_ITEM_OVERHEAD_TOKENS + tokens_for_bytes(bytes)
        })
        .sum();
    let response_format = request
        .options
        .response_format
        .as_ref()
        .map_or(0, |format| {
            tokens_for_bytes(format.name.len() + json_len(&format.schema))
        });
    messages + tools + response_format
}

fn message_bytes(message: &Message) -> usize {
    match message {
        Message::System { text } | Message::User { text } => text.len(),
        Message::Assistant { text, tool_calls } => {
            text.len()
                + tool_calls
                    .iter()
                    .map(|call| call.id.len() + call.name.len() + json_len(&call.arguments))
                    .sum::<usize>()
        }
        Message::Tool {
            call_id,
            name,
            content,
            ..
        } => call_id.len() + name.len() + bounded_tool_result(content).len(),
    }
}

fn tokens_for_bytes(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

fn json_len(value: &Value) -> usize {
    value.to_string().len()
}

const RATE_FIELDS: [&str; 2] = ["input_per_mtok", "output_per_mtok"];

fn parse_entry(model: &str, entry: &Value) -> Result<Price, String> {
    let Value::Object(fields) = entry else {
        return Err(format!(
            "price catalog entry `{model}` must be an object with `input_per_mtok` and \
             `output_per_mtok`, found {}",
            kiln_types::words::json_type(entry)
        ));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|key| !RATE_FIELDS.contains(&key.as_str()) && key.as_str() != "note")
    {
        return Err(format!(
            "price catalog entry `{model}` has an unknown field `{unknown}`; expected \
             `input_per_mtok`, `output_per_mtok` and optionally `note`"
        ));
    }
    if let Some(note) = fields.get("note")
        && !note.is_string()
    {
        return Err(format!(
            "price catalog entry `{model}`: `note` is {}, expected a string",
            kiln_types::words::json_type(note)
        ));
    }
    let [input_per_mtok, output_per_mtok] = RATE_FIELDS;
    Ok(Price {
        input_per_mtok: parse_rate(model, input_per_mtok, fields.get(input_per_mtok))?,
        output_per_mtok: parse_rate(model, output_per_mtok, fields.get(output_per_mtok))?,
    })
}

fn parse_rate(model: &str, field: &str, value: Option<&Value>) -> Result<f64, String> {
    let expected = "expected a non-negative number of USD per million tokens";
    let Some(value) = value else {
        return Err(format!(
            "price catalog entry `{model}`: `{field}` is missing, {expected}"
        ));
    };
    match value.as_f64() {
        Some(rate) if rate.is_finite() && rate >= 0.0 => Ok(rate),
        Some(rate) => Err(format!(
            "price catalog entry `{model}`: `{field}` is {rate}, {expected}"
        )),
        None => Err(format!(
            "price catalog entry `{model}`: `{field}` is {} `{value}`, {expected}",
            kiln_types::words::json_type(value)
        )),
    }
}

/// `id` without a trailing release date, `-YYYYMMDD` (Anthropic) or `-YYYY-MM-DD` (OpenAI),
/// when it has one and something is left before it.
fn without_date(id: &str) -> Option<&str> {
    ["-dddddddd", "-dddd-dd-dd"].into_iter().find_map(|shape| {
        let cut = id.len().checked_sub(shape.len()).filter(|&cut| cut > 0)?;
        let tail = id.get(cut..)?;
        let fits = tail.bytes().zip(shape.bytes()).all(|(byte, want)| {
            if want == b'd' {
                byte.is_ascii_digit()
            } else {
                byte == want
            }
        });
        if fits { id.get(..cut) } else { None }
    })
}
