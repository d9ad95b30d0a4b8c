//! Anthropic Messages. Request: <https://docs.anthropic.com/en/api/messages>; the event
//! stream (`message_start`, `content_block_start|delta|stop`, `message_delta`,
//! `message_stop`, `ping`, `error`; text as `text_delta`, tool input as `input_json_delta`
//! fragments of `partial_json`): <https://docs.anthropic.com/en/api/messages-streaming>;
//! tool use and `tool_result` blocks: <https://docs.anthropic.com/en/docs/build-with-claude/tool-use>;
//! calling from a browser needs `anthropic-dangerous-direct-browser-access: true`
//! (<https://docs.anthropic.com/en/api/client-sdks>, "CORS"); structured outputs with
//! `output_format: {type: "json_schema", schema}` under the
//! `structured-outputs-2025-11-13` beta:
//! <https://docs.anthropic.com/en/docs/build-with-claude/structured-outputs>; the model
//! list `GET /v1/models`: <https://docs.anthropic.com/en/api/models-list>.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::assemble::{ToolCalls, preview};
use crate::chat::{ChatRequest, Message, ToolChoice, bounded_tool_result};
use crate::drive::{Decoder, Flow, remember_model};
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, Stop, StopReason, Usage};
use crate::failure::Peer;
use crate::{ApiKey, ModelInfo};

/// The API version every request names (`anthropic-version`).
pub(crate) const VERSION: &str = "2023-06-01";
const STRUCTURED_OUTPUTS_BETA: &str = "structured-outputs-2025-11-13";

pub(crate) fn endpoint(base_url: &str) -> String {
    format!("{base_url}/v1/messages")
}

pub(crate) fn models_endpoint(base_url: &str) -> String {
    format!("{base_url}/v1/models?limit=1000")
}

pub(crate) fn headers(
    key: Option<&ApiKey>,
    request: Option<&ChatRequest>,
) -> Vec<(String, String)> {
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("anthropic-version".to_owned(), VERSION.to_owned()),
        (
            "anthropic-dangerous-direct-browser-access".to_owned(),
            "true".to_owned(),
        ),
    ];
    if let Some(key) = key {
        headers.push(("x-api-key".to_owned(), key.expose().to_owned()));
    }
    if request.is_some_and(|request| request.options.response_format.is_some()) {
        headers.push((
            "anthropic-beta".to_owned(),
            STRUCTURED_OUTPUTS_BETA.to_owned(),
        ));
    }
    headers
}

pub(crate) fn body(request: &ChatRequest) -> Value {
    let options = &request.options;
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("max_tokens".into(), json!(options.max_tokens));
    body.insert("stream".into(), json!(true));
    if let Some(system) = request.system_text() {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages(&request.messages)));
    if let Some(temperature) = options.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert(
            "tool_choice".into(),
            match &options.tool_choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
            },
        );
    }
    if let Some(format) = &options.response_format {
        let (schema, _) = crate::openai::closed_schema(&format.schema);
        body.insert(
            "output_format".into(),
            json!({"type": "json_schema", "schema": schema}),
        );
    }
    Value::Object(body)
}

/// Messages as content blocks. Roles must alternate, so consecutive blocks of one role
/// (a user text after tool results, several tool results) share one message.
fn messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(String, Vec<Value>)> = Vec::new();
    let mut push = |role: &str, block: Value| match out.last_mut() {
        Some((last, blocks)) if last == role => blocks.push(block),
        _ => out.push((role.to_owned(), vec![block])),
    };
    for message in messages {
        match message {
            Message::System { .. } => {}
            Message::User { text } => push("user", json!({"type": "text", "text": text})),
            Message::Assistant { text, tool_calls } => {
                // The API refuses a text block that is only whitespace.
                if !text.trim().is_empty() {
                    push("assistant", json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    push(
                        "assistant",
                        json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}),
                    );
                }
            }
            Message::Tool {
                call_id,
                content,
                is_error,
                ..
            } => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": bounded_tool_result(content),
                });
                if *is_error {
                    block["is_error"] = json!(true);
                }
                push("user", block);
            }
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

pub(crate) fn parse_models(body: &Value) -> Result<Vec<ModelInfo>, String> {
    crate::openai::parse_models(body)
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "tool_use" => StopReason::ToolUse,
        "refusal" => StopReason::ContentFilter,
        other => StopReason::Other(other.to_owned()),
    }
}

/// A `content_block_delta` event, borrowed.
#[derive(Deserialize)]
struct BlockDelta<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow)]
    delta: DeltaBody<'a>,
}

#[derive(Deserialize)]
struct DeltaBody<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    partial_json: Option<Cow<'a, str>>,
}

/// Reads the Messages event stream.
#[derive(Default)]
pub(crate) struct EventDecoder {
    calls: ToolCalls,
    usage: Usage,
    stop: Option<StopReason>,
    model: Option<String>,
}

