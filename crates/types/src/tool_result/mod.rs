//! The `tool-result/v1` result of a codemode run: one text part for a model,
//! machine fields in `structuredContent`, and `isError` / `errorCode` on failure.
//!
//! Rendering and the 3 MiB size bound follow the codemode reference
//! (`shared/reference/002_…`, "Results", "Model text and program data" and
//! "Size bound"). Pure: no I/O, tested natively.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The result format this module writes.
pub const RESULT_FORMAT: &str = "tool-result/v1";
/// A serialized result is strictly smaller than this.
pub const MAX_RESULT_BYTES: usize = 3 * 1024 * 1024;
/// Room kept for framing and metadata when the model text is cut.
const TEXT_HEADROOM_BYTES: usize = 4 * 1024;
const TRUNCATED_MARKER: &str = "\n[Model text truncated for the 3 MiB result limit.]";
const OMITTED_LINE: &str = "\nStructured fields were omitted for size.";

/// A content result as a model and a program receive it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub content: Vec<ContentPart>,
    /// A [`RunSummary`], possibly with large fields replaced by
    /// `{"omitted": true, "original_bytes": n}` to meet the size bound.
    #[serde(rename = "structuredContent")]
    pub structured_content: Value,
    #[serde(
        rename = "isError",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub is_error: bool,
    #[serde(rename = "errorCode", default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text { text: String },
}

impl ToolResult {
    /// The text content parts, joined by blank lines: what a model or a
    /// history record reads.
    #[must_use]
    pub fn text(&self) -> String {
        self.content
            .iter()
            .map(|ContentPart::Text { text }| text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// The machine-readable account of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// `codemode:<id>`.
    pub run_id: String,
    pub status: RunStatus,
    /// The terminal status with any budget suffix: `completed`, `failed`,
    /// `budget_exhausted:wall`, …
    pub termination_reason: String,
    pub duration_ms: u64,
    pub person_wait_ms: u64,
    pub call_count: u32,
    pub calls: Vec<CallSummary>,
    /// The returned JSON value, unchanged (`null` for `undefined`).
    pub value: Value,
    /// Console output, one line per call of `console.*`.
    pub output: String,
    pub warnings: Vec<Warning>,
    pub keyless: bool,
    pub catalog_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunFailure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// One tool call of a run, in call order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSummary {
    pub tool: String,
    pub outcome: CallOutcome,
    pub waited_on_person: bool,
    pub duration_ms: u64,
}

/// The reference's per-call outcome vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    Ok,
    Denied,
    ConsentUnavailable,
    ToolUnavailable,
    Error,
    Refused,
    OutcomeUnknown,
    Cancelled,
    Withdrawn,
}

impl CallOutcome {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Denied => "denied",
            Self::ConsentUnavailable => "consent_unavailable",
            Self::ToolUnavailable => "tool_unavailable",
            Self::Error => "error",
            Self::Refused => "refused",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::Cancelled => "cancelled",
            Self::Withdrawn => "withdrawn",
        }
    }
}

/// A tool's refusal or failure: what a rejected call carries into the guest
/// (`error.code`, `error.message`, `error.detail`) and how its summary row reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// Stable snake_case code: `tool_unavailable`, `denied`, or the tool's own.
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
    /// How the call summary records it.
    pub outcome: CallOutcome,
}

impl ToolFailure {
    /// A failure a catalog scripts: `{code, message, detail?}`, outcome
    /// `error`; the error says which field is missing.
    pub fn from_script(error: &Value) -> Result<Self, String> {
        let code = error
            .get("code")
            .and_then(Value::as_str)
            .ok_or("needs a string `code`")?;
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .ok_or("needs a string `message`")?;
        Ok(Self {
            code: code.to_owned(),
            message: message.to_owned(),
            detail: error.get("detail").cloned(),
            outcome: CallOutcome::Error,
        })
    }
}

/// What a host answers to one tool call.
pub type ToolReply = Result<Value, ToolFailure>;

/// A limit of a run that can run out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    JsCpu,
    ToolCalls,
    Wall,
    PersonWait,
    ReturnValue,
    Memory,
    Recursion,
    Stack,
}

