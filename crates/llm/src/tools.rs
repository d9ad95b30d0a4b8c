//! Tools for a model that was not trained on them: the offered tools are
//! described in the system message with one JSON shape to answer in, and a
//! reply in that shape (and only such a reply) becomes a tool call. A forced
//! tool's reply is read as its arguments. Prose is never scraped for JSON.

use kiln_types::chat::{ChatRequest, Message, ToolChoice};
use serde_json::Value;

use crate::template::TemplateMessage;

/// How the turn's reply is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolMode {
    /// Text only.
    Off,
    /// A reply that is `{"tool_call": {"name", "arguments"}}` naming one of these is a call.
    Offered(Vec<String>),
    /// The whole reply is this tool's arguments object.
    Forced(String),
}

/// The template's messages for `request`, and how its reply is read.
pub(crate) fn prompt_messages(request: &ChatRequest) -> (Vec<TemplateMessage>, ToolMode) {
    let (preamble, mode) = preamble(request);
    let mut messages: Vec<TemplateMessage> = Vec::with_capacity(request.messages.len() + 1);
    for message in &request.messages {
        messages.push(match message {
            Message::System { text } => TemplateMessage {
                role: "system",
                content: text.clone(),
            },
            Message::User { text } => TemplateMessage {
                role: "user",
                content: text.clone(),
            },
            Message::Assistant { text, tool_calls } => {
                let mut content = text.clone();
                for call in tool_calls {
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    content.push_str(
                        &serde_json::json!({"tool_call": {"name": call.name, "arguments": call.arguments}})
                            .to_string(),
                    );
                }
                TemplateMessage {
                    role: "assistant",
                    content,
                }
            }
            // The model knows no tool role: a result is a user message saying whose it is.
            Message::Tool {
                name,
                content,
                is_error,
                ..
            } => TemplateMessage {
                role: "user",
                content: format!(
                    "[{} of the tool `{name}`]\n{content}",
                    if *is_error { "The error" } else { "The result" }
                ),
            },
        });
    }
    if let Some(preamble) = preamble {
        match messages.first_mut() {
            Some(first) if first.role == "system" => {
                first.content = format!("{}\n\n{preamble}", first.content);
            }
            _ => messages.insert(
                0,
                TemplateMessage {
                    role: "system",
                    content: preamble,
                },
            ),
        }
    }
    (messages, mode)
}

fn preamble(request: &ChatRequest) -> (Option<String>, ToolMode) {
    let schema_text = |schema: &Value| schema.to_string();
    match &request.options.tool_choice {
        ToolChoice::Tool(name) => {
            if let Some(tool) = request.tools.iter().find(|tool| &tool.name == name) {
                return (
                    Some(format!(
                        "Reply with only a JSON object and no other text: the arguments of `{}` ({}), matching this JSON Schema: {}",
                        tool.name,
                        tool.description.trim(),
                        schema_text(&tool.input_schema)
                    )),
                    ToolMode::Forced(tool.name.clone()),
                );
            }
        }
        ToolChoice::None => return (None, ToolMode::Off),
        ToolChoice::Auto | ToolChoice::Required => {}
    }
    if request.tools.is_empty() {
        return (
            request.options.response_format.as_ref().map(|format| {
                format!(
                    "Reply with only JSON and no other text, matching this JSON Schema: {}",
                    schema_text(&format.schema)
                )
            }),
            ToolMode::Off,
        );
    }
    let mut text = String::from(
        "You can call tools. To call one, reply with only this JSON and no other text:\n\
         {\"tool_call\": {\"name\": \"TOOL\", \"arguments\": {...}}}\n",
    );
    text.push_str(if request.options.tool_choice == ToolChoice::Required {
        "You must call one of them.\n"
    } else {
        "Otherwise reply in plain text.\n"
    });
    text.push_str("The tools (arguments marked ? may be left out):\n");
    for tool in &request.tools {
        text.push_str(&format!(
            "- {}({}): {}\n",
            tool.name,
            arguments(&tool.input_schema),
            first_sentence(&tool.description)
        ));
    }
    (
        Some(text),
        ToolMode::Offered(request.tools.iter().map(|tool| tool.name.clone()).collect()),
    )
}

