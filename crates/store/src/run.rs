//! Run memory: one per run, shared by everything under it. Keys live in four
//! namespaces: `step:<id>` and `task:<id>` (results the executors write),
//! `input:<name>` (what the caller supplied) and `shared:<name>` (what agents
//! publish with `share_result`). Values are pulled (list metadata, then read
//! the keys wanted), never pushed into prompts.

use std::rc::Rc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::backend::{Backend, Change, Expect, Listener, Op, Record, Scan, Subscription, Table};
use crate::clock::epoch_ms;
use crate::error::StoreError;
pub use kiln_types::records::EntryMeta;

/// The namespaces, in the order lists show them.
pub const NAMESPACES: [&str; 4] = ["step", "task", "input", "shared"];
/// The largest value one entry holds, as JSON bytes.
pub const MAX_VALUE_BYTES: usize = 1024 * 1024;
/// The longest name after the namespace.
pub const MAX_NAME_CHARS: usize = 200;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct StoredEntry {
    #[serde(flatten)]
    meta: EntryMeta,
    value: Value,
}

/// What a writer says about a value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Describe {
    pub title: String,
    pub description: String,
    /// Empty: the namespace's own kind.
    pub kind: String,
}

/// Which entries `list` answers. Every field narrows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ListFilter {
    #[serde(default)]
    pub namespace: Option<String>,
    /// Keys starting with this (namespace included: `step:fetch`).
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
}

/// A read's answer for one key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadEntry {
    pub key: String,
    /// `None` when the run has no such key.
    pub value: Option<Value>,
}

/// Splits and checks `namespace:name`.
pub fn parse_key(key: &str) -> Result<(&str, &str), StoreError> {
    let Some((namespace, name)) = key.split_once(':') else {
        return Err(StoreError::Invalid(format!(
            "run memory key `{key}` has no namespace; keys are `step:`, `task:`, `input:` or `shared:` followed by a name"
        )));
    };
    if !NAMESPACES.contains(&namespace) {
        return Err(StoreError::Invalid(format!(
            "run memory key `{key}` is in namespace `{namespace}:`; the namespaces are `step:`, `task:`, `input:` and `shared:`"
        )));
    }
    check_name(key, name)?;
    Ok((namespace, name))
}

fn check_name(key: &str, name: &str) -> Result<(), StoreError> {
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(StoreError::Invalid(format!(
            "run memory key `{key}` needs a name of 1 to {MAX_NAME_CHARS} characters with no control characters"
        )));
    }
    Ok(())
}

fn default_kind(namespace: &str) -> &'static str {
    match namespace {
        "step" => "step_result",
        "task" => "task_result",
        "input" => "input",
        _ => "shared",
    }
}

/// Told the keys of a run as they are written.
pub type KeyListener = Rc<dyn Fn(&[String])>;

/// The run memory of one run.
#[derive(Clone)]
pub struct RunMemory {
    backend: Rc<dyn Backend>,
    run_id: String,
    prefix: String,
}

impl RunMemory {
    #[must_use]
    pub fn new(backend: Rc<dyn Backend>, run_id: &str) -> Self {
        Self {
            backend,
            run_id: run_id.to_owned(),
            prefix: format!("{run_id}/"),
        }
    }

    #[must_use]
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Writes `key` (any namespace: for the executors that own them).
    /// Rewriting a key replaces its value.
    pub async fn set(
        &self,
        key: &str,
        value: Value,
        describe: Describe,
    ) -> Result<EntryMeta, StoreError> {
        let (namespace, _) = parse_key(key)?;
        // Deeper, the record around it could not be read back (issue 15 #9).
        kiln_types::check_depth(&value).map_err(|problem| {
            StoreError::Invalid(format!("the value for run memory key `{key}` {problem}"))
        })?;
        let bytes = serde_json::to_string(&value).map_or(0, |json| json.len());
        if bytes > MAX_VALUE_BYTES {
            return Err(StoreError::Invalid(format!(
                "the value for run memory key `{key}` is {bytes} bytes as JSON; at most {MAX_VALUE_BYTES} are kept"
            )));
        }
        let meta = EntryMeta {
            key: key.to_owned(),
            title: describe.title,
            description: describe.description,
            kind: if describe.kind.is_empty() {
                default_kind(namespace).to_owned()
            } else {
                describe.kind
            },
            bytes: bytes as u64,
            created_ms: epoch_ms(),
        };
        let stored = StoredEntry {
            meta: meta.clone(),
            value,
        };
        let value =
            serde_json::to_value(stored).map_err(|error| StoreError::Invalid(error.to_string()))?;
        self.backend
            .commit(vec![Op::put(
                Table::RunEntries,
                format!("{}{key}", self.prefix),
                value,
                Expect::Any,
            )])
            .await?;
        Ok(meta)
    }

