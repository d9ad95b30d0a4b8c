//! Code nodes as data: a JavaScript body with typed inputs and outputs
//! (reference/004), the slot type vocabulary every surface checks values and
//! connections with, and graphs of nodes joined output → input.
//!
//! This is the one place the vocabulary is defined. A slot's type is written
//! as text (`"list[number]"`), parsed once into a [`SlotType`]:
//!
//! | type | a value of it |
//! | --- | --- |
//! | `string` | a JSON string |
//! | `number` | a JSON number |
//! | `integer` | a number with no fraction |
//! | `boolean` | `true` or `false` |
//! | `object` | any JSON object (the same as `dict[any]`) |
//! | `array` | any JSON array (the same as `list[any]`) |
//! | `bytes` | `{"$bytes": "<base64>"}`, a `Uint8Array` in the body |
//! | `any` | anything, `null` included |
//! | `list[T]` | an array whose every item is a `T` |
//! | `dict[T]` | an object whose every value is a `T` |
//! | `{name: T, other?: T}` | an object with these keys (a `?` key may be absent; others may be present) |
//!
//! A value is a `Uint8Array` in a body only where its slot's type says
//! `bytes` (at the top, or inside a `list`, `dict` or record): the type
//! decides, never the value's shape, so a `{"$bytes": …}` object that comes
//! to an `object`, `dict[string]` or `any` input stays that plain object.
//!
//! A connection from an output of type `A` to an input of type `B` fits when
//! every value of `A` could be a `B` ([`SlotType::fits`]): an `integer` feeds
//! a `number`, not the other way; `any` on either side fits and is checked
//! when the value arrives.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::BYTES_KEY;
use crate::words::{is_identifier, json_type_exact};

/// The deepest a written type may nest (`list[list[…]]`); past it the type
/// is refused rather than parsed.
pub const MAX_TYPE_DEPTH: usize = 16;

/// The longest a written type may be, in bytes.
pub const MAX_TYPE_CHARS: usize = 1_000;

/// A slot's type: the vocabulary of the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotType {
    String,
    Number,
    Integer,
    Boolean,
    /// Any object: `dict[any]`.
    Object,
    /// Any array: `list[any]`.
    Array,
    Bytes,
    Any,
    List(Box<SlotType>),
    Dict(Box<SlotType>),
    /// An object with named fields, in the order written.
    Record(Vec<Field>),
}

/// One field of a [`SlotType::Record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ty: SlotType,
    /// Written `name?:`: the key may be absent.
    pub optional: bool,
}

/// The names of the plain types, in the order the documentation lists them.
pub const PLAIN_TYPES: [&str; 8] = [
    "string", "number", "integer", "boolean", "object", "array", "bytes", "any",
];

