//! The permission ladder's words as they cross to the page: the mode, a
//! tool's setting, a call's category, the settings a person changes, and an
//! approval card with its answer. `kiln-capabilities` decides with them; the
//! app shows and edits them.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The one tool that cannot be blocked: how a job reports that it finished or
/// got stuck.
pub const RETURN_RESULT: &str = "return_result";

/// The permission mode of a thread or run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Look, don't touch: only read-class calls run.
    Plan,
    /// Ask before anything that mutates or reaches out.
    Default,
    /// Run everything the settings allow without asking.
    Auto,
}

impl Mode {
    pub const ALL: [Self; 3] = [Self::Plan, Self::Default, Self::Auto];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Default => "default",
            Self::Auto => "auto",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|mode| mode.as_str() == text)
            .ok_or_else(|| {
                format!("unknown permission mode `{text}`; expected plan, default or auto")
            })
    }
}

/// A per-agent, per-tool rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Autonomy {
    /// Run without asking.
    Auto,
    /// Ask for approval.
    Ask,
    /// Never allow this tool.
    Block,
}

impl Autonomy {
    pub const ALL: [Self; 3] = [Self::Auto, Self::Ask, Self::Block];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ask => "ask",
            Self::Block => "block",
        }
    }
}

impl FromStr for Autonomy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|autonomy| autonomy.as_str() == text)
            .ok_or_else(|| format!("unknown tool setting `{text}`; expected auto, ask or block"))
    }
}

/// Why the ladder asks the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskReason {
    /// Default mode asks before what mutates or reaches out.
    Mode,
    /// The tool is set to ask.
    Setting,
    /// The auto-run brake is engaged and this tool executes code.
    Brake,
}

impl AskReason {
    #[must_use]
    pub fn sentence(self) -> &'static str {
        match self {
            Self::Mode => "default mode asks before a call that changes something or reaches out",
            Self::Setting => "this tool is set to ask for approval",
            Self::Brake => "the auto-run brake is engaged: code-execution tools ask every time",
        }
    }
}

/// The settings a person changes: mode, per-tool rules, the brake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSettings {
    pub mode: Mode,
    #[serde(default)]
    pub autonomy: BTreeMap<String, Autonomy>,
    #[serde(default)]
    pub brake: bool,
}

impl Default for GateSettings {
    fn default() -> Self {
        Self {
            mode: Mode::Default,
            autonomy: BTreeMap::new(),
            brake: false,
        }
    }
}

impl GateSettings {
    /// Refuses settings the ladder would not honour, by name.
    pub fn check(&self) -> Result<(), String> {
        if self.autonomy.get(RETURN_RESULT) == Some(&Autonomy::Block) {
            return Err(blocking_return_result());
        }
        Ok(())
    }
}

/// Why `return_result` cannot be blocked, in the words every refusal uses.
pub fn blocking_return_result() -> String {
    format!(
        "{RETURN_RESULT} cannot be blocked: it is how a job reports that it finished or got stuck, \
         and blocking it would leave every job unable to end"
    )
}

/// One call that needs the person's answer. Arguments arrive redacted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub call_number: u32,
    pub tool: String,
    pub category: Category,
    /// Where the tool comes from (`builtin`, `page`, `mcp:everything`).
    pub module: String,
    pub description: String,
    pub args: Value,
    pub reason: AskReason,
    /// The host whose gate asks (`page`, `kiln run`).
    pub host: String,
}

/// The person's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "answer")]
pub enum Answer {
    Approve,
    Deny,
    /// Approve, and answer the same for this tool for the rest of the session.
    AllowForSession,
    /// Nobody could be asked; `reason` names who and why.
    Unavailable {
        reason: String,
    },
}

/// What a call can do to the world. The permission ladder decides by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Reads what the run may see; changes nothing.
    Read,
    /// Changes state the person owns (files, memory, settings).
    Write,
    /// Runs code or a process.
    Execute,
    /// Reaches outside: the network, another service, a plan of many actions.
    External,
}

impl Category {
    pub const ALL: [Self; 4] = [Self::Read, Self::Write, Self::Execute, Self::External];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Execute => "execute",
            Self::External => "external",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Category {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|category| category.as_str() == text)
            .ok_or_else(|| {
                format!("unknown permission category `{text}`; expected read, write, execute or external")
            })
    }
}

