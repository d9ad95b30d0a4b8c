//! The only door to a tool. Every call, from every entrance (a sandbox
//! program, a model's direct tool call, a sub-agent, a plan step), walks one
//! ladder ([`Dispatcher::call`]): lookup in the [`Registry`] → argument
//! coercion and validation ([`args`]) → permission decision ([`gate::decide`])
//! → approval round trip when asked ([`gate::Approver`]) → implementation.
//!
//! Sources feed one registry: built-in capabilities (`http_request` when a run
//! asks for network reach, under its [`NetPolicy`]; with the host's stores,
//! the memory, history and file capabilities of [`storage`]), the host's own
//! tools (the page's `tools`, the CLI's scripted catalog) and MCP servers
//! ([`mcp`]).
//!
//! The ladder:
//!
//! - [`spec`]: what a capability is as data, the part a model, a prompt and
//!   the ladder read without loading any implementation.
//! - [`registry`]: the one table of capabilities every source adds to and
//!   every entrance looks tools up in.
//! - [`dispatch`]: the ladder every call walks, its results and errors
//!   scrubbed of the run's secrets.
//! - [`args`]: the argument half: coercion, missing names, JSON Schema.
//! - [`gate`]: the decision half: one pure function over the permission
//!   settings, and the [`Gate`] a host publishes.
//! - [`secrets`]: a run's secret scope, whose values never print.
//! - `describe`: words for values in messages.
//!
//! The sources:
//!
//! - [`builtin`]: the built-in capabilities as one table of specs, and the
//!   calls that mount them on a registry.
//! - [`http_request`]: `http_request`, the built-in fetch capability.
//! - [`storage`]: the storage capabilities, each a thin door onto `kiln-store`.
//! - [`memory_tools`]: the memory capabilities: the run's shared memory,
//!   durable memory and `search_history`.
//! - [`file_tools`]: the workspace file capabilities (`file_*`).
//! - [`skill_tools`]: the skill capabilities (`list_skills`, `load_skill`,
//!   `create_skill`, `update_skill`, `delete_skill`) an agent turn mounts.
//! - [`web_search`]: `web_search` over the search API a workspace configured
//!   (SearXNG, Brave, Tavily).
//! - [`scripted`]: scripted capabilities, catalog entries that say what
//!   their tool answers (the CLI's `--tools CATALOG.json`, tests).
//! - [`mcp`]: MCP servers' tools, mounted under each server's name.
//! - `bench` (feature `bench`): the measurements `cargo xtask bench` prints.

#![allow(
    clippy::result_large_err,
    reason = "`ToolFailure` is the contract's error, made at most once per call: boxing it would buy nothing"
)]

pub mod args;
#[cfg(feature = "bench")]
pub mod bench;
pub mod builtin;
mod describe;
pub mod dispatch;
pub mod file_tools;
pub mod gate;
pub mod http_request;
pub mod mcp;
pub mod memory_tools;
pub mod registry;
pub mod scripted;
pub mod secrets;
pub mod skill_tools;
pub mod spec;
pub mod storage;
pub mod web_search;

pub use dispatch::{CallContext, Dispatcher, HeldSignal, Permit, ProgressObserver, RunState};
pub use gate::{Answer, ApprovalRequest, Approver, Autonomy, Decision, Gate, GateSettings, Mode};
pub use http_request::NetPolicy;
pub use registry::{Entry, Implementation, Registry};
pub use secrets::{Secret, SecretScope};
pub use spec::{CapabilitySpec, Category, Source};
pub use storage::Storage;
