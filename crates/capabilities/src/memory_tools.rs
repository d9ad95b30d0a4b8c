//! The memory capabilities: the run's shared memory (`list_shared`,
//! `read_shared`, `share_result`, the reference's "Agent Memory": metadata
//! first, values pulled by key, agents publish only under `shared:`), durable
//! memory (`save_memory`, `query_memory`, `mark_memory_helpful`,
//! `mark_memory_outdated`) and `search_history`.

use std::rc::Rc;

use kiln_store::durable::{DEFAULT_AGENT, MAX_TEXT_CHARS, Mark};
use kiln_store::run::{ListFilter, MAX_VALUE_BYTES, NAMESPACES};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::spec::{CapabilitySpec, Category};
use crate::storage::{
    AGENT_NOT_GRANTED, Handler, NAMESPACE_REFUSED, Storage, arguments, refined, reply, spec,
    store_failure,
};

pub const LIST_SHARED: &str = "list_shared";
pub const READ_SHARED: &str = "read_shared";
pub const SHARE_RESULT: &str = "share_result";
pub const SAVE_MEMORY: &str = "save_memory";
pub const QUERY_MEMORY: &str = "query_memory";
pub const MARK_MEMORY_HELPFUL: &str = "mark_memory_helpful";
pub const MARK_MEMORY_OUTDATED: &str = "mark_memory_outdated";
pub const SEARCH_HISTORY: &str = "search_history";

/// The most keys one `read_shared` reads.
pub const MAX_READ_KEYS: usize = 50;
/// The most hits one query answers, and how many when the call does not say.
pub const MAX_LIMIT: usize = 50;
pub const DEFAULT_LIMIT: usize = 10;

fn entry_meta() -> Value {
    json!({
        "type": "object",
        "properties": {
            "key": {"type": "string"},
            "title": {"type": "string"},
            "description": {"type": "string"},
            "kind": {"type": "string"},
            "bytes": {"type": "integer"},
            "created_ms": {"type": "integer"}
        }
    })
}

fn memory() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "text": {"type": "string"},
            "agent": {"type": "string"},
            "helpful": {"type": "integer", "description": "How many times it was marked helpful."},
            "outdated": {"type": "boolean"},
            "created_ms": {"type": "integer"},
            "updated_ms": {"type": "integer"}
        }
    })
}

fn limit_schema(what: &str) -> Value {
    json!({
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_LIMIT,
        "default": DEFAULT_LIMIT,
        "description": format!("The most {what} to answer (1 to {MAX_LIMIT}; {DEFAULT_LIMIT} when left out).")
    })
}

fn agent_schema() -> Value {
    json!({
        "type": "string",
        "description": "Whose memories: left out, the agent this run works for; another agent only when the host granted it."
    })
}

fn memory_id_schema(name: &str, description: String) -> CapabilitySpec {
    spec(
        name,
        description,
        Category::Write,
        json!({
            "type": "object",
            "properties": {
                "memory_id": {"type": "string", "minLength": 1, "description": "The memory's `id`, as save_memory or query_memory answered it."}
            },
            "required": ["memory_id"],
            "additionalProperties": false
        }),
        memory(),
    )
}

