//! OpenAI Chat Completions, as OpenAI, OpenRouter, llama.cpp's server and many others speak
//! it. Request: <https://platform.openai.com/docs/api-reference/chat/create>; the stream of
//! `chat.completion.chunk` objects ending in `data: [DONE]`:
//! <https://platform.openai.com/docs/api-reference/chat-streaming>; streamed tool calls
//! (`delta.tool_calls[].index` with `id` and `function.name` first, then
//! `function.arguments` fragments): <https://platform.openai.com/docs/guides/function-calling>;
//! `stream_options.include_usage` (one last chunk with `usage` and no choices); JSON-schema
//! replies with `response_format: {type: "json_schema", json_schema: {name, schema, strict}}`:
//! <https://platform.openai.com/docs/guides/structured-outputs>; the model list
//! `GET /models`: <https://platform.openai.com/docs/api-reference/models/list>.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::ApiKey;
use crate::ModelInfo;
use crate::assemble::{ToolCalls, preview};
use crate::chat::{ChatRequest, Message, ToolChoice, ToolDef, bounded_tool_result};
use crate::drive::{Decoder, Flow};
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, Stop, StopReason, Usage};
use crate::failure::Peer;

pub(crate) fn endpoint(base_url: &str) -> String {
    format!("{base_url}/chat/completions")
}

pub(crate) fn models_endpoint(base_url: &str) -> String {
    format!("{base_url}/models")
}

pub(crate) fn headers(key: Option<&ApiKey>) -> Vec<(String, String)> {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if let Some(key) = key {
        headers.push((
            "authorization".to_owned(),
            format!("Bearer {}", key.expose()),
        ));
    }
    headers
}

/// Whether `base_url` is OpenAI's own API, which names the output cap
/// `max_completion_tokens` (its reasoning models refuse `max_tokens`); every other
/// server of this format (llama.cpp, vLLM, OpenRouter…) reads `max_tokens`.
pub(crate) fn is_openai_itself(base_url: &str) -> bool {
    base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest)
        .split(['/', ':'])
        .next()
        .is_some_and(|host| host.eq_ignore_ascii_case("api.openai.com"))
}

pub(crate) fn body(request: &ChatRequest, openai_itself: bool) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message).collect();
    let options = &request.options;
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    let cap = if openai_itself {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body.insert(cap.into(), json!(options.max_tokens));
    if let Some(temperature) = options.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if !request.tools.is_empty() {
        let tools = function_tools(&request.tools);
        body.insert("tools".into(), Value::Array(tools));
        body.insert(
            "tool_choice".into(),
            match &options.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
            },
        );
    }
    if let Some(format) = &options.response_format {
        let (schema, strict) = closed_schema(&format.schema);
        body.insert(
            "response_format".into(),
            json!({
                "type": "json_schema",
                "json_schema": {"name": format.name, "schema": schema, "strict": strict}
            }),
        );
    }
    Value::Object(body)
}

/// A response schema with `additionalProperties: false` on every object that does not say
/// otherwise (the reference's rule for output schemas), and whether it may be sent
/// `strict`: OpenAI's strict mode refuses a schema unless every object is closed and
/// lists all its properties as required
/// (<https://platform.openai.com/docs/guides/structured-outputs#supported-schemas>), so a
/// schema with optional fields goes non-strict rather than being refused.
pub(crate) fn closed_schema(schema: &Value) -> (Value, bool) {
    fn close(value: &mut Value, strict: &mut bool, depth: usize) {
        if depth > 64 {
            *strict = false;
            return;
        }
        match value {
            Value::Object(map) => {
                let is_object = map.get("type").and_then(Value::as_str) == Some("object")
                    || map.contains_key("properties");
                if is_object {
                    match map.get("additionalProperties") {
                        None => {
                            map.insert("additionalProperties".into(), Value::Bool(false));
                        }
                        Some(Value::Bool(false)) => {}
                        Some(_) => *strict = false,
                    }
                    let properties: Vec<&String> = map
                        .get("properties")
                        .and_then(Value::as_object)
                        .map(|properties| properties.keys().collect())
                        .unwrap_or_default();
                    let required: Vec<&str> = map
                        .get("required")
                        .and_then(Value::as_array)
                        .map(|names| names.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    if properties
                        .iter()
                        .any(|name| !required.contains(&name.as_str()))
                    {
                        *strict = false;
                    }
                }
                for child in map.values_mut() {
                    close(child, strict, depth + 1);
                }
            }
            Value::Array(items) => {
                for item in items {
                    close(item, strict, depth + 1);
                }
            }
            _ => {}
        }
    }
    let mut schema = schema.clone();
    let mut strict = true;
    close(&mut schema, &mut strict, 0);
    (schema, strict)
}

/// Tools as `{type: "function", function: {name, description, parameters}}` (OpenAI's
/// shape, which Ollama takes too).
pub(crate) fn function_tools(tools: &[ToolDef]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                }
            })
        })
        .collect()
}

