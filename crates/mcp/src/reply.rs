//! Finding the JSON-RPC response to one request in its reply: pure parsing, no I/O.
//!
//! Transports §Streamable HTTP › Sending Messages to the Server: the reply to a request is
//! either `application/json` holding the response ([`find_in_json`]), or
//! `text/event-stream` whose events may carry server notifications and requests before the
//! response. An event stream is read one event at a time as it arrives ([`EventReader`]):
//! the caller stops at the response, since a server may keep the stream open after it, and
//! answers each server request ([`ServerRequest`]) before reading on, since the server may
//! hold the response until it has that answer. Notifications and other ids' responses are
//! skipped. An event stream that ends before the response but gave an event id is to be
//! resumed (Transports › Resumability and Redelivery): the caller waits the `retry` the
//! server asked for and asks again with `Last-Event-ID`. The caller wraps each
//! `Err(String)` into [`crate::McpError::Protocol`] with the server and the method.

use std::fmt;

use eventsource_stream::Event;
use serde_json::{Value, json};

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

/// How a reply carries its messages, by its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyForm {
    /// `application/json`: one message (or a batch), read whole.
    Json,
    /// `text/event-stream`: messages as events, read as they arrive.
    EventStream,
}

impl ReplyForm {
    /// The form a reply whose `Content-Type` is `content_type` takes; any other is refused.
    pub(crate) fn of(content_type: Option<&str>) -> Result<Self, String> {
        let media_type = content_type.map(|value| {
            value
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
        match media_type.as_deref() {
            Some("application/json") => Ok(Self::Json),
            Some("text/event-stream") => Ok(Self::EventStream),
            Some(other) => Err(format!(
                "unexpected Content-Type `{other}`: expected `application/json` or `text/event-stream`"
            )),
            None => Err("the reply has no Content-Type".to_owned()),
        }
    }
}

/// The response to request `id` in a whole `application/json` body.
pub(crate) fn find_in_json(body: &[u8], id: u64) -> Result<Found, String> {
    let message: Value = serde_json::from_slice(body)
        .map_err(|error| format!("the JSON reply is not valid JSON: {error}"))?;
    let mut requests = Vec::new();
    // The server cannot wait for answers to requests in a reply that is already whole:
    // they are skipped, as notifications are.
    match_in(&message, id, &mut requests)?
        .map(Found::Answer)
        .ok_or_else(|| format!("the JSON reply holds no response to request id {id}"))
}

/// A request the server sent on a reply stream: a message with a `method` and an `id`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerRequest {
    /// As the server sent it (a string or a number), for the answer to carry back.
    pub id: Value,
    pub method: String,
}

impl ServerRequest {
    /// Our answer, to POST at once. Basic › Utilities › Ping: a `ping` is answered with an
    /// empty result. Anything else (sampling, elicitation, roots...) needs a capability the
    /// client did not declare in `initialize` (Lifecycle §Capability Negotiation), so it is
    /// refused as JSON-RPC's "method not found", which tells the server not to wait.
    pub(crate) fn answer(&self) -> Value {
        if self.method == "ping" {
            return json!({ "jsonrpc": "2.0", "id": self.id, "result": {} });
        }
        json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {
                "code": METHOD_NOT_FOUND,
                "message": format!(
                    "Kiln's MCP client does not offer `{}`: it declared no capability for it",
                    excerpt(&self.method)
                ),
            },
        })
    }
}

/// JSON-RPC 2.0 §5.1: the method does not exist or is not available.
const METHOD_NOT_FOUND: i64 = -32601;

/// What one event of a reply stream means for the request being read for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// The response to our request: stop reading.
    Answer(RpcOutcome),
    /// Requests from the server, to answer before reading on; more than one only in a
    /// batch (which 2025-03-26 servers may send).
    Requests(Vec<ServerRequest>),
    /// Nothing for us: a notification, a priming event, another id's response.
    Continue,
}

/// Reads one reply stream for the response to request `id`, an event at a time
/// ([`Self::read`]), and says how a stream that ended without it is to go on
/// ([`Self::end`]).
#[derive(Debug)]
pub(crate) struct EventReader {
    id: u64,
    n_events: usize,
    last_event_id: Option<String>,
    retry_ms: Option<u64>,
}

impl EventReader {
    pub(crate) fn new(id: u64) -> Self {
        Self {
            id,
            n_events: 0,
            last_event_id: None,
            retry_ms: None,
        }
    }

