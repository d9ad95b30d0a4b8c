//! What the provider is sent of a thread: one tool result cut at
//! [`MAX_TOOL_RESULT_CHARS`], and a thread compacted into a summary of
//! everything before its last user turns.

use futures::StreamExt as _;
use kiln_providers::budget::RunBudget;
use kiln_providers::{AbortSignal, ChatOptions, ChatRequest, Event, Message, Provider};

/// The most characters of one tool result that enter the history.
pub const MAX_TOOL_RESULT_CHARS: usize = 25_000;

/// The first line of a compaction row, which is how the app knows one.
pub const COMPACTION_MARK: &str = "[Earlier conversation summarized]";

/// Cuts `content` to [`MAX_TOOL_RESULT_CHARS`] characters, saying so and how
/// to ask for less.
#[must_use]
pub(crate) fn cut_result(content: String) -> String {
    let total = content.chars().count();
    if total <= MAX_TOOL_RESULT_CHARS {
        return content;
    }
    let kept: String = content.chars().take(MAX_TOOL_RESULT_CHARS).collect();
    format!(
        "{kept}\n\n[Output cut: this result was {total} characters and only the first {MAX_TOOL_RESULT_CHARS} are shown. \
         Ask for a smaller slice: print or return only the fields, rows or lines you need, or page through it.]"
    )
}

/// When a thread is compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// The estimated prompt, in tokens, past which the thread is compacted
    /// before a model turn.
    pub threshold_tokens: u64,
    /// User turns kept whole at the end.
    pub keep_turns: usize,
}

impl Default for Compaction {
    fn default() -> Self {
        Self {
            threshold_tokens: 120_000,
            keep_turns: 4,
        }
    }
}

/// Where the kept part of `view` starts: at the `keep`-th user message from
/// the end, so a tool call stays with its result. `None` when there is
/// nothing before it to summarize.
#[must_use]
pub fn split_point(view: &[Message], keep: usize) -> Option<usize> {
    let users: Vec<usize> = view
        .iter()
        .enumerate()
        .filter(|(_, message)| matches!(message, Message::User { .. }))
        .map(|(index, _)| index)
        .collect();
    let keep = keep.max(1);
    let cut = *users.get(users.len().checked_sub(keep)?)?;
    (cut > 0).then_some(cut)
}

/// The thread as plain text for the summarizer.
fn transcript(messages: &[Message]) -> String {
    let mut text = String::new();
    for message in messages {
        let line = match message {
            Message::System { .. } => continue,
            Message::User { text } => format!("User: {text}"),
            Message::Assistant { text, tool_calls } => {
                let calls: Vec<String> = tool_calls
                    .iter()
                    .map(|call| format!("[called {} with {}]", call.name, call.arguments))
                    .collect();
                format!("Assistant: {text} {}", calls.join(" "))
            }
            Message::Tool { name, content, .. } => {
                let cut: String = content.chars().take(4_000).collect();
                format!("Tool {name} answered: {cut}")
            }
        };
        text.push_str(line.trim());
        text.push_str("\n\n");
    }
    text
}

/// Asks `provider` for a summary of `messages`.
///
/// # Errors
///
/// The provider's failure or refusal, in a sentence.
pub async fn summarize(
    provider: &dyn Provider,
    options: &ChatOptions,
    messages: &[Message],
    budget: &RunBudget,
    abort: Option<AbortSignal>,
) -> Result<(String, kiln_providers::FinalMessage), String> {
    let request = ChatRequest {
        messages: vec![
            Message::System {
                text: "You summarize a conversation between a person and an AI agent so the agent can continue it. \
                       Keep every fact, decision, number, name, file and memory key the agent may need, what was asked, \
                       what was done and what is still open. Write plain prose and lists, no preamble."
                    .into(),
            },
            Message::User {
                text: format!("Summarize this conversation:\n\n{}", transcript(messages)),
            },
        ],
        tools: Vec::new(),
        options: ChatOptions {
            tool_choice: kiln_providers::ToolChoice::Auto,
            response_format: None,
            ..options.clone()
        },
    };
    let mut stream = kiln_providers::turn(provider, request, Some(budget.clone()), abort);
    let mut done = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(Event::Done { message }) => done = Some(message),
            Ok(_) => {}
            Err(error) => return Err(error.to_string()),
        }
    }
    let message = done.ok_or("the summarizer's stream ended without its message")?;
    if let Some(stop) = message
        .stop
        .as_ref()
        .filter(|stop| stop.reason.is_refusal())
    {
        return Err(stop
            .message
            .clone()
            .unwrap_or_else(|| format!("the summarizer was stopped ({:?})", stop.reason)));
    }
    if message.text.trim().is_empty() {
        return Err("the summarizer answered nothing".into());
    }
    Ok((message.text.clone(), message))
}

/// The compaction row that replaces what `summary` summarizes.
#[must_use]
pub fn compaction_row(summary: &str) -> Message {
    Message::User {
        text: format!("{COMPACTION_MARK}\n{}", summary.trim()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message::User { text: text.into() }
    }

    fn assistant(text: &str) -> Message {
        Message::Assistant {
            text: text.into(),
            tool_calls: Vec::new(),
        }
    }

    #[test]
    fn a_result_past_the_bound_is_cut_with_a_notice() {
        assert_eq!(cut_result("short".into()), "short");
        let long = "é".repeat(MAX_TOOL_RESULT_CHARS + 10);
        let cut = cut_result(long);
        assert!(cut.starts_with(&"é".repeat(MAX_TOOL_RESULT_CHARS)));
        assert!(cut.contains(&format!(
            "this result was {} characters and only the first 25000 are shown",
            MAX_TOOL_RESULT_CHARS + 10
        )));
    }

    #[test]
    fn the_cut_lands_on_a_user_message_keeping_the_last_turns() {
        let view = [
            user("1"),
            assistant("a"),
            user("2"),
            assistant("b"),
            user("3"),
            assistant("c"),
        ];
        assert_eq!(split_point(&view, 2), Some(2));
        assert_eq!(split_point(&view, 1), Some(4));
        assert_eq!(split_point(&view, 3), None);
        assert_eq!(split_point(&view, 9), None);
    }
}
