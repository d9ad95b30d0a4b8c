//! Everything in one JSON document and back. Keys stay out unless the person
//! asks. An import reads and checks the whole document before it writes
//! anything, then writes every record in one transaction. [`clear`] deletes
//! everything instead.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::backend::{Backend, Expect, Op, Record, Scan, Table};
use crate::clock::epoch_ms;
use crate::error::StoreError;
use crate::files::{self, FileTree, WorkspacePath};
use crate::{SCHEMA_VERSION, config, durable, history, run};

/// The `format` field of an export.
pub const FORMAT: &str = "kiln-export";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// Put providers' API keys in the document.
    pub include_keys: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportRecord {
    pub key: String,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportFile {
    pub path: String,
    /// The bytes, base64.
    pub base64: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportDoc {
    pub format: String,
    pub schema: u32,
    #[serde(default)]
    pub exported_ms: u64,
    #[serde(default)]
    pub keys_included: bool,
    #[serde(default)]
    pub tables: BTreeMap<String, Vec<ExportRecord>>,
    #[serde(default)]
    pub files: Vec<ExportFile>,
}

/// What an import wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImportSummary {
    pub records: BTreeMap<String, usize>,
    pub files: usize,
}

/// Reads everything into one document.
pub async fn export(
    backend: &dyn Backend,
    tree: Option<&dyn FileTree>,
    options: ExportOptions,
) -> Result<ExportDoc, StoreError> {
    let mut tables = BTreeMap::new();
    for table in Table::ALL {
        let records = backend.scan(table, Scan::default()).await?;
        let exported = records
            .into_iter()
            // The vault's values are sealed by this browser's (or this
            // machine's keyring's) own key, which no export carries: a copy
            // elsewhere could not open them, nor use the key's name.
            .filter(|record| {
                !(table == Table::Config
                    && (record.key.starts_with("secret:")
                        || record.key == crate::vault::KEYRING_NAME_KEY))
            })
            .map(|Record { key, value, .. }| {
                let mut value = value;
                if table == Table::Config
                    && !options.include_keys
                    && key.starts_with("provider:")
                    && let Some(object) = value.as_object_mut()
                {
                    object.remove("key");
                }
                ExportRecord { key, value }
            })
            .collect();
        tables.insert(table.name().to_owned(), exported);
    }
    let mut exported_files = Vec::new();
    if let Some(tree) = tree {
        for file in files::walk(tree, &WorkspacePath::root(), usize::MAX).await? {
            let path = WorkspacePath::parse(&file.path)?;
            let bytes = tree.read(&path).await?;
            exported_files.push(ExportFile {
                path: file.path,
                base64: STANDARD.encode(bytes),
            });
        }
    }
    Ok(ExportDoc {
        format: FORMAT.into(),
        schema: SCHEMA_VERSION,
        exported_ms: epoch_ms(),
        keys_included: options.include_keys,
        tables,
        files: exported_files,
    })
}

fn invalid(table: &str, key: &str, why: impl std::fmt::Display) -> StoreError {
    StoreError::Invalid(format!(
        "the import's {table} record `{key}` is not valid: {why}; nothing was imported"
    ))
}

/// Checks one record read from an import.
fn check(table: Table, record: &ExportRecord) -> Result<(), StoreError> {
    let name = table.name();
    let key = record.key.as_str();
    let parse_err = |error: serde_json::Error| invalid(name, key, error);
    match table {
        Table::Memories => {
            let memory: durable::Memory =
                serde_json::from_value(record.value.clone()).map_err(parse_err)?;
            if memory.id != key {
                return Err(invalid(
                    name,
                    key,
                    format!("it holds memory `{}`", memory.id),
                ));
            }
            if memory.text.trim().is_empty()
                || memory.text.chars().count() > durable::MAX_TEXT_CHARS
            {
                return Err(invalid(name, key, "its text is empty or too long"));
            }
        }
        Table::RunEntries => {
            let (_, entry_key) = key.split_once('/').ok_or_else(|| {
                invalid(name, key, "the key is not `<run id>/<namespace>:<name>`")
            })?;
            run::parse_key(entry_key).map_err(|error| invalid(name, key, error))?;
            if record.value.get("value").is_none() {
                return Err(invalid(name, key, "it has no `value`"));
            }
            let _: run::EntryMeta =
                serde_json::from_value(record.value.clone()).map_err(parse_err)?;
        }
        Table::Threads => {
            let thread: history::Thread =
                serde_json::from_value(record.value.clone()).map_err(parse_err)?;
            if thread.id != key {
                return Err(invalid(
                    name,
                    key,
                    format!("it holds thread `{}`", thread.id),
                ));
            }
        }
        Table::Messages => {
            let message: history::ThreadMessage =
                serde_json::from_value(record.value.clone()).map_err(parse_err)?;
            if key != format!("{}/{:010}", message.thread_id, message.seq) {
                return Err(invalid(
                    name,
                    key,
                    "the key is not `<thread id>/<sequence>`",
                ));
            }
        }
        Table::Jobs => {
            let job: history::Job =
                serde_json::from_value(record.value.clone()).map_err(parse_err)?;
            if job.id != key {
                return Err(invalid(name, key, format!("it holds job `{}`", job.id)));
            }
        }
        Table::Config => {
            config::check_record(key, &record.value).map_err(|error| invalid(name, key, error))?
        }
    }
    Ok(())
}

/// Checks `doc` whole, then writes it: every record in one transaction
/// (a record with the same key is replaced), then the files. A provider
/// imported without its key keeps the key already stored.
pub async fn import(
    backend: &dyn Backend,
    tree: Option<&dyn FileTree>,
    doc: &Value,
) -> Result<ImportSummary, StoreError> {
    let doc: ExportDoc =
        serde_json::from_value(doc.clone()).map_err(|error| StoreError::NotAnExport {
            detail: error.to_string(),
        })?;
    if doc.format != FORMAT {
        return Err(StoreError::Invalid(format!(
            "the import's format is `{}`, not `{FORMAT}`; nothing was imported",
            doc.format
        )));
    }
    if doc.schema > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            name: "the import".into(),
            found: doc.schema,
            supported: SCHEMA_VERSION,
        });
    }
    let mut ops = Vec::new();
    let mut summary = ImportSummary::default();
    for (name, records) in &doc.tables {
        let table = Table::from_name(name).ok_or_else(|| {
            StoreError::Invalid(format!(
                "the import has a table `{name}` this Kiln does not keep; nothing was imported"
            ))
        })?;
        let mut keys = BTreeSet::new();
        for record in records {
            check(table, record)?;
            if !keys.insert(record.key.as_str()) {
                return Err(invalid(name, &record.key, "the key appears twice"));
            }
            let mut value = record.value.clone();
            if table == Table::Config
                && record.key.starts_with("provider:")
                && value.get("key").is_none()
                && let Some(existing) = backend.get(table, &record.key).await?
                && let (Some(key), Some(object)) =
                    (existing.value.get("key"), value.as_object_mut())
            {
                object.insert("key".into(), key.clone());
            }
            ops.push(Op::put(table, record.key.clone(), value, Expect::Any));
        }
        summary.records.insert(name.clone(), records.len());
    }
    let mut decoded = Vec::with_capacity(doc.files.len());
    if !doc.files.is_empty() && tree.is_none() {
        return Err(StoreError::Invalid(
            "the import has files but this store has no workspace files; nothing was imported"
                .into(),
        ));
    }
    for file in &doc.files {
        let path = WorkspacePath::parse(&file.path)?;
        if path.is_root() {
            return Err(StoreError::Invalid(
                "the import has a file with an empty path; nothing was imported".into(),
            ));
        }
        let bytes = STANDARD.decode(&file.base64).map_err(|error| {
            StoreError::Invalid(format!(
                "the import's file `{path}` is not base64 ({error}); nothing was imported"
            ))
        })?;
        decoded.push((path, bytes));
    }
    if !ops.is_empty() {
        backend.commit(ops).await?;
    }
    if let Some(tree) = tree {
        for (path, bytes) in decoded {
            tree.write(&path, bytes).await?;
            summary.files += 1;
        }
    }
    Ok(summary)
}

