//! The storage capabilities: run memory (`list_shared`, `read_shared`,
//! `share_result`), durable memory (`save_memory`, `query_memory`,
//! `mark_memory_helpful`, `mark_memory_outdated`), history
//! (`search_history`) and the workspace's files (`file_*`), each a thin door
//! onto `kiln-store`.
//!
//! The host opens the stores and hands them in as one [`Storage`]
//! (`builtin::add_storage`); the specs are data in [`crate::memory_tools`]
//! and [`crate::file_tools`], listed with every other built-in by
//! `builtin::specs()`. Reads are category `read`; everything that writes is
//! `write`, so plan mode refuses it at the gate.
//!
//! A store's error reaches the caller once, through [`store_failure`]: its
//! stable code (`StoreError::code`, refined to `path_refused` for a path that
//! could leave the workspace and `namespace_refused` for a `share_result`
//! outside `shared:`), its message (which names the value) with
//! `StoreError::hint` on a `hint:` line after it, and outcome `error`: the
//! call ran and the store said no, which is neither the person's refusal nor
//! a budget.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_store::durable::DurableMemory;
use kiln_store::files::FileTree;
use kiln_store::history::History;
use kiln_store::run::RunMemory;
use kiln_store::{Backend, StoreError};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::dispatch::{CallContext, Permit};
use crate::registry::{Implementation, Registry};
use crate::spec::{CapabilitySpec, Category, Source};

/// The stores one run's storage capabilities work on, opened by the host.
#[derive(Clone)]
pub struct Storage {
    /// This run's memory (`step:`, `task:`, `input:`, `shared:`).
    pub run: RunMemory,
    /// The workspace's durable memories.
    pub memory: DurableMemory,
    /// Jobs and conversations, for `search_history`.
    pub history: History,
    /// The workspace's files.
    pub files: Rc<dyn FileTree>,
    /// Whose memories `save_memory` keeps and `query_memory` searches when a
    /// call names no agent (`kiln_store::durable::DEFAULT_AGENT`: `default`).
    pub agent: String,
    /// Other agents whose memories the host lets this run read, save and mark
    /// too; none unless the host grants them. A call that names any other
    /// agent, or marks another agent's memory, is refused
    /// ([`AGENT_NOT_GRANTED`]).
    pub granted_agents: Vec<String>,
    /// The bytes `file_search` may still read in this run, shared by its calls
    /// (from [`MAX_RUN_SEARCHED_BYTES`]).
    pub search_budget: Rc<std::cell::Cell<u64>>,
}

/// The most bytes `file_search` reads in one run (256 MiB), over all its calls.
pub const MAX_RUN_SEARCHED_BYTES: u64 = 256 << 20;

impl Storage {
    /// The stores of one workspace `backend` and its `files`, with the run
    /// memory of `run_id`; `agent` saves and searches memories.
    #[must_use]
    pub fn new(
        backend: Rc<dyn Backend>,
        files: Rc<dyn FileTree>,
        run_id: &str,
        agent: &str,
    ) -> Self {
        Self {
            run: RunMemory::new(backend.clone(), run_id),
            memory: DurableMemory::new(backend.clone()),
            history: History::new(backend),
            files,
            agent: agent.to_owned(),
            granted_agents: Vec::new(),
            search_budget: Rc::new(std::cell::Cell::new(MAX_RUN_SEARCHED_BYTES)),
        }
    }
}

/// Code of a memory call about an agent that is not the run's, nor granted to it.
pub const AGENT_NOT_GRANTED: &str = "agent_not_granted";
/// Code of a path that could leave the workspace (absolute, a drive, `..`).
pub const PATH_REFUSED: &str = "path_refused";
/// Code of a `share_result` key in a namespace the run's executors own.
pub const NAMESPACE_REFUSED: &str = "namespace_refused";
/// Code of content larger than a workspace file may be.
pub const FILE_TOO_LARGE: &str = "file_too_large";
/// Code of a file read as text that is not UTF-8.
pub const NOT_TEXT: &str = "not_text";

/// A store's error as the call's failure; the one place the mapping lives.
#[must_use]
pub fn store_failure(error: StoreError) -> ToolFailure {
    failure(error.code(), error.with_hint().to_string())
}

/// A failure of the storage capabilities' own (outcome `error`).
pub(crate) fn failure(code: &str, message: String) -> ToolFailure {
    ToolFailure {
        code: code.to_owned(),
        message,
        detail: None,
        outcome: CallOutcome::Error,
    }
}

/// `store_failure` with a more precise code.
pub(crate) fn refined(code: &'static str) -> impl Fn(StoreError) -> ToolFailure {
    move |error| ToolFailure {
        code: code.to_owned(),
        ..store_failure(error)
    }
}

/// Arguments the ladder already validated, as the capability's own type.
pub(crate) fn arguments<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolFailure> {
    serde_json::from_value(args).map_err(|error| {
        failure(
            "invalid_arguments",
            format!("{tool}: the arguments do not read: {error}"),
        )
    })
}

/// A value as JSON for a reply.
pub(crate) fn reply<T: serde::Serialize>(value: &T) -> ToolReply {
    serde_json::to_value(value).map_err(|error| {
        failure(
            "internal",
            format!("the reply could not be written as JSON: {error}"),
        )
    })
}

/// What runs one storage capability's call.
/// A built-in storage capability's spec.
pub(crate) fn spec(
    name: &str,
    description: String,
    category: Category,
    input: Value,
    result: Value,
) -> CapabilitySpec {
    CapabilitySpec {
        name: name.into(),
        description,
        input_schema: input,
        category,
        result,
        source: Source::Builtin,
    }
}

pub(crate) type Handler = fn(Rc<Storage>, Value) -> LocalBoxFuture<'static, ToolReply>;

/// One storage capability over the run's stores.
struct StorageTool {
    storage: Rc<Storage>,
    handler: Handler,
}

impl Implementation for StorageTool {
    fn call(
        &self,
        args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        (self.handler)(self.storage.clone(), args)
    }
}

/// Every storage capability: its spec and what runs it.
pub(crate) fn table() -> Vec<(CapabilitySpec, Handler)> {
    let mut table = crate::memory_tools::table();
    table.extend(crate::file_tools::table());
    table
}

/// Mounts every storage capability on `registry` over `storage`.
pub(crate) fn add(registry: &mut Registry, storage: &Storage) {
    add_where(registry, storage, |_| true);
}

/// Mounts the storage capabilities named in `names`.
pub(crate) fn add_only(registry: &mut Registry, storage: &Storage, names: &[&str]) {
    add_where(registry, storage, |spec| {
        names.contains(&spec.name.as_str())
    });
}

fn add_where(registry: &mut Registry, storage: &Storage, keep: impl Fn(&CapabilitySpec) -> bool) {
    let storage = Rc::new(storage.clone());
    for (spec, handler) in table().into_iter().filter(|(spec, _)| keep(spec)) {
        let implementation = Rc::new(StorageTool {
            storage: storage.clone(),
            handler,
        });
        // Built-in specs are ours and compile (tested).
        let _ = registry.add(spec, implementation);
    }
}
