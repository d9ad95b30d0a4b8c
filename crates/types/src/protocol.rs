//! The versioned messages between a host page and a sandbox worker.
//!
//! Messages cross `postMessage` as JSON text in an [`Envelope`]: strings are
//! cheap to structured-clone, and a peer speaking another protocol version is
//! refused by name instead of misread.

use serde::{Deserialize, Serialize};

use crate::run::{ConsoleLine, Progress, RunError, RunLimits, RunReport};
use crate::tool_result::{ToolReply, Warning};

/// Bumped whenever a message changes shape.
/// Shape: 0x6d658744781bf283 at version 3 (the hash of this file's message types; the
/// tidy test `protocol_shapes` fails when they change and this version does not).
pub const PROTOCOL_VERSION: u32 = 3;

/// Every message on the wire: the protocol version and one message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope<M> {
    pub v: u32,
    pub msg: M,
}

/// From the host to a sandbox worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToSandbox {
    /// Run one program against `catalog` (a JSON array of tool entries, which
    /// the worker admits). The worker answers with [`FromSandbox::Report`].
    Run {
        run_id: u64,
        code: String,
        limits: RunLimits,
        #[serde(default = "empty_catalog")]
        catalog: serde_json::Value,
    },
    /// The host's answer to one of the calls of [`FromSandbox::Idle`]. The guest
    /// runs again from the moment the host sends it.
    ToolReply {
        run_id: u64,
        call_number: u32,
        reply: ToolReply,
    },
    /// The call is now held on a person (`held: true`: an approval, a
    /// decision) or no longer is. Time the program spends blocked with every
    /// in-flight call held counts against its person-wait budget.
    ToolHeld {
        run_id: u64,
        call_number: u32,
        held: bool,
    },
}

fn empty_catalog() -> serde_json::Value {
    serde_json::Value::Array(Vec::new())
}

/// From a sandbox worker to its host.
#[allow(
    clippy::large_enum_variant,
    reason = "messages are decoded one at a time and moved once; boxing the report would buy nothing (the lint fires only on some targets)"
)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromSandbox {
    /// The worker's wasm is instantiated and it accepts runs.
    Ready,
    /// The guest stopped running JavaScript: it is waiting on the tool calls it
    /// has made (those in `calls` are new; the host answers each with
    /// [`ToSandbox::ToolReply`]) and on its sleeps. It runs again when the host
    /// replies, or by itself after `wake_in_ms` when a sleep is pending. The host
    /// counts guest CPU from these transitions: `cpu_ms` is the guest's total so
    /// far, and a worker that runs past its budget without going idle is
    /// terminated.
    Idle {
        run_id: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        calls: Vec<CallRequest>,
        cpu_ms: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wake_in_ms: Option<f64>,
    },
    /// The guest printed: `lines` are the console lines kept since the last
    /// `Console` (within the run's console budget), `dropped` how many lines
    /// the budget has cut so far. Sent as the guest prints, not when it goes
    /// idle, so what the host keeps of the output survives a worker it has to
    /// terminate in the middle of a loop; the run's [`FromSandbox::Report`]
    /// still carries the whole console, and is what the host reports when it
    /// comes.
    Console {
        run_id: u64,
        lines: Vec<ConsoleLine>,
        dropped: usize,
    },
    /// The guest reported how far it has come (`progress(percent, message)`),
    /// sent as it reports, like [`FromSandbox::Console`].
    Progress { run_id: u64, progress: Progress },
    /// The outcome of the run with this id, with admission's warnings and digest.
    Report {
        run_id: u64,
        report: RunReport,
        warnings: Vec<Warning>,
        catalog_digest: String,
    },
    /// The run ended in a way that leaves this worker unusable (its memory
    /// budget ran out and its wasm is about to abort): the host ends the run
    /// with `error` and replaces the worker.
    Lost { run_id: u64, error: RunError },
    /// A message the worker could not read; `problem` says what was wrong.
    Rejected { problem: String },
}

/// One tool call the program made, as the host receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRequest {
    /// 1-based, in the order the program made its calls.
    pub call_number: u32,
    pub tool: String,
    pub args: serde_json::Value,
}

