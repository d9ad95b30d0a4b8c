//! The workspace's storage operations, as every entrance that is not a
//! program names them (`kiln.memory.save`, the app's panels): one verb
//! (`memory.save`, `files.read`, `export`, `threads.*` for the person's
//! conversations, `workspace.clear` to delete everything, …) with a JSON
//! object of arguments, answered with JSON. The runtime worker serves them over the
//! runtime protocol; the arguments are read here, once, with unknown fields
//! refused by name.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kiln_store::StoreError;
use kiln_store::config::Config;
use kiln_store::durable::{DurableMemory, Mark};
use kiln_store::export::{self, ExportOptions};
use kiln_store::files::{self, WorkspacePath};
use kiln_store::history::History;
use kiln_store::run::{ListFilter, RunMemory};
use kiln_store::skills::Skills;
use kiln_store::threads::Threads;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use kiln_run::Workspace;

use crate::settings;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The request itself was wrong: an unknown verb, a missing or
    /// unexpected argument, a bad path.
    #[error("{0}")]
    BadRequest(String),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<kiln_run::ProviderError> for OpError {
    fn from(error: kiln_run::ProviderError) -> Self {
        match error {
            kiln_run::ProviderError::Invalid(message) => Self::BadRequest(message),
            kiln_run::ProviderError::Store(error) => Self::Store(error),
        }
    }
}

fn bad_request(message: impl std::fmt::Display) -> OpError {
    OpError::BadRequest(message.to_string())
}

fn args<T: DeserializeOwned>(args: &Value) -> Result<T, OpError> {
    let args = if args.is_null() { &json!({}) } else { args };
    serde_json::from_value(args.clone()).map_err(bad_request)
}

fn path(text: &str) -> Result<WorkspacePath, OpError> {
    WorkspacePath::parse(text).map_err(bad_request)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SaveArgs {
    text: String,
    #[serde(default)]
    agent: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryArgs {
    query: String,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    id: String,
}

/// `threads.create`: a new thread titled after its first message.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateThreadArgs {
    first_message: String,
    #[serde(default)]
    agent: String,
}

/// `threads.append`: a message a page keeps in its own conversation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AppendArgs {
    id: String,
    role: String,
    text: String,
}

/// `threads.rename`, `threads.pin`, `threads.truncate`, `threads.fork`: a
/// thread and what changes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThreadArgs {
    id: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    pinned: Option<bool>,
    /// The message to cut or fork from.
    #[serde(default)]
    seq: Option<u64>,
}

