//! The guest's `agents` object: sub-agents for programs, as a thin layer
//! over the delegation capabilities.
//!
//! `agents.run(prompt, {outputSchema, tools})` → the child's outcome
//! (`{status: "completed", value}` or `{status: "failed", error}`; it never
//! rejects for the child's failure), `agents.start(prompt, options)` → the
//! background child's id, `agents.wait({ids, timeoutMs})` → `{subtasks,
//! timed_out}`. Each method is exactly one call of one tool (`run_subtask`,
//! `start_subtask`, `wait_subtasks`) through the function `tools.<name>`
//! uses, so the host's ladder gates and counts it like any call.
//!
//! `agents` is defined only when the run's catalog exposes at least one of
//! those tools; a method whose tool is missing rejects with a `TypeError`
//! naming it. Like `workspace`, the object is frozen, has no prototype, and
//! the global is neither writable nor configurable.

use boa_engine::property::Attribute;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsValue, Source, js_string};

use crate::catalog::Admission;
use crate::tools::tool_function;

/// The tools `agents` calls, in the order `agents.js` takes them.
pub const AGENT_TOOLS: [&str; 3] = ["run_subtask", "start_subtask", "wait_subtasks"];

const AGENTS: &str = include_str!("agents.js");

/// `agents.js`'s factory, made while the context is built.
pub(crate) struct Factory(JsObject);

/// Evaluates `agents.js` in `context`.
pub(crate) fn prepare(context: &mut Context) -> JsResult<Factory> {
    let factory = context.eval(Source::from_bytes(AGENTS))?;
    match factory.as_callable() {
        Some(factory) => Ok(Factory(factory.clone())),
        None => Err(JsNativeError::typ()
            .with_message("agents' definition is not a function")
            .into()),
    }
}

/// Defines the global `agents` when `admission` exposes a delegation tool.
pub(crate) fn install(
    context: &mut Context,
    factory: &Factory,
    admission: &Admission,
) -> JsResult<()> {
    let exposed = admission.exposed_names();
    if !AGENT_TOOLS.iter().any(|name| exposed.contains(name)) {
        return Ok(());
    }
    let functions: Vec<JsValue> = AGENT_TOOLS
        .iter()
        .map(|name| {
            if exposed.contains(name) {
                tool_function(name, context).into()
            } else {
                JsValue::undefined()
            }
        })
        .collect();
    let agents = factory.0.call(&JsValue::undefined(), &functions, context)?;
    context.register_global_property(js_string!("agents"), agents, Attribute::empty())
}
