//! Scripted tools for the engine's own tests: a catalog entry that says what
//! its tool answers, served straight through the `ToolHost` seam. Tools that
//! people and programs use are capabilities (`kiln-capabilities`), reached
//! only through its ladder; this host exists to test the `tools` contract of
//! the engine alone.
//!
//! An entry may carry `returns` (the value; absent, the call echoes its
//! arguments), `error` (`{code, message, detail?}`: the call rejects with it) and
//! `delay_ms` (how long the answer takes, at most 60,000) and `person_wait_ms`
//! (how long, before that, the call is held on a person, as an approval would
//! hold it; at most 60,000).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_types::Progress;
use kiln_types::tool_result::CallOutcome;
use serde_json::Value;

use kiln_sandbox::clock::PersonSignal;
use kiln_sandbox::tools::{ToolCall, ToolFailure, ToolHost, ToolReply};

/// The longest scripted delay.
pub const MAX_DELAY_MS: u64 = 60_000;

#[derive(Debug, Clone)]
struct Script {
    returns: Option<Value>,
    error: Option<ToolFailure>,
    delay_ms: u64,
    person_wait_ms: u64,
}

/// Serves scripted catalog entries, and keeps the progress the guest reports.
#[derive(Debug, Clone, Default)]
pub struct ScriptedTools {
    scripts: BTreeMap<String, Script>,
    progress: Rc<RefCell<Vec<Progress>>>,
}

impl ScriptedTools {
    /// Reads the scripts of a catalog. Entries that admission will drop are
    /// skipped here too; a malformed script field is reported by name.
    pub fn from_catalog(catalog: &Value) -> Result<Self, String> {
        let mut scripts = BTreeMap::new();
        for (index, entry) in catalog.as_array().into_iter().flatten().enumerate() {
            let Some(name) = entry.get("name").and_then(Value::as_str) else {
                continue;
            };
            let error = match entry.get("error") {
                None | Some(Value::Null) => None,
                Some(error) => Some(ToolFailure::from_script(error).map_err(|problem| {
                    format!("catalog entry {index} (`{name}`): `error` {problem}")
                })?),
            };
            let milliseconds = |field: &str| {
                match entry.get(field) {
                None => Ok(0),
                Some(ms) => ms.as_u64().filter(|ms| *ms <= MAX_DELAY_MS).ok_or_else(|| {
                    format!(
                        "catalog entry {index} (`{name}`): `{field}` must be an integer from 0 to {MAX_DELAY_MS}; got {ms}"
                    )
                }),
            }
            };
            let delay_ms = milliseconds("delay_ms")?;
            let person_wait_ms = milliseconds("person_wait_ms")?;
            scripts.insert(
                name.to_owned(),
                Script {
                    returns: entry.get("returns").cloned(),
                    error,
                    delay_ms,
                    person_wait_ms,
                },
            );
        }
        Ok(Self {
            scripts,
            progress: Rc::default(),
        })
    }

    /// The progress reports the host was given, in order.
    pub fn reported(&self) -> Vec<Progress> {
        self.progress.borrow().clone()
    }
}

impl ToolHost for ScriptedTools {
    fn progress(&self, progress: &Progress) {
        self.progress.borrow_mut().push(progress.clone());
    }

    fn call(&self, call: ToolCall, person: PersonSignal) -> LocalBoxFuture<'static, ToolReply> {
        let script = self.scripts.get(&call.tool).cloned();
        Box::pin(async move {
            let Some(script) = script else {
                return Err(ToolFailure {
                    code: "tool_unavailable".into(),
                    message: format!("{} has no script", call.tool),
                    detail: None,
                    outcome: CallOutcome::ToolUnavailable,
                });
            };
            if script.person_wait_ms > 0 {
                person.held(true);
                kiln_clock::sleep(script.person_wait_ms).await;
                person.held(false);
            }
            if script.delay_ms > 0 {
                kiln_clock::sleep(script.delay_ms).await;
            }
            match script.error {
                Some(failure) => Err(failure),
                None => Ok(script.returns.unwrap_or(call.args)),
            }
        })
    }
}
