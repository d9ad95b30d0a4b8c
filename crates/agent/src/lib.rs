//! One agent turn (DESIGN: "agent"): the CodeAct loop, sub-agents and plans —
//! the only modules that recurse — and the page's streamed chat exchange.
//! A program run is `kiln-run`'s; this crate drives turns of a model over it.
//!
//! - `codeact`: the CodeAct loop ([`run_agent`]) — the model acts by writing
//!   programs (`execute_code`, a program run through the ladder) and a few
//!   direct tools, with its guards, compaction and `finish`; an entrance
//!   supplies an [`AgentRequest`] (or a page's [`AgentSpec`]) and an
//!   [`AgentSetup`] with its [`Person`] and [`Sink`].
//! - `profile`: an agent profile applied to a job ([`Profiled`]): its
//!   prompt, memories, autonomy and MCP servers, and the team an
//!   orchestrator delegates to by slug ([`Member`]).
//! - `schedule`: when a schedule's occurrences fall ([`Cadence`]) and the
//!   pass that fires what is due ([`run_due`]), claimed through the store.
//! - `skills`: the skill catalog in a turn's prompt, `/name` bodies, and
//!   the built-in tools an agent's assigned skills unlock.
//! - `docs`: `kiln_docs`, Kiln's own documentation (the README, the
//!   manifest, the skills) searched offline.
//! - `subagent`: children of a turn (`run_subtask`, `run_search`,
//!   background subtasks) over a [`Kin`], one budget shared downward.
//! - `plan`: the plan builder, `execute_plan` over `kiln_run::dag` and the
//!   planner behind the `create_plan` tool ([`create_plan`], answering a
//!   [`Planned`]).
//! - `chat`: the plain chat turn loop ([`converse`]) — a model's tool calls
//!   up the same ladder and their results back — emitting events to a sink.
//! - `thread`: an agent turn kept in a thread ([`ThreadTurn`]): the person's
//!   message, the turn's events, and what the model reads next.
//! - `turn`: one streamed chat turn as a page asks for it ([`TurnRequest`]),
//!   and its budget.
//! - `bench` (feature `bench`): the hooks `cargo xtask bench` measures.
//!
//! The names of a turn's built-in tools (`execute_code`, `execute_plan`, …)
//! are `kiln_types::agent`'s, so every surface compares against the same
//! words.
//!
//! **Architecture invariant:** pure orchestration over traits. No platform
//! crate (web-sys, js-sys, wasm-bindgen) and no engine (Boa): the tidy test
//! keeps it so, and the crate is tested natively in milliseconds.

// The front door: what is `pub` in a private module is re-exported here, or it
// is `pub(crate)`.
#![warn(unreachable_pub)]
#![allow(
    clippy::result_large_err,
    reason = "`ToolFailure` is the contract's error, made at most once per call: boxing it would buy nothing"
)]

#[cfg(feature = "bench")]
pub mod bench;
mod chat;
mod codeact;
mod docs;
mod plan;
mod profile;
mod schedule;
mod skills;
mod subagent;
mod thread;
mod turn;

pub use chat::{ChatEnd, ChatEvent, ChatOutcome, Conversation, converse, tool_defs};
pub use codeact::history::{
    COMPACTION_MARK, Compaction, MAX_TOOL_RESULT_CHARS, compaction_row, split_point,
    summarize as summarize_thread,
};
pub use codeact::request::AgentSpec;
pub use codeact::tools::{Person, Sink, is_always_on};
pub use codeact::{AgentOutcome, AgentRequest, AgentSetup, run_agent};
pub use plan::planner::{Planned, plan as create_plan};
pub use profile::{
    Bench, Connect, Member, Profiled, Team, load as load_profile, open_vault, own_model, stricter,
    vault_secrets,
};
pub use schedule::{
    Cadence, Due, Fire, Fired, GRACE_MS, MAX_MISSED, Pass, claim_due, run_due, settle,
};
pub use subagent::{Background, DEFAULT_CHILD_TURNS, Kin, MAX_DEPTH};
pub use thread::{ThreadTurn, context_change, continuation};
pub use turn::{TurnBudget, TurnRequest, new_budget};
