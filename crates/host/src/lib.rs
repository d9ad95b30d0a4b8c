//! The host's side of Kiln's sandbox: what the runtime worker links to run
//! programs in sandbox workers.
//!
//! - `pool`: the pool of sandbox workers and the host's half of each run:
//!   tool calls answered, the wall and JS CPU budgets enforced.
//! - `tools`: how a call that waits on a person tells its sandbox worker so.
//!
//! [`SandboxPool`] starts sandbox workers, runs one program per worker at a
//! time, sends every tool call up the caller's ladder
//! (`kiln_capabilities::Dispatcher`), and ends a run that passes its wall or
//! JS CPU budget by terminating its worker. It answers a
//! [`kiln_types::RunResult`]; the run layer (`kiln_run::run_program`) makes
//! the `tool-result/v1` object of it.
//!
//! It speaks only the protocol of `kiln_types::protocol`; it knows nothing of
//! Boa or of what a tool does.

mod pool;
mod tools;

/// The host's clock: `kiln-clock`'s system clock, `performance.now()` on a page and in a
/// worker alike.
pub use kiln_clock::now_ms;
pub use kiln_types::RunResult;
pub use pool::SandboxPool;