/// Why a message from the wire could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    Json(String),
    Version { found: u32, expected: u32 },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Json(problem) => write!(f, "not a Kiln protocol message: {problem}"),
            Self::Version { found, expected } => write!(
                f,
                "protocol version `{found}` is not the expected `{expected}`\nhint: reload the page so the page and its workers come from the same build"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Encodes a message for the wire.
#[must_use]
pub fn encode<M: Serialize>(msg: M) -> String {
    encode_versioned(msg, PROTOCOL_VERSION)
}

/// Encodes an envelope of protocol version `v` (each protocol has its own).
pub(crate) fn encode_versioned<M: Serialize>(msg: M, v: u32) -> String {
    // Serializing these plain enums cannot fail: no maps with non-string keys, no
    // non-finite floats reach them unchecked (serde_json writes `null` for those).
    serde_json::to_string(&Envelope { v, msg }).unwrap_or_default()
}

/// Decodes a message from the wire, refusing other protocol versions.
pub fn decode<M: for<'de> Deserialize<'de>>(text: &str) -> Result<M, DecodeError> {
    decode_versioned(text, PROTOCOL_VERSION)
}

/// Decodes an envelope of protocol version `expected` (each protocol has its
/// own), refusing any other by name.
pub(crate) fn decode_versioned<M: for<'de> Deserialize<'de>>(
    text: &str,
    expected: u32,
) -> Result<M, DecodeError> {
    #[derive(Deserialize)]
    struct VersionOnly {
        v: u32,
    }
    let version: VersionOnly =
        serde_json::from_str(text).map_err(|e| DecodeError::Json(e.to_string()))?;
    if version.v != expected {
        return Err(DecodeError::Version {
            found: version.v,
            expected,
        });
    }
    let envelope: Envelope<M> =
        serde_json::from_str(text).map_err(|e| DecodeError::Json(e.to_string()))?;
    Ok(envelope.msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_idle_console_and_held() {
        let idle = FromSandbox::Idle {
            run_id: 3,
            calls: vec![CallRequest {
                call_number: 1,
                tool: "echo".into(),
                args: serde_json::json!({"text": "hi"}),
            }],
            cpu_ms: 1.5,
            wake_in_ms: Some(20.0),
        };
        assert_eq!(decode::<FromSandbox>(&encode(&idle)), Ok(idle));
        let console = FromSandbox::Console {
            run_id: 3,
            lines: vec![ConsoleLine {
                level: crate::run::ConsoleLevel::Log,
                text: "hi".into(),
            }],
            dropped: 2,
        };
        assert_eq!(decode::<FromSandbox>(&encode(&console)), Ok(console));
        let bare: FromSandbox = decode(&format!(
            r#"{{"v":{PROTOCOL_VERSION},"msg":{{"type":"idle","run_id":3,"cpu_ms":0}}}}"#
        ))
        .unwrap();
        assert!(
            matches!(bare, FromSandbox::Idle { calls, wake_in_ms: None, .. } if calls.is_empty())
        );
        let held = ToSandbox::ToolHeld {
            run_id: 3,
            call_number: 1,
            held: true,
        };
        assert_eq!(decode::<ToSandbox>(&encode(&held)), Ok(held));
    }

    #[test]
    fn round_trips_a_run_and_a_report() {
        let run = ToSandbox::Run {
            run_id: 7,
            code: "return 1".into(),
            limits: RunLimits::default(),
            catalog: serde_json::json!([{"name": "echo"}]),
        };
        assert_eq!(decode::<ToSandbox>(&encode(&run)), Ok(run));

        let report = FromSandbox::Report {
            run_id: 7,
            report: RunReport::stopped(RunError::wall_budget(5), 5.0),
            warnings: Vec::new(),
            catalog_digest: "sha256:0".into(),
        };
        assert_eq!(decode::<FromSandbox>(&encode(&report)), Ok(report));
    }

    #[test]
    fn refuses_other_versions_and_garbage_by_name() {
        let other = PROTOCOL_VERSION + 1;
        let err =
            decode::<ToSandbox>(&format!(r#"{{"v":{other},"msg":{{"type":"run"}}}}"#)).unwrap_err();
        assert_eq!(
            err,
            DecodeError::Version {
                found: other,
                expected: PROTOCOL_VERSION
            }
        );
        assert!(err.to_string().contains(&format!("`{other}`")));

        let err = decode::<ToSandbox>("{").unwrap_err();
        assert!(matches!(err, DecodeError::Json(_)), "{err:?}");
        let err = decode::<ToSandbox>(&format!(
            r#"{{"v":{PROTOCOL_VERSION},"msg":{{"type":"fly"}}}}"#
        ))
        .unwrap_err();
        assert!(err.to_string().contains("fly"), "{err}");
    }

    #[test]
    fn limits_clamp_and_default() {
        let limits: RunLimits = serde_json::from_str("{}").unwrap();
        assert_eq!(limits, RunLimits::default());
        let wide = RunLimits {
            wall_ms: u64::MAX,
            js_cpu_ms: u64::MAX,
            person_wait_ms: u64::MAX,
            memory_bytes: u64::MAX,
            tool_calls: u32::MAX,
            return_bytes: usize::MAX,
            console_bytes: usize::MAX,
            fetch_calls: u32::MAX,
            fetch_body_bytes: usize::MAX,
            fetch_timeout_ms: u64::MAX,
        }
        .clamped();
        assert_eq!(wide.js_cpu_ms, RunLimits::MAX_JS_CPU_MS);
        assert_eq!(wide.person_wait_ms, RunLimits::MAX_PERSON_WAIT_MS);
        assert_eq!(wide.memory_bytes, RunLimits::MAX_MEMORY_BYTES);
        let narrow = RunLimits {
            wall_ms: 0,
            js_cpu_ms: 0,
            memory_bytes: 0,
            ..RunLimits::default()
        }
        .clamped();
        assert_eq!((narrow.wall_ms, narrow.js_cpu_ms), (1, 1));
        assert_eq!(narrow.memory_bytes, RunLimits::MIN_MEMORY_BYTES);
        assert_eq!(wide.wall_ms, RunLimits::MAX_WALL_MS);
        assert_eq!(wide.tool_calls, RunLimits::MAX_TOOL_CALLS);
        assert_eq!(wide.return_bytes, RunLimits::MAX_RETURN_BYTES);
        assert_eq!(wide.console_bytes, RunLimits::MAX_CONSOLE_BYTES);
        assert_eq!(wide.fetch_calls, RunLimits::MAX_FETCH_CALLS);
        assert_eq!(wide.fetch_body_bytes, RunLimits::MAX_FETCH_BODY_BYTES);
        assert_eq!(wide.fetch_timeout_ms, RunLimits::MAX_FETCH_TIMEOUT_MS);
        assert!(serde_json::from_str::<RunLimits>(r#"{"wal_ms":1}"#).is_err());
    }
}