/// Why a written type could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError {
    pub message: String,
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl SlotType {
    /// Reads a written type.
    ///
    /// # Errors
    ///
    /// The text is not in the vocabulary; the message names where and what
    /// was expected.
    pub fn parse(text: &str) -> Result<Self, TypeError> {
        if text.len() > MAX_TYPE_CHARS {
            return Err(TypeError {
                message: format!(
                    "the type is {} bytes long; at most {MAX_TYPE_CHARS}",
                    text.len()
                ),
            });
        }
        let mut reader = Reader {
            text,
            at: 0,
            depth: 0,
        };
        let ty = reader.ty()?;
        reader.space();
        if reader.at < text.len() {
            return Err(reader.error("nothing more after the type"));
        }
        Ok(ty)
    }

    /// Whether every value of `self` (an output's type) is a value of `to`
    /// (an input's type). `any` on either side fits.
    #[must_use]
    pub fn fits(&self, to: &Self) -> bool {
        use SlotType as T;
        match (self.widened(), to.widened()) {
            (T::Any, _) | (_, T::Any) => true,
            (T::Integer, T::Number) => true,
            (T::Bytes, T::Dict(value)) => T::String.fits(&value),
            (T::List(a), T::List(b)) | (T::Dict(a), T::Dict(b)) => a.fits(&b),
            (T::Record(fields), T::Dict(value)) => fields.iter().all(|field| field.ty.fits(&value)),
            (T::Dict(value), T::Record(fields)) => {
                // A dict may lack a required key: only when every field is
                // optional can it be said to fit.
                fields
                    .iter()
                    .all(|field| field.optional && value.fits(&field.ty))
            }
            (T::Record(have), T::Record(want)) => want.iter().all(|field| {
                match have.iter().find(|candidate| candidate.name == field.name) {
                    Some(found) => (field.optional || !found.optional) && found.ty.fits(&field.ty),
                    None => field.optional,
                }
            }),
            (a, b) => a == b,
        }
    }

    /// `object` and `array` as the `dict[any]` and `list[any]` they are.
    fn widened(&self) -> Self {
        match self {
            Self::Object => Self::Dict(Box::new(Self::Any)),
            Self::Array => Self::List(Box::new(Self::Any)),
            other => other.clone(),
        }
    }

    /// Whether `value` is a value of this type.
    ///
    /// # Errors
    ///
    /// The first place it is not: the path inside the value (empty at its
    /// top), the type expected there and what came.
    pub fn check(&self, value: &Value) -> Result<(), Mismatch> {
        let mut path = String::new();
        self.check_at(value, &mut path)
    }

    fn check_at(&self, value: &Value, path: &mut String) -> Result<(), Mismatch> {
        let mismatch = |path: &str| Mismatch {
            path: path.to_owned(),
            expected: self.to_string(),
            came: describe(value),
        };
        match (self, value) {
            (Self::Any, _)
            | (Self::String, Value::String(_))
            | (Self::Number, Value::Number(_))
            | (Self::Boolean, Value::Bool(_))
            | (Self::Object, Value::Object(_))
            | (Self::Array, Value::Array(_)) => Ok(()),
            (Self::Integer, Value::Number(number)) => {
                if number.is_i64()
                    || number.is_u64()
                    || number.as_f64().is_some_and(|x| x.fract() == 0.0)
                {
                    Ok(())
                } else {
                    Err(mismatch(path))
                }
            }
            (Self::Bytes, value) if is_bytes(value) => Ok(()),
            (Self::List(item), Value::Array(items)) => {
                for (at, value) in items.iter().enumerate() {
                    let length = path.len();
                    path.push_str(&format!("[{at}]"));
                    item.check_at(value, path)?;
                    path.truncate(length);
                }
                Ok(())
            }
            (Self::Dict(item), Value::Object(entries)) => {
                for (key, value) in entries {
                    let length = path.len();
                    push_key(path, key);
                    item.check_at(value, path)?;
                    path.truncate(length);
                }
                Ok(())
            }
            (Self::Record(fields), Value::Object(entries)) => {
                for field in fields {
                    let length = path.len();
                    push_key(path, &field.name);
                    match entries.get(&field.name) {
                        Some(value) => field.ty.check_at(value, path)?,
                        None if field.optional => {}
                        None => {
                            return Err(Mismatch {
                                path: path.clone(),
                                expected: field.ty.to_string(),
                                came: "nothing (the key is missing)".to_owned(),
                            });
                        }
                    }
                    path.truncate(length);
                }
                Ok(())
            }
            _ => Err(mismatch(path)),
        }
    }
}

fn push_key(path: &mut String, key: &str) {
    if is_identifier(key) {
        path.push('.');
        path.push_str(key);
    } else {
        path.push_str(&format!("[{}]", Value::String(key.to_owned())));
    }
}

/// Whether `value` is bytes as they cross a boundary: `{"$bytes": base64}`.
#[must_use]
pub fn is_bytes(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.len() == 1
                && map
                    .get(BYTES_KEY)
                    .and_then(Value::as_str)
                    .is_some_and(is_base64)
        }
        _ => false,
    }
}

/// Standard base64 with padding, as [`BYTES_KEY`] values are written.
fn is_base64(text: &str) -> bool {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return false;
    }
    let body = text.trim_end_matches('=');
    bytes.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// What a value is, as a refusal names it: its type and, for a scalar, a
