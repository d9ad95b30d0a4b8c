//! One program run, for every entrance (DESIGN: "run"): the request and its
//! one parser, the ladder assembled from the entrance's [`Environment`], the
//! run's record in the history, the run itself over a [`SandboxRunner`],
//! custody of keyed runs, `tools.model`/`tools.classify`, and the DAG
//! scheduler plans and graphs share. It never knows a model loop exists.
//!
//! - `request`: [`RunRequest`], the run request and its one parser.
//! - `environment`: what an entrance supplies to every run
//!   ([`Environment`], [`People`], [`ToolBridge`], [`Workspace`]).
//! - `ladder`: a run's registry (the entrance's tools, the page's tools,
//!   the built-ins it asked for, the workspace's storage tools, its model
//!   tools, its MCP servers), gate and dispatcher ([`assemble`]).
//! - `record`: the run's job in the history ([`RunRecord`], [`RunId`]).
//! - `program`: [`run_program`], the one program run.
//! - `custody`: keyed runs ([`Custody`]), each kept for its [`Principal`]:
//!   attach on retry, the interim reply, late results, withdraw.
//! - `model_tools`: `tools.model` and `tools.classify` ([`ModelTools`]).
//! - `provider`: the provider a field names, given whole or kept
//!   ([`provider_config`]).
//! - `typescript`: a runner that runs TypeScript programs too, over the
//!   entrance's [`Stripper`] ([`TypeScript`]).
//! - `bench` (feature `bench`): what `cargo xtask bench` runs with.
//! - [`dag`]: the event-driven DAG scheduler and the order and cycle checks
//!   plans and graphs run before anything starts.
//!
//! **Architecture invariant:** pure orchestration over traits. No platform
//! crate (web-sys, js-sys, wasm-bindgen), no engine (Boa), and neither
//! `kiln-agent` nor `kiln-nodes`: the tidy test keeps it so, and the crate is
//! tested natively in milliseconds.

// The front door: what is `pub` in a private module is re-exported here, or it
// is `pub(crate)`.
#![warn(unreachable_pub)]
#![allow(
    clippy::result_large_err,
    reason = "`ToolFailure` is the contract's error, made at most once per call: boxing it would buy nothing"
)]

#[cfg(feature = "bench")]
pub mod bench;
mod custody;
pub mod dag;
mod environment;
mod ladder;
mod model_tools;
mod program;
mod provider;
mod record;
mod request;
mod typescript;

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::Dispatcher;
use kiln_types::cancel::AbortSignal;
use kiln_types::{RunLimits, RunResult};

pub use custody::{
    Custody, CustodyError, Principal, REPLY_DUE_MS, Retention, RunHandle, Spawn, holding,
    interrupted,
};
pub use environment::{Environment, OwnTools, People, ToolBridge, Workspace};
pub use ladder::{
    Ladder, assemble, assemble_job, catalog, check_workspace_name, mount_beyond, secret_scope,
};
pub use model_tools::{CLASSIFY, MODEL, ModelBudget, ModelTools};
pub use program::{ProgramRun, run_program};
pub use provider::{PROVIDER_SHAPE, ProviderError, kept_model, provider_config};
pub use record::{JobOf, RunId, RunRecord, status_of};
pub use request::{Builtin, Limits, McpMount, ModelSetup, RequestError, RunRequest, ToolEntry};
pub use typescript::{Stripper, TypeScript};

/// Runs one program in a sandbox, every tool call up `tools`' ladder.
///
/// Implementations: the browser's pool of sandbox workers (ending a runaway
/// guest by terminating its worker), the CLI's sandbox child process, an
/// in-process sandbox in tests. A runner never fails: a sandbox that cannot
/// start or dies is an `engine` failure in the report. When `cancel` is
/// thrown the runner ends the run at once (`cancelled`, with the output and
/// call outcomes so far).
pub trait SandboxRunner {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult>;

    /// How this runner reads a program written in TypeScript, when it does
    /// ([`TypeScript`]): what checks a program before any run (a code
    /// node's) use to read it the same way.
    fn stripper(&self) -> Option<Rc<dyn Stripper>> {
        None
    }
}
