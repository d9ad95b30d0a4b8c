//! Ollama's native chat API, `POST /api/chat`, streamed as one JSON object per line
//! (NDJSON) until one with `"done": true` carrying `done_reason`, `prompt_eval_count` and
//! `eval_count`: <https://github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion>.
//! Tool calls come whole in one line, their `arguments` an object (not a JSON string); tools
//! and `format` (a JSON schema) as in the same document; the model list is
//! `GET /api/tags` (<https://github.com/ollama/ollama/blob/main/docs/api.md#list-local-models>),
//! and what a model can do is `capabilities` in `POST /api/show`'s answer
//! (`["completion", "tools", …]`; <https://github.com/ollama/ollama/blob/main/docs/api.md#show-model-information>).
//! A browser page may call it only from an origin in `OLLAMA_ORIGINS`
//! (<https://github.com/ollama/ollama/blob/main/docs/faq.md>).

use serde_json::{Map, Value, json};

use crate::assemble::{ToolCalls, preview};
use crate::chat::{ChatRequest, Message, ToolChoice, bounded_tool_result};
use crate::drive::{Decoder, Flow, remember_model};
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, Stop, StopReason, Usage};
use crate::failure::Peer;
use crate::{ApiKey, ModelInfo};

pub(crate) fn endpoint(base_url: &str) -> String {
    format!("{base_url}/api/chat")
}

pub(crate) fn models_endpoint(base_url: &str) -> String {
    format!("{base_url}/api/tags")
}

pub(crate) fn show_endpoint(base_url: &str) -> String {
    format!("{base_url}/api/show")
}

/// Whether `/api/show`'s answer says the model calls tools: `None` when it
/// lists no capabilities (an older Ollama).
pub(crate) fn calls_tools(body: &Value) -> Option<bool> {
    let capabilities = body.get("capabilities")?.as_array()?;
    Some(capabilities.iter().any(|capability| capability == "tools"))
}

/// Ollama itself takes no key; one configured is sent as a bearer token (for a proxy in
/// front of it, as hosted Ollama does).
pub(crate) fn headers(key: Option<&ApiKey>) -> Vec<(String, String)> {
    crate::openai::headers(key)
}