/// short form of it (`a string ("abc")`, `an array of 3`).
#[must_use]
pub fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => format!("a boolean ({flag})"),
        Value::Number(number) => format!("{} ({number})", json_type_exact(value)),
        Value::String(text) => {
            let shown: String = text.chars().take(40).collect();
            let cut = if shown.len() < text.len() { "…" } else { "" };
            format!("a string ({}{cut})", Value::String(shown))
        }
        Value::Array(items) => format!("an array of {}", items.len()),
        Value::Object(map) if is_bytes(value) => {
            let length = map
                .get(BYTES_KEY)
                .and_then(Value::as_str)
                .map_or(0, str::len);
            format!("bytes ({} base64 characters)", length)
        }
        Value::Object(map) => {
            let keys: Vec<&str> = map.keys().take(5).map(String::as_str).collect();
            let more = if map.len() > keys.len() { ", …" } else { "" };
            format!("an object {{{}{more}}}", keys.join(", "))
        }
    }
}

/// Where a value is not of its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Inside the value: `""` at the top, `[2].name` further in.
    pub path: String,
    /// The type expected there.
    pub expected: String,
    /// What came, as [`describe`] says it.
    pub came: String,
}

impl Mismatch {
    /// The sentence a refusal says for the slot `slot`: "`rows[2].price`
    /// must be a number, not a string ("12")".
    #[must_use]
    pub fn sentence(&self, slot: &str) -> String {
        format!(
            "`{slot}{}` must be {}, not {}",
            self.path,
            a(&self.expected),
            self.came
        )
    }
}

/// "a number", "an integer", "a list[string]".
fn a(ty: &str) -> String {
    match ty {
        "bytes" => return "bytes".to_owned(),
        "any" => return "anything".to_owned(),
        _ => {}
    }
    let vowel = ty.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {ty}", if vowel { "an" } else { "a" })
}

impl fmt::Display for SlotType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::String => f.write_str("string"),
            Self::Number => f.write_str("number"),
            Self::Integer => f.write_str("integer"),
            Self::Boolean => f.write_str("boolean"),
            Self::Object => f.write_str("object"),
            Self::Array => f.write_str("array"),
            Self::Bytes => f.write_str("bytes"),
            Self::Any => f.write_str("any"),
            Self::List(item) => write!(f, "list[{item}]"),
            Self::Dict(item) => write!(f, "dict[{item}]"),
            Self::Record(fields) => {
                f.write_str("{")?;
                for (at, field) in fields.iter().enumerate() {
                    if at > 0 {
                        f.write_str(", ")?;
                    }
                    let mark = if field.optional { "?" } else { "" };
                    write!(f, "{}{mark}: {}", field.name, field.ty)?;
                }
                f.write_str("}")
            }
        }
    }
}

impl Serialize for SlotType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SlotType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text)
            .map_err(|error| serde::de::Error::custom(format!("type `{text}`: {error}")))
    }
}

/// A recursive-descent reader of written types, bounded in depth.
struct Reader<'a> {
    text: &'a str,
    at: usize,
    depth: usize,
}