impl ThreadArgs {
    fn needs<T>(field: Option<T>, op: &str, name: &str) -> Result<T, OpError> {
        field.ok_or_else(|| bad_request(format!("`{op}` needs `{name}`")))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkArgs {
    id: String,
    mark: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    id: String,
    version: u64,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveArgs {
    id: String,
    #[serde(default)]
    version: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    #[serde(default)]
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    base64: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RunListArgs {
    #[serde(default)]
    run_id: Option<String>,
}

/// `workspace.clear`: the words that say the person meant it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Confirm {
    confirm: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ExportArgs {
    #[serde(default)]
    include_keys: bool,
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Runs storage operation `op` with `request`, its arguments.
///
/// # Errors
///
/// [`OpError::BadRequest`] naming what in the request was wrong, or the
/// store's error.
pub async fn store_op(opened: &Workspace, op: &str, request: &Value) -> Result<Value, OpError> {
    let memory = DurableMemory::new(opened.backend.clone());
    let history = History::new(opened.backend.clone());
    let threads = Threads::new(opened.backend.clone());
    let config = Config::new(opened.backend.clone());
    let tree = &*opened.files;
    Ok(match op {
        "memory.save" => {
            let SaveArgs { text, agent } = args(request)?;
            to_value(&memory.save(&agent, &text).await?)
        }
        "memory.query" => {
            let QueryArgs {
                query,
                agent,
                limit,
            } = args(request)?;
            to_value(
                &memory
                    .query(&query, agent.as_deref(), limit.unwrap_or(10))
                    .await?,
            )
        }
        "memory.get" => {
            let IdArgs { id } = args(request)?;
            to_value(&memory.get(&id).await?)
        }
        "memory.list" => {
            let ListArgs { agent, limit } = args(request)?;
            to_value(&memory.list(agent.as_deref(), limit).await?)
        }
        "memory.mark" => {
            let MarkArgs { id, mark } = args(request)?;
            let mark: Mark = mark.parse().map_err(bad_request)?;
            to_value(&memory.mark(&id, mark).await?)
        }
        "memory.edit" => {
            let EditArgs { id, version, text } = args(request)?;
            to_value(&memory.edit(&id, version, &text).await?)
        }
        "memory.remove" => {
            let RemoveArgs { id, version } = args(request)?;
            memory.remove(&id, version).await?;
            Value::Null
        }
        "history.jobs" => {
            let ListArgs { limit, .. } = args(request)?;
            to_value(&history.jobs(limit.unwrap_or(50)).await?)
        }
        "history.job" => {
            let IdArgs { id } = args(request)?;
            to_value(&history.job(&id).await?)
        }
        "threads.list" => {
            let ListArgs { limit, agent } = args(request)?;
            if agent.is_some() {
                return Err(bad_request("`threads.list` takes only `limit`"));
            }
            to_value(&threads.list(limit.unwrap_or(500)).await?)
        }
        "threads.create" => {
            let CreateThreadArgs {
                first_message,
                agent,
            } = args(request)?;
            to_value(&threads.create(&first_message, &agent).await?)
        }
        "threads.open" => {
            let IdArgs { id } = args(request)?;
            to_value(&threads.open(&id).await?)
        }
        "threads.append" => {
            let AppendArgs { id, role, text } = args(request)?;
            let draft = kiln_store::threads::Draft {
                role,
                text,
                ..kiln_store::threads::Draft::default()
            };
            to_value(&threads.append(&id, draft).await?)
        }
        "threads.rename" => {
            let ThreadArgs { id, title, .. } = args(request)?;
            let title = ThreadArgs::needs(title, op, "title")?;
            to_value(&threads.rename(&id, &title).await?)
        }
        "threads.pin" => {
            let ThreadArgs { id, pinned, .. } = args(request)?;
            let pinned = ThreadArgs::needs(pinned, op, "pinned")?;
            to_value(&threads.pin(&id, pinned).await?)
        }
        "threads.delete" => {
            let IdArgs { id } = args(request)?;
            to_value(&threads.delete(&id).await?)
        }
        "threads.restore" => {
            let IdArgs { id } = args(request)?;
            to_value(&threads.restore(&id).await?)
        }
        "threads.truncate" => {
            let ThreadArgs { id, seq, .. } = args(request)?;
            let seq = ThreadArgs::needs(seq, op, "seq")?;
            to_value(&threads.truncate(&id, seq).await?)
        }
        "threads.fork" => {
            let ThreadArgs { id, seq, .. } = args(request)?;
            let seq = ThreadArgs::needs(seq, op, "seq")?;
            to_value(&threads.fork(&id, seq).await?)
        }
        "history.search" => {
            let SearchArgs { query, limit } = args(request)?;
            to_value(&history.search(&query, limit.unwrap_or(20)).await?)
        }
        "run.list" => {
            let RunListArgs { run_id } = args(request)?;
            let run_id = match run_id {
                Some(id) => id,
                None => match history.jobs(1).await?.into_iter().next() {
                    Some(job) => job.id,
                    None => return Ok(json!({"run_id": null, "entries": []})),
                },
            };
            let run = RunMemory::new(opened.backend.clone(), &run_id);
            let metas = run.list(&ListFilter::default()).await?;
            let keys: Vec<String> = metas.iter().map(|meta| meta.key.clone()).collect();
            let values = run.read(&keys).await?;
            let entries: Vec<Value> = metas
                .into_iter()
                .zip(values)
                .map(|(meta, read)| {
                    let mut entry = to_value(&meta);
                    if let Some(object) = entry.as_object_mut() {
                        object.insert("value".into(), read.value.unwrap_or(Value::Null));
                    }
                    entry
                })
                .collect();
            json!({"run_id": run_id, "entries": entries})
        }
        "files.read" => {
            let PathArgs { path: text } = args(request)?;
            let bytes = tree.read(&path(&text)?).await?;
            match String::from_utf8(bytes) {
                Ok(text) => json!({"text": text}),
                Err(bytes) => json!({"base64": STANDARD.encode(bytes.into_bytes())}),
            }
        }
        "files.write" => {
            let WriteArgs {
                path: text,
                text: content,
                base64,
            } = args(request)?;
            let bytes = match (content, base64) {
                (Some(content), None) => content.into_bytes(),
                (None, Some(encoded)) => STANDARD
                    .decode(encoded)
                    .map_err(|error| bad_request(format!("`base64` is not base64: {error}")))?,
                _ => return Err(bad_request("give exactly one of `text` and `base64`")),
            };
            if bytes.len() > files::MAX_FILE_BYTES {
                return Err(bad_request(format!(
                    "the file is {} bytes; at most {} are written",
                    bytes.len(),
                    files::MAX_FILE_BYTES
                )));
            }
            to_value(&tree.write(&path(&text)?, bytes).await?)
        }
        "files.list" => {
            let PathArgs { path: text } = args(request)?;
            to_value(&tree.list(&path(&text)?).await?)
        }
        "files.stat" => {
            let PathArgs { path: text } = args(request)?;
            to_value(&tree.stat(&path(&text)?).await?)
        }
        "files.mkdir" => {
            let PathArgs { path: text } = args(request)?;
            tree.mkdir(&path(&text)?).await?;
            Value::Null
        }
        "files.remove" => {
            let PathArgs { path: text } = args(request)?;
            tree.remove(&path(&text)?).await?;
            Value::Null
        }
        "config.get" => to_value(&settings::view(&config).await?),
        "config.permissions" => {
            settings::set_permissions(&config, args(request)?).await?;
            Value::Null
        }
        "config.team_changes" => {
            settings::set_team_changes(&config, args(request)?).await?;
            Value::Null
        }
        "config.web_search" => {
            settings::set_web_search(&config, args(request)?).await?;
            Value::Null
        }
        "config.network" => {
            settings::set_network(&config, args(request)?).await?;
            Value::Null
        }
        "config.provider.put" => {
            let version = settings::put_provider(&config, args(request)?).await?;
            json!({"version": version})
        }
        "config.provider.remove" => {
            settings::remove_provider(&config, args(request)?).await?;
            Value::Null
        }
        "config.select" => {
            settings::set_selection(&config, args(request)?).await?;
            Value::Null
        }
        "graphs.list" => to_value(&config.graphs().await?),
        "graphs.put" => {
            let record: kiln_store::config::GraphRecord = args(request)?;
            if !record.nodes.is_empty() {
                let spec = kiln_types::node::GraphSpec {
                    nodes: record.nodes.clone(),
                    edges: record.edges.clone(),
                };
                kiln_nodes::build_graph(spec).map_err(|issues| {
                    OpError::BadRequest(format!(
                        "graph `{}` was not saved: {}",
                        record.name,
                        issues.join("; ")
                    ))
                })?;
            }
            json!({"version": config.put_graph(&record).await?})
        }
        "graphs.remove" => {
            let RemoveGraphArgs { name, version } = args(request)?;
            config.remove_graph(&name, version).await?;
            Value::Null
        }
        "agents.list" => to_value(&config.agents().await?),
        "agents.get" => {
            let SlugArgs { slug } = args(request)?;
            match config.agent(&slug).await? {
                Some(agent) => to_value(&agent),
                None => return Err(bad_request(settings::no_agent(&config, &slug).await?)),
            }
        }
        "agents.put" => json!({"version": settings::put_agent(&config, args(request)?).await?}),
        "agents.remove" => {
            let RemoveAgentArgs { slug, version } = args(request)?;
            config.remove_agent(&slug, version).await?;
            Value::Null
        }
        "skills.list" => to_value(&Skills::new(Some(config.clone())).list().await?),
        "skills.get" => {
            let NameArgs { name } = args(request)?;
            let skills = Skills::new(Some(config.clone()));
            match skills.get(&name).await? {
                Some(skill) => to_value(&skill),
                None => {
                    return Err(bad_request(format!(
                        "there is no skill `{name}`; the skills are {}",
                        skills
                            .list()
                            .await?
                            .iter()
                            .map(|skill| format!("`{}`", skill.record.name))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
        }
        "skills.put" => {
            let PutSkillArgs { skill, replacing } = args(request)?;
            let skills = Skills::new(Some(config.clone()));
            let version = match replacing {
                Some(name) => skills.update(&name, &skill).await?,
                None if skill.version == 0 => skills.create(&skill).await?,
                None => skills.update(&skill.name.clone(), &skill).await?,
            };
            json!({"version": version})
        }
        "skills.remove" => {
            let RemoveSkillArgs { name, version } = args(request)?;
            Skills::new(Some(config.clone()))
                .delete(&name, version)
                .await?;
            Value::Null
        }
        "schedules.list" => {
            let now = kiln_store::clock::epoch_ms();
            let mut listed = Vec::new();
            for schedule in config.schedules().await? {
                let cadence = kiln_agent::Cadence::of(&schedule);
                let firings = config.firings(&schedule.id).await?;
                listed.push(json!({
                    "schedule": schedule,
                    "when": cadence.as_ref().map(kiln_agent::Cadence::describe).ok(),
                    "problem": cadence.as_ref().err(),
                    "next_ms": cadence.ok().and_then(|c| c.next_after(now.max(schedule.since_ms))),
                    "firings": firings.into_iter().take(10).collect::<Vec<_>>(),
                }));
            }
            Value::Array(listed)
        }
        "schedules.put" => {
            let mut schedule: kiln_types::schedule::ScheduleRecord = args(request)?;
            kiln_agent::Cadence::of(&schedule).map_err(OpError::BadRequest)?;
            if config.agent(&schedule.agent).await?.is_none() {
                return Err(bad_request(
                    settings::no_agent(&config, &schedule.agent).await?,
                ));
            }
            if schedule.version == 0 {
                // Occurrences before it was made are not due.
                schedule.since_ms = kiln_store::clock::epoch_ms();
            }
            json!({"version": config.put_schedule(&schedule).await?})
        }
        "schedules.remove" => {
            let RemoveScheduleArgs { id, version } = args(request)?;
            config.remove_schedule(&id, version).await?;
            Value::Null
        }
        "config.code_model" => {
            settings::set_code_model(&config, args(request)?).await?;
            Value::Null
        }
        "config.turn_limits" => {
            settings::set_turn_limits(&config, args(request)?).await?;
            Value::Null
        }
        "export" => {
            let ExportArgs { include_keys } = args(request)?;
            let doc = export::export(&*opened.backend, Some(tree), ExportOptions { include_keys })
                .await?;
            to_value(&doc)
        }
        "import" => to_value(&export::import(&*opened.backend, Some(tree), request).await?),
        "workspace.clear" => {
            let Confirm { confirm } = args(request)?;
            if confirm != "delete everything" {
                return Err(bad_request(
                    "`workspace.clear` deletes every record and file: send {confirm: \"delete everything\"}",
                ));
            }
            to_value(&export::clear(&*opened.backend, Some(tree)).await?)
        }
        other => {
            return Err(bad_request(format!("`{other}` is not a storage operation")));
        }
    })
}

/// `graphs.remove`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveGraphArgs {
    name: String,
    version: u64,
}

/// The vault's operations: `secrets.list` (names, origins, agents, when set
/// and last used; never a value), `secrets.put` (a [`SecretPut`]: a value
/// written once, or settings changed with the value kept) and
/// `secrets.remove {name, version}`.
///
/// [`SecretPut`]: kiln_types::vault::SecretPut
pub async fn vault_op(
    vault: &kiln_store::vault::Vault,
    op: &str,
    request: &Value,
) -> Result<Value, OpError> {
    Ok(match op {
        "secrets.list" => to_value(&vault.list().await?),
        "secrets.put" => {
            let change: kiln_types::vault::SecretPut = args(request)?;
            change.check().map_err(OpError::BadRequest)?;
            json!({"version": vault.put(&change, kiln_store::clock::epoch_ms()).await?})
        }
        "secrets.remove" => {
            let RemoveSkillArgs { name, version } = args(request)?;
            vault.remove(&name, version).await?;
            Value::Null
        }
        other => {
            return Err(bad_request(format!("`{other}` is not a vault operation")));
        }
    })
}

/// `schedules.remove`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveScheduleArgs {
    id: String,
    version: u64,
}

/// `skills.get`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    name: String,
}

/// `skills.put`'s arguments: the skill (version 0: a new one), and the name
/// it had when it is renamed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PutSkillArgs {
    skill: kiln_types::skill::SkillRecord,
    #[serde(default)]
    replacing: Option<String>,
}

/// `skills.remove`'s and `secrets.remove`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveSkillArgs {
    name: String,
    version: u64,
}

/// `agents.get`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SlugArgs {
    slug: String,
}

/// `agents.remove`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveAgentArgs {
    slug: String,
    version: u64,
}
