//! Small helpers every crate's messages and name checks share.

use serde_json::Value;

/// Whether `name` can stand as `tools.<name>`: a JavaScript identifier.
#[must_use]
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c == '$' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c == '$' || c.is_alphanumeric())
}

/// `text` as a message quotes it: at most `max` characters (then `…`), control
/// characters escaped, so a hostile name cannot fill or break the message.
#[must_use]
pub fn clip(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (count, c) in text.chars().enumerate() {
        if count == max {
            out.push('\u{2026}');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `a string`, `a number`, `an object`, … as messages name a value's type.
#[must_use]
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// [`json_type`], telling an integer from other numbers (where a schema
/// asks for one, the difference is the message).
#[must_use]
pub fn json_type_exact(value: &Value) -> &'static str {
    match value {
        Value::Number(number) if number.is_i64() || number.is_u64() => "an integer",
        other => json_type(other),
    }
}
