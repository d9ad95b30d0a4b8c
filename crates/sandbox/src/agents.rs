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
//! naming it. Like `workspace`, it is made and installed as every tool
//! namespace is (`namespace`, with `agents.js`): frozen, and a program cannot
//! replace it.

use crate::namespace::Namespace;

/// The tools `agents` calls, in the order `agents.js` takes them.
pub const AGENT_TOOLS: [&str; 3] = ["run_subtask", "start_subtask", "wait_subtasks"];

/// The global `agents` ([`crate::namespace`]).
pub(crate) static NAMESPACE: Namespace = Namespace {
    global: "agents",
    source: include_str!("agents.js"),
    tools: &AGENT_TOOLS,
};
