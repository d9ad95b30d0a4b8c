//! The page API's storage: one workspace's IndexedDB database and OPFS
//! folder, opened by `Kiln.load`, reached through `kiln.store(op, args)`
//! (which `kiln.js` spreads into `kiln.memory`, `kiln.files`, `kiln.history`,
//! `kiln.runMemory`, `kiln.config`, `kiln.exportAll`, `kiln.importAll`) and
//! `kiln.onChange(callback)`; and what every `kiln.run` gets from it: a job
//! record in the history, its own run memory, and the memory, history and
//! file capabilities (so `workspace.*` works in programs).

use std::rc::Rc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use js_sys::{Function, Promise, Reflect};
use kiln_agent::Workspace;
use kiln_store::backend::{Backend, Change};
use kiln_store::config::Config;
use kiln_store::durable::{DurableMemory, Mark};
use kiln_store::export::{self, ExportOptions};
use kiln_store::files::{self, FileTree, WorkspacePath};
use kiln_store::history::History;
use kiln_store::run::{ListFilter, RunMemory};
use kiln_store::{StoreError, Subscription};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use crate::{Kiln, from_json_text, to_json_text};

/// A workspace's stores, open.
pub(crate) type Opened = Workspace;

/// What `Kiln.load` got: the stores, or why there are none.
pub(crate) type PageStorage = Rc<Result<Opened, StoreError>>;

/// Opens `workspace`'s database (`kiln-<workspace>`) and files.
pub(crate) async fn open(workspace: &str) -> PageStorage {
    let opened = async {
        kiln_agent::ladder::check_workspace_name(workspace).map_err(StoreError::Invalid)?;
        open_platform(workspace).await
    };
    Rc::new(opened.await)
}

#[cfg(target_arch = "wasm32")]
async fn open_platform(workspace: &str) -> Result<Opened, StoreError> {
    use kiln_store::browser::{IdbBackend, OpfsTree};
    let backend: Rc<dyn Backend> = IdbBackend::open(&format!("kiln-{workspace}")).await?;
    let tree: Rc<dyn FileTree> = OpfsTree::open(workspace).await?;
    Ok(Opened {
        backend,
        files: tree,
    })
}

/// The native build (tests, lints) keeps the workspace in memory.
#[cfg(not(target_arch = "wasm32"))]
async fn open_platform(_workspace: &str) -> Result<Opened, StoreError> {
    use kiln_store::native::{MemoryBackend, MemoryTree};
    let backend: Rc<dyn Backend> = MemoryBackend::new();
    let tree: Rc<dyn FileTree> = MemoryTree::new();
    Ok(Opened {
        backend,
        files: tree,
    })
}

/// A `StoreError` as a page `Error` with `code` and `hint`.
pub(crate) fn store_error(error: &StoreError) -> JsValue {
    let js = js_sys::Error::new(&error.to_string());
    let _ = Reflect::set(&js, &"code".into(), &error.code().into());
    if let Some(hint) = error.hint() {
        let _ = Reflect::set(&js, &"hint".into(), &hint.into());
    }
    js.into()
}

fn bad_request(op: &str, message: impl std::fmt::Display) -> JsValue {
    js_sys::TypeError::new(&format!("kiln.{op}: {message}")).into()
}

fn args<T: DeserializeOwned>(op: &str, args: &Value) -> Result<T, JsValue> {
    serde_json::from_value(args.clone()).map_err(|error| bad_request(op, error))
}