/// The most characters of one string an approval card shows; the rest is cut
/// with a note saying how much.
pub const CARD_VALUE_CHARS: usize = 300;

/// The most characters of arguments an approval card shows in all, so that a
/// long argument cannot push the tool, its category and the reason off screen.
pub const CARD_ARGUMENT_CHARS: usize = 2_000;

/// The most entries of one object or array a card shows.
const CARD_ENTRIES: usize = 40;

/// The most levels of nesting a card shows.
const CARD_DEPTH: usize = 8;

/// `args` as an approval card shows them: every string cut at
/// [`CARD_VALUE_CHARS`] and all of them at [`CARD_ARGUMENT_CHARS`], objects and
/// arrays at 40 entries and 8 levels, each cut saying what it left out (`…
/// [cut: 1,200 more characters]`). Keys and values keep their text; the
/// escaping of what a terminal or a page would act on is [`card_text`]'s.
#[must_use]
pub fn card_arguments(args: &Value) -> Value {
    let mut budget = CARD_ARGUMENT_CHARS;
    cut_value(args, &mut budget, 0)
}

fn cut_value(value: &Value, budget: &mut usize, depth: usize) -> Value {
    match value {
        Value::String(text) => Value::String(cut_string(text, budget)),
        Value::Array(items) if depth >= CARD_DEPTH => Value::String(format!(
            "[cut: an array of {}]",
            counted(items.len(), "item")
        )),
        Value::Object(map) if depth >= CARD_DEPTH => {
            Value::String(format!("[cut: an object of {}]", counted(map.len(), "key")))
        }
        Value::Array(items) => {
            let mut shown: Vec<Value> = Vec::new();
            for item in items.iter().take(CARD_ENTRIES) {
                if *budget == 0 {
                    break;
                }
                shown.push(cut_value(item, budget, depth + 1));
            }
            if shown.len() < items.len() {
                shown.push(Value::String(format!(
                    "[cut: {}]",
                    more(items.len() - shown.len(), "item")
                )));
            }
            Value::Array(shown)
        }
        Value::Object(map) => {
            let mut shown = serde_json::Map::new();
            for (key, item) in map.iter().take(CARD_ENTRIES) {
                if *budget == 0 {
                    break;
                }
                let key = cut_string(key, budget);
                let item = cut_value(item, budget, depth + 1);
                shown.insert(key, item);
            }
            if shown.len() < map.len() {
                shown.insert(
                    "…".to_owned(),
                    Value::String(format!("[cut: {}]", more(map.len() - shown.len(), "key"))),
                );
            }
            Value::Object(shown)
        }
        other => {
            *budget = budget.saturating_sub(other.to_string().len());
            other.clone()
        }
    }
}

fn cut_string(text: &str, budget: &mut usize) -> String {
    let room = CARD_VALUE_CHARS.min(*budget);
    let length = text.chars().count();
    if length <= room {
        *budget -= length;
        return text.to_owned();
    }
    *budget -= room;
    let kept: String = text.chars().take(room).collect();
    format!("{kept}… [cut: {}]", more(length - room, "character"))
}

/// `1 item`, `2 items`.
fn counted(number: usize, noun: &str) -> String {
    let plural = if number == 1 { "" } else { "s" };
    format!(
        "{} {noun}{plural}",
        group_digits(u64::try_from(number).unwrap_or(u64::MAX))
    )
}

/// `1 more item`, `2 more items`.
fn more(number: usize, noun: &str) -> String {
    let plural = if number == 1 { "" } else { "s" };
    format!(
        "{} more {noun}{plural}",
        group_digits(u64::try_from(number).unwrap_or(u64::MAX))
    )
}

