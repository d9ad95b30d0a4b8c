//! One module a command of `kiln`, each its flags and what it does:
//!
//! - `run`: `kiln run`, a program run through `kiln_run::run_program` in this process.
//! - `agent`: `kiln agent run "OBJECTIVE"`, one agent turn of the CodeAct loop.
//! - `agents`: `kiln agents list|show|create|edit|remove`, agent profiles in an on-disk store.
//! - `skills`: `kiln skills list|show|create|edit|remove`, the skill catalog (shipped and the
//!   store's own).
//! - `secrets`: `kiln secrets list|set|remove`, the workspace's vault, sealed under a key in the OS
//!   keyring.
//! - `schedules`: `kiln schedules list|create|remove|run-due`, an agent's jobs on a cron
//!   expression; `run-due` runs what is due once, for cron or a timer to drive.
//! - `chat`: `kiln chat`, an interactive session over the CodeAct loop, one turn a message.
//! - `node`: `kiln node run|check|author` and `kiln graph run`: code nodes from a terminal.
//! - `memory`: `kiln memory`, durable memories from a terminal in an on-disk store.
//! - `eval`: `kiln eval`, suites that score an agent against a real model.
//! - `mcp`: `kiln mcp serve`, Kiln as another agent's sandbox: an MCP server over stdio or
//!   Streamable HTTP.
//! - `mcp_http`: `kiln mcp serve --http PORT`, MCP's Streamable HTTP transport on 127.0.0.1.

pub(crate) mod agent;
pub(crate) mod agents;
pub(crate) mod chat;
pub(crate) mod eval;
pub(crate) mod mcp;
pub(crate) mod mcp_http;
pub(crate) mod memory;
pub(crate) mod node;
pub(crate) mod run;
pub(crate) mod schedules;
pub(crate) mod secrets;
pub(crate) mod skills;