impl Reader<'_> {
    fn error(&self, expected: &str) -> TypeError {
        let rest: String = self.text[self.at..].chars().take(20).collect();
        let found = if rest.is_empty() {
            "the end".to_owned()
        } else {
            format!("`{rest}`")
        };
        TypeError {
            message: format!(
                "expected {expected} at character {}, found {found} (types: {}, list[T], dict[T], {{name: T, other?: T}})",
                self.at + 1,
                PLAIN_TYPES.join(", ")
            ),
        }
    }

    fn space(&mut self) {
        while self.text[self.at..].starts_with(char::is_whitespace) {
            self.at += self.text[self.at..]
                .chars()
                .next()
                .map_or(1, char::len_utf8);
        }
    }

    fn eat(&mut self, token: char) -> bool {
        self.space();
        if self.text[self.at..].starts_with(token) {
            self.at += token.len_utf8();
            true
        } else {
            false
        }
    }

    fn word(&mut self) -> &str {
        self.space();
        let start = self.at;
        while self.text[self.at..]
            .starts_with(|c: char| c == '_' || c == '$' || c.is_alphanumeric())
        {
            self.at += self.text[self.at..]
                .chars()
                .next()
                .map_or(1, char::len_utf8);
        }
        &self.text[start..self.at]
    }

    fn ty(&mut self) -> Result<SlotType, TypeError> {
        self.depth += 1;
        if self.depth > MAX_TYPE_DEPTH {
            return Err(TypeError {
                message: format!("the type nests deeper than {MAX_TYPE_DEPTH} levels"),
            });
        }
        let ty = self.ty_inner();
        self.depth -= 1;
        ty
    }

    fn ty_inner(&mut self) -> Result<SlotType, TypeError> {
        if self.eat('{') {
            return self.record();
        }
        let start = self.at;
        let word = self.word().to_owned();
        let ty = match word.as_str() {
            "string" => SlotType::String,
            "number" => SlotType::Number,
            "integer" => SlotType::Integer,
            "boolean" => SlotType::Boolean,
            "object" => SlotType::Object,
            "array" => SlotType::Array,
            "bytes" => SlotType::Bytes,
            "any" => SlotType::Any,
            "list" | "dict" => {
                if !self.eat('[') {
                    return Err(self.error(&format!("`[` after `{word}`")));
                }
                let item = Box::new(self.ty()?);
                if !self.eat(']') {
                    return Err(self.error("`]`"));
                }
                if word == "list" {
                    SlotType::List(item)
                } else {
                    SlotType::Dict(item)
                }
            }
            _ => {
                self.at = start;
                self.space();
                return Err(self.error("a type"));
            }
        };
        Ok(ty)
    }

    fn record(&mut self) -> Result<SlotType, TypeError> {
        let mut fields: Vec<Field> = Vec::new();
        if self.eat('}') {
            return Ok(SlotType::Record(fields));
        }
        loop {
            let name = self.word().to_owned();
            if !is_identifier(&name) {
                return Err(self.error("a field name"));
            }
            if fields.iter().any(|field| field.name == name) {
                return Err(TypeError {
                    message: format!("field `{name}` is named twice"),
                });
            }
            let optional = self.eat('?');
            if !self.eat(':') {
                return Err(self.error(&format!("`:` after field `{name}`")));
            }
            let ty = self.ty()?;
            fields.push(Field { name, ty, optional });
            if self.eat('}') {
                return Ok(SlotType::Record(fields));
            }
            if !self.eat(',') {
                return Err(self.error("`,` or `}`"));
            }
        }
    }
}

/// One input of a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSlot {
    /// How the body reads it: a JavaScript identifier.
    pub name: String,
    #[serde(rename = "type")]
    pub ty: SlotType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Used when no value comes. A slot with a default is never missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Whether a run without a value (and no default) is refused. Default
    /// `true`; an optional input without a value is `undefined` in the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

impl InputSlot {
    /// Whether a run must bring a value: no default, and not marked optional.
    #[must_use]
    pub fn must_come(&self) -> bool {
        self.default.is_none() && self.required.unwrap_or(true)
    }
}

/// One output of a node: a key of the object its body returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSlot {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: SlotType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A code node: a title, a JavaScript body (the body of an async function
/// that reads its inputs by name and returns `{output: value, …}`) and its
/// typed slots. Serialized as it is written, snake case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeNode {
    pub title: String,
    pub code: String,
    #[serde(default)]
    pub inputs: Vec<InputSlot>,
    pub outputs: Vec<OutputSlot>,
}

/// One end of an edge: a node's id and one of its slots, written
/// `node.slot`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlotRef {
    pub node: String,
    pub slot: String,
}

impl fmt::Display for SlotRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.node, self.slot)
    }
}

impl Serialize for SlotRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SlotRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.rsplit_once('.') {
            Some((node, slot)) if !node.is_empty() && !slot.is_empty() => Ok(Self {
                node: node.to_owned(),
                slot: slot.to_owned(),
            }),
            _ => Err(serde::de::Error::custom(format!(
                "`{text}` is not `node.slot` (a node's id, a dot, one of its slots)"
            ))),
        }
    }
}

/// An edge: `from` an output to an input `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    pub from: SlotRef,
    pub to: SlotRef,
}

/// A node of a graph: its id beside the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphNode {
    pub id: String,
    #[serde(flatten)]
    pub node: CodeNode,
}

/// Nodes and the edges between them, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphSpec {
    pub nodes: Vec<GraphNode>,
    #[serde(default)]
    pub edges: Vec<Edge>,
}

