//! The versioned messages between a page (the app, the page API) and its
//! runtime worker (DESIGN: "runtime protocol").
//!
//! Like the sandbox protocol ([`crate::protocol`]) they cross `postMessage`
//! as JSON text in an [`Envelope`](crate::protocol::Envelope) whose `v` is
//! [`RUNTIME_PROTOCOL_VERSION`]: a peer of another version, or a message
//! that does not read, is refused by name ([`DecodeError`]), never misread.
//!
//! Every exchange the page starts carries an `id` of its choosing; the
//! worker's answers name it. What the page keeps (its tools' `call`
//! functions, its `approve` callback) never crosses: the worker asks for
//! them by message ([`FromRuntime::ToolCall`], [`FromRuntime::Approve`]) and
//! the page answers. A run request travels as the JSON
//! `kiln_agent::RunRequest` reads, so the worker checks it once, by the same
//! rules as every entrance. (Program runs cross today; chat turns, storage
//! and the change feed, model lists and MCP mounts join them as they move
//! into the worker.)

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::{DecodeError, Envelope};
use crate::tool_result::ToolReply;

/// Bumped whenever a runtime message changes shape. It starts past the
/// sandbox protocol's numbers, so a message of one protocol sent down the
/// other's channel is refused by its version, never misread.
pub const RUNTIME_PROTOCOL_VERSION: u32 = 1001;

/// What a runtime worker serves, given as its `name` when the page starts it
/// (so it is there before the first message, which could otherwise arrive
/// before the worker's wasm listens): the workspace whose stores it opens,
/// the sandbox workers' bootstrap and how many to keep started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeOptions {
    pub workspace: String,
    pub sandbox_url: String,
    pub pool_size: u32,
}

/// The person's (or the page's) answer to [`FromRuntime::Approve`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Approval {
    Approve,
    Deny,
    AllowForSession,
    /// Nobody could answer (the callback threw or answered something else):
    /// the call fails `consent_unavailable` with `reason`.
    Unavailable {
        reason: String,
    },
}

/// From the page to its runtime worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToRuntime {
    /// Runs one program. `request` is the run request's JSON, the page's
    /// functions left out; the answer is [`FromRuntime::Done`] with the
    /// `tool-result/v1` object (or, with `report`, the sandbox's own report).
    Run {
        id: u64,
        request: Value,
        /// The page has an `approve` callback: someone can be asked
        /// ([`FromRuntime::Approve`]), so the default mode is `default`.
        #[serde(default)]
        approve: bool,
        #[serde(default)]
        report: bool,
    },
    /// Ends run `id` at once (a Stop button, an `AbortSignal`).
    Cancel { id: u64 },
    /// The page tool's answer to [`FromRuntime::ToolCall`].
    ToolReply {
        id: u64,
        call_number: u32,
        reply: ToolReply,
    },
    /// The page tool's call is held on a person, or no longer is
    /// (`ctx.waitOnPerson`): the run counts it as person wait.
    ToolHeld {
        id: u64,
        call_number: u32,
        held: bool,
    },
    /// The answer to [`FromRuntime::Approve`] number `ask`.
    Answer { ask: u64, approval: Approval },
}

/// Why a request failed, as the page rejects it: a `TypeError` for a
/// request that does not read, else an `Error` with a stable `code`, the
/// hint as its own field, and the HTTP status of a provider's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// `true`: the request itself was wrong (a `TypeError` on the page).
    #[serde(default)]
    pub bad_request: bool,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

impl Problem {
    /// A request that does not read (a `TypeError` on the page).
    #[must_use]
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            bad_request: true,
            message: message.into(),
            code: None,
            hint: None,
            status: None,
        }
    }
}