fn message(message: &Message) -> Value {
    match message {
        Message::System { text } => json!({"role": "system", "content": text}),
        Message::User { text } => json!({"role": "user", "content": text}),
        Message::Assistant { text, tool_calls } => {
            let mut object = Map::new();
            object.insert("role".into(), json!("assistant"));
            object.insert(
                "content".into(),
                if text.is_empty() && !tool_calls.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                },
            );
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments.to_string()},
                        })
                    })
                    .collect();
                object.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(object)
        }
        Message::Tool {
            call_id, content, ..
        } => json!({
            "role": "tool",
            "tool_call_id": call_id,
            "content": bounded_tool_result(content),
        }),
    }
}

pub(crate) fn parse_models(body: &Value) -> Result<Vec<ModelInfo>, String> {
    let data = body
        .get("data")
        .and_then(Value::as_array)
        .ok_or("the model list has no `data` array")?;
    Ok(data
        .iter()
        .filter_map(|entry| {
            let id = entry.get("id")?.as_str()?;
            Some(ModelInfo {
                id: id.to_owned(),
                display_name: entry
                    .get("display_name")
                    .or_else(|| entry.get("name"))
                    .and_then(Value::as_str)
                    .filter(|name| *name != id)
                    .map(str::to_owned),
            })
        })
        .collect())
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "length" => StopReason::MaxTokens,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "content_filter" => StopReason::ContentFilter,
        other => StopReason::Other(other.to_owned()),
    }
}

/// One `chat.completion.chunk`, read into borrowed fields: no `Value` tree, and text
/// without escapes is not copied until it becomes an event. Fields we do not read are
/// skipped; `null` reads as absent.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    /// OpenRouter and others report a failure mid-stream as a chunk with `error`.
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// Reads `chat.completion.chunk` events.
#[derive(Default)]
pub(crate) struct ChunkDecoder {
    calls: ToolCalls,
    model: Option<String>,
}

