//! One agent turn (DESIGN: "agent"): the CodeAct loop, sub-agents and plans —
//! the only modules that recurse — and the page's streamed chat exchange.
//! A program run is `kiln-run`'s; this crate drives turns of a model over it.
//!
//! - [`codeact`]: the CodeAct loop — the model acts by writing programs
//!   (`execute_code`, a program run through the ladder) and a few direct
//!   tools, with its guards, compaction and `finish`.
//! - [`subagent`]: children of a turn (`run_subtask`, `run_search`,
//!   background subtasks), one budget shared downward.
//! - [`plan`]: the plan builder, `execute_plan` over `kiln_run::dag` and the
//!   planner behind `create_plan`.
//! - [`chat`]: the plain chat turn loop — a model's tool calls up the same
//!   ladder and their results back — emitting events to a sink.
//! - [`turn`]: one streamed chat turn as a page asks for it, and its budget.
//! - `bench` (feature `bench`): the hooks `cargo xtask bench` measures.
//!
//! **Architecture invariant:** pure orchestration over traits. No platform
//! crate (web-sys, js-sys, wasm-bindgen) and no engine (Boa): the tidy test
//! keeps it so, and the crate is tested natively in milliseconds.

#![allow(
    clippy::result_large_err,
    reason = "`ToolFailure` is the contract's error, made at most once per call: boxing it would buy nothing"
)]

#[cfg(feature = "bench")]
pub mod bench;
pub mod chat;
pub mod codeact;
pub mod plan;
pub mod subagent;
pub mod turn;
