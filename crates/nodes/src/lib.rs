//! Code nodes (DESIGN: "nodes"; reference/004): a typed JavaScript body
//! checked, fed its values and run as one `kiln-run` program, graphs of
//! them on `kiln_run::dag`, and the CodePlanner that writes one.
//!
//! - [`node`]: one node — its checks, its values, its program, its outputs.
//! - [`graph`]: graphs of nodes — built and checked before anything runs,
//!   run on the DAG scheduler.
//! - [`codegen`]: the CodePlanner — a model writes a node through a
//!   validated `submit_code` call.
//!
//! **Architecture invariant:** pure orchestration over traits. No platform
//! crate (web-sys, js-sys, wasm-bindgen) and no engine (Boa: `kiln-jscheck`
//! is its parser only); `kiln-agent` is not a dependency, since a node never
//! runs a model loop.

pub mod codegen;
pub mod graph;
pub mod node;
