//! `kiln:diff`: line, word and unified diffs over `similar`.

use kiln_types::library::{Answer, Failure, LibraryCall};
use serde_json::{Value, json};

use super::json as to_json;

/// The most lines, or words, either side of a diff may have: the work grows
/// with the tokens times the differences.
pub const MAX_DIFF_TOKENS: usize = 20_000;

/// The two texts of a diff, each within the text bound and [`MAX_DIFF_TOKENS`]
/// `unit`s, as `count` counts them.
fn diff_texts<'a>(
    call: &'a LibraryCall,
    what: &str,
    unit: &str,
    count: fn(&str) -> usize,
) -> Result<(&'a str, &'a str), Failure> {
    let before = call.text(0);
    let after = call.text(1);
    for (side, text) in [("before", before), ("after", after)] {
        let tokens = count(text);
        if tokens > MAX_DIFF_TOKENS {
            return Err(Failure::range(format!(
                "kiln:diff {what}: the {side} text has {tokens} {unit}, more than the {MAX_DIFF_TOKENS} a diff compares"
            )));
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
pub(super) fn lines(call: &LibraryCall) -> Result<Answer, Failure> {
    let (before, after) = diff_texts(call, "lines", "lines", count_lines)?;
    let diff = similar::TextDiff::from_lines(before, after);
    let changes = diff
        .iter_all_changes()
        .map(|change| (change.tag(), change.value()));
    to_json(runs(changes))
}

/// `words(before, after)`.
pub(super) fn words(call: &LibraryCall) -> Result<Answer, Failure> {
    let (before, after) = diff_texts(call, "words", "words", count_words)?;
    let diff = similar::TextDiff::from_words(before, after);
    let changes = diff
        .iter_all_changes()
        .map(|change| (change.tag(), change.value()));
    to_json(runs(changes))
}

/// `unified(before, after, {context, from, to})`.
pub(super) fn unified(call: &LibraryCall) -> Result<Answer, Failure> {
    let (before, after) = diff_texts(call, "unified", "lines", count_lines)?;
    let options = call.options(2);
    let radius = match options.get("context") {
        None | Some(Value::Null) => 3,
        Some(Value::Number(number)) => number
            .as_u64()
            .filter(|radius| *radius <= 1000)
            .and_then(|radius| usize::try_from(radius).ok())
            .ok_or_else(|| {
                Failure::range(format!(
                    "kiln:diff unified: `context` is a number of lines from 0 to 1000; got {number}"
                ))
            })?,
        Some(other) => {
            return Err(Failure::type_error(format!(
                "kiln:diff unified: `context` is a number; got {other}"
            )));
        }
    };
    if before == after {
        return Ok(Answer::Text(String::new()));
    }
    let name = |key: &str, default: &str| match options.get(key) {
        Some(Value::String(name)) => name.clone(),
        _ => default.to_owned(),
    };
    let diff = similar::TextDiff::from_lines(before, after);
    let text = diff
        .unified_diff()
        .context_radius(radius)
        .header(&name("from", "before"), &name("to", "after"))
        .to_string();
    Ok(Answer::Text(text))
}