/// The memory capabilities' specs and handlers.
pub(crate) fn table() -> Vec<(CapabilitySpec, Handler)> {
    vec![
        (
            spec(
                LIST_SHARED,
                "Lists what this run's shared memory holds, as metadata only (key, title, \
                 description, kind, size in bytes, creation time), never the values. Keys are \
                 `step:<id>` and `task:<id>` (results of the run's steps and tasks), \
                 `input:<name>` (what the caller supplied) and `shared:<name>` (what agents \
                 published with share_result). Narrow by namespace, key prefix or kind, then \
                 fetch only the values you need with read_shared."
                    .into(),
                Category::Read,
                json!({
                    "type": "object",
                    "properties": {
                        "namespace": {"type": "string", "enum": NAMESPACES, "description": "Only keys in this namespace."},
                        "prefix": {"type": "string", "description": "Only keys starting with this, namespace included (`step:fetch`)."},
                        "kind": {"type": "string", "description": "Only entries of this kind (`step_result`, `task_result`, `input`, `shared`, or a writer's own)."}
                    },
                    "additionalProperties": false
                }),
                json!({
                    "type": "object",
                    "properties": {"entries": {"type": "array", "items": entry_meta()}}
                }),
            ),
            |storage, args| Box::pin(list_shared(storage, args)),
        ),
        (
            spec(
                READ_SHARED,
                format!(
                    "Reads the values of run memory keys (as list_shared names them: \
                     `step:<id>`, `task:<id>`, `input:<name>`, `shared:<name>`), 1 to \
                     {MAX_READ_KEYS} per call. A key the run does not have reads \
                     `value: null` and is listed in `missing`."
                ),
                Category::Read,
                json!({
                    "type": "object",
                    "properties": {
                        "keys": {
                            "type": "array",
                            "items": {"type": "string"},
                            "minItems": 1,
                            "maxItems": MAX_READ_KEYS,
                            "description": "Full keys, namespace included."
                        }
                    },
                    "required": ["keys"],
                    "additionalProperties": false
                }),
                json!({
                    "type": "object",
                    "properties": {
                        "entries": {
                            "type": "array",
                            "items": {"type": "object", "properties": {"key": {"type": "string"}, "value": {}}}
                        },
                        "missing": {"type": "array", "items": {"type": "string"}}
                    }
                }),
            ),
            |storage, args| Box::pin(read_shared(storage, args)),
        ),
        (
            spec(
                SHARE_RESULT,
                format!(
                    "Publishes a value under `shared:<key>` in this run's memory, where other \
                     steps and agents of the run find it with list_shared and read_shared. \
                     Publishing a key again replaces its value. Only `shared:` is writable: a \
                     key in `step:`, `task:` or `input:` (which the run's executors own) is \
                     refused with code `{NAMESPACE_REFUSED}`. A value is at most \
                     {MAX_VALUE_BYTES} bytes of JSON. Answers the entry's metadata."
                ),
                Category::Write,
                json!({
                    "type": "object",
                    "properties": {
                        "key": {"type": "string", "minLength": 1, "description": "A name (`summary`), or `shared:summary`."},
                        "value": {"description": "Any JSON value."},
                        "title": {"type": "string", "description": "A short title list_shared shows."},
                        "description": {"type": "string", "description": "What the value is, for whoever lists it."}
                    },
                    "required": ["key", "value"],
                    "additionalProperties": false
                }),
                entry_meta(),
            ),
            |storage, args| Box::pin(share_result(storage, args)),
        ),
        (
            spec(
                SAVE_MEMORY,
                format!(
                    "Keeps a fact in durable memory, across runs and jobs, for query_memory to \
                     find later. Save one self-contained fact per memory, worded so it makes \
                     sense without this conversation (at most {MAX_TEXT_CHARS} characters). \
                     Answers the memory with its `id`."
                ),
                Category::Write,
                json!({
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS},
                        "agent": agent_schema()
                    },
                    "required": ["text"],
                    "additionalProperties": false
                }),
                memory(),
            ),
            |storage, args| Box::pin(save_memory(storage, args)),
        ),
        (
            spec(
                QUERY_MEMORY,
                "Searches durable memory by words, best match first: memories marked helpful \
                 rank higher, and outdated ones come after every current one. Each memory \
                 carries its `id` (for mark_memory_helpful / mark_memory_outdated) and a \
                 `score`."
                    .into(),
                Category::Read,
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "description": "Words to look for."},
                        "limit": limit_schema("memories"),
                        "agent": agent_schema()
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
                json!({
                    "type": "object",
                    "properties": {"memories": {"type": "array", "items": memory()}}
                }),
            ),
            |storage, args| Box::pin(query_memory(storage, args)),
        ),
        (
            memory_id_schema(
                MARK_MEMORY_HELPFUL,
                "Marks a memory as helpful after it helped: it ranks higher in later \
                 query_memory results. Answers the memory."
                    .into(),
            ),
            |storage, args| {
                Box::pin(mark_memory(
                    storage,
                    args,
                    MARK_MEMORY_HELPFUL,
                    Mark::Helpful,
                ))
            },
        ),
        (
            memory_id_schema(
                MARK_MEMORY_OUTDATED,
                "Marks a memory as outdated (no longer true): later query_memory results list \
                 it after every current memory. Save the corrected fact with save_memory. \
                 Answers the memory."
                    .into(),
            ),
            |storage, args| {
                Box::pin(mark_memory(
                    storage,
                    args,
                    MARK_MEMORY_OUTDATED,
                    Mark::Outdated,
                ))
            },
        ),
        (
            spec(
                SEARCH_HISTORY,
                "Searches past work by words, across every agent: jobs (program runs, chats, \
                 agents' jobs) and conversation messages, best match first. Each hit has its \
                 `kind` (`job` or `message`), `id` (the job's, or the message's thread), \
                 `title`, `agent` and the matching line as `excerpt`."
                    .into(),
                Category::Read,
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "description": "Words to look for."},
                        "limit": limit_schema("hits")
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
                json!({
                    "type": "object",
                    "properties": {
                        "hits": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "kind": {"type": "string", "enum": ["job", "message"]},
                                    "id": {"type": "string"},
                                    "agent": {"type": "string"},
                                    "title": {"type": "string"},
                                    "excerpt": {"type": "string"},
                                    "created_ms": {"type": "integer"},
                                    "score": {"type": "number"}
                                }
                            }
                        }
                    }
                }),
            ),
            |storage, args| Box::pin(search_history(storage, args)),
        ),
    ]
}

async fn list_shared(storage: Rc<Storage>, args: Value) -> ToolReply {
    let filter: ListFilter = arguments(LIST_SHARED, args)?;
    let entries = storage.run.list(&filter).await.map_err(store_failure)?;
    Ok(json!({ "entries": reply(&entries)? }))
}

