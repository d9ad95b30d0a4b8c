//! Kiln's agent layer (DESIGN: "agent"): one program run and one chat turn,
//! assembled here once for every entrance — the page API, the app, the
//! runtime worker and the CLI — so they cannot drift apart.
//!
//! - [`request`]: the run request and its one parser.
//! - [`ladder`]: a run's registry (the entrance's tools, the page's tools,
//!   the built-ins it asked for, the workspace's storage tools, its MCP
//!   servers), gate and dispatcher, with the one mode rule: `default` when
//!   someone can be asked, else `auto`.
//! - [`record`]: the run's job in the history — one title, one recorded
//!   output, one status rule.
//! - [`program`]: [`program::run_program`] over a [`SandboxRunner`] (the
//!   worker pool in the browser, the watchdog thread natively), with the
//!   warnings merged once and the MCP sessions closed once.
//! - [`chat`]: the chat turn loop — a model's tool calls up the same ladder
//!   and their results back — emitting events to a sink.
//! - [`turn`]: one streamed chat turn as a page asks for it, and its budget.
//! - [`node`] and [`graph`]: code nodes — a typed JavaScript body checked,
//!   fed its values and run as one program — and graphs of them on the
//!   plans' scheduler; [`codegen`] the CodePlanner that writes one through
//!   a validated `submit_code` call.
//! - [`ops`]: the workspace's storage operations (`memory.save`,
//!   `files.read`, …) as pages and the app name them; [`settings`] the
//!   configuration they edit (permissions, network, providers).
//!
//! **Architecture invariant:** pure orchestration over traits. No platform
//! crate (web-sys, js-sys, wasm-bindgen) and no engine (Boa): the tidy test
//! keeps it so, and the crate is tested natively in milliseconds.

// `ToolFailure` is the contract's error, made at most once per call: boxing it
// would buy nothing.
#![allow(clippy::result_large_err)]

#[cfg(feature = "bench")]
pub mod bench;
pub mod chat;
pub mod codeact;
pub mod codegen;
pub mod custody;
pub mod eval;
pub mod eval_codegen;
pub mod eval_plans;
pub mod graph;
pub mod ladder;
pub mod model_tools;
pub mod node;
pub mod ops;
pub mod plan;
pub mod program;
pub mod record;
pub mod request;
pub mod settings;
pub mod subagent;
pub mod turn;

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::Dispatcher;
use kiln_types::cancel::AbortSignal;
use kiln_types::{RunLimits, RunResult};

pub use ladder::{Environment, People, ToolBridge, Workspace};
pub use program::{ProgramRun, run_program};
pub use request::{Builtin, Limits, RequestError, RunRequest};

/// Runs one program in a sandbox, every tool call up `tools`' ladder.
///
/// Implementations: the browser's pool of sandbox workers (ending a runaway
/// guest by terminating its worker), the CLI's sandbox thread under a
/// watchdog, an in-process sandbox in tests. A runner never fails: a sandbox
/// that cannot start or dies is an `engine` failure in the report. When
/// `cancel` is thrown the runner ends the run at once (`cancelled`, with the
/// output and call outcomes so far); a runner that cannot (the CLI's thread,
/// which its watchdog ends instead) says so in its docs.
pub trait SandboxRunner {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult>;
}
