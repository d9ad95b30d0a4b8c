//! Words for values in messages.

use serde_json::Value;

/// `a string`, `an object`, … as messages name a value's type.
#[must_use]
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `` `a`, `b` `` or `nothing`.
#[must_use]
pub fn key_list(keys: &[&str]) -> String {
    if keys.is_empty() {
        return "nothing".into();
    }
    keys.iter()
        .map(|key| format!("`{key}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
