//! Code nodes (DESIGN: "nodes"; reference/004): a typed JavaScript body
//! checked, fed its values and run as one `kiln-run` program, graphs of
//! them on `kiln_run::dag`, and the CodePlanner that writes one.
//!
//! - `node`: one node — its checks ([`check_node`]), its values
//!   ([`fill_inputs`]), its program, its outputs ([`run_node`]).
//! - `graph`: graphs of nodes — built and checked before anything runs
//!   ([`build_graph`]), run on the DAG scheduler ([`run_graph`]).
//! - `codegen`: the CodePlanner ([`author`]) — a model writes a node through
//!   a validated `submit_code` call ([`check_submission`]), told what a run
//!   has by its prompt ([`author_system_prompt`]).
//!
//! The node and graph shapes themselves ([`CodeNode`], [`GraphSpec`], a
//! run's [`NodeRun`] and a graph's [`Ended`]) are `kiln_types::node`'s.
//!
//! **Architecture invariant:** pure orchestration over traits. No platform
//! crate (web-sys, js-sys, wasm-bindgen) and no engine (Boa: `kiln-jscheck`
//! is its parser only); `kiln-agent` is not a dependency, since a node never
//! runs a model loop.
//!
//! [`CodeNode`]: kiln_types::node::CodeNode
//! [`GraphSpec`]: kiln_types::node::GraphSpec
//! [`NodeRun`]: kiln_types::node::NodeRun
//! [`Ended`]: kiln_types::node::Ended

// The front door: what is `pub` in a private module is re-exported here, or it
// is `pub(crate)`.
#![warn(unreachable_pub)]

mod codegen;
mod graph;
mod node;

pub use codegen::prompt::{
    system as author_system_prompt, unknown_apis, user as author_user_prompt,
};
pub use codegen::{
    AuthorSpec, Authored, CodeFailure, CodeRequest, MAX_ROUNDS as MAX_AUTHOR_ROUNDS, SUBMIT_CODE,
    Submission, Telemetry, answer as authored_answer, author, check_submission, pick_model,
    resolve_model,
};
pub use graph::{
    Graph, GraphRequest, GraphRun, NodeProgress, Setup as GraphSetup, build as build_graph,
    run_graph,
};
pub use node::{
    MAX_CODE_BYTES, NodeRequest, check as check_node, check_typed as check_node_typed,
    default_limits as default_node_limits, fill as fill_inputs, program as node_program,
    request as node_run_request, run_node,
};
