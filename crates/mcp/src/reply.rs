//! Finding the JSON-RPC response in the body of a POST reply: pure parsing, no I/O.
//!
//! Transports §Streamable HTTP › Sending Messages to the Server: the reply to a request is
//! either `application/json` holding the response, or `text/event-stream` whose events may
//! carry server notifications and requests before the response. Messages other than the
//! response to our id are skipped. An event stream that ends before the response but gave
//! an event id is to be resumed (Transports › Resumability and Redelivery): the caller
//! waits the `retry` the server asked for and asks again with `Last-Event-ID`. The caller
//! wraps each `Err(String)` into [`crate::McpError::Protocol`] with the server and the
//! method.

use std::convert::Infallible;

use eventsource_stream::{Event, EventStream};
use futures::{FutureExt as _, StreamExt as _, stream};
use serde_json::Value;

/// The response to one request: its `result`, or its `error` object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RpcOutcome {
    Result(Value),
    Error { code: i64, message: String },
}

/// What a reply held for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Found {
    Answer(RpcOutcome),
    /// An event stream that ended before the response, after an event with an id: resume
    /// it from `last_event_id`, `retry_ms` later when the server set one.
    Resume(Resume),
}

/// Where an event stream that ended early is to be resumed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resume {
    pub last_event_id: String,
    pub retry_ms: Option<u64>,
    /// The events the stream held, for the message when resuming is given up.
    pub events: usize,
}