fn count(usage: &Value, name: &str) -> Option<u64> {
    usage.get(name).and_then(Value::as_u64)
}

impl EventDecoder {
    fn read_usage(&mut self, usage: &Value, out: &mut Vec<Event>) {
        // Input is split into fresh, cache-written and cache-read tokens; all are input.
        let input: Option<u64> = [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ]
        .iter()
        .filter_map(|name| count(usage, name))
        .reduce(u64::saturating_add);
        if let Some(input) = input {
            self.usage.input_tokens = input;
        }
        if let Some(output) = count(usage, "output_tokens") {
            self.usage.output_tokens = output;
        }
        out.push(Event::Usage { usage: self.usage });
    }
}

impl EventDecoder {
    /// A `content_block_delta`: text, or a fragment of a tool call's input. Thinking,
    /// signatures and citations are not part of the reply's text.
    fn block_delta(
        &mut self,
        peer: &Peer,
        event: BlockDelta<'_>,
        out: &mut Vec<Event>,
    ) -> Result<(), ProviderError> {
        let index = event
            .index
            .and_then(|index| usize::try_from(index).ok())
            .unwrap_or(0);
        match (
            &*event.delta.kind,
            event.delta.text,
            event.delta.partial_json,
        ) {
            ("text_delta", Some(text), _) => out.push(Event::TextDelta {
                text: text.into_owned(),
            }),
            ("input_json_delta", _, Some(fragment)) if !fragment.is_empty() => out.push(
                self.calls
                    .delta(index, &fragment)
                    .map_err(|message| peer.error(ErrorKind::InvalidToolCall, message))?,
            ),
            _ => {}
        }
        Ok(())
    }
}

