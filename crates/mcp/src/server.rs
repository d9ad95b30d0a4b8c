//! The transport-free half of an MCP server: one JSON-RPC message in, what to do
//! with it out (Basic Protocol › Messages; Lifecycle; Server Features › Tools). The
//! transport (stdio lines, Streamable HTTP) and the tools' implementation are the
//! caller's; a tool call is handed back as [`Incoming::Call`] so the caller runs it
//! where it likes and answers with [`call_result`].
//!
//! **Invariant:** no message a client sends panics the server: a line that is not JSON,
//! not JSON-RPC 2.0, an unknown method or malformed parameters is an error response with
//! the code the JSON-RPC 2.0 specification gives (-32700, -32600, -32601, -32602),
//! naming what was wrong.

use serde_json::{Value, json};

use crate::{PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};

/// Who the server is and what it offers.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub name: String,
    pub version: String,
    /// For the model: how to use the server (`initialize`'s `instructions`).
    pub instructions: Option<String>,
    /// The tools as `tools/list` gives them (`{name, description, inputSchema, …}`).
    pub tools: Vec<Value>,
}

/// What one message asks of the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// Answer with this at once (a response, or an error response).
    Reply(Value),
    /// `initialize`: answer with `reply`; `client` is the client's
    /// `clientInfo.name`, when it gave one (who the client's runs belong to).
    Initialize {
        reply: Value,
        client: Option<String>,
    },
    /// Call tool `name` (one that `tools/list` offers) and answer request `id` with
    /// [`call_result`].
    Call {
        id: Value,
        name: String,
        arguments: Value,
    },
    /// The client no longer wants the answer to request `request_id`
    /// (`notifications/cancelled`).
    Cancelled { request_id: Value },
    /// A notification, or a response to nothing we asked: nothing to answer.
    Nothing,
}

/// JSON-RPC 2.0's codes.
pub const PARSE_ERROR: i64 = -32_700;
pub const INVALID_REQUEST: i64 = -32_600;
pub const METHOD_NOT_FOUND: i64 = -32_601;
pub const INVALID_PARAMS: i64 = -32_602;

/// Reads one message (a line of stdio, a POST body).
#[must_use]
pub fn read(text: &str, spec: &ServerSpec) -> Incoming {
    let message: Value = match serde_json::from_str(text) {
        Ok(message) => message,
        Err(error) => {
            return Incoming::Reply(error_response(
                &Value::Null,
                PARSE_ERROR,
                &format!("the message is not JSON: {error}"),
            ));
        }
    };
    let Value::Object(object) = &message else {
        return Incoming::Reply(error_response(
            &Value::Null,
            INVALID_REQUEST,
            "a message must be one JSON-RPC 2.0 object (batches are not part of 2025-06-18)",
        ));
    };
    let id = object.get("id").cloned();
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        return match id {
            // A response from the client: the server asks nothing, so it answers nothing.
            Some(_) if object.contains_key("result") || object.contains_key("error") => {
                Incoming::Nothing
            }
            _ => Incoming::Reply(error_response(
                &id.unwrap_or(Value::Null),
                INVALID_REQUEST,
                "the message has no `method`",
            )),
        };
    };
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Incoming::Reply(error_response(
            &id.unwrap_or(Value::Null),
            INVALID_REQUEST,
            "`jsonrpc` must be \"2.0\"",
        ));
    }
    let params = object.get("params").cloned().unwrap_or_else(|| json!({}));
    let Some(id) = id else {
        // Notifications: `initialized`, `cancelled`, and any other, which need no answer.
        if method == "notifications/cancelled"
            && let Some(request_id) = params.get("requestId")
        {
            return Incoming::Cancelled {
                request_id: request_id.clone(),
            };
        }
        return Incoming::Nothing;
    };
    match method {
        "initialize" => Incoming::Initialize {
            reply: response(&id, initialize(&params, spec)),
            client: params
                .pointer("/clientInfo/name")
                .and_then(Value::as_str)
                .filter(|name| !name.trim().is_empty())
                .map(str::to_owned),
        },
        "ping" => Incoming::Reply(response(&id, json!({}))),
        "tools/list" => Incoming::Reply(response(&id, json!({ "tools": spec.tools }))),
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return Incoming::Reply(error_response(
                    &id,
                    INVALID_PARAMS,
                    "tools/call needs `name`, the tool's name",
                ));
            };
            if !spec.tools.iter().any(|tool| tool["name"] == name) {
                let names: Vec<&str> = spec
                    .tools
                    .iter()
                    .filter_map(|tool| tool["name"].as_str())
                    .collect();
                return Incoming::Reply(error_response(
                    &id,
                    INVALID_PARAMS,
                    &format!(
                        "there is no tool `{name}`; this server has {}",
                        names.join(", ")
                    ),
                ));
            }
            let arguments = params
                .get("arguments")
                .cloned()
                .unwrap_or_else(|| json!({}));
            if !arguments.is_object() {
                return Incoming::Reply(error_response(
                    &id,
                    INVALID_PARAMS,
                    "`arguments` must be an object",
                ));
            }
            Incoming::Call {
                id,
                name: name.to_owned(),
                arguments,
            }
        }
        other => Incoming::Reply(error_response(
            &id,
            METHOD_NOT_FOUND,
            &format!(
                "`{other}` is not a method this server offers (initialize, ping, tools/list, tools/call)"
            ),
        )),
    }
}