/// Why a connection does not fit, in a sentence, or `None` when it does.
#[must_use]
pub fn connection_refusal(
    from: &SlotRef,
    from_type: &SlotType,
    to: &SlotRef,
    to_type: &SlotType,
) -> Option<String> {
    (!from_type.fits(to_type)).then(|| {
        format!(
            "`{from}` gives {}, which does not fit `{to}`, which takes {}",
            a(&from_type.to_string()),
            a(&to_type.to_string())
        )
    })
}

/// The names in `names` that come more than once, in order of first repeat.
#[must_use]
pub fn repeated<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = BTreeSet::new();
    let mut twice = Vec::new();
    for name in names {
        if !seen.insert(name) && !twice.contains(&name) {
            twice.push(name);
        }
    }
    twice
}

/// How a node of a graph run, or the whole graph, settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    Completed,
    /// Its own failure, or a dependency's.
    Failed,
    /// The run was stopped.
    Aborted,
}

impl Ended {
    /// Its name on the wire: `completed`, `failed`, `aborted`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Aborted => "aborted",
        }
    }
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a node's run failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFailure {
    /// `invalid_node`, `invalid_inputs`, `not_outputs`, or the run's own
    /// error code (`runtime_error`, `budget_exhausted`, `cancelled`, …).
    pub code: String,
    pub message: String,
}

/// What one node's run gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRun {
    /// The declared outputs the body gave, by name.
    pub outputs: serde_json::Map<String, Value>,
    /// Type mismatches, missing and extra outputs, and the run's own
    /// warnings.
    pub warnings: Vec<String>,
    pub console: Vec<crate::ConsoleLine>,
    /// The run's wall time, as the sandbox measured it.
    pub duration_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<NodeFailure>,
    /// The run's `tool-result/v1` object; `None` when the node or its
    /// values were refused before anything ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<crate::tool_result::ToolResult>,
    /// The run's job in the history, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

impl NodeRun {
    /// A run refused before the sandbox saw it.
    #[must_use]
    pub fn refused(code: &str, reasons: &[String]) -> Self {
        Self {
            outputs: serde_json::Map::new(),
            warnings: Vec::new(),
            console: Vec::new(),
            duration_ms: 0.0,
            error: Some(NodeFailure {
                code: code.to_owned(),
                message: reasons.join("; "),
            }),
            result: None,
            job_id: None,
        }
    }
}

