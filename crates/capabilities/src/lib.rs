//! The only door to a tool. Every call, from every entrance (a sandbox
//! program today; a model's direct tool call and a sub-agent later), walks one
//! ladder ([`Dispatcher::call`]): lookup in the [`Registry`] → argument
//! coercion and validation ([`args`]) → permission decision ([`gate::decide`])
//! → approval round trip when asked ([`gate::Approver`]) → implementation.
//!
//! Sources feed one registry: built-in capabilities (`http_request` when a run
//! asks for network reach, under its [`NetPolicy`]; with the host's stores,
//! the memory, history and file capabilities of [`storage`]), the host's own
//! tools (the page's `tools`, the CLI's scripted catalog) and MCP servers
//! ([`mcp`]).

// `ToolFailure` is the contract's error, made at most once per call: boxing it
// would buy nothing.
#![allow(clippy::result_large_err)]

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
pub mod reflection;
pub mod registry;
pub mod scripted;
pub mod secrets;
pub mod spec;
pub mod storage;

pub use dispatch::{CallContext, Dispatcher, HeldSignal, Permit, RunState};
pub use gate::{Answer, ApprovalRequest, Approver, Autonomy, Decision, Gate, GateSettings, Mode};
pub use http_request::NetPolicy;
pub use registry::{Entry, Implementation, Registry};
pub use secrets::{Secret, SecretScope};
pub use spec::{CapabilitySpec, Category, Source};
pub use storage::Storage;