/// Lifecycle › Version Negotiation: the client's revision when we speak it, else ours.
fn initialize(params: &Value, spec: &ServerSpec) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = match asked {
        Some(asked) if SUPPORTED_PROTOCOL_VERSIONS.contains(&asked) => asked,
        _ => PROTOCOL_VERSION,
    };
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": spec.name, "version": spec.version },
    });
    if let Some(instructions) = &spec.instructions {
        result["instructions"] = json!(instructions);
    }
    result
}

/// The answer to tool call `id`: `result` is the tool's `CallToolResult`.
#[must_use]
pub fn call_result(id: &Value, result: Value) -> Value {
    response(id, result)
}

fn response(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response to request `id` (`null` when the request could not be read).
#[must_use]
pub fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ServerSpec {
        ServerSpec {
            name: "kiln".into(),
            version: "0.1.0".into(),
            instructions: Some("write programs".into()),
            tools: vec![json!({"name": "codemode", "inputSchema": {"type": "object"}})],
        }
    }

    fn error_of(incoming: Incoming) -> (Value, i64, String) {
        let Incoming::Reply(reply) = incoming else {
            panic!("{incoming:?}")
        };
        (
            reply["id"].clone(),
            reply["error"]["code"].as_i64().unwrap_or_default(),
            reply["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    }

    #[test]
    fn the_handshake_negotiates_a_revision_both_speak() {
        let cases = [
            ("2025-06-18", "2025-06-18"),
            ("2025-03-26", "2025-03-26"),
            ("2024-11-05", "2025-06-18"),
        ];
        for (asked, answered) in cases {
            let line = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
            let Incoming::Initialize { reply, client } = read(&line.to_string(), &spec()) else {
                panic!()
            };
            assert_eq!(client.as_deref(), Some("t"));
            assert_eq!(reply["result"]["protocolVersion"], answered, "{asked}");
            assert_eq!(reply["result"]["serverInfo"]["name"], "kiln");
            assert_eq!(
                reply["result"]["capabilities"]["tools"]["listChanged"],
                false
            );
            assert_eq!(reply["result"]["instructions"], "write programs");
        }
        let listed = read(
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#,
            &spec(),
        );
        assert_eq!(
            listed,
            Incoming::Reply(
                json!({"jsonrpc": "2.0", "id": "a", "result": {"tools": spec().tools}})
            )
        );
    }

    #[test]
    fn a_tool_call_is_handed_back_and_notifications_are_not_answered() {
        assert_eq!(
            read(
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"codemode","arguments":{"code":"return 1"}}}"#,
                &spec()
            ),
            Incoming::Call {
                id: json!(7),
                name: "codemode".into(),
                arguments: json!({"code": "return 1"})
            }
        );
        assert_eq!(
            read(
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                &spec()
            ),
            Incoming::Nothing
        );
        assert_eq!(
            read(
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
                &spec()
            ),
            Incoming::Cancelled {
                request_id: json!(7)
            }
        );
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#, &spec()),
            Incoming::Nothing
        );
    }

    #[test]
    fn bad_messages_are_error_responses_naming_what_was_wrong() {
        let cases: [(&str, Value, i64, &str); 7] = [
            (
                "{oops",
                Value::Null,
                PARSE_ERROR,
                "the message is not JSON: key must be a string at line 1 column 2",
            ),
            (
                "[1]",
                Value::Null,
                INVALID_REQUEST,
                "a message must be one JSON-RPC 2.0 object (batches are not part of 2025-06-18)",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1}"#,
                json!(1),
                INVALID_REQUEST,
                "the message has no `method`",
            ),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                json!(1),
                INVALID_REQUEST,
                "`jsonrpc` must be \"2.0\"",
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#,
                json!(2),
                METHOD_NOT_FOUND,
                "`resources/list` is not a method this server offers (initialize, ping, tools/list, tools/call)",
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"eval"}}"#,
                json!(3),
                INVALID_PARAMS,
                "there is no tool `eval`; this server has codemode",
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"codemode","arguments":[1]}}"#,
                json!(4),
                INVALID_PARAMS,
                "`arguments` must be an object",
            ),
        ];
        for (line, id, code, message) in cases {
            assert_eq!(
                error_of(read(line, &spec())),
                (id, code, message.to_owned()),
                "{line}"
            );
        }
    }
}