impl Budget {
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::JsCpu => "js_cpu",
            Self::ToolCalls => "tool_calls",
            Self::Wall => "wall",
            Self::PersonWait => "person_wait",
            Self::ReturnValue => "return_value",
            Self::Memory => "memory",
            Self::Recursion => "recursion",
            Self::Stack => "stack",
        }
    }

    /// The run error code of a stop by this budget: `budget_exhausted:<budget>`.
    #[must_use]
    pub fn error_code(self) -> String {
        format!("budget_exhausted:{}", self.as_str())
    }
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFailure {
    /// `script`, a tool's own code, `budget_exhausted:<budget>`, …
    pub code: String,
    /// One plain line, no stack.
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

/// Something admission or the run wants the reader to know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// `tool_entry_invalid`, `tools_unavailable`, …
    pub code: String,
    /// A plain-language sentence.
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RunSummary {
    /// The stable `errorCode`: budget stops map to `budget_exhausted`.
    #[must_use]
    pub fn error_code(&self) -> Option<String> {
        let error = self.error.as_ref()?;
        Some(if error.code.starts_with("budget_exhausted:") {
            "budget_exhausted".to_owned()
        } else {
            error.code.clone()
        })
    }

    /// The model text, rendered by the reference's fixed rules.
    #[must_use]
    pub fn render_text(&self) -> String {
        let mut text = format!(
            "{} · {} ms · {} calls · person wait {} ms",
            self.status.as_str(),
            self.duration_ms,
            self.call_count,
            self.person_wait_ms
        );
        if let Some(error) = &self.error {
            open_section(&mut text);
            text.push_str(&format!("Error ({}): {}", error.code, error.message));
            if let Some(detail) = &error.detail {
                text.push_str(&format!("\nError detail: {detail}"));
            }
        }
        if self.status == RunStatus::Completed {
            open_section(&mut text);
            text.push_str("Return value:");
            match &self.value {
                Value::Null => text.push_str(" none"),
                Value::String(string) => {
                    text.push('\n');
                    text.push_str(string);
                }
                value @ (Value::Object(_) | Value::Array(_)) => {
                    text.push('\n');
                    text.push_str(&serde_json::to_string_pretty(value).unwrap_or_default());
                }
                value => {
                    text.push('\n');
                    text.push_str(&value.to_string());
                }
            }
        }
        if !self.output.is_empty() {
            open_section(&mut text);
            text.push_str("Output:\n");
            text.push_str(&self.output);
        }
        if !self.calls.is_empty() {
            open_section(&mut text);
            text.push_str(
                "Tool | Outcome | Waited on person | Duration (ms)\n--- | --- | --- | ---\n",
            );
            for call in &self.calls {
                text.push_str(&format!(
                    "{} | {} | {} | {}\n",
                    call.tool,
                    call.outcome.as_str(),
                    call.waited_on_person,
                    call.duration_ms
                ));
            }
        }
        if !self.warnings.is_empty() {
            open_section(&mut text);
            text.push_str("Warnings:");
            for warning in &self.warnings {
                text.push_str(&format!("\n- {}: {}", warning.code, warning.message));
            }
        }
        text
    }

    /// The complete result, bounded to [`MAX_RESULT_BYTES`].
    #[must_use]
    pub fn into_result(self) -> ToolResult {
        let text = self.render_text();
        let error_code = self.error_code();
        let structured = serde_json::to_value(&self).unwrap_or(Value::Null);
        bound(ToolResult {
            content: vec![ContentPart::Text { text }],
            structured_content: structured,
            is_error: error_code.is_some(),
            error_code,
        })
    }
}

/// Ends `text` with exactly one blank line before the next section, whatever
/// the previous section (verbatim console output, say) ended with.
fn open_section(text: &mut String) {
    while !text.ends_with("\n\n") {
        text.push('\n');
    }
}

fn serialized_len<T: Serialize>(value: &T) -> usize {
    serde_json::to_string(value).map_or(usize::MAX, |text| text.len())
}

/// Applies the size bound: cut the model text first, then replace the largest
/// reducible machine fields one at a time. Identity, status, error code and
/// budget accounting are never touched, so a success stays a success.
fn bound(mut result: ToolResult) -> ToolResult {
    if serialized_len(&result) < MAX_RESULT_BYTES {
        return result;
    }
    let text_budget = MAX_RESULT_BYTES - TEXT_HEADROOM_BYTES;
    let ContentPart::Text { text } = &mut result.content[0];
    if serialized_len(text) > text_budget {
        *text = truncate_text(
            text,
            text_budget.saturating_sub(serialized_len(&TRUNCATED_MARKER)),
        );
        text.push_str(TRUNCATED_MARKER);
    }

    let mut said_omitted = false;
    while serialized_len(&result) >= MAX_RESULT_BYTES {
        let Some((path, size)) = largest_reducible(&result.structured_content) else {
            break;
        };
        let omitted = json!({"omitted": true, "original_bytes": size});
        if let Some(slot) = result.structured_content.pointer_mut(path) {
            *slot = omitted;
        }
        if !said_omitted {
            said_omitted = true;
            let ContentPart::Text { text } = &mut result.content[0];
            if serialized_len(text) + OMITTED_LINE.len() > text_budget {
                let keep = text_budget
                    .saturating_sub(OMITTED_LINE.len() + serialized_len(&TRUNCATED_MARKER));
                *text = truncate_text(text, keep);
                text.push_str(TRUNCATED_MARKER);
            }
            text.push_str(OMITTED_LINE);
        }
    }
    result
}

/// The fields that may be replaced, by JSON pointer.
const REDUCIBLE: [&str; 6] = [
    "/calls",
    "/output",
    "/warnings",
    "/error/detail",
    "/error/message",
    "/value",
];

fn largest_reducible(structured: &Value) -> Option<(&'static str, usize)> {
    REDUCIBLE
        .iter()
        .filter_map(|path| {
            let value = structured.pointer(path)?;
            let already = value.get("omitted") == Some(&Value::Bool(true));
            (!already).then(|| (*path, serialized_len(value)))
        })
        .filter(|(_, size)| *size > 64)
        .max_by_key(|(_, size)| *size)
}

/// The longest prefix of `text`, cut on a character boundary, whose JSON string
/// encoding is at most `max_json_bytes`.
fn truncate_text(text: &str, max_json_bytes: usize) -> String {
    let mut used = 2; // the quotes
    let mut end = 0;
    for (index, character) in text.char_indices() {
        let cost = match character {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{08}' | '\u{0c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if used + cost > max_json_bytes {
            break;
        }
        used += cost;
        end = index + character.len_utf8();
    }
    text[..end].to_owned()
}

/// A call of a running program held on a person, as an interim reply names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub tool: String,
    /// Counts from 1 in the order the program made its tool calls (sleeps are
    /// not counted).
    pub call: u32,
    /// Why it waits: `consent` (an approval card), or a provider's own reason
    /// (`login_handoff`, `login_capture`, …).
    pub reason: String,
}

impl Held {
    /// `browser_use (call 2) needs their consent`.
    fn describe(&self) -> String {
        let need = match self.reason.as_str() {
            "consent" => "needs their consent".to_owned(),
            "login_handoff" => "needs them to log in".to_owned(),
            "login_capture" => "needs them to finish logging in".to_owned(),
            other => format!("waits on them ({other})"),
        };
        format!("{} (call {}) {need}", self.tool, self.call)
    }
}

/// The sentence every interim reply ends with.
pub const KEPT_SENTENCE: &str = "When the program finishes, Kiln keeps its final result for this call: call `late_results` with this run id to get it.";

/// [`KEPT_SENTENCE`] as a page reads it: the page API's call for it.
pub const PAGE_KEPT_SENTENCE: &str = "When the program finishes, Kiln keeps its final result for this call: call `kiln.lateResult(run_id)` to get it.";

impl ToolResult {
    /// An interim result as a page reads it ([`PAGE_KEPT_SENTENCE`]); any
    /// other result as it is.
    #[must_use]
    pub fn for_page(mut self) -> Self {
        for part in &mut self.content {
            let ContentPart::Text { text } = part;
            if let Some(kept) = text.strip_suffix(KEPT_SENTENCE) {
                *text = format!("{kept}{PAGE_KEPT_SENTENCE}");
            }
        }
        self
    }
}

/// The interim result of a keyed run that had not finished when its reply was
/// due (reference 002, "Results"): `structuredContent` `{status: "running",
/// run_id, held: {reason}}`, the reason being the first held call's in call
/// order, else `running`; the text names each call held on a person, or says
/// the program is still running, then [`KEPT_SENTENCE`]. Not an error.
#[must_use]
pub fn interim(run_id: &str, held: &[Held]) -> ToolResult {
    let mut held = held.to_vec();
    held.sort_by_key(|call| call.call);
    let reason = held
        .first()
        .map_or_else(|| "running".to_owned(), |call| call.reason.clone());
    let text = if held.is_empty() {
        format!(
            "Still running: the program had not finished when this reply was due. {KEPT_SENTENCE}"
        )
    } else {
        let calls: Vec<String> = held.iter().map(Held::describe).collect();
        format!(
            "Waiting on the person: {}. The program resumes when they answer. {KEPT_SENTENCE}",
            calls.join("; ")
        )
    };
    ToolResult {
        content: vec![ContentPart::Text { text }],
        structured_content: json!({"status": "running", "run_id": run_id, "held": {"reason": reason}}),
        is_error: false,
        error_code: None,
    }
}

/// How long a keyed call waits for its run before it answers the interim
/// (the reference's foreground wait).
pub const REPLY_DUE_MS: u64 = 25_000;

/// A result that is only an error, for what an entrance answers without a
/// run (a refused call, an id it keeps nothing for, a run that was
/// interrupted): the text `LEAD\n\nError (CODE): MESSAGE` (no lead: the error
/// line alone), `structured` with `error: {code, message}` added, `isError`
/// and `errorCode`.
#[must_use]
pub fn error_result(
    lead: Option<&str>,
    code: &str,
    message: &str,
    structured: Value,
) -> ToolResult {
    let line = format!("Error ({code}): {message}");
    let text = match lead {
        Some(lead) => format!("{lead}\n\n{line}"),
        None => line,
    };
    let mut structured = match structured {
        Value::Object(fields) => fields,
        _ => serde_json::Map::new(),
    };
    structured.insert("error".into(), json!({"code": code, "message": message}));
    ToolResult {
        content: vec![ContentPart::Text { text }],
        structured_content: Value::Object(structured),
        is_error: true,
        error_code: Some(code.to_owned()),
    }
}

#[cfg(test)]
mod tests;

/// A keyless run id, `codemode:` and 16 hex digits, from 8 random bytes the
/// caller draws from its platform's randomness.
#[must_use]
pub fn run_id_from(bytes: [u8; 8]) -> String {
    use std::fmt::Write as _;
    let mut id = String::from("codemode:");
    for byte in bytes {
        let _ = write!(id, "{byte:02x}");
    }
    id
}
