//! The workspace file capabilities: `file_read`, `file_write`, `file_edit`,
//! `file_list`, `file_search`, `file_stat`, `file_mkdir`, `file_remove`. The
//! last six back a program's `workspace` object (`kiln-sandbox`), one call
//! each.
//!
//! Every path goes through `WorkspacePath::parse` before the tree sees it: a
//! path that could leave the workspace (absolute, a drive letter, `..`) is
//! refused by name with code `path_refused`, and nothing is read or written.

use std::rc::Rc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kiln_store::files::{
    self, MAX_FILE_BYTES, MAX_MATCHES, MAX_SEARCHED_BYTES, MAX_SEARCHED_FILES, WorkspacePath,
};
use kiln_types::BYTES_KEY;
use kiln_types::tool_result::{ToolFailure, ToolReply};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::spec::{CapabilitySpec, Category};
use crate::storage::{
    FILE_TOO_LARGE, Handler, MAX_RUN_SEARCHED_BYTES, NOT_TEXT, PATH_REFUSED, Storage, arguments,
    failure, refined, reply, spec, store_failure,
};

pub const FILE_READ: &str = "file_read";
pub const FILE_WRITE: &str = "file_write";
pub const FILE_EDIT: &str = "file_edit";
pub const FILE_LIST: &str = "file_list";
pub const FILE_SEARCH: &str = "file_search";
pub const FILE_STAT: &str = "file_stat";
pub const FILE_MKDIR: &str = "file_mkdir";
pub const FILE_REMOVE: &str = "file_remove";

/// How file content travels as a JSON string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Encoding {
    #[default]
    Utf8,
    Base64,
}

impl Encoding {
    fn as_str(self) -> &'static str {
        match self {
            Self::Utf8 => "utf8",
            Self::Base64 => "base64",
        }
    }
}

fn path_schema(what: &str) -> Value {
    json!({
        "type": "string",
        "description": format!(
            "{what}, relative to the workspace root and separated by `/` (`notes/todo.md`). \
             `..`, absolute paths and drive letters are refused (`{PATH_REFUSED}`)."
        )
    })
}

fn encoding_schema() -> Value {
    json!({
        "type": "string",
        "enum": ["utf8", "base64"],
        "default": "utf8",
        "description": "`utf8` for text (the default), `base64` for any bytes."
    })
}

fn stat_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "exists": {"type": "boolean"},
            "is_file": {"type": "boolean"},
            "is_dir": {"type": "boolean"},
            "size": {"type": "integer", "description": "Bytes; 0 for a folder."},
            "modified_ms": {"type": ["integer", "null"], "description": "Last write, ms since the epoch, when known."}
        }
    })
}

fn one_path(
    name: &str,
    description: String,
    category: Category,
    what: &str,
    result: Value,
) -> CapabilitySpec {
    spec(
        name,
        description,
        category,
        json!({
            "type": "object",
            "properties": {"path": path_schema(what)},
            "required": ["path"],
            "additionalProperties": false
        }),
        result,
    )
}