/// How one node of a graph run settled: what a graph's run streams as each
/// node settles, and lists at its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    pub id: String,
    pub status: Ended,
    /// Its run: outputs, warnings, console, duration and error. A node that
    /// never ran (a dependency failed, the run was stopped) has an empty
    /// one, with the reason as its error.
    #[serde(flatten)]
    pub run: NodeRun,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ty(text: &str) -> SlotType {
        SlotType::parse(text).expect(text)
    }

    #[test]
    fn written_types_read_back_as_written() {
        for text in [
            "string",
            "number",
            "integer",
            "boolean",
            "object",
            "array",
            "bytes",
            "any",
            "list[number]",
            "dict[list[string]]",
            "{name: string, price?: number}",
            "list[{id: integer, tags: list[string]}]",
            "{}",
        ] {
            assert_eq!(ty(text).to_string(), text);
        }
        assert_eq!(
            ty("  list [ { a :number } ] ").to_string(),
            "list[{a: number}]"
        );
    }

    #[test]
    fn unreadable_types_say_where_and_what_was_expected() {
        for (text, says) in [
            ("strin", "expected a type at character 1, found `strin`"),
            (
                "list",
                "expected `[` after `list` at character 5, found the end",
            ),
            ("list[number", "expected `]` at character 12"),
            ("{a number}", "expected `:` after field `a` at character 4"),
            ("{a: number, a: string}", "field `a` is named twice"),
            (
                "number number",
                "expected nothing more after the type at character 8",
            ),
            ("", "expected a type at character 1, found the end"),
        ] {
            let error = SlotType::parse(text).expect_err(text).message;
            assert!(error.contains(says), "{text}: {error}");
        }
        let deep = format!("{}number{}", "list[".repeat(40), "]".repeat(40));
        assert!(
            SlotType::parse(&deep)
                .expect_err("deep")
                .message
                .contains("deeper than 16")
        );
    }

    #[test]
    fn connections_fit_when_every_value_of_the_output_is_one_of_the_input() {
        for (from, to, fits) in [
            ("integer", "number", true),
            ("number", "integer", false),
            ("string", "number", false),
            ("any", "number", true),
            ("number", "any", true),
            ("list[integer]", "list[number]", true),
            ("list[number]", "list[integer]", false),
            ("list[string]", "array", true),
            ("array", "list[string]", true),
            ("object", "array", false),
            ("{a: number}", "object", true),
            ("{a: integer, b: string}", "{a: number}", true),
            ("{a?: number}", "{a: number}", false),
            ("{b: number}", "{a: number}", false),
            ("{b: number}", "{a?: number}", true),
            ("dict[number]", "{a: number}", false),
            ("dict[number]", "{a?: number}", true),
            ("{a: number, b: integer}", "dict[number]", true),
            ("bytes", "object", true),
            ("bytes", "string", false),
            ("string", "bytes", false),
        ] {
            assert_eq!(ty(from).fits(&ty(to)), fits, "{from} → {to}");
        }
    }

    #[test]
    fn values_are_checked_and_the_first_misfit_is_named_by_its_path() {
        for (text, value, answer) in [
            ("string", json!("a"), Ok(())),
            ("integer", json!(3), Ok(())),
            ("integer", json!(3.0), Ok(())),
            (
                "integer",
                json!(3.5),
                Err("`x` must be an integer, not a number (3.5)"),
            ),
            (
                "number",
                json!("12"),
                Err("`x` must be a number, not a string (\"12\")"),
            ),
            (
                "boolean",
                json!(null),
                Err("`x` must be a boolean, not null"),
            ),
            ("any", json!(null), Ok(())),
            ("bytes", json!({"$bytes": "AQID"}), Ok(())),
            (
                "bytes",
                json!({"$bytes": "not base64"}),
                Err("`x` must be bytes, not an object {$bytes}"),
            ),
            (
                "list[number]",
                json!([1, 2, "3"]),
                Err("`x[2]` must be a number, not a string (\"3\")"),
            ),
            (
                "list[{price: number}]",
                json!([{"price": 1}, {"price": "2"}]),
                Err("`x[1].price` must be a number, not a string (\"2\")"),
            ),
            (
                "{name: string}",
                json!({}),
                Err("`x.name` must be a string, not nothing (the key is missing)"),
            ),
            ("{name?: string}", json!({"other": 1}), Ok(())),
            (
                "dict[integer]",
                json!({"a b": 1.5}),
                Err("`x[\"a b\"]` must be an integer, not a number (1.5)"),
            ),
            (
                "array",
                json!({"a": 1}),
                Err("`x` must be an array, not an object {a}"),
            ),
        ] {
            let got = ty(text)
                .check(&value)
                .map_err(|mismatch| mismatch.sentence("x"));
            assert_eq!(got, answer.map_err(str::to_owned), "{text} {value}");
        }
    }

    #[test]
    fn nodes_and_graphs_read_from_their_json() {
        let graph: GraphSpec = serde_json::from_value(json!({
            "nodes": [
                {"id": "load", "title": "Load", "code": "return {rows: [1]}", "outputs": [{"name": "rows", "type": "list[number]"}]},
                {"id": "sum", "title": "Sum", "code": "return {total: rows.length}",
                 "inputs": [{"name": "rows", "type": "list[number]", "default": []}],
                 "outputs": [{"name": "total", "type": "number"}]}
            ],
            "edges": [{"from": "load.rows", "to": "sum.rows"}]
        }))
        .expect("graph");
        assert_eq!(graph.edges[0].from.to_string(), "load.rows");
        assert_eq!(
            graph.nodes[1].node.inputs[0].ty,
            SlotType::List(Box::new(SlotType::Number))
        );
        let back = serde_json::to_value(&graph).expect("json");
        assert_eq!(back["nodes"][1]["inputs"][0]["type"], "list[number]");
        let refused = serde_json::from_value::<CodeNode>(
            json!({"title": "t", "code": "", "outputs": [{"name": "a", "type": "nmber"}]}),
        )
        .expect_err("bad type")
        .to_string();
        assert!(
            refused.contains("type `nmber`: expected a type"),
            "{refused}"
        );
    }
}
