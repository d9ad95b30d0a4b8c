//! `kiln:diff`: line, word and unified diffs over `similar`.

use boa_engine::{Context, JsNativeError, JsResult, JsString, JsValue};
use serde_json::{Value, json};

use super::{options, to_js};
use crate::stdlib::string_argument;

/// The most lines, or words, either side of a diff may have: the work grows
/// with the tokens times the differences.
pub const MAX_DIFF_TOKENS: usize = 20_000;

/// The two texts of a diff, each within the text bound and [`MAX_DIFF_TOKENS`]
/// `unit`s, as `count` counts them.
fn diff_texts(
    args: &[JsValue],
    context: &mut Context,
    what: &str,
    unit: &str,
    count: fn(&str) -> usize,
) -> JsResult<(String, String)> {
    let before = string_argument(args, 0, context)?;
    let after = string_argument(args, 1, context)?;
    for (side, text) in [("before", &before), ("after", &after)] {
        let tokens = count(text);
        if tokens > MAX_DIFF_TOKENS {
            return Err(JsNativeError::range()
                .with_message(format!(
                    "kiln:diff {what}: the {side} text has {tokens} {unit}, more than the {MAX_DIFF_TOKENS} a diff compares"
                ))
                .into());
        }
    }
    Ok((before, after))
}

fn count_lines(text: &str) -> usize {
    text.lines().count()
}

fn count_words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// A diff's changes grouped into runs: `{value, added, removed, count}`.
fn runs<'a>(changes: impl Iterator<Item = (similar::ChangeTag, &'a str)>) -> Value {
    let mut runs: Vec<(similar::ChangeTag, String, usize)> = Vec::new();
    for (tag, value) in changes {
        match runs.last_mut() {
            Some((last, text, count)) if *last == tag => {
                text.push_str(value);
                *count += 1;
            }
            _ => runs.push((tag, value.to_owned(), 1)),
        }
    }
    Value::Array(
        runs.into_iter()
            .map(|(tag, value, count)| {
                json!({
                    "value": value,
                    "added": tag == similar::ChangeTag::Insert,
                    "removed": tag == similar::ChangeTag::Delete,
                    "count": count,
                })
            })
            .collect(),
    )
}

/// `lines(before, after)`.
pub(super) fn lines(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let (before, after) = diff_texts(args, context, "lines", "lines", count_lines)?;
    let diff = similar::TextDiff::from_lines(&before, &after);
    let changes = diff
        .iter_all_changes()
        .map(|change| (change.tag(), change.value()));
    to_js(&runs(changes), context)
}

/// `words(before, after)`.
pub(super) fn words(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let (before, after) = diff_texts(args, context, "words", "words", count_words)?;
    let diff = similar::TextDiff::from_words(&before, &after);
    let changes = diff
        .iter_all_changes()
        .map(|change| (change.tag(), change.value()));
    to_js(&runs(changes), context)
}

/// `unified(before, after, {context, from, to})`.
pub(super) fn unified(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let (before, after) = diff_texts(args, context, "unified", "lines", count_lines)?;
    let options = options(args, 2, context)?;
    let radius = match options.get("context") {
        None | Some(Value::Null) => 3,
        Some(Value::Number(number)) => number
            .as_u64()
            .filter(|radius| *radius <= 1000)
            .and_then(|radius| usize::try_from(radius).ok())
            .ok_or_else(|| {
                JsNativeError::range().with_message(format!(
                    "kiln:diff unified: `context` is a number of lines from 0 to 1000; got {number}"
                ))
            })?,
        Some(other) => {
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "kiln:diff unified: `context` is a number; got {other}"
                ))
                .into());
        }
    };
    if before == after {
        return Ok(JsString::from("").into());
    }
    let name = |key: &str, default: &str| match options.get(key) {
        Some(Value::String(name)) => name.clone(),
        _ => default.to_owned(),
    };
    let diff = similar::TextDiff::from_lines(&before, &after);
    let text = diff
        .unified_diff()
        .context_radius(radius)
        .header(&name("from", "before"), &name("to", "after"))
        .to_string();
    Ok(JsString::from(text).into())
}
