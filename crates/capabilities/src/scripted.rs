//! Scripted capabilities: a catalog entry that says what its tool answers.
//! The CLI's `--tools CATALOG.json` serves them, and tests use them to drive
//! the ladder with a real implementation behind it.
//!
//! An entry is `{name, description, input_schema, category?, returns?, error?,
//! delay_ms?, person_wait_ms?}`: `category` is the permission category
//! (default `external`, the conservative one); `returns` the value (absent, the
//! call echoes its arguments); `error` (`{code, message, detail?}`) makes the
//! call reject with it; `delay_ms` is how long the answer takes and
//! `person_wait_ms` how long, before that, the call is held on a person (each
//! at most 60,000).

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_types::tool_result::{ToolFailure, ToolReply, Warning};
use serde_json::Value;

use crate::dispatch::{CallContext, Permit};
use crate::registry::{Implementation, Registry};
use crate::spec::{CapabilitySpec, Category, Source};

/// The longest scripted delay.
pub const MAX_DELAY_MS: u64 = 60_000;

#[derive(Debug, Clone)]
struct Script {
    returns: Option<Value>,
    error: Option<ToolFailure>,
    delay_ms: u64,
    person_wait_ms: u64,
}

impl Implementation for Script {
    fn call(
        &self,
        args: Value,
        context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let script = self.clone();
        Box::pin(async move {
            if script.person_wait_ms > 0 {
                (context.held)(true);
                kiln_http::sleep(script.person_wait_ms).await;
                (context.held)(false);
            }
            if script.delay_ms > 0 {
                kiln_http::sleep(script.delay_ms).await;
            }
            match script.error {
                Some(failure) => Err(failure),
                None => Ok(script.returns.unwrap_or(args)),
            }
        })
    }
}

/// Adds every entry of `catalog` (a JSON array) to `registry` as a capability
/// of `host`. A malformed entry becomes a `tool_entry_invalid` warning and is
/// dropped; a malformed script field (`error`, `delay_ms`, `category`) is an
/// error naming the entry, since the catalog's author asked for something
/// this cannot serve.
pub fn add_catalog(registry: &mut Registry, catalog: &Value, host: &str) -> Result<(), String> {
    let Value::Array(entries) = catalog else {
        return Err(format!(
            "the tool catalog must be a JSON array of entries; got {} (invalid_catalog)",
            crate::describe::json_type(catalog)
        ));
    };
    for (index, entry) in entries.iter().enumerate() {
        let malformed = |message: String| Warning {
            code: "tool_entry_invalid".into(),
            message,
            module: Some(host.to_owned()),
            tool: None,
            index: Some(index),
            reason: Some("malformed".into()),
        };
        let Some(object) = entry.as_object() else {
            registry.warn(malformed(format!(
                "catalog entry {index} is {}, not an object; it was dropped",
                crate::describe::json_type(entry)
            )));
            continue;
        };
        let Some(name) = object.get("name").and_then(Value::as_str) else {
            registry.warn(malformed(format!(
                "catalog entry {index} has no string `name`; it was dropped"
            )));
            continue;
        };
        let field = |field: &str| format!("catalog entry {index} (`{name}`): `{field}`");
        let category = match object.get("category") {
            None => Category::External,
            Some(Value::String(text)) => text
                .parse()
                .map_err(|why| format!("{} {why}", field("category")))?,
            Some(other) => {
                return Err(format!(
                    "{} must be a string; got {other}",
                    field("category")
                ));
            }
        };
        let error = match object.get("error") {
            None | Some(Value::Null) => None,
            Some(error) => Some(
                ToolFailure::from_script(error)
                    .map_err(|problem| format!("{} {problem}", field("error")))?,
            ),
        };
        let milliseconds = |key: &str| match object.get(key) {
            None => Ok(0),
            Some(ms) => ms.as_u64().filter(|ms| *ms <= MAX_DELAY_MS).ok_or_else(|| {
                format!(
                    "{} must be an integer from 0 to {MAX_DELAY_MS}; got {ms}",
                    field(key)
                )
            }),
        };
        let script = Script {
            returns: object.get("returns").cloned(),
            error,
            delay_ms: milliseconds("delay_ms")?,
            person_wait_ms: milliseconds("person_wait_ms")?,
        };
        let spec = CapabilitySpec {
            name: name.to_owned(),
            description: object
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            input_schema: object
                .get("input_schema")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            category,
            result: serde_json::json!({}),
            source: Source::Host {
                host: host.to_owned(),
            },
        };
        // A name or schema the registry refuses is already a warning there.
        let _ = registry.add(spec, Rc::new(script));
    }
    Ok(())
}