/// How many records per table, and files, [`clear`] removed.
pub type ClearSummary = ImportSummary;

/// Deletes everything the workspace keeps: every record of every table (API
/// keys included) and every file and folder. What another tab writes while
/// this runs stays.
///
/// # Errors
///
/// The store's error; what was removed before it stays removed.
pub async fn clear(
    backend: &dyn Backend,
    tree: Option<&dyn FileTree>,
) -> Result<ClearSummary, StoreError> {
    /// Deletes per transaction, so that a large table is not one huge batch.
    const BATCH: usize = 500;
    let mut summary = ClearSummary::default();
    for table in Table::ALL {
        let records = backend.scan(table, crate::backend::Scan::default()).await?;
        let mut removed = 0;
        for chunk in records.chunks(BATCH) {
            let ops = chunk
                .iter()
                .map(|record| {
                    Op::delete(table, record.key.clone(), Expect::Version(record.version))
                })
                .collect();
            match backend.commit(ops).await {
                Ok(_) => removed += chunk.len(),
                // Another tab changed one of them meanwhile: what it wrote stays.
                Err(StoreError::Conflict { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        summary.records.insert(table.name().to_owned(), removed);
    }
    if let Some(tree) = tree {
        // Deepest first: files, then the folders they leave empty.
        let mut folders = Vec::new();
        let mut pending = vec![WorkspacePath::root()];
        while let Some(folder) = pending.pop() {
            for entry in tree.list(&folder).await? {
                let path = WorkspacePath::parse(&entry.path)?;
                if entry.is_dir {
                    pending.push(path.clone());
                    folders.push(path);
                } else {
                    tree.remove(&path).await?;
                    summary.files += 1;
                }
            }
        }
        folders.sort_by_key(|path| std::cmp::Reverse(path.parts().count()));
        for folder in folders {
            tree.remove(&folder).await?;
        }
    }
    Ok(summary)
}