/// The file capabilities' specs and handlers.
pub(crate) fn table() -> Vec<(CapabilitySpec, Handler)> {
    vec![
        (
            spec(
                FILE_READ,
                format!(
                    "Reads one file of the workspace. Text by default; a file that is not UTF-8 \
                     text is refused (`{NOT_TEXT}`): read it with `encoding: \"base64\"`. \
                     Answers `{{path, content, size, encoding}}` (`size` in bytes)."
                ),
                Category::Read,
                json!({
                    "type": "object",
                    "properties": {
                        "path": path_schema("The file"),
                        "encoding": encoding_schema()
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "content": {"type": "string"},
                        "size": {"type": "integer"},
                        "encoding": {"type": "string", "enum": ["utf8", "base64"]}
                    }
                }),
            ),
            |storage, args| Box::pin(file_read(storage, args)),
        ),
        (
            spec(
                FILE_WRITE,
                format!(
                    "Creates or replaces one file of the workspace with `content`, making its \
                     folders. The replace is whole: the old content is gone. `content` is text, \
                     or base64 with `encoding: \"base64\"` (or bytes, from a program's \
                     Uint8Array). At most {MAX_FILE_BYTES} bytes (`{FILE_TOO_LARGE}` past \
                     that). Answers the file's stat. To change part of a text file, use \
                     file_edit."
                ),
                Category::Write,
                json!({
                    "type": "object",
                    "properties": {
                        "path": path_schema("The file"),
                        "content": {
                            "anyOf": [
                                {"type": "string"},
                                {"type": "object", "properties": {BYTES_KEY: {"type": "string"}}, "required": [BYTES_KEY], "additionalProperties": false}
                            ]
                        },
                        "encoding": encoding_schema()
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
                stat_schema(),
            ),
            |storage, args| Box::pin(file_write(storage, args)),
        ),
        (
            spec(
                FILE_EDIT,
                "Replaces exact text in one text file of the workspace: `old_text` must occur \
                 exactly once (give more surrounding text to pick one), or set `replace_all` \
                 to replace every occurrence. Answers `{path, replaced}` (how many were \
                 replaced)."
                    .into(),
                Category::Write,
                json!({
                    "type": "object",
                    "properties": {
                        "path": path_schema("The file"),
                        "old_text": {"type": "string", "minLength": 1, "description": "The exact text to replace, whitespace included."},
                        "new_text": {"type": "string"},
                        "replace_all": {"type": "boolean", "default": false}
                    },
                    "required": ["path", "old_text", "new_text"],
                    "additionalProperties": false
                }),
                json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "replaced": {"type": "integer"}}
                }),
            ),
            |storage, args| Box::pin(file_edit(storage, args)),
        ),
        (
            spec(
                FILE_LIST,
                "Lists one folder of the workspace (the root when `path` is left out): folders \
                 first, then files, by name. Answers `{path, entries}`, each entry \
                 `{name, path, is_dir, size, modified_ms}`. Not recursive: use file_search to \
                 look through a tree."
                    .into(),
                Category::Read,
                json!({
                    "type": "object",
                    "properties": {"path": path_schema("The folder (the root when left out or empty)")},
                    "additionalProperties": false
                }),
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "entries": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "name": {"type": "string"},
                                    "path": {"type": "string"},
                                    "is_dir": {"type": "boolean"},
                                    "size": {"type": "integer"},
                                    "modified_ms": {"type": ["integer", "null"]}
                                }
                            }
                        }
                    }
                }),
            ),
            |storage, args| Box::pin(file_list(storage, args)),
        ),
        (
            spec(
                FILE_SEARCH,
                format!(
                    "Finds the lines holding `pattern` (plain text, case-insensitive, not a \
                     regular expression) in the text files under a folder of the workspace \
                     (the root when `path` is left out). Answers `{{matches, truncated}}`, \
                     each match `{{path, line, text}}` (1-based line); at most {MAX_MATCHES} \
                     matches, {MAX_SEARCHED_FILES} files and {} MiB read per search, and {} MiB \
                     per run (`note` says where a search stopped).",
                    MAX_SEARCHED_BYTES >> 20,
                    MAX_RUN_SEARCHED_BYTES >> 20
                ),
                Category::Read,
                json!({
                    "type": "object",
                    "properties": {
                        "pattern": {"type": "string", "minLength": 1},
                        "path": path_schema("The folder to search (the root when left out)")
                    },
                    "required": ["pattern"],
                    "additionalProperties": false
                }),
                json!({
                    "type": "object",
                    "properties": {
                        "matches": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"path": {"type": "string"}, "line": {"type": "integer"}, "text": {"type": "string"}}
                            }
                        },
                        "truncated": {"type": "boolean"},
                        "note": {"type": "string"}
                    }
                }),
            ),
            |storage, args| Box::pin(file_search(storage, args)),
        ),
        (
            one_path(
                FILE_STAT,
                "Says whether a path of the workspace exists and what it is: \
                 `{path, exists, is_file, is_dir, size, modified_ms}`. A missing path is \
                 `exists: false`, not an error."
                    .into(),
                Category::Read,
                "The file or folder",
                stat_schema(),
            ),
            |storage, args| Box::pin(file_stat(storage, args)),
        ),
        (
            one_path(
                FILE_MKDIR,
                "Makes a folder of the workspace and any folders above it; a folder that \
                 already exists is fine. Answers the folder's stat."
                    .into(),
                Category::Write,
                "The folder",
                stat_schema(),
            ),
            |storage, args| Box::pin(file_mkdir(storage, args)),
        ),
        (
            one_path(
                FILE_REMOVE,
                "Removes one file, or one empty folder, of the workspace. A folder that still \
                 holds anything is refused: remove what is inside first (a tree is never \
                 removed at once). Answers `{path, removed: true}`."
                    .into(),
                Category::Write,
                "The file or empty folder",
                json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "removed": {"type": "boolean"}}
                }),
            ),
            |storage, args| Box::pin(file_remove(storage, args)),
        ),
    ]
}