    /// `share_result`: publishes `name` under `shared:`. A name that carries
    /// another namespace is refused by name: agents cannot spoof step, task
    /// or input results.
    pub async fn publish(
        &self,
        name: &str,
        value: Value,
        title: &str,
        description: &str,
    ) -> Result<EntryMeta, StoreError> {
        let name = match name.split_once(':') {
            Some(("shared", rest)) => rest,
            Some((namespace, _)) if NAMESPACES.contains(&namespace) => {
                return Err(StoreError::Invalid(format!(
                    "share_result publishes only under `shared:`; `{name}` is in `{namespace}:`, which the run's executors own"
                )));
            }
            _ => name,
        };
        let key = format!("shared:{name}");
        check_name(&key, name)?;
        self.set(
            &key,
            value,
            Describe {
                title: title.to_owned(),
                description: description.to_owned(),
                kind: String::new(),
            },
        )
        .await
    }

    /// Metadata of the entries `filter` lets through, in namespace order then key order.
    pub async fn list(&self, filter: &ListFilter) -> Result<Vec<EntryMeta>, StoreError> {
        if let Some(namespace) = &filter.namespace
            && !NAMESPACES.contains(&namespace.trim_end_matches(':'))
        {
            return Err(StoreError::Invalid(format!(
                "`{namespace}` is not a namespace; the namespaces are `step`, `task`, `input` and `shared`"
            )));
        }
        let records = self
            .backend
            .scan(
                Table::RunEntries,
                Scan {
                    prefix: &self.prefix,
                    ..Scan::default()
                },
            )
            .await?;
        let mut entries = Vec::new();
        for record in records {
            let entry = self.entry(record)?;
            let meta = entry.meta;
            let (namespace, _) = meta.key.split_once(':').unwrap_or(("", ""));
            let keep = filter
                .namespace
                .as_deref()
                .is_none_or(|wanted| wanted.trim_end_matches(':') == namespace)
                && filter
                    .prefix
                    .as_deref()
                    .is_none_or(|prefix| meta.key.starts_with(prefix))
                && filter.kind.as_deref().is_none_or(|kind| meta.kind == kind);
            if keep {
                entries.push(meta);
            }
        }
        entries.sort_by_key(|meta| {
            let namespace = meta.key.split(':').next().unwrap_or("");
            (
                NAMESPACES
                    .iter()
                    .position(|n| *n == namespace)
                    .unwrap_or(NAMESPACES.len()),
                meta.key.clone(),
            )
        });
        Ok(entries)
    }

    /// The values of `keys`, in order; a key the run does not have reads `None`.
    pub async fn read(&self, keys: &[String]) -> Result<Vec<ReadEntry>, StoreError> {
        let mut read = Vec::with_capacity(keys.len());
        for key in keys {
            parse_key(key)?;
            let value = match self
                .backend
                .get(Table::RunEntries, &format!("{}{key}", self.prefix))
                .await?
            {
                Some(record) => Some(self.entry(record)?.value),
                None => None,
            };
            read.push(ReadEntry {
                key: key.clone(),
                value,
            });
        }
        Ok(read)
    }

    /// Calls `listener` with the keys of this run written from now on.
    pub fn subscribe(&self, listener: KeyListener) -> Subscription {
        let prefix = self.prefix.clone();
        let feed: Listener = Rc::new(move |changes: &[Change]| {
            let keys: Vec<String> = changes
                .iter()
                .filter(|change| change.table == Table::RunEntries)
                .filter_map(|change| change.key.strip_prefix(&prefix).map(str::to_owned))
                .collect();
            if !keys.is_empty() {
                listener(&keys);
            }
        });
        self.backend.subscribe(feed)
    }

    fn entry(&self, record: Record) -> Result<StoredEntry, StoreError> {
        serde_json::from_value(record.value).map_err(|error| StoreError::Corrupt {
            place: format!("run memory entry `{}`", record.key),
            detail: error.to_string(),
            hint: None,
        })
    }
}