impl Decoder for ChunkDecoder {
    fn item(
        &mut self,
        peer: &Peer,
        _name: &str,
        data: &str,
        out: &mut Vec<Event>,
    ) -> Result<Flow, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Finished);
        }
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|error| {
            let what = if error.is_data() {
                "does not have the shape of a chat.completion.chunk"
            } else {
                "is not valid JSON"
            };
            peer.error(
                ErrorKind::Stream,
                format!("a stream chunk {what} ({error}): {}", preview(data)),
            )
        })?;
        if let Some(error) = chunk.error {
            let said = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message")
                .to_owned();
            return Err(peer.error(
                ErrorKind::Stream,
                format!("the provider reported an error mid-stream: {said}"),
            ));
        }
        if self.model.is_none()
            && let Some(model) = chunk.model.filter(|model| !model.is_empty())
        {
            self.model = Some(model.into_owned());
        }
        let tool_error = |message: String| peer.error(ErrorKind::InvalidToolCall, message);
        if let Some(choice) = chunk.choices.and_then(|choices| choices.into_iter().next()) {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content
                    && !text.is_empty()
                {
                    out.push(Event::TextDelta {
                        text: text.into_owned(),
                    });
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    let key = call
                        .index
                        .and_then(|index| usize::try_from(index).ok())
                        .unwrap_or(0);
                    let (name, arguments) = call
                        .function
                        .map(|function| (function.name, function.arguments))
                        .unwrap_or_default();
                    // Servers that omit `index` (every call at 0) tell calls apart by id:
                    // a new id where a call is open ends that one.
                    if let Some(id) = call.id.as_deref()
                        && self.calls.open_id(key).is_some_and(|open| open != id)
                    {
                        out.push(self.calls.end(key).map_err(tool_error)?);
                    }
                    if !self.calls.is_open(key) {
                        out.push(
                            self.calls
                                .start(key, call.id.as_deref(), name.as_deref().unwrap_or(""))
                                .map_err(tool_error)?,
                        );
                    }
                    if let Some(fragment) = arguments
                        && !fragment.is_empty()
                    {
                        out.push(self.calls.delta(key, &fragment).map_err(tool_error)?);
                    }
                }
            }
            if let Some(reason) = choice.finish_reason {
                out.extend(self.calls.end_all().map_err(tool_error)?);
                let mut reason = stop_reason(&reason);
                // Some servers say `stop` after tool calls.
                if reason == StopReason::EndTurn && self.calls.any() {
                    reason = StopReason::ToolUse;
                }
                out.push(Event::Stop {
                    stop: Stop {
                        reason,
                        message: None,
                    },
                });
            }
        }
        if let Some(usage) = chunk.usage {
            out.push(Event::Usage {
                usage: Usage {
                    input_tokens: usage.prompt_tokens.unwrap_or(0),
                    output_tokens: usage.completion_tokens.unwrap_or(0),
                },
            });
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
    use crate::chat::{ChatOptions, ResponseFormat, ToolCall, ToolDef};
    use crate::error::ProviderKind;

    fn peer() -> Peer {
        Peer::new(
            ProviderKind::OpenAi,
            "http://127.0.0.1:1/v1/chat/completions",
            Some("m"),
        )
    }

    #[test]
    fn the_request_carries_tools_history_and_format() {
        let request = ChatRequest {
            messages: vec![
                Message::System {
                    text: "be brief".into(),
                },
                Message::User {
                    text: "weather?".into(),
                },
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "get_weather".into(),
                        arguments: json!({"city": "Paris"}),
                    }],
                },
                Message::Tool {
                    call_id: "c1".into(),
                    name: "get_weather".into(),
                    content: "18".into(),
                    is_error: false,
                },
            ],
            tools: vec![ToolDef {
                name: "get_weather".into(),
                description: "weather".into(),
                input_schema: json!({"type": "object"}),
            }],
            options: ChatOptions {
                response_format: Some(ResponseFormat {
                    name: "answer".into(),
                    schema: json!({"type": "object"}),
                }),
                ..ChatOptions::new("m")
            },
        };
        assert!(is_openai_itself("https://api.openai.com/v1"));
        assert!(!is_openai_itself("http://127.0.0.1:8080/v1"));
        assert_eq!(body(&request, true)["max_completion_tokens"], json!(1024));
        let body = body(&request, false);
        assert_eq!(body["max_tokens"], json!(1024));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            json!("{\"city\":\"Paris\"}")
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "18"})
        );
        assert_eq!(
            body["tools"][0]["function"]["parameters"],
            json!({"type": "object"})
        );
        assert_eq!(body["tool_choice"], json!("auto"));
        assert_eq!(
            body["response_format"]["json_schema"]["name"],
            json!("answer")
        );
    }

    #[test]
    fn response_schemas_are_closed_and_strict_only_when_they_can_be() {
        let cases = [
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}),
                true,
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}}),
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}),
                false,
            ),
            (
                json!({"type": "object", "properties": {"n": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}, "required": ["n"]}),
                json!({"type": "object", "properties": {"n": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"], "additionalProperties": false}}, "required": ["n"], "additionalProperties": false}),
                true,
            ),
            (
                json!({"type": "object", "additionalProperties": true}),
                json!({"type": "object", "additionalProperties": true}),
                false,
            ),
        ];
        for (schema, closed, strict) in cases {
            assert_eq!(closed_schema(&schema), (closed, strict), "{schema}");
        }
    }

    #[test]
    fn calls_without_an_index_are_told_apart_by_id() {
        let chunks = [
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{\"y\":2}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ];
        let mut decoder = ChunkDecoder::default();
        let mut out = Vec::new();
        for chunk in chunks {
            assert_eq!(
                decoder.item(&peer(), "", chunk, &mut out),
                Ok(Flow::More),
                "{chunk}"
            );
        }
        let calls: Vec<_> = out
            .iter()
            .filter_map(|event| match event {
                Event::ToolCallEnd { call, .. } => Some((call.id.clone(), call.arguments.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            calls,
            vec![("a".into(), json!({"x": 1})), ("b".into(), json!({"y": 2}))]
        );
    }

    #[test]
    fn streamed_tool_calls_assemble_and_usage_comes_last() {
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5}}"#,
        ];
        let mut decoder = ChunkDecoder::default();
        let mut out = Vec::new();
        for chunk in chunks {
            assert_eq!(decoder.item(&peer(), "", chunk, &mut out), Ok(Flow::More));
        }
        assert_eq!(
            decoder.item(&peer(), "", "[DONE]", &mut out),
            Ok(Flow::Finished)
        );
        let ends: Vec<_> = out
            .iter()
            .filter_map(|event| match event {
                Event::ToolCallEnd { call, .. } => Some(call.arguments.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(ends, vec![json!({"city": "Paris"})]);
        assert!(out.contains(&Event::Usage {
            usage: Usage {
                input_tokens: 12,
                output_tokens: 5
            }
        }));
        assert!(out.iter().any(
            |event| matches!(event, Event::Stop { stop } if stop.reason == StopReason::ToolUse)
        ));
    }

    #[test]
    fn malformed_chunks_and_arguments_are_named_errors() {
        let mut decoder = ChunkDecoder::default();
        let error = decoder
            .item(&peer(), "", "{\"choices\":[", &mut Vec::new())
            .err();
        assert!(error.is_some_and(|error| {
            error.code() == "stream"
                && error
                    .message
                    .starts_with("a stream chunk is not valid JSON")
        }));

        let mut decoder = ChunkDecoder::default();
        let mut out = Vec::new();
        decoder
            .item(&peer(), "", r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{oops"}}]}}]}"#, &mut out)
            .ok();
        let error = decoder
            .item(
                &peer(),
                "",
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
                &mut out,
            )
            .err();
        assert!(
            error.is_some_and(|error| error.code() == "invalid_tool_call"
                && error.message.contains("`f` (id `x`)"))
        );
    }
}