/// From the runtime worker to its page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromRuntime {
    /// The worker is up; `storage` says why the workspace's stores did not
    /// open, when they did not (runs then go on without the storage tools).
    Ready {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        storage: Option<Problem>,
    },
    /// Exchange `id` ended with `value` (a `tool-result/v1` object, or the
    /// sandbox's own report).
    Done { id: u64, value: Value },
    /// Exchange `id` failed before it could answer.
    Failed { id: u64, problem: Problem },
    /// A program of run `id` called the page tool `tool`.
    ToolCall {
        id: u64,
        call_number: u32,
        tool: String,
        args: Value,
    },
    /// A call of run `id` needs an answer ([`ToRuntime::Answer`] with the
    /// same `ask`); `request` is the approval card's content, secrets
    /// redacted.
    Approve { id: u64, ask: u64, request: Value },
    /// A message the worker could not read; `problem` says what was wrong.
    Rejected { problem: String },
}

/// Encodes a runtime message for the wire.
#[must_use]
pub fn encode<M: Serialize>(msg: M) -> String {
    // As for the sandbox protocol: plain enums of JSON values cannot fail.
    serde_json::to_string(&Envelope {
        v: RUNTIME_PROTOCOL_VERSION,
        msg,
    })
    .unwrap_or_default()
}

/// Decodes a runtime message, refusing other versions and malformed
/// messages by name.
pub fn decode<M: for<'de> Deserialize<'de>>(text: &str) -> Result<M, DecodeError> {
    crate::protocol::decode_versioned(text, RUNTIME_PROTOCOL_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_result::{CallOutcome, ToolFailure};

    #[test]
    fn every_message_round_trips() {
        let to = [
            ToRuntime::Run {
                id: 1,
                request: serde_json::json!({"code": "return 1"}),
                approve: true,
                report: false,
            },
            ToRuntime::Cancel { id: 1 },
            ToRuntime::ToolReply {
                id: 1,
                call_number: 2,
                reply: Err(ToolFailure {
                    code: "tool_error".into(),
                    message: "no".into(),
                    detail: None,
                    outcome: CallOutcome::Error,
                }),
            },
            ToRuntime::ToolHeld {
                id: 1,
                call_number: 2,
                held: true,
            },
            ToRuntime::Answer {
                ask: 3,
                approval: Approval::Unavailable {
                    reason: "the callback threw".into(),
                },
            },
        ];
        for message in to {
            assert_eq!(decode::<ToRuntime>(&encode(&message)), Ok(message));
        }
        let from = [
            FromRuntime::Ready { storage: None },
            FromRuntime::ToolCall {
                id: 1,
                call_number: 2,
                tool: "echo".into(),
                args: serde_json::json!({"a": 1}),
            },
            FromRuntime::Failed {
                id: 1,
                problem: Problem {
                    bad_request: true,
                    message: "`code` is missing".into(),
                    code: None,
                    hint: None,
                    status: None,
                },
            },
            FromRuntime::Approve {
                id: 1,
                ask: 4,
                request: serde_json::json!({"tool": "save"}),
            },
        ];
        for message in from {
            assert_eq!(decode::<FromRuntime>(&encode(&message)), Ok(message));
        }
    }

    #[test]
    fn other_versions_and_malformed_messages_are_refused_by_name() {
        let sandbox_message = crate::protocol::encode(crate::protocol::FromSandbox::Ready);
        let cases = [
            (r#"{"v":1002,"msg":{"type":"cancel","id":1}}"#, "`1002`"),
            ("{", "not a Kiln protocol message"),
            (r#"{"v":1001,"msg":{"type":"fly"}}"#, "fly"),
            (r#"{"v":1001,"msg":{"type":"cancel"}}"#, "id"),
            (
                r#"{"v":1001,"msg":{"type":"answer","ask":1,"approval":{"answer":"maybe"}}}"#,
                "maybe",
            ),
        ];
        for (text, named) in cases {
            let error = decode::<ToRuntime>(text).expect_err(text);
            assert!(error.to_string().contains(named), "{text}: {error}");
        }
        // A sandbox message is not a runtime message, and the other way round.
        let refused = decode::<FromRuntime>(&sandbox_message).expect_err("a sandbox message");
        assert!(refused.to_string().contains("`1001`"), "{refused}");
        let runtime_message = encode(FromRuntime::Ready { storage: None });
        assert!(crate::protocol::decode::<crate::protocol::FromSandbox>(&runtime_message).is_err());
    }
}
