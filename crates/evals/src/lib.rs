//! Kiln's evals (`kiln eval`): deterministic cases scored against a model,
//! run natively by the CLI only — never in a wasm build.
//!
//! - [`codeact`]: multi-step tasks over in-process tools, each solved once
//!   as a CodeAct turn and once as plain tool calls, side by side.
//! - [`plans`]: the planner (tool routing, clean plans) and delegation to
//!   sub-agents.
//! - [`codegen`]: the CodePlanner on requests a person would make, each
//!   accepted node run on held-out inputs.
//!
//! The cases themselves are data, not code: one JSON file per suite in
//! `cases/*.json` (`codeact.json`, `planner.json`, `subtask.json`,
//! `codegen.json`), compiled in and parsed by [`cases`] (which also picks
//! them by name, `--cases`) when a suite asks
//! for them. Editing a case is editing its file; the runners and the
//! scoring stay here.

#![allow(
    clippy::result_large_err,
    reason = "`ToolFailure` is the contract's error, made at most once per call: boxing it would buy nothing"
)]

pub mod cases;
pub mod codeact;
pub mod codegen;
pub mod plans;