/// `1234567` as `1,234,567`.
#[must_use]
pub fn group_digits(number: u64) -> String {
    let digits = number.to_string();
    let mut grouped = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

/// `text` as a card may print it: every control character (C0, DEL and C1,
/// such as U+009B, which a terminal reads as the start of a command) and every
/// bidirectional mark, embedding, override and isolate (which reorder what a
/// person reads) is written visibly as `\u{…}` instead of acting. Everything
/// else is kept.
#[must_use]
pub fn card_text(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for character in text.chars() {
        if acts_when_printed(character) {
            shown.push_str(&format!("\\u{{{:04X}}}", u32::from(character)));
        } else {
            shown.push(character);
        }
    }
    shown
}

/// `args` as a card's block of text: pretty-printed JSON (whose strings have
/// their C0 controls escaped by JSON itself), with what [`card_text`] escapes
/// escaped too, except the layout's own line breaks.
#[must_use]
pub fn card_json(args: &Value) -> String {
    let pretty = serde_json::to_string_pretty(args).unwrap_or_default();
    pretty
        .split('\n')
        .map(card_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A character that a terminal or a page acts on rather than shows.
fn acts_when_printed(character: char) -> bool {
    character.is_control()
        || matches!(
            character,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod card_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn card_text_shows_what_a_terminal_or_a_page_would_act_on() {
        let cases = [
            ("plain words stay", "plain words stay"),
            ("tab\tand newline\n", "tab\\u{0009}and newline\\u{000A}"),
            ("escape \u{1b}[2J clears", "escape \\u{001B}[2J clears"),
            ("C1 CSI \u{9b}2J clears", "C1 CSI \\u{009B}2J clears"),
            ("delete \u{7f}", "delete \\u{007F}"),
            ("override \u{202e}gnp.exe", "override \\u{202E}gnp.exe"),
            ("isolate \u{2066}x\u{2069}", "isolate \\u{2066}x\\u{2069}"),
            (
                "marks \u{200e}\u{200f}\u{61c}",
                "marks \\u{200E}\\u{200F}\\u{061C}",
            ),
            ("accents é and 漢字 stay", "accents é and 漢字 stay"),
        ];
        for (text, shown) in cases {
            assert_eq!(card_text(text), shown, "{text:?}");
        }
    }

    #[test]
    fn card_json_keeps_its_layout_and_escapes_what_its_strings_carry() {
        let shown = card_json(&json!({"a": "line\nbreak", "b": "over\u{202e}ride"}));
        assert_eq!(
            shown,
            "{\n  \"a\": \"line\\nbreak\",\n  \"b\": \"over\\u{202E}ride\"\n}"
        );
    }

    #[test]
    fn card_arguments_cut_long_values_and_say_how_much() {
        let long = "x".repeat(200_000);
        let shown = card_arguments(&json!({"body": long, "url": "https://example.test/"}));
        let body = shown["body"].as_str().unwrap_or_default();
        assert!(
            body.starts_with(&"x".repeat(CARD_VALUE_CHARS)),
            "{body:.80}"
        );
        assert!(
            body.ends_with("… [cut: 199,700 more characters]"),
            "{body:.80}"
        );
        // The short value after it is still shown.
        assert_eq!(shown["url"], "https://example.test/");

        let many: Vec<Value> = (0..100).map(|i| json!(i)).collect();
        let shown = card_arguments(&json!({"items": many}));
        let items = shown["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), CARD_ENTRIES + 1);
        assert_eq!(items[CARD_ENTRIES], "[cut: 60 more items]");
        let one = card_arguments(&json!({"s": "z".repeat(CARD_VALUE_CHARS + 1)}));
        assert!(
            one["s"]
                .as_str()
                .unwrap_or_default()
                .ends_with("[cut: 1 more character]")
        );

        let mut deep = json!("bottom");
        for _ in 0..20 {
            deep = json!([deep]);
        }
        let text = card_arguments(&deep).to_string();
        assert!(text.contains("[cut: an array of 1 item]"), "{text}");
    }

    #[test]
    fn card_arguments_stay_within_their_budget_however_wide() {
        let wide: serde_json::Map<String, Value> = (0..40)
            .map(|i| (format!("key{i}"), Value::String("y".repeat(1_000))))
            .collect();
        let shown = card_arguments(&Value::Object(wide)).to_string();
        // The budget bounds the characters shown; the cut notes and JSON add a little.
        assert!(
            shown.chars().count() < CARD_ARGUMENT_CHARS + 2_000,
            "{}",
            shown.len()
        );
        assert!(shown.contains("more keys") || shown.contains("more characters"));
    }
}