fn path(op: &str, text: &str) -> Result<WorkspacePath, JsValue> {
    WorkspacePath::parse(text).map_err(|error| bad_request(op, error))
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

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ExportArgs {
    #[serde(default)]
    include_keys: bool,
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// One storage operation; `Err` is a `TypeError` (bad request) or a store error.
async fn dispatch(opened: Opened, op: String, request: Value) -> Result<Value, JsValue> {
    let memory = DurableMemory::new(opened.backend.clone());
    let history = History::new(opened.backend.clone());
    let tree = &*opened.files;
    let failed = |error: StoreError| store_error(&error);
    let op = op.as_str();
    Ok(match op {
        "memory.save" => {
            let SaveArgs { text, agent } = args(op, &request)?;
            to_value(&memory.save(&agent, &text).await.map_err(failed)?)
        }
        "memory.query" => {
            let QueryArgs {
                query,
                agent,
                limit,
            } = args(op, &request)?;
            to_value(
                &memory
                    .query(&query, agent.as_deref(), limit.unwrap_or(10))
                    .await
                    .map_err(failed)?,
            )
        }
        "memory.list" => {
            let ListArgs { agent, limit } = args(op, &request)?;
            to_value(&memory.list(agent.as_deref(), limit).await.map_err(failed)?)
        }
        "memory.mark" => {
            let MarkArgs { id, mark } = args(op, &request)?;
            let mark: Mark = mark.parse().map_err(|error| bad_request(op, error))?;
            to_value(&memory.mark(&id, mark).await.map_err(failed)?)
        }
        "memory.edit" => {
            let EditArgs { id, version, text } = args(op, &request)?;
            to_value(&memory.edit(&id, version, &text).await.map_err(failed)?)
        }
        "memory.remove" => {
            let RemoveArgs { id, version } = args(op, &request)?;
            memory.remove(&id, version).await.map_err(failed)?;
            Value::Null
        }
        "history.jobs" => {
            let ListArgs { limit, .. } = args(op, &request)?;
            to_value(&history.jobs(limit.unwrap_or(50)).await.map_err(failed)?)
        }
        "history.search" => {
            let SearchArgs { query, limit } = args(op, &request)?;
            to_value(
                &history
                    .search(&query, limit.unwrap_or(20))
                    .await
                    .map_err(failed)?,
            )
        }
        "run.list" => {
            let RunListArgs { run_id } = args(op, &request)?;
            let run_id = match run_id {
                Some(id) => id,
                None => match history.jobs(1).await.map_err(failed)?.into_iter().next() {
                    Some(job) => job.id,
                    None => return Ok(json!({"run_id": null, "entries": []})),
                },
            };
            let run = RunMemory::new(opened.backend.clone(), &run_id);
            let metas = run.list(&ListFilter::default()).await.map_err(failed)?;
            let keys: Vec<String> = metas.iter().map(|meta| meta.key.clone()).collect();
            let values = run.read(&keys).await.map_err(failed)?;
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
            let PathArgs { path: text } = args(op, &request)?;
            let bytes = tree.read(&path(op, &text)?).await.map_err(failed)?;
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
            } = args(op, &request)?;
            let bytes = match (content, base64) {
                (Some(content), None) => content.into_bytes(),
                (None, Some(encoded)) => STANDARD
                    .decode(encoded)
                    .map_err(|error| bad_request(op, format!("`base64` is not base64: {error}")))?,
                _ => return Err(bad_request(op, "give exactly one of `text` and `base64`")),
            };
            if bytes.len() > files::MAX_FILE_BYTES {
                return Err(bad_request(
                    op,
                    format!(
                        "the file is {} bytes; at most {} are written",
                        bytes.len(),
                        files::MAX_FILE_BYTES
                    ),
                ));
            }
            to_value(&tree.write(&path(op, &text)?, bytes).await.map_err(failed)?)
        }
        "files.list" => {
            let PathArgs { path: text } = args(op, &request)?;
            to_value(&tree.list(&path(op, &text)?).await.map_err(failed)?)
        }
        "files.stat" => {
            let PathArgs { path: text } = args(op, &request)?;
            to_value(&tree.stat(&path(op, &text)?).await.map_err(failed)?)
        }
        "files.mkdir" => {
            let PathArgs { path: text } = args(op, &request)?;
            tree.mkdir(&path(op, &text)?).await.map_err(failed)?;
            Value::Null
        }
        "files.remove" => {
            let PathArgs { path: text } = args(op, &request)?;
            tree.remove(&path(op, &text)?).await.map_err(failed)?;
            Value::Null
        }
        "config.get" => {
            let config = Config::new(opened.backend.clone());
            let providers: Vec<Value> = config
                .providers()
                .await
                .map_err(failed)?
                .into_iter()
                .map(|provider| {
                    let has_key = provider.key.is_some();
                    let mut value = to_value(&provider);
                    if let Some(object) = value.as_object_mut() {
                        object.remove("key");
                        object.insert("has_key".into(), has_key.into());
                    }
                    value
                })
                .collect();
            json!({
                "settings": config.settings().await.map_err(failed)?,
                "providers": providers,
                "agents": config.agents().await.map_err(failed)?,
            })
        }
        "export" => {
            let ExportArgs { include_keys } = args(op, &request)?;
            let doc = export::export(&*opened.backend, Some(tree), ExportOptions { include_keys })
                .await
                .map_err(failed)?;
            to_value(&doc)
        }
        "import" => to_value(
            &export::import(&*opened.backend, Some(tree), &request)
                .await
                .map_err(failed)?,
        ),
        other => {
            return Err(bad_request(
                "store",
                format!("`{other}` is not a storage operation"),
            ));
        }
    })
}

#[wasm_bindgen]
impl Kiln {
    /// One storage operation (`memory.save`, `files.read`, `export`, …) with
    /// its arguments object; resolves to its JSON answer. `kiln.js` gives
    /// each its own method. Rejects with a `TypeError` for a bad request, or
    /// an `Error` with `code` and `hint` from the store.
    pub fn store(&self, op: String, request: JsValue) -> Promise {
        let storage = self.storage.clone();
        let request = if request.is_undefined() || request.is_null() {
            Ok("{}".to_owned())
        } else {
            to_json_text(&request)
        };
        wasm_bindgen_futures::future_to_promise(async move {
            let request: Value = match request {
                Ok(text) => serde_json::from_str(&text).map_err(|error| bad_request(&op, error))?,
                Err(why) => return Err(bad_request(&op, format!("the arguments {why}"))),
            };
            let opened = match &*storage {
                Ok(opened) => opened.clone(),
                Err(error) => return Err(store_error(error)),
            };
            let answer = dispatch(opened, op, request).await?;
            Ok(from_json_text(&answer.to_string()))
        })
    }

    /// Calls `callback([{table, key, version}])` after every committed change,
    /// from this page or another tab of the same workspace; answers a
    /// function that stops it.
    ///
    /// # Errors
    ///
    /// The store's error when storage is not available.
    #[wasm_bindgen(js_name = onChange)]
    pub fn on_change(&self, callback: Function) -> Result<Function, JsValue> {
        let opened = match &*self.storage {
            Ok(opened) => opened,
            Err(error) => return Err(store_error(error)),
        };
        let subscription: Rc<std::cell::RefCell<Option<Subscription>>> = Rc::default();
        let listener = Rc::new(move |changes: &[Change]| {
            let json = serde_json::to_string(changes).unwrap_or_default();
            let _ = callback.call1(&JsValue::NULL, &from_json_text(&json));
        });
        *subscription.borrow_mut() = Some(opened.backend.subscribe(listener));
        let stop = Closure::<dyn FnMut()>::new(move || {
            subscription.borrow_mut().take();
        });
        Ok(stop.into_js_value().unchecked_into())
    }
}

/// For `cargo xtask bench`: opens `workspace`'s stores as `Kiln.load` does
/// and reads one count, `{open_ms, first_read_ms}`: the cold open of the
/// database (and the OPFS folder) in this page.
///
/// # Errors
///
/// The store's error when the workspace cannot open.
#[wasm_bindgen(js_name = benchStorageOpen)]
pub async fn bench_storage_open(workspace: String) -> Result<JsValue, JsValue> {
    let started = kiln_http::now_ms();
    let storage = open(&workspace).await;
    let opened = kiln_http::now_ms();
    let backend = match &*storage {
        Ok(opened) => opened.backend.clone(),
        Err(error) => return Err(store_error(error)),
    };
    backend
        .count(kiln_store::Table::Memories)
        .await
        .map_err(|error| store_error(&error))?;
    let read = kiln_http::now_ms();
    Ok(from_json_text(
        &json!({"open_ms": opened - started, "first_read_ms": read - opened}).to_string(),
    ))
}