/// A tool's arguments as a short list, `code, timeout_ms?`: a small model's
/// context holds the agent's contract and its tools only this way (the whole
/// schemas of a workspace's tools alone would fill it).
fn arguments(schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .keys()
                .map(|name| {
                    if required.contains(&name.as_str()) {
                        name.clone()
                    } else {
                        format!("{name}?")
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// The first sentence of a description (up to its first ". " or line end).
fn first_sentence(description: &str) -> &str {
    let text = description.trim();
    let line = text.lines().next().unwrap_or_default();
    match line.find(". ") {
        Some(end) => &line[..=end],
        None => line,
    }
}

/// Whether a reply that begins with `text` may be a call, and so must be held
/// back until it ends rather than streamed.
pub(crate) fn may_be_call(mode: &ToolMode, text: &str) -> bool {
    match mode {
        ToolMode::Off => false,
        ToolMode::Forced(_) => true,
        ToolMode::Offered(_) => {
            let start = text.trim_start();
            start.is_empty() || start.starts_with('{') || start.starts_with('`')
        }
    }
}

/// The call a whole reply makes, if it is one: the tool's name and its
/// arguments object.
pub(crate) fn parse_call(mode: &ToolMode, reply: &str) -> Option<(String, Value)> {
    let json: Value = serde_json::from_str(unfenced(reply)).ok()?;
    let wrapped = json
        .get("tool_call")
        .and_then(|call| Some((call.get("name")?.as_str()?, call.get("arguments")?)));
    match mode {
        ToolMode::Off => None,
        ToolMode::Offered(names) => {
            let (name, arguments) = wrapped?;
            (names.iter().any(|offered| offered == name) && arguments.is_object())
                .then(|| (name.to_owned(), arguments.clone()))
        }
        ToolMode::Forced(forced) => match wrapped {
            Some((name, arguments)) if name == forced && arguments.is_object() => {
                Some((forced.clone(), arguments.clone()))
            }
            _ => json.is_object().then(|| (forced.clone(), json)),
        },
    }
}

/// The reply without a Markdown code fence around it.
fn unfenced(reply: &str) -> &str {
    let trimmed = reply.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let body = rest.split_once('\n').map_or(rest, |(_, body)| body);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_types::chat::{ChatOptions, ToolDef};

    fn request(choice: ToolChoice) -> ChatRequest {
        let mut options = ChatOptions::new("m");
        options.tool_choice = choice;
        ChatRequest {
            messages: vec![Message::User { text: "hi".into() }],
            tools: vec![ToolDef {
                name: "add".into(),
                description: "Adds.".into(),
                input_schema: serde_json::json!({"type": "object"}),
            }],
            options,
        }
    }

    #[test]
    fn replies_are_read_by_their_mode() {
        let offered = ToolMode::Offered(vec!["add".into()]);
        let forced = ToolMode::Forced("add".into());
        let call = r#"{"tool_call": {"name": "add", "arguments": {"a": 1}}}"#;
        type Case<'a> = (&'a ToolMode, &'a str, Option<(&'a str, Value)>);
        let cases: [Case; 8] = [
            (&offered, call, Some(("add", serde_json::json!({"a": 1})))),
            (
                &offered,
                &format!("```json\n{call}\n```"),
                Some(("add", serde_json::json!({"a": 1}))),
            ),
            (
                &offered,
                r#"{"tool_call": {"name": "sub", "arguments": {}}}"#,
                None,
            ),
            (&offered, r#"{"a": 1}"#, None),
            (&offered, "The answer is {\"a\": 1}", None),
            (
                &forced,
                r#"{"a": 1}"#,
                Some(("add", serde_json::json!({"a": 1}))),
            ),
            (&forced, call, Some(("add", serde_json::json!({"a": 1})))),
            (&ToolMode::Off, call, None),
        ];
        for (mode, reply, expected) in cases {
            let got = parse_call(mode, reply);
            assert_eq!(
                got,
                expected.map(|(name, args)| (name.to_owned(), args)),
                "{reply}"
            );
        }
    }

    #[test]
    fn the_preamble_joins_the_system_message() {
        let mut with_system = request(ToolChoice::Auto);
        with_system.messages.insert(
            0,
            Message::System {
                text: "Be brief.".into(),
            },
        );
        let (messages, mode) = prompt_messages(&with_system);
        assert_eq!(mode, ToolMode::Offered(vec!["add".into()]));
        assert_eq!(messages.len(), 2);
        assert!(
            messages[0]
                .content
                .starts_with("Be brief.\n\nYou can call tools.")
        );
        let (messages, mode) = prompt_messages(&request(ToolChoice::Tool("add".into())));
        assert_eq!(mode, ToolMode::Forced("add".into()));
        assert!(messages[0].content.contains("the arguments of `add`"));
        let (messages, mode) = prompt_messages(&request(ToolChoice::None));
        assert_eq!((messages.len(), mode), (1, ToolMode::Off));
    }
}
