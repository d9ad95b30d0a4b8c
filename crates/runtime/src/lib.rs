//! The runtime worker's wasm entry (DESIGN: "runtime worker"): a dedicated
//! worker that hosts `kiln-run`, `kiln-agent` and `kiln-nodes` — the ladder, the workspace's stores, the
//! MCP sessions of its runs and the pool of sandbox workers (nested workers
//! it starts itself) — and speaks [`kiln_types::runtime`] to its page.
//!
//! - `worker`: the message loop and the two seams that reach back to the page:
//!   the page tools of a run and its `approve` callback.
//! - `ops`: the workspace's storage operations as entrances other than a program
//!   name them (`memory.save`, `files.read`, `export`, …), their arguments read once.
//! - `settings`: the configuration the app edits (permissions, network, the
//!   chat's providers), as storage operations that never overwrite another tab's
//!   change blindly.
//! - `model`: Kiln's own model in the browser: the model worker, a nested worker
//!   started at the first turn that asks for it, and the provider over it.
//! - `typescript`: the stripper of TypeScript programs, a wasm of its own
//!   (`pkg/kiln_ts.js`) imported the first time a program needs it.
//! - `bench`: the figures `cargo xtask bench` reads from inside the worker (only
//!   with the `bench` feature).
//!
//! The sandbox workers are nested workers this worker starts itself: workers
//! the page started and handed over through a `MessageChannel` would put the
//! page back on the path of every sandbox message and every worker's
//! lifetime. Nested, a runaway guest is still ended by terminating its
//! worker, and the page is not involved; it is also the faster way
//! (`playwright/bench/sandbox.mjs` times both).
//!
//! No logic of its own: a run is `kiln_run::run_program`; this crate only
//! carries messages. The page's tools and its `approve` callback stay on the
//! page: a call to one is a [`FromRuntime::ToolCall`] answered by
//! [`ToRuntime::ToolReply`], a question an [`FromRuntime::Approve`] answered
//! by [`ToRuntime::Answer`]. Storage operations are [`store_op`] (`ops`, editing `settings`; the vault's are [`vault_op`]), chat
//! turns `kiln_providers::turn` over a request `kiln_agent::TurnRequest` reads;
//! their events stream back under the exchange's id. The bench hooks
//! ([`ToRuntime::Bench`]) are built only with the `bench` feature. The
//! worker reads its [`RuntimeOptions`] from its
//! `name`, starts the first sandbox worker, opens the stores and posts
//! [`FromRuntime::Ready`] without waiting for that worker (a run does); the
//! page sends runs only after that.

#[cfg(target_arch = "wasm32")]
mod bench;
#[cfg(target_arch = "wasm32")]
mod model;
mod ops;
mod settings;
#[cfg(target_arch = "wasm32")]
mod typescript;
#[cfg(target_arch = "wasm32")]
mod worker;

#[cfg(doc)]
use kiln_types::runtime::{FromRuntime, RuntimeOptions, ToRuntime};
pub use ops::{OpError, store_op, vault_op};