pub(crate) fn body(request: &ChatRequest) -> Value {
    let options = &request.options;
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|message| match message {
            Message::System { text } => json!({"role": "system", "content": text}),
            Message::User { text } => json!({"role": "user", "content": text}),
            Message::Assistant { text, tool_calls } => {
                let mut object = json!({"role": "assistant", "content": text});
                if !tool_calls.is_empty() {
                    object["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| json!({"function": {"name": call.name, "arguments": call.arguments}}))
                        .collect();
                }
                object
            }
            Message::Tool { name, content, .. } => json!({
                "role": "tool",
                "tool_name": name,
                "content": bounded_tool_result(content),
            }),
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    let mut model_options = Map::new();
    model_options.insert("num_predict".into(), json!(options.max_tokens));
    if let Some(temperature) = options.temperature {
        model_options.insert("temperature".into(), json!(temperature));
    }
    body.insert("options".into(), Value::Object(model_options));
    // Ollama has no tool choice: `none` is honoured by offering no tools.
    if !request.tools.is_empty() && options.tool_choice != ToolChoice::None {
        let tools = crate::openai::function_tools(&request.tools);
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(format) = &options.response_format {
        body.insert("format".into(), format.schema.clone());
    }
    Value::Object(body)
}

pub(crate) fn parse_models(body: &Value) -> Result<Vec<ModelInfo>, String> {
    let models = body
        .get("models")
        .and_then(Value::as_array)
        .ok_or("the model list has no `models` array")?;
    Ok(models
        .iter()
        .filter_map(|entry| {
            let id = entry.get("model").or_else(|| entry.get("name"))?.as_str()?;
            Some(ModelInfo {
                id: id.to_owned(),
                display_name: None,
            })
        })
        .collect())
}

/// Reads `/api/chat` lines.
#[derive(Default)]
pub(crate) struct LineDecoder {
    calls: ToolCalls,
    model: Option<String>,
}

impl Decoder for LineDecoder {
    fn item(
        &mut self,
        peer: &Peer,
        _name: &str,
        data: &str,
        out: &mut Vec<Event>,
    ) -> Result<Flow, ProviderError> {
        let line: Value = serde_json::from_str(data).map_err(|error| {
            peer.error(
                ErrorKind::Stream,
                format!(
                    "a stream line is not valid JSON ({error}): {}",
                    preview(data)
                ),
            )
        })?;
        if let Some(error) = line.get("error") {
            let said = error
                .as_str()
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(peer.error(
                ErrorKind::Stream,
                format!("the provider reported an error mid-stream: {said}"),
            ));
        }
        remember_model(&mut self.model, &line, "/model");
        let message = line.get("message").unwrap_or(&Value::Null);
        if let Some(text) = message.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            out.push(Event::TextDelta {
                text: text.to_owned(),
            });
        }
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
            let tool_error = |message: String| peer.error(ErrorKind::InvalidToolCall, message);
            for call in calls {
                let function = call.get("function").unwrap_or(&Value::Null);
                let name = function.get("name").and_then(Value::as_str).unwrap_or("");
                // A running key: every call of a line is whole, so none stays open.
                let key = usize::MAX;
                let id = call.get("id").and_then(Value::as_str);
                out.push(self.calls.start(key, id, name).map_err(tool_error)?);
                let arguments = match function.get("arguments") {
                    None | Some(Value::Null) => "{}".to_owned(),
                    // Arguments are an object; some servers send them as a JSON string.
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                };
                out.push(self.calls.delta(key, &arguments).map_err(tool_error)?);
                out.push(self.calls.end(key).map_err(tool_error)?);
            }
        }
        if line.get("done").and_then(Value::as_bool) == Some(true) {
            let count = |name: &str| line.get(name).and_then(Value::as_u64).unwrap_or(0);
            out.push(Event::Usage {
                usage: Usage {
                    input_tokens: count("prompt_eval_count"),
                    output_tokens: count("eval_count"),
                },
            });
            let reason = match line.get("done_reason").and_then(Value::as_str) {
                _ if self.calls.any() => StopReason::ToolUse,
                None | Some("stop") => StopReason::EndTurn,
                Some("length") => StopReason::MaxTokens,
                Some(other) => StopReason::Other(other.to_owned()),
            };
            out.push(Event::Stop {
                stop: Stop {
                    reason,
                    message: None,
                },
            });
            return Ok(Flow::Finished);
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
    use crate::error::ProviderKind;

    fn peer() -> Peer {
        Peer::new(
            ProviderKind::Ollama,
            "http://127.0.0.1:11434/api/chat",
            Some("llama3.2"),
        )
    }

    #[test]
    fn lines_with_text_tool_calls_and_the_final_counts() {
        let lines = [
            r#"{"model":"llama3.2","message":{"role":"assistant","content":"Hel"},"done":false}"#,
            r#"{"model":"llama3.2","message":{"role":"assistant","content":"lo"},"done":false}"#,
            r#"{"model":"llama3.2","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}},{"function":{"name":"get_time","arguments":{}}}]},"done":false}"#,
        ];
        let mut decoder = LineDecoder::default();
        let mut out = Vec::new();
        for line in lines {
            assert_eq!(decoder.item(&peer(), "", line, &mut out), Ok(Flow::More));
        }
        let last = r#"{"model":"llama3.2","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":26,"eval_count":9}"#;
        assert_eq!(
            decoder.item(&peer(), "", last, &mut out),
            Ok(Flow::Finished)
        );
        let mut message = crate::FinalMessage::default();
        out.iter().for_each(|event| message.absorb(event));
        assert_eq!(message.text, "Hello");
        assert_eq!(message.tool_calls.len(), 2);
        assert_eq!(message.tool_calls[0].id, "call_1");
        assert_eq!(message.tool_calls[1].id, "call_2");
        assert_eq!(message.tool_calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(
            message.usage,
            Usage {
                input_tokens: 26,
                output_tokens: 9
            }
        );
        assert_eq!(
            message.stop.map(|stop| stop.reason),
            Some(StopReason::ToolUse)
        );
    }

    #[test]
    fn an_error_line_is_an_error() {
        let mut decoder = LineDecoder::default();
        let error = decoder
            .item(
                &peer(),
                "",
                r#"{"error":"model 'x' not found"}"#,
                &mut Vec::new(),
            )
            .err();
        assert!(error.is_some_and(|error| error.message.ends_with("model 'x' not found")));
    }
}