/// `input` as a contained path, or refused by name.
fn contained(input: &str) -> Result<WorkspacePath, ToolFailure> {
    WorkspacePath::parse(input).map_err(refined(PATH_REFUSED))
}

/// Refuses content past [`MAX_FILE_BYTES`], naming its size.
fn check_size(path: &WorkspacePath, size: u64) -> Result<(), ToolFailure> {
    if size <= MAX_FILE_BYTES as u64 {
        return Ok(());
    }
    Err(failure(
        FILE_TOO_LARGE,
        format!(
            "`{path}` was not written: its content would be {size} bytes, and a workspace file \
             holds at most {MAX_FILE_BYTES} bytes (16 MiB)"
        ),
    ))
}

#[derive(Deserialize)]
struct Read {
    path: String,
    #[serde(default)]
    encoding: Encoding,
}

async fn file_read(storage: Rc<Storage>, args: Value) -> ToolReply {
    let Read { path, encoding } = arguments(FILE_READ, args)?;
    let path = contained(&path)?;
    let bytes = storage.files.read(&path).await.map_err(store_failure)?;
    let size = bytes.len();
    let content = match encoding {
        Encoding::Base64 => STANDARD.encode(&bytes),
        Encoding::Utf8 => String::from_utf8(bytes).map_err(|error| {
            failure(
                NOT_TEXT,
                format!(
                    "`{path}` is not UTF-8 text (byte {} is not)\nhint: read it with `encoding: \"base64\"`",
                    error.utf8_error().valid_up_to()
                ),
            )
        })?,
    };
    Ok(json!({
        "path": path.as_str(),
        "content": content,
        "size": size,
        "encoding": encoding.as_str(),
    }))
}

/// `content` as the guest sent it: text, or bytes from a `Uint8Array`.
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Bytes {
        #[serde(rename = "$bytes")]
        bytes: String,
    },
}

#[derive(Deserialize)]
struct Write {
    path: String,
    content: Content,
    #[serde(default)]
    encoding: Encoding,
}

fn decode(text: &str) -> Result<Vec<u8>, ToolFailure> {
    STANDARD.decode(text).map_err(|error| {
        failure(
            "invalid_arguments",
            format!("{FILE_WRITE}: `content` is not base64 ({error})"),
        )
    })
}

async fn file_write(storage: Rc<Storage>, args: Value) -> ToolReply {
    let Write {
        path,
        content,
        encoding,
    } = arguments(FILE_WRITE, args)?;
    let path = contained(&path)?;
    let bytes = match (content, encoding) {
        (Content::Text(text), Encoding::Utf8) => text.into_bytes(),
        (Content::Text(text), Encoding::Base64) => decode(&text)?,
        (Content::Bytes { bytes }, _) => decode(&bytes)?,
    };
    check_size(&path, bytes.len() as u64)?;
    let stat = storage
        .files
        .write(&path, bytes)
        .await
        .map_err(store_failure)?;
    reply(&stat)
}

#[derive(Deserialize)]
struct Edit {
    path: String,
    old_text: String,
    new_text: String,
    #[serde(default)]
    replace_all: bool,
}