    /// What the stream's next event means.
    pub(crate) fn read(&mut self, event: Event) -> Result<Step, String> {
        self.n_events += 1;
        if !event.id.is_empty() {
            self.last_event_id = Some(event.id.clone());
        }
        if let Some(retry) = event.retry {
            self.retry_ms = Some(u64::try_from(retry.as_millis()).unwrap_or(u64::MAX));
        }
        // Only `message` events (the default type) carry JSON-RPC; an empty data field is a
        // priming event that only sets an event id for resumption.
        if !(event.event.is_empty() || event.event == "message") || event.data.trim().is_empty() {
            return Ok(Step::Continue);
        }
        let message: Value = serde_json::from_str(&event.data)
            .map_err(|error| format!("SSE event #{} is not valid JSON: {error}", self.n_events))?;
        let mut requests = Vec::new();
        Ok(match match_in(&message, self.id, &mut requests)? {
            Some(outcome) => Step::Answer(outcome),
            None if requests.is_empty() => Step::Continue,
            None => Step::Requests(requests),
        })
    }

    /// The message for the stream's next event, which could not be framed (`error`: bad
    /// UTF-8 or a line that is not SSE). A failure of the transport is the caller's to name.
    pub(crate) fn malformed(&mut self, error: impl fmt::Display) -> String {
        self.n_events += 1;
        format!("SSE event #{} is malformed: {error}", self.n_events)
    }

    /// The stream ended before the response: resume it when it gave an event id.
    pub(crate) fn end(self) -> Result<Found, String> {
        match self.last_event_id {
            Some(last_event_id) => Ok(Found::Resume(Resume {
                last_event_id,
                retry_ms: self.retry_ms,
                events: self.n_events,
            })),
            None => Err(format!(
                "the event stream ended after {} event(s) without a response to request id {}",
                self.n_events, self.id
            )),
        }
    }
}

