//! Tool calls arrive in pieces (an id and a name, then fragments of their JSON arguments);
//! this puts each back together and checks its arguments are one JSON object before the
//! call is handed on.

use serde_json::Value;

use crate::chat::ToolCall;
use crate::event::Event;

struct Partial {
    /// The provider's key for the call (OpenAI's `index`, Anthropic's block index).
    key: usize,
    id: String,
    name: String,
    arguments: String,
    ended: bool,
}

/// The calls of one turn, in the order they started. Our `index` is that order.
#[derive(Default)]
pub(crate) struct ToolCalls {
    calls: Vec<Partial>,
}

impl ToolCalls {
    fn position(&self, key: usize) -> Option<usize> {
        self.calls
            .iter()
            .position(|call| call.key == key && !call.ended)
    }

    /// A call starts. An empty id gets `call_<n>` (Ollama gives none).
    pub(crate) fn start(
        &mut self,
        key: usize,
        id: Option<&str>,
        name: &str,
    ) -> Result<Event, String> {
        if name.is_empty() {
            return Err(format!("tool call #{} has no name", self.calls.len() + 1));
        }
        if self.position(key).is_some() {
            return Err(format!(
                "tool call `{name}` starts at index {key}, where another call has not ended"
            ));
        }
        let index = self.calls.len();
        let id = match id {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => format!("call_{}", index + 1),
        };
        self.calls.push(Partial {
            key,
            id: id.clone(),
            name: name.to_owned(),
            arguments: String::new(),
            ended: false,
        });
        Ok(Event::ToolCallStart {
            index,
            id,
            name: name.to_owned(),
        })
    }

    /// The id of the call open at this key.
    pub(crate) fn open_id(&self, key: usize) -> Option<&str> {
        self.position(key)
            .map(|index| self.calls[index].id.as_str())
    }

    /// Whether a call with this key is open.
    pub(crate) fn is_open(&self, key: usize) -> bool {
        self.position(key).is_some()
    }

    pub(crate) fn delta(&mut self, key: usize, fragment: &str) -> Result<Event, String> {
        let index = self.position(key).ok_or_else(|| {
            format!("argument text for tool call index {key}, which never started")
        })?;
        self.calls[index].arguments.push_str(fragment);
        Ok(Event::ToolCallDelta {
            index,
            fragment: fragment.to_owned(),
        })
    }

    /// The call is complete: its arguments must parse as a JSON object (empty text is `{}`).
    pub(crate) fn end(&mut self, key: usize) -> Result<Event, String> {
        let index = self
            .position(key)
            .ok_or_else(|| format!("tool call index {key} ends without having started"))?;
        let call = &mut self.calls[index];
        call.ended = true;
        let text = call.arguments.trim();
        let arguments = if text.is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_str::<Value>(text).map_err(|error| {
                format!(
                    "tool call #{} `{}` (id `{}`): its arguments are not valid JSON ({error}): {}",
                    index + 1,
                    call.name,
                    call.id,
                    preview(text)
                )
            })?
        };
        if !arguments.is_object() {
            return Err(format!(
                "tool call #{} `{}` (id `{}`): its arguments must be a JSON object, not {}",
                index + 1,
                call.name,
                call.id,
                kiln_types::words::json_type(&arguments)
            ));
        }
        Ok(Event::ToolCallEnd {
            index,
            call: ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments,
            },
        })
    }

    /// Ends every call still open, in order (OpenAI ends them all at `finish_reason`).
    pub(crate) fn end_all(&mut self) -> Result<Vec<Event>, String> {
        let open: Vec<usize> = self
            .calls
            .iter()
            .filter(|call| !call.ended)
            .map(|call| call.key)
            .collect();
        open.into_iter().map(|key| self.end(key)).collect()
    }

    pub(crate) fn any(&self) -> bool {
        !self.calls.is_empty()
    }
}

/// At most 120 characters of a peer's text, for a message.
pub(crate) fn preview(text: &str) -> String {
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("`{}…`", &text[..cut]),
        None => format!("`{text}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_assemble_into_an_object() {
        let mut calls = ToolCalls::default();
        assert!(matches!(
            calls.start(0, Some("call_a"), "get_weather"),
            Ok(Event::ToolCallStart { index: 0, .. })
        ));
        calls.delta(0, "{\"city\":").ok();
        calls.delta(0, "\"Paris\"}").ok();
        match calls.end(0) {
            Ok(Event::ToolCallEnd { call, .. }) => {
                assert_eq!(call.arguments, serde_json::json!({"city": "Paris"}));
                assert_eq!(call.id, "call_a");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_arguments_name_the_call() {
        let cases = [
            (
                "{\"city\":",
                "tool call #1 `get_weather` (id `call_1`): its arguments are not valid JSON",
            ),
            (
                "[1,2]",
                "tool call #1 `get_weather` (id `call_1`): its arguments must be a JSON object, not an array",
            ),
        ];
        for (text, expected) in cases {
            let mut calls = ToolCalls::default();
            calls.start(3, None, "get_weather").ok();
            calls.delta(3, text).ok();
            let error = calls.end(3).err().unwrap_or_default();
            assert!(error.starts_with(expected), "{text}: {error}");
        }
    }

    #[test]
    fn empty_arguments_are_an_empty_object_and_unknown_keys_are_errors() {
        let mut calls = ToolCalls::default();
        calls.start(0, None, "now").ok();
        assert!(matches!(
            calls.end_all().as_deref(),
            Ok([Event::ToolCallEnd { .. }])
        ));
        assert!(calls.delta(7, "x").is_err());
        assert!(calls.end(7).is_err());
        assert!(calls.start(1, None, "").is_err());
    }
}