async fn file_edit(storage: Rc<Storage>, args: Value) -> ToolReply {
    let Edit {
        path,
        old_text,
        new_text,
        replace_all,
    } = arguments(FILE_EDIT, args)?;
    let path = contained(&path)?;
    let tree = storage.files.as_ref();
    // Only an edit that grows the file can pass the size bound.
    if new_text.len() > old_text.len() {
        let text = files::read_text(tree, &path).await.map_err(store_failure)?;
        let count = text.matches(old_text.as_str()).count();
        let replaced = if replace_all { count } else { count.min(1) };
        // In 64 bits: on wasm32 the growth of many replacements overflows a
        // `usize` and would pass the bound (then ask the heap for gigabytes).
        let grown = (replaced as u64).saturating_mul((new_text.len() - old_text.len()) as u64);
        check_size(&path, (text.len() as u64).saturating_add(grown))?;
    }
    let replaced = files::edit(tree, &path, &old_text, &new_text, replace_all)
        .await
        .map_err(store_failure)?;
    Ok(json!({ "path": path.as_str(), "replaced": replaced }))
}

#[derive(Deserialize)]
struct OptionalPath {
    #[serde(default)]
    path: String,
}

async fn file_list(storage: Rc<Storage>, args: Value) -> ToolReply {
    let OptionalPath { path } = arguments(FILE_LIST, args)?;
    let path = contained(&path)?;
    let entries = storage.files.list(&path).await.map_err(store_failure)?;
    Ok(json!({ "path": path.as_str(), "entries": reply(&entries)? }))
}

#[derive(Deserialize)]
struct Search {
    pattern: String,
    #[serde(default)]
    path: String,
}

async fn file_search(storage: Rc<Storage>, args: Value) -> ToolReply {
    let Search { pattern, path } = arguments(FILE_SEARCH, args)?;
    let path = contained(&path)?;
    if storage.search_budget.get() == 0 {
        return Err(failure(
            "search_budget_exhausted",
            format!(
                "file_search has read {} MiB in this run, all it may: search a narrower `path`, \
                 or read the files you need with file_read",
                MAX_RUN_SEARCHED_BYTES >> 20
            ),
        ));
    }
    let searched = files::search_within(
        storage.files.as_ref(),
        &path,
        &pattern,
        &storage.search_budget,
    )
    .await
    .map_err(store_failure)?;
    let note = match searched.stopped {
        None | Some("matches") => None,
        Some("files") => Some(format!(
            "only the first {MAX_SEARCHED_FILES} files were searched; search a narrower `path`"
        )),
        Some("bytes") => Some(format!(
            "the search stopped after {} MiB, the most one search reads; search a narrower `path`",
            MAX_SEARCHED_BYTES >> 20
        )),
        Some(_) => Some(format!(
            "the search stopped at this run's file_search budget of {} MiB",
            MAX_RUN_SEARCHED_BYTES >> 20
        )),
    };
    let mut answer = json!({
        "truncated": searched.stopped.is_some(),
        "matches": reply(&searched.matches)?,
    });
    if let Some(note) = note {
        answer["note"] = Value::String(note);
    }
    Ok(answer)
}

#[derive(Deserialize)]
struct OnePath {
    path: String,
}

async fn file_stat(storage: Rc<Storage>, args: Value) -> ToolReply {
    let OnePath { path } = arguments(FILE_STAT, args)?;
    let path = contained(&path)?;
    let stat = storage.files.stat(&path).await.map_err(store_failure)?;
    reply(&stat)
}

async fn file_mkdir(storage: Rc<Storage>, args: Value) -> ToolReply {
    let OnePath { path } = arguments(FILE_MKDIR, args)?;
    let path = contained(&path)?;
    storage.files.mkdir(&path).await.map_err(store_failure)?;
    let stat = storage.files.stat(&path).await.map_err(store_failure)?;
    reply(&stat)
}

async fn file_remove(storage: Rc<Storage>, args: Value) -> ToolReply {
    let OnePath { path } = arguments(FILE_REMOVE, args)?;
    let path = contained(&path)?;
    storage.files.remove(&path).await.map_err(store_failure)?;
    Ok(json!({ "path": path.as_str(), "removed": true }))
}