#[derive(Deserialize)]
struct ReadShared {
    keys: Vec<String>,
}

async fn read_shared(storage: Rc<Storage>, args: Value) -> ToolReply {
    let ReadShared { keys } = arguments(READ_SHARED, args)?;
    let entries = storage.run.read(&keys).await.map_err(store_failure)?;
    let missing: Vec<&str> = entries
        .iter()
        .filter(|entry| entry.value.is_none())
        .map(|entry| entry.key.as_str())
        .collect();
    Ok(json!({ "entries": reply(&entries)?, "missing": missing }))
}

#[derive(Deserialize)]
struct ShareResult {
    key: String,
    value: Value,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: String,
}

async fn share_result(storage: Rc<Storage>, args: Value) -> ToolReply {
    let ShareResult {
        key,
        value,
        title,
        description,
    } = arguments(SHARE_RESULT, args)?;
    // The store refuses another namespace in its own words; the code says
    // which refusal it was.
    let foreign = key
        .split_once(':')
        .is_some_and(|(namespace, _)| namespace != "shared" && NAMESPACES.contains(&namespace));
    let published = storage
        .run
        .publish(&key, value, &title, &description)
        .await
        .map_err(|error| {
            if foreign {
                refined(NAMESPACE_REFUSED)(error)
            } else {
                store_failure(error)
            }
        })?;
    reply(&published)
}

/// The agent a call names, else the run's, else the default one: what
/// `save_memory` stores under is what `query_memory` finds. A run reaches its
/// own agent's memories and those the host granted it, no other.
fn whose(storage: &Storage, requested: Option<String>) -> Result<String, ToolFailure> {
    let own = Some(storage.agent.trim())
        .filter(|agent| !agent.is_empty())
        .unwrap_or(DEFAULT_AGENT);
    let Some(asked) = requested
        .as_deref()
        .map(str::trim)
        .filter(|agent| !agent.is_empty())
    else {
        return Ok(own.to_owned());
    };
    if asked == own
        || storage
            .granted_agents
            .iter()
            .any(|granted| granted == asked)
    {
        return Ok(asked.to_owned());
    }
    Err(agent_refused(
        storage,
        own,
        &format!("`agent` `{}` is not this run's agent", asked.escape_debug()),
    ))
}

/// The refusal of a memory call about another agent.
fn agent_refused(storage: &Storage, own: &str, what: &str) -> ToolFailure {
    let granted = if storage.granted_agents.is_empty() {
        String::new()
    } else {
        format!(" and of {}", storage.granted_agents.join(", "))
    };
    ToolFailure {
        code: AGENT_NOT_GRANTED.into(),
        message: format!(
            "{what}: a run reads, saves and marks only the memories of its own agent \
             (`{own}`){granted}"
        ),
        detail: None,
        outcome: CallOutcome::Refused,
    }
}

#[derive(Deserialize)]
struct SaveMemory {
    text: String,
    agent: Option<String>,
}

async fn save_memory(storage: Rc<Storage>, args: Value) -> ToolReply {
    let SaveMemory { text, agent } = arguments(SAVE_MEMORY, args)?;
    let memory = storage
        .memory
        .save(&whose(&storage, agent)?, &text)
        .await
        .map_err(store_failure)?;
    reply(&memory)
}

#[derive(Deserialize)]
struct Query {
    query: String,
    limit: Option<usize>,
    agent: Option<String>,
}

async fn query_memory(storage: Rc<Storage>, args: Value) -> ToolReply {
    let Query {
        query,
        limit,
        agent,
    } = arguments(QUERY_MEMORY, args)?;
    let memories = storage
        .memory
        .query(
            &query,
            Some(&whose(&storage, agent)?),
            limit.unwrap_or(DEFAULT_LIMIT),
        )
        .await
        .map_err(store_failure)?;
    Ok(json!({ "memories": reply(&memories)? }))
}

#[derive(Deserialize)]
struct MemoryId {
    memory_id: String,
}

async fn mark_memory(
    storage: Rc<Storage>,
    args: Value,
    tool: &'static str,
    mark: Mark,
) -> ToolReply {
    let MemoryId { memory_id } = arguments(tool, args)?;
    let found = storage
        .memory
        .get(&memory_id)
        .await
        .map_err(store_failure)?;
    if whose(&storage, Some(found.agent.clone())).is_err() {
        let own = whose(&storage, None)?;
        return Err(agent_refused(
            &storage,
            &own,
            &format!("memory `{memory_id}` is another agent's"),
        ));
    }
    let memory = storage
        .memory
        .mark(&memory_id, mark)
        .await
        .map_err(store_failure)?;
    reply(&memory)
}

async fn search_history(storage: Rc<Storage>, args: Value) -> ToolReply {
    let Query { query, limit, .. } = arguments(SEARCH_HISTORY, args)?;
    let hits = storage
        .history
        .search(&query, limit.unwrap_or(DEFAULT_LIMIT))
        .await
        .map_err(store_failure)?;
    Ok(json!({ "hits": reply(&hits)? }))
}