/// The response to request `id` in a reply whose `Content-Type` is `content_type`.
pub(crate) fn find_response(
    content_type: Option<&str>,
    body: &[u8],
    id: u64,
) -> Result<Found, String> {
    let media_type = content_type.map(|value| {
        value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    match media_type.as_deref() {
        Some("application/json") => {
            let message: Value = serde_json::from_slice(body)
                .map_err(|error| format!("the JSON reply is not valid JSON: {error}"))?;
            match_in(&message, id)?
                .map(Found::Answer)
                .ok_or_else(|| format!("the JSON reply holds no response to request id {id}"))
        }
        Some("text/event-stream") => find_in_event_stream(body, id),
        Some(other) => Err(format!(
            "unexpected Content-Type `{other}`: expected `application/json` or `text/event-stream`"
        )),
        None => Err("the reply has no Content-Type".to_owned()),
    }
}

fn find_in_event_stream(body: &[u8], id: u64) -> Result<Found, String> {
    // The body is whole already; a one-chunk stream never returns Pending, so each `next()`
    // completes at once.
    let mut events = EventStream::new(stream::iter([Ok::<_, Infallible>(body)]));
    let mut n_events = 0_usize;
    let mut last_event_id = None;
    let mut retry_ms = None;
    while let Some(Some(event)) = events.next().now_or_never() {
        n_events += 1;
        let event: Event =
            event.map_err(|error| format!("SSE event #{n_events} is malformed: {error}"))?;
        if !event.id.is_empty() {
            last_event_id = Some(event.id.clone());
        }
        if let Some(retry) = event.retry {
            retry_ms = Some(u64::try_from(retry.as_millis()).unwrap_or(u64::MAX));
        }
        // Only `message` events (the default type) carry JSON-RPC; an empty data field is a
        // priming event that only sets an event id for resumption.
        if !(event.event.is_empty() || event.event == "message") || event.data.trim().is_empty() {
            continue;
        }
        let message: Value = serde_json::from_str(&event.data)
            .map_err(|error| format!("SSE event #{n_events} is not valid JSON: {error}"))?;
        if let Some(outcome) = match_in(&message, id)? {
            return Ok(Found::Answer(outcome));
        }
    }
    match last_event_id {
        Some(last_event_id) => Ok(Found::Resume(Resume {
            last_event_id,
            retry_ms,
            events: n_events,
        })),
        None => Err(format!(
            "the event stream ended after {n_events} event(s) without a response to request id {id}"
        )),
    }
}

/// The response to `id` in one JSON-RPC message (or a batch of them, which 2025-03-26
/// servers may send), `None` when the message is something else.
fn match_in(message: &Value, id: u64) -> Result<Option<RpcOutcome>, String> {
    match message {
        Value::Array(batch) => {
            for message in batch {
                if let Some(outcome) = match_in(message, id)? {
                    return Ok(Some(outcome));
                }
            }
            Ok(None)
        }
        Value::Object(object) => {
            // Requests and notifications from the server carry a method; we answer neither.
            if object.contains_key("method") || object.get("id") != Some(&Value::from(id)) {
                return Ok(None);
            }
            if let Some(error) = object.get("error") {
                let code = error.get("code").and_then(Value::as_i64);
                let message = error.get("message").and_then(Value::as_str);
                return match (code, message) {
                    (Some(code), Some(message)) => Ok(Some(RpcOutcome::Error {
                        code,
                        message: message.to_owned(),
                    })),
                    _ => Err(format!(
                        "the error object lacks an integer `code` or a string `message`: {}",
                        excerpt(&error.to_string())
                    )),
                };
            }
            match object.get("result") {
                Some(result) => Ok(Some(RpcOutcome::Result(result.clone()))),
                None => Err(format!(
                    "the response to request id {id} has no `result` nor `error`"
                )),
            }
        }
        other => Err(format!(
            "a JSON-RPC message must be an object, got `{}`",
            excerpt(&other.to_string())
        )),
    }
}

/// The first 300 characters of `text`, cut on a character boundary, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    const MAX_CHARS: usize = 300;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SSE: Option<&str> = Some("text/event-stream");
    const JSON: Option<&str> = Some("application/json; charset=utf-8");

    fn ok(result: Value) -> Result<Found, String> {
        Ok(Found::Answer(RpcOutcome::Result(result)))
    }

    #[test]
    fn replies_are_read_by_content_type() {
        let cases: [(Option<&str>, &str, Result<Found, String>); 15] = [
            (JSON, r#"{"jsonrpc":"2.0","id":7,"result":{"a":1}}"#, ok(serde_json::json!({"a":1}))),
            (
                JSON,
                r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}"#,
                Ok(Found::Answer(RpcOutcome::Error { code: -32601, message: "Method not found".into() })),
            ),
            (JSON, r#"[{"jsonrpc":"2.0","id":6,"result":1},{"jsonrpc":"2.0","id":7,"result":2}]"#, ok(2.into())),
            (JSON, "{not json", Err("the JSON reply is not valid JSON: key must be a string at line 1 column 2".into())),
            (JSON, r#"{"jsonrpc":"2.0","id":8,"result":{}}"#, Err("the JSON reply holds no response to request id 7".into())),
            (JSON, r#"{"jsonrpc":"2.0","id":7}"#, Err("the response to request id 7 has no `result` nor `error`".into())),
            (JSON, r#"{"jsonrpc":"2.0","id":7,"error":{"code":"x"}}"#, Err(r#"the error object lacks an integer `code` or a string `message`: {"code":"x"}"#.into())),
            (JSON, "42", Err("a JSON-RPC message must be an object, got `42`".into())),
            (
                SSE,
                "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n\
                 id: 2\ndata:\n\n\
                 data: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n\n\
                 event: message\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":7,\"result\":true}\r\n\r\n",
                ok(true.into()),
            ),
            (SSE, "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":1}\n", Err("the event stream ended after 0 event(s) without a response to request id 7".into())),
            // A priming event alone (an id and a retry), as a server that answers on a resumed stream sends.
            (SSE, "id: ev-1\nretry: 500\ndata:\n\n", Ok(Found::Resume(Resume { last_event_id: "ev-1".into(), retry_ms: Some(500), events: 1 }))),
            (SSE, "id: 4\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n", Ok(Found::Resume(Resume { last_event_id: "4".into(), retry_ms: None, events: 1 }))),
            (SSE, "data: oops\n\n", Err("SSE event #1 is not valid JSON: expected value at line 1 column 1".into())),
            (Some("text/html"), "<html>", Err("unexpected Content-Type `text/html`: expected `application/json` or `text/event-stream`".into())),
            (None, "{}", Err("the reply has no Content-Type".into())),
        ];
        for (content_type, body, expected) in cases {
            assert_eq!(
                find_response(content_type, body.as_bytes(), 7),
                expected,
                "{body}"
            );
        }
    }

    #[test]
    fn excerpts_cut_on_a_character_boundary() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(301);
        assert_eq!(excerpt(&long), format!("{}…", "é".repeat(300)));
    }
}