impl Decoder for EventDecoder {
    fn item(
        &mut self,
        peer: &Peer,
        name: &str,
        data: &str,
        out: &mut Vec<Event>,
    ) -> Result<Flow, ProviderError> {
        // Nearly every event of a reply is a `content_block_delta`: read those into
        // borrowed fields, without a `Value` tree.
        if name == "content_block_delta"
            && let Ok(event) = serde_json::from_str::<BlockDelta<'_>>(data)
        {
            self.block_delta(peer, event, out)?;
            return Ok(Flow::More);
        }
        let event: Value = serde_json::from_str(data).map_err(|error| {
            peer.error(
                ErrorKind::Stream,
                format!(
                    "event `{name}` is not valid JSON ({error}): {}",
                    preview(data)
                ),
            )
        })?;
        let kind = event.get("type").and_then(Value::as_str).unwrap_or(name);
        let index = || {
            event
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|index| usize::try_from(index).ok())
                .unwrap_or(0)
        };
        let tool_error = |message: String| peer.error(ErrorKind::InvalidToolCall, message);
        match kind {
            "message_start" => {
                remember_model(&mut self.model, &event, "/message/model");
                if let Some(usage) = event.pointer("/message/usage") {
                    self.read_usage(usage, out);
                }
            }
            "content_block_start" => {
                let block = event.get("content_block").unwrap_or(&Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let id = block.get("id").and_then(Value::as_str);
                        let tool = block.get("name").and_then(Value::as_str).unwrap_or("");
                        out.push(self.calls.start(index(), id, tool).map_err(tool_error)?);
                    }
                    Some("text") => {
                        if let Some(text) = block.get("text").and_then(Value::as_str)
                            && !text.is_empty()
                        {
                            out.push(Event::TextDelta {
                                text: text.to_owned(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            // Unnamed, or a shape the borrowed read above did not take.
            "content_block_delta" => {
                if let Ok(delta) = BlockDelta::deserialize(&event) {
                    self.block_delta(peer, delta, out)?;
                }
            }
            "content_block_stop" if self.calls.is_open(index()) => {
                out.push(self.calls.end(index()).map_err(tool_error)?);
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop_reason(reason));
                }
                if let Some(usage) = event.get("usage") {
                    self.read_usage(usage, out);
                }
            }
            "message_stop" => {
                // A tool_use block whose `content_block_stop` never came ends here (or
                // fails naming the call), rather than being lost.
                out.extend(self.calls.end_all().map_err(tool_error)?);
                let reason = self.stop.take().unwrap_or(StopReason::EndTurn);
                out.push(Event::Stop {
                    stop: Stop {
                        reason,
                        message: None,
                    },
                });
                return Ok(Flow::Finished);
            }
            "error" => {
                let error = event.get("error").unwrap_or(&Value::Null);
                let error_type = error.get("type").and_then(Value::as_str).unwrap_or("error");
                let said = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                let kind = match error_type {
                    "overloaded_error" | "api_error" => ErrorKind::Server,
                    "rate_limit_error" => ErrorKind::RateLimited {
                        retry_after_ms: None,
                    },
                    _ => ErrorKind::Stream,
                };
                return Err(peer.error(kind, format!("the stream reported `{error_type}`: {said}")));
            }
            // `ping` and event types added later.
            _ => {}
        }
        Ok(Flow::More)
    }

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ChatOptions, ToolCall};
    use crate::error::ProviderKind;

    fn peer() -> Peer {
        Peer::new(
            ProviderKind::Anthropic,
            "http://127.0.0.1:1/v1/messages",
            Some("claude"),
        )
    }

    #[test]
    fn tool_results_and_texts_share_alternating_messages() {
        let request = ChatRequest {
            messages: vec![
                Message::System { text: "sys".into() },
                Message::User { text: "hi".into() },
                Message::Assistant {
                    text: "checking".into(),
                    tool_calls: vec![
                        ToolCall {
                            id: "a".into(),
                            name: "f".into(),
                            arguments: json!({}),
                        },
                        ToolCall {
                            id: "b".into(),
                            name: "g".into(),
                            arguments: json!({"x": 1}),
                        },
                    ],
                },
                Message::Tool {
                    call_id: "a".into(),
                    name: "f".into(),
                    content: "1".into(),
                    is_error: false,
                },
                Message::Tool {
                    call_id: "b".into(),
                    name: "g".into(),
                    content: "boom".into(),
                    is_error: true,
                },
            ],
            tools: Vec::new(),
            options: ChatOptions::new("claude"),
        };
        let body = body(&request);
        assert_eq!(body["system"], json!("sys"));
        let roles: Vec<_> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].clone())
            .collect();
        assert_eq!(
            roles,
            vec![json!("user"), json!("assistant"), json!("user")]
        );
        assert_eq!(body["messages"][1]["content"][2]["input"], json!({"x": 1}));
        assert_eq!(body["messages"][2]["content"][1]["is_error"], json!(true));
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn a_streamed_tool_use_and_usage() {
        let events = [
            (
                "message_start",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"cache_read_input_tokens":7,"output_tokens":1}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look."}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Pa"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ris\"}"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":1}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}"#,
            ),
            ("ping", r#"{"type":"ping"}"#),
        ];
        let mut decoder = EventDecoder::default();
        let mut out = Vec::new();
        for (name, data) in events {
            assert_eq!(
                decoder.item(&peer(), name, data, &mut out),
                Ok(Flow::More),
                "{name}"
            );
        }
        assert_eq!(
            decoder.item(
                &peer(),
                "message_stop",
                r#"{"type":"message_stop"}"#,
                &mut out
            ),
            Ok(Flow::Finished)
        );
        let mut message = crate::FinalMessage::default();
        out.iter().for_each(|event| message.absorb(event));
        assert_eq!(message.text, "Let me look.");
        assert_eq!(message.tool_calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(
            message.usage,
            Usage {
                input_tokens: 10,
                output_tokens: 20
            }
        );
        assert_eq!(
            message.stop.map(|stop| stop.reason),
            Some(StopReason::ToolUse)
        );
    }

    #[test]
    fn a_tool_call_whose_block_never_stopped_ends_with_the_message() {
        let mut decoder = EventDecoder::default();
        let mut out = Vec::new();
        for (name, data) in [
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#,
            ),
        ] {
            decoder.item(&peer(), name, data, &mut out).ok();
        }
        assert_eq!(
            decoder.item(
                &peer(),
                "message_stop",
                r#"{"type":"message_stop"}"#,
                &mut out
            ),
            Ok(Flow::Finished)
        );
        assert!(out.iter().any(|event| matches!(event, Event::ToolCallEnd { call, .. } if call.arguments == json!({"a": 1}))));
    }

    #[test]
    fn whitespace_before_a_tool_call_is_not_a_text_block() {
        let request = ChatRequest {
            messages: vec![
                Message::User { text: "hi".into() },
                Message::Assistant {
                    text: "\n\n".into(),
                    tool_calls: vec![ToolCall {
                        id: "a".into(),
                        name: "f".into(),
                        arguments: json!({}),
                    }],
                },
            ],
            tools: Vec::new(),
            options: ChatOptions::new("claude"),
        };
        let body = body(&request);
        assert_eq!(
            body["messages"][1]["content"].as_array().map(Vec::len),
            Some(1)
        );
        assert_eq!(body["messages"][1]["content"][0]["type"], json!("tool_use"));
    }

    #[test]
    fn an_error_event_is_typed() {
        let mut decoder = EventDecoder::default();
        let error = decoder
            .item(
                &peer(),
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                &mut Vec::new(),
            )
            .err();
        assert!(error.is_some_and(|error| error.code() == "server_error"
            && error.message == "the stream reported `overloaded_error`: Overloaded"));
    }
}
