//! Data shared by every Kiln crate and carried across the worker boundary.
//!
//! Nothing here does I/O or knows an engine: these are plain values with serde
//! derives, so the page, the workers and the CLI agree on them by construction.
//!
//! The four protocols, each a versioned envelope of JSON text:
//!
//! - [`protocol`]: the messages between a host page and a sandbox worker.
//! - [`runtime`]: the messages between a page and its runtime worker.
//! - [`model`]: the messages between the runtime worker and the model worker.
//! - [`widget`]: the messages between a host page and the widget it embeds, and the
//!   deployment's `widget.json`.
//!
//! What crosses them:
//!
//! - [`run`]: one program run: what is asked (limits) and what comes back (the
//!   report).
//! - [`tool_result`]: the `tool-result/v1` result of a run, its rendering and its
//!   size bound.
//! - [`guest`]: every global Kiln defines in a sandbox run, as data, for prompts and
//!   help texts to be written from.
//! - [`library`]: a call into the library modules that run outside the engine,
//!   and its reply, with the byte frame they cross a wasm boundary as.
//! - [`declaration`]: a tool as a TypeScript declaration, from its JSON Schema.
//! - [`manifest`]: the capability manifest: what a program or a code node's body
//!   may use, and the budgets with their defaults and ceilings.
//! - [`chat`]: a chat turn as it crosses to the page: the provider it asks, what it
//!   sends, the events it streams, the message it ends with.
//! - [`agent`]: an agent turn as every surface sees it: its guards, its events,
//!   its result.
//! - [`plan`]: a plan, tasks forming a DAG with steps forming DAGs of their own.
//! - [`node`]: code nodes as data, the slot type vocabulary, and graphs of nodes.
//! - [`permission`]: the permission ladder's words as they cross to the page.
//! - [`records`]: the records a workspace keeps, as they cross to the page.
//! - [`profile`]: an agent profile: prompt, model, skills, servers, secrets,
//!   autonomy, role, and the rules a record is held to.
//! - [`schedule`]: an agent's job on a cron expression, and each firing.
//! - [`search`]: the web search a workspace configures for `web_search`.
//! - [`skill`]: skills, shipped and the workspace's, the rules a record is
//!   held to and `/name` invocations.
//! - [`vault`]: the secrets vault as the page sees it: names, origins and
//!   agents, never a value.
//! - [`redacted`]: [`Redacted`], the one redacting string, for keys and secrets.
//! - [`cancel`]: the cancel switch of a run or a turn, one type for every layer.
//! - [`words`]: small helpers every crate's messages and name checks share.

pub mod agent;
pub mod cancel;
pub mod chat;
pub mod declaration;
pub mod guest;
pub mod library;
pub mod manifest;
pub mod model;
pub mod node;
pub mod permission;
pub mod plan;
pub mod profile;
pub mod protocol;
pub mod records;
pub mod redacted;
pub mod run;
pub mod runtime;
pub mod schedule;
pub mod search;
pub mod skill;
pub mod tool_result;
pub mod vault;
pub mod widget;
pub mod words;

/// How bytes cross every JSON boundary (guest ⇄ host, worker ⇄ page, the
/// result): a `Uint8Array` travels as an object with this one key and its
/// contents in standard base64 with padding, `{"$bytes": "AQID"}`, and becomes
/// a `Uint8Array` again on the other side. An object of exactly this one
/// string-valued key is read as bytes wherever it arrives.
pub const BYTES_KEY: &str = "$bytes";

/// How deep a value may nest where it crosses a boundary (guest → host, a
/// tool's answer → guest, a value a store keeps). Every reader on the way
/// (`serde_json` stops at 128 levels) also reads the envelopes around it (a
/// protocol message, a `tool-result/v1` object, a stored record, the runtime
/// protocol): 64 leaves room for all of them, so a value one side accepts
/// is one every other side can read.
pub const MAX_VALUE_DEPTH: usize = 64;

/// How deep `value` nests: a scalar is 0, `[1]` is 1, `{"a": [1]}` is 2.
/// Counted without recursion, so any value can be measured.
#[must_use]
pub fn value_depth(value: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 0_usize)];
    while let Some((value, depth)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &serde_json::Value>> = match value {
            serde_json::Value::Array(items) => Box::new(items.iter()),
            serde_json::Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        pending.extend(children.map(|child| (child, depth + 1)));
    }
    deepest
}

/// `Err` saying how deep `value` nests when that is past [`MAX_VALUE_DEPTH`]
/// (`is nested 70 levels deep; Kiln carries values up to 64`).
pub fn check_depth(value: &serde_json::Value) -> Result<(), String> {
    let depth = value_depth(value);
    if depth > MAX_VALUE_DEPTH {
        Err(format!(
            "is nested {depth} levels deep; Kiln carries values up to {MAX_VALUE_DEPTH}"
        ))
    } else {
        Ok(())
    }
}

pub use redacted::Redacted;
pub use run::{
    ConsoleLevel, ConsoleLine, MAX_PROGRESS_MESSAGE_CHARS, MAX_PROGRESS_REPORTS,
    PROGRESS_INTERVAL_MS, Progress, RunError, RunErrorKind, RunLimits, RunOutcome, RunReport,
    RunResult,
};

#[cfg(test)]
mod depth_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_counts_levels_of_arrays_and_objects() {
        for (value, depth) in [
            (json!(1), 0),
            (json!([]), 1),
            (json!([1]), 1),
            (json!({"a": [1]}), 2),
            (json!({"a": 1, "b": {"c": {"d": []}}}), 4),
        ] {
            assert_eq!(value_depth(&value), depth, "{value}");
        }
    }
}