/// The response to `id` in one JSON-RPC message (or a batch of them, which 2025-03-26
/// servers may send), `None` when the message is something else; a server request met on
/// the way is added to `requests`.
fn match_in(
    message: &Value,
    id: u64,
    requests: &mut Vec<ServerRequest>,
) -> Result<Option<RpcOutcome>, String> {
    match message {
        Value::Array(batch) => {
            for message in batch {
                if let Some(outcome) = match_in(message, id, requests)? {
                    return Ok(Some(outcome));
                }
            }
            Ok(None)
        }
        Value::Object(object) => {
            if let Some(method) = object.get("method") {
                // A request carries an id (never null in MCP); a notification none, and is
                // skipped, as is a method that is not a string.
                match (method, object.get("id")) {
                    (Value::String(method), Some(request_id)) if !request_id.is_null() => {
                        requests.push(ServerRequest {
                            id: request_id.clone(),
                            method: method.clone(),
                        });
                    }
                    _ => {}
                }
                return Ok(None);
            }
            if object.get("id") != Some(&Value::from(id)) {
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
    use std::convert::Infallible;

    use eventsource_stream::EventStream;
    use futures::{FutureExt as _, StreamExt as _, stream};

    use super::*;

    const SSE: Option<&str> = Some("text/event-stream");
    const JSON: Option<&str> = Some("application/json; charset=utf-8");

    fn ok(result: Value) -> Result<Found, String> {
        Ok(Found::Answer(RpcOutcome::Result(result)))
    }

    /// The response to request `id` in a whole reply, read as the client reads a reply that
    /// arrives in one chunk: a one-chunk stream never returns Pending, so each `next()`
    /// completes at once. Server requests on the way are skipped here.
    fn find_response(content_type: Option<&str>, body: &[u8], id: u64) -> Result<Found, String> {
        match ReplyForm::of(content_type)? {
            ReplyForm::Json => find_in_json(body, id),
            ReplyForm::EventStream => {
                let mut events = EventStream::new(stream::iter([Ok::<_, Infallible>(body)]));
                let mut reader = EventReader::new(id);
                while let Some(Some(event)) = events.next().now_or_never() {
                    let step = match event {
                        Ok(event) => reader.read(event)?,
                        Err(error) => return Err(reader.malformed(error)),
                    };
                    if let Step::Answer(outcome) = step {
                        return Ok(Found::Answer(outcome));
                    }
                }
                reader.end()
            }
        }
    }

    /// A reply's `Content-Type` and body, and what it holds for request 7.
    type ReplyCase = (Option<&'static str>, &'static [u8], Result<Found, String>);

    #[test]
    fn replies_are_read_by_content_type() {
        let cases: [ReplyCase; 17] = [
            (JSON, br#"{"jsonrpc":"2.0","id":7,"result":{"a":1}}"#, ok(serde_json::json!({"a":1}))),
            (
                JSON,
                br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}"#,
                Ok(Found::Answer(RpcOutcome::Error { code: -32601, message: "Method not found".into() })),
            ),
            (JSON, br#"[{"jsonrpc":"2.0","id":6,"result":1},{"jsonrpc":"2.0","id":7,"result":2}]"#, ok(2.into())),
            (JSON, b"{not json", Err("the JSON reply is not valid JSON: key must be a string at line 1 column 2".into())),
            (JSON, br#"{"jsonrpc":"2.0","id":8,"result":{}}"#, Err("the JSON reply holds no response to request id 7".into())),
            (JSON, br#"{"jsonrpc":"2.0","id":7}"#, Err("the response to request id 7 has no `result` nor `error`".into())),
            (JSON, br#"{"jsonrpc":"2.0","id":7,"error":{"code":"x"}}"#, Err(r#"the error object lacks an integer `code` or a string `message`: {"code":"x"}"#.into())),
            (JSON, b"42", Err("a JSON-RPC message must be an object, got `42`".into())),
            (
                SSE,
                b"event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n\
                 id: 2\ndata:\n\n\
                 data: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n\n\
                 event: message\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":7,\"result\":true}\r\n\r\n",
                ok(true.into()),
            ),
            (SSE, b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":1}\n", Err("the event stream ended after 0 event(s) without a response to request id 7".into())),
            // A priming event alone (an id and a retry), as a server that answers on a resumed stream sends.
            (SSE, b"id: ev-1\nretry: 500\ndata:\n\n", Ok(Found::Resume(Resume { last_event_id: "ev-1".into(), retry_ms: Some(500), events: 1 }))),
            (SSE, b"id: 4\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n", Ok(Found::Resume(Resume { last_event_id: "4".into(), retry_ms: None, events: 1 }))),
            (SSE, b"data: oops\n\n", Err("SSE event #1 is not valid JSON: expected value at line 1 column 1".into())),
            // Events after the response are never read: the stream may stay open.
            (SSE, b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":1}\n\ndata: oops\n\n", ok(1.into())),
            (SSE, b"data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\ndata: \xff\n\n", Err("SSE event #2 is malformed: UTF8 error: invalid utf-8 sequence of 1 bytes from index 0".into())),
            (Some("text/html"), b"<html>", Err("unexpected Content-Type `text/html`: expected `application/json` or `text/event-stream`".into())),
            (None, b"{}", Err("the reply has no Content-Type".into())),
        ];
        for (content_type, body, expected) in cases {
            assert_eq!(
                find_response(content_type, body, 7),
                expected,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    fn request(id: Value, method: &str) -> ServerRequest {
        ServerRequest {
            id,
            method: method.to_owned(),
        }
    }

    #[test]
    fn each_event_says_whether_to_answer_the_server_or_read_on() {
        let elicit = r#"{"jsonrpc":"2.0","id":"e-1","method":"elicitation/create","params":{}}"#;
        let cases = [
            (
                elicit.to_owned(),
                Step::Requests(vec![request("e-1".into(), "elicitation/create")]),
            ),
            (
                r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#.to_owned(),
                Step::Requests(vec![request(0.into(), "ping")]),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#.to_owned(),
                Step::Continue,
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_owned(),
                Step::Continue,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":5}"#.to_owned(),
                Step::Continue,
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"result":{}}"#.to_owned(),
                Step::Continue,
            ),
            (
                format!(r#"[{elicit},{{"jsonrpc":"2.0","id":2,"method":"roots/list"}}]"#),
                Step::Requests(vec![
                    request("e-1".into(), "elicitation/create"),
                    request(2.into(), "roots/list"),
                ]),
            ),
            (
                format!(r#"[{elicit},{{"jsonrpc":"2.0","id":7,"result":1}}]"#),
                Step::Answer(RpcOutcome::Result(1.into())),
            ),
        ];
        for (data, expected) in cases {
            let mut reader = EventReader::new(7);
            let event = Event {
                data: data.clone(),
                ..Event::default()
            };
            assert_eq!(reader.read(event), Ok(expected), "{data}");
        }
        // Only `message` events carry JSON-RPC.
        let mut reader = EventReader::new(7);
        let other = Event {
            event: "endpoint".into(),
            data: elicit.into(),
            ..Event::default()
        };
        assert_eq!(reader.read(other), Ok(Step::Continue));
    }

    #[test]
    fn server_requests_are_answered_by_what_the_client_declared() {
        let refused = |id: Value, method: &str| {
            json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": -32601,
                    "message": format!("Kiln's MCP client does not offer `{method}`: it declared no capability for it"),
                },
            })
        };
        let cases = [
            (
                request(3.into(), "ping"),
                json!({ "jsonrpc": "2.0", "id": 3, "result": {} }),
            ),
            (
                request("p".into(), "ping"),
                json!({ "jsonrpc": "2.0", "id": "p", "result": {} }),
            ),
            (
                request("e-1".into(), "elicitation/create"),
                refused("e-1".into(), "elicitation/create"),
            ),
            (
                request(4.into(), "sampling/createMessage"),
                refused(4.into(), "sampling/createMessage"),
            ),
            (
                request(5.into(), "roots/list"),
                refused(5.into(), "roots/list"),
            ),
        ];
        for (request, expected) in cases {
            assert_eq!(request.answer(), expected, "{request:?}");
        }
    }

    #[test]
    fn excerpts_cut_on_a_character_boundary() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(301);
        assert_eq!(excerpt(&long), format!("{}…", "é".repeat(300)));
    }
}
