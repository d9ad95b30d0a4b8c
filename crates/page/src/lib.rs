//! The ES module API that other pages load from `pkg/kiln.js`:
//!
//! ```js
//! import { Kiln } from "./kiln/kiln.js";
//! const kiln = await Kiln.load();
//! const result = await kiln.run({
//!   code: "return await tools.echo({text: 'hi'})",
//!   tools: {
//!     echo: {
//!       description: "Returns its arguments.",
//!       input_schema: {type: "object"},
//!       call: async (args, ctx) => args,
//!     },
//!   },
//!   limits: {js_cpu_ms: 2000},
//! });
//! // result is the tool-result/v1 object: {content, structuredContent, isError?, errorCode?}
//! ```
//!
//! Values cross as JSON, and a `Uint8Array` stays bytes both ways: the guest's
//! bytes arrive in `args` as a `Uint8Array`, and a `Uint8Array` a tool returns
//! reaches the guest as one (in the `tool-result/v1` value, bytes read
//! `{"$bytes": "<base64>"}`).
//!
//! A tool's `call(args, ctx)` may return a value or a promise; a throw or a
//! rejection fails the call, with the error's `code` (snake_case), `message`
//! and `detail`. `ctx.callNumber` is the call's number in the run, and
//! `ctx.waitOnPerson(promise)` marks the call as held on a person while
//! `promise` is pending (an approval dialog, say), which the run's
//! person-wait budget counts.
//!
//! Every call walks the capability ladder (`kiln_capabilities`): lookup,
//! argument coercion and JSON Schema validation, the permission decision and,
//! when it asks, the page's `approve` callback. More request fields:
//!
//! - `tools.<name>.category`: `read`, `write`, `execute` or `external`
//!   (default `external`).
//! - `permission: {mode?, autonomy?, brake?}`: mode `plan` | `default` |
//!   `auto`; `autonomy` maps a tool name to `auto` | `ask` | `block`; `brake`
//!   engages the auto-run brake. Default mode: `default` with an `approve`
//!   callback, `auto` without one.
//! - `approve(request)`: resolves `"approve"`, `"deny"` or
//!   `"allow_for_session"` (the last holds for every later run of this
//!   `Kiln`). `request` is `{tool, callNumber, category, module, description,
//!   args, reason, host}` with secrets redacted. Without it, nobody is asked:
//!   a call that needs approval fails `consent_unavailable`.
//! - `mcp: {name: url | {url, category?, headers?}}`: mounts an MCP server's
//!   tools (Streamable HTTP) as `name_<tool>`. `headers: {Name: value}` (at
//!   most 8) are sent on every exchange with the server, each `${NAME}` in a
//!   value filled from the run's secret NAME when the server is mounted:
//!   `{"Authorization": "Bearer ${DOCS_TOKEN}"}`. A secret the run does not
//!   hold, or one bound to origins that leave the server out, keeps the
//!   server off before anything is sent to it (a `tools_unavailable` warning
//!   naming the server, the header and the secret); the program never sees
//!   the value, and an echo of it in what the server answers comes back as
//!   `[redacted:NAME]`.
//! - `secrets: {NAME: value | {value, origins: [...]}}`: the run's secret
//!   scope (`http_request`'s `secret_headers`, `mcp`'s `headers`); the
//!   program never sees a value, a secret bound to origins is sent to no
//!   other, and one bound to none only to the origins `allow_net` names (or
//!   to an MCP server whose `headers` name it).
//!
//! - `agent`: who the run's memories are saved for (default `default`).
//! - `inputs: {name: value}`: written to the run memory as `input:<name>`
//!   before the program starts (the program reads them with `read_shared`).
//!
//! - `builtins: ["http_request"]`: the built-in `http_request` (category
//!   `external`), for any public address; `allow_net: [origin, ...]`
//!   instead names exactly the origins it may reach (loopback and private
//!   ones included, since they are named). Without either, the run has no
//!   network: its tools are exactly what it named.
//!
//! The whole request but its functions (`approve`, each tool's `call`) is
//! read by `kiln_run::RunRequest`, the one parser every entrance shares;
//! the run is assembled and recorded by `kiln_run::run_program`. When
//! the workspace's storage opened (`Kiln.load({workspace})`, default
//! `default`: IndexedDB `kiln-<workspace>` and its OPFS folder), every run is
//! recorded in the history, gets its own run memory, and is offered the
//! memory, history and file capabilities (`list_shared`, `read_shared`,
//! `share_result`, `save_memory`, `query_memory`, `mark_memory_helpful`,
//! `mark_memory_outdated`, `search_history`, `file_*`) and `workspace.*`;
//! when it did not, the run says why in a `storage_unavailable` warning. The
//! stores are also the page's: see `storage.rs`.
//!
//! Bad input (a request that is not an object, code that is not a string, a
//! tool without `call`, unknown limits) rejects with a `TypeError` naming what
//! was wrong; everything the program does comes back as a `tool-result/v1`
//! object, never as a rejection.
//!
//! `kiln.run` is this file's; the rest of the API has modules of its own:
//!
//! - `agent`: `kiln.agent(request)`, one agent turn (the CodeAct loop) in the
//!   runtime worker.
//! - `chat`: `kiln.chat(request)` and `kiln.models(provider)`, LLM providers
//!   from the page, through `kiln-providers` in the runtime worker.
//! - `nodes`: code nodes from a page (`kiln.codeNode`, `kiln.graph`,
//!   `kiln.authorCode`), each served by the runtime worker.
//! - `storage`: the workspace's storage, reached through `kiln.store(op, args)`
//!   and `kiln.onChange(callback)`.
//! - `runtime`: the page's side of the runtime protocol: starts the runtime
//!   worker, sends it each run, chat turn and storage operation, and answers
//!   what a run asks of the page (a page tool's call, the `approve` callback).

mod agent;
mod chat;
mod nodes;
mod runtime;
mod storage;

use std::collections::HashMap;
use std::rc::Rc;

use js_sys::{Function, JSON, Object, Promise, Reflect};
use kiln_types::runtime::{Problem, RuntimeOptions, ToRuntime};
use kiln_types::tool_result::{CallOutcome, ToolFailure};
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

/// A loaded runtime: its worker started and ready for runs.
#[wasm_bindgen]
pub struct Kiln {
    /// The runtime worker, which runs the programs, the chat turns and the
    /// storage operations.
    runtime: Rc<runtime::Runtime>,
    /// Run budgets made by `kiln.budget()`, by number, for `chat({budget})`
    /// to share: the spend each handle reports.
    budgets: chat::Budgets,
    /// Why the workspace's stores did not open in the worker, if they did not.
    storage: Option<Problem>,
}

#[wasm_bindgen]
impl Kiln {
    /// Starts the runtime worker (`runtime_url`), which starts the sandbox
    /// pool (workers load `sandbox_url`, up to `pool_size` kept started) and
    /// opens `workspace`'s stores, and resolves once it is ready. Storage
    /// that cannot open (a private window, blocked site data) does not fail
    /// the load: runs go on without the storage tools, and `storageError`
    /// says why.
    ///
    /// # Errors
    ///
    /// Why the runtime worker or its first sandbox worker could not start.
    pub async fn load(
        runtime_url: String,
        sandbox_url: String,
        pool_size: usize,
        workspace: Option<String>,
        reply_due_ms: Option<f64>,
    ) -> Result<Self, JsError> {
        let workspace = workspace.unwrap_or_else(|| "default".to_owned());
        let reply_due_ms = match reply_due_ms {
            None => None,
            Some(ms) if ms.is_finite() && ms >= 0.0 => {
                // Whole milliseconds, at most the reference's 25 s.
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "checked finite and ≥ 0, then capped"
                )]
                Some((ms.ceil() as u64).min(kiln_types::tool_result::REPLY_DUE_MS))
            }
            Some(_) => {
                return Err(JsError::new(
                    "`replyDueMs` must be a number of milliseconds ≥ 0 (at most 25000)",
                ));
            }
        };
        let options = RuntimeOptions {
            workspace,
            sandbox_url,
            pool_size: u32::try_from(pool_size).unwrap_or(u32::MAX),
            reply_due_ms,
        };
        let client = kiln_runtime_client::RuntimeClient::start(&runtime_url, &options)
            .await
            .map_err(|problem| JsError::new(&problem))?;
        let storage = client.storage().cloned();
        Ok(Self {
            runtime: Rc::new(runtime::Runtime { client }),
            budgets: chat::Budgets::default(),
            storage,
        })
    }

    /// Why the workspace's storage did not open (an `Error` with `code` and
    /// `hint`), or `null` when it did.
    #[wasm_bindgen(getter, js_name = storageError)]
    pub fn storage_error(&self) -> JsValue {
        match &self.storage {
            None => JsValue::NULL,
            Some(problem) => rejection("kiln.load", problem),
        }
    }

    /// Runs one program like [`Kiln::run`] and resolves to the sandbox's own
    /// account of it instead: `{job_id, report, warnings, catalog_digest,
    /// text, record_error}`, where `report` has the outcome, console lines,
    /// calls and the timings (`duration_ms`, `start_ms`, `context_ms`,
    /// `person_wait_ms`), `text` is what a model reads and `record_error` why
    /// the run's history record was not finished. For tools, the app and
    /// benchmarks; a model reads `run`'s result.
    pub fn report(&self, request: JsValue) -> Promise {
        self.start(&request, true)
    }

    /// For `cargo xtask bench`: one figure measured in the runtime worker
    /// (`ladder` `{iterations}`, `mcp` `{url, calls}`, `sse` `{bytes,
    /// rounds}`, `storage_open` `{workspace}`). The worker has the hooks only
    /// when the bench built it.
    pub fn bench(&self, hook: String, args: JsValue) -> Promise {
        let args = to_json_text(&args)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .unwrap_or(Value::Null);
        let answered = self
            .runtime
            .call(move |id| ToRuntime::Bench { id, hook, args }, None, None);
        wasm_bindgen_futures::future_to_promise(async move {
            match answered.await {
                Ok(Ok(value)) => Ok(from_json_text(&value.to_string())),
                Ok(Err(problem)) => Err(rejection("kiln.bench", &problem)),
                Err(_) => Err(type_error("the runtime worker went away")),
            }
        })
    }

    /// Runs one program in the runtime worker; resolves to its
    /// `tool-result/v1` object. With a `key`, the run is kept: a retry with
    /// the same key gets that run's result and never runs it again, and a
    /// run not ended when its answer is due (25 s) resolves to the interim
    /// result (`{status: "running", run_id, held}`) and goes on, its page
    /// tools and `approve` still called.
    pub fn run(&self, request: JsValue) -> Promise {
        self.start(&request, false)
    }

    /// The final result of the keyed run `runId` (waiting at most 25 s, then
    /// the interim again); an id kept nowhere resolves to an error result
    /// (`unknown_run`, `expired_run`).
    #[wasm_bindgen(js_name = lateResult)]
    pub fn late_result(&self, run_id: JsValue) -> Promise {
        self.kept_run("kiln.lateResult", run_id, |id, run_id| {
            ToRuntime::LateResult { id, run_id }
        })
    }

    /// Cancels the keyed run `runId`; resolves to how it ended (`cancelled`:
    /// calls never sent `cancelled`, calls held on the person `withdrawn`,
    /// started ones `outcome_unknown`).
    pub fn withdraw(&self, run_id: JsValue) -> Promise {
        self.kept_run("kiln.withdraw", run_id, |id, run_id| ToRuntime::Withdraw {
            id,
            run_id,
        })
    }
}

impl Kiln {
    /// `lateResult` and `withdraw`: one run id, one answer.
    fn kept_run(
        &self,
        what: &'static str,
        run_id: JsValue,
        message: impl FnOnce(u64, String) -> ToRuntime,
    ) -> Promise {
        let Some(run_id) = run_id.as_string().filter(|id| !id.trim().is_empty()) else {
            return Promise::reject(&js_sys::TypeError::new(&format!(
                "{what} takes a run id, the `structuredContent.run_id` of a keyed kiln.run"
            )));
        };
        let answered = self.runtime.call(move |id| message(id, run_id), None, None);
        wasm_bindgen_futures::future_to_promise(async move {
            match answered.await {
                Ok(Ok(value)) => JSON::parse(&value.to_string()),
                Ok(Err(problem)) => Err(rejection(what, &problem)),
                Err(_) => Err(js_sys::TypeError::new(&format!(
                    "{what}: the runtime worker went away"
                ))
                .into()),
            }
        })
    }

    /// Reads the page's part of a request now (its functions and signal; a
    /// bad one rejects before anything starts), sends the rest to the
    /// runtime worker, whose one parser checks it, and resolves to its answer.
    fn start(&self, request: &JsValue, report: bool) -> Promise {
        let sent = self.send(request, report);
        wasm_bindgen_futures::future_to_promise(async move {
            let answered = sent?;
            match answered.await {
                Ok(Ok(value)) => JSON::parse(&value.to_string()),
                Ok(Err(problem)) => Err(rejection("kiln.run", &problem)),
                Err(_) => Err(type_error("the runtime worker went away during the run")),
            }
        })
    }

    fn send(
        &self,
        request: &JsValue,
        report: bool,
    ) -> Result<kiln_runtime_client::Answered, JsValue> {
        if !request.is_object() {
            return Err(type_error(
                "takes one object, {code, tools?, limits?, permission?, approve?, mcp?, secrets?, agent?, inputs?, builtins?, allow_net?, key?, model?, signal?}",
            ));
        }
        let (request, calls, approve, signal) =
            page_parts(request, &["signal"], |problem| type_error(problem))?;
        let page = runtime::JsPage {
            calls,
            approve,
            ask: None,
        };
        Ok(self.runtime.exchange(
            move |id, approve| ToRuntime::Run {
                id,
                request,
                approve,
                report,
            },
            page,
            signal,
            None,
        ))
    }
}

/// What of a run or agent request stays on the page — each tool's `call`,
/// `approve`, the signal — and the rest as JSON for the worker (functions
/// left out, and the fields named in `drop`). A bad one is refused by
/// `error` before anything starts.
type PageParts = (
    Value,
    std::collections::HashMap<String, Function>,
    Option<Function>,
    Option<kiln_runtime_client::Signal>,
);

fn page_parts(
    request: &JsValue,
    drop: &[&str],
    error: fn(&str) -> JsValue,
) -> Result<PageParts, JsValue> {
    {
        let field =
            |name: &str| Reflect::get(request, &JsValue::from_str(name)).unwrap_or_default();
        let calls = tool_calls(&field("tools")).map_err(|why| error(&why))?;
        let approve = field("approve");
        let approve = if approve.is_undefined() || approve.is_null() {
            None
        } else {
            Some(approve.dyn_into::<Function>().map_err(|_| {
                error(
                    "`approve` must be a function (request) => \"approve\" | \"deny\" | \"allow_for_session\"",
                )
            })?)
        };
        let signal = match field("signal") {
            value if value.is_undefined() || value.is_null() => None,
            value => Some(
                kiln_runtime_client::Signal::from_value(value).ok_or_else(|| {
                    error("`signal` must be an AbortSignal (from an AbortController)")
                })?,
            ),
        };
        // Functions (`approve`, each tool's `call`) are left out of the JSON,
        // and so are the named fields.
        let copy = Object::assign(&Object::new(), request.unchecked_ref());
        for name in drop {
            let _ = Reflect::delete_property(&copy, &JsValue::from_str(name));
        }
        let text =
            to_json_text(&copy).map_err(|problem| error(&format!("the request {problem}")))?;
        let request: Value = serde_json::from_str(&text)
            .map_err(|problem| error(&format!("the request is not JSON: {problem}")))?;
        Ok((request, calls, approve, signal))
    }
}

/// The function in `request`'s field `name`, if it has one; a field that is
/// something else is refused by `error`.
fn optional_function(
    request: &JsValue,
    name: &str,
    error: impl Fn(&str) -> JsValue,
) -> Result<Option<Function>, JsValue> {
    Reflect::get(request, &JsValue::from_str(name))
        .ok()
        .filter(|value| !value.is_undefined() && !value.is_null())
        .map(|value| {
            value
                .dyn_into::<Function>()
                .map_err(|_| error(&format!("`{name}` must be a function")))
        })
        .transpose()
}

/// A page's `onEvent` as the runtime client's listener. A throwing listener
/// loses nothing: the exchange goes on.
fn listener(on_event: Function) -> runtime::Listener {
    Rc::new(move |event: Value| {
        let _ = on_event.call1(&JsValue::NULL, &from_json_text(&event.to_string()));
    })
}

/// How the page rejects a request the worker refused: a `TypeError` for a
/// request that does not read (its message after `what`, the method that
/// was called), else an `Error` with its `code`, `hint` and `status`.
pub(crate) fn rejection(what: &str, problem: &Problem) -> JsValue {
    if problem.bad_request {
        return js_sys::TypeError::new(&format!("{what}: {}", problem.message)).into();
    }
    let error = js_sys::Error::new(&problem.message);
    if let Some(code) = &problem.code {
        let _ = Reflect::set(&error, &"code".into(), &code.into());
    }
    if let Some(hint) = &problem.hint {
        let _ = Reflect::set(&error, &"hint".into(), &hint.into());
    }
    if let Some(status) = problem.status {
        let _ = Reflect::set(&error, &"status".into(), &status.into());
    }
    error.into()
}

/// An approve callback's answer as a message shows it.
fn answer_text(value: &JsValue) -> String {
    if value.is_undefined() {
        return "undefined (no answer)".into();
    }
    JSON::stringify(value)
        .ok()
        .and_then(|text| text.as_string())
        .unwrap_or_else(|| describe(value))
}

fn type_error(message: impl AsRef<str>) -> JsValue {
    js_sys::TypeError::new(&format!("kiln.run: {}", message.as_ref())).into()
}

// The JSON codec of page values, in JavaScript: `JSON.stringify`'s replacer and
// `JSON.parse`'s reviver run once per value, and a call from the engine into
// JavaScript is far cheaper than one into wasm. Bytes travel as
// `{"$bytes": "<base64>"}` (`kiln_types::BYTES_KEY`).
#[wasm_bindgen(inline_js = r#"
const BYTES = "$bytes";
function toBase64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(text);
}
function fromBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
export function encodeJson(value) {
  return JSON.stringify(value, (key, item) => (item instanceof Uint8Array ? { [BYTES]: toBase64(item) } : item));
}
export function invokeTool(call, argsText, callNumber, hold) {
  let open = true;
  const ctx = {
    callNumber,
    // Held while `pending` is pending; after the call settles it no longer counts.
    waitOnPerson(pending) {
      if (!open) return Promise.resolve(pending);
      hold(callNumber, true);
      return Promise.resolve(pending).finally(() => open && hold(callNumber, false));
    },
  };
  const close = (value) => ((open = false), value);
  const fail = (error) => {
    open = false;
    throw error;
  };
  let out;
  try {
    out = call(decodeJson(argsText), ctx);
  } catch (error) {
    fail(error);
  }
  // Only a thenable costs a turn of the event loop.
  return out !== null && (typeof out === "object" || typeof out === "function") && typeof out.then === "function"
    ? Promise.resolve(out).then(close, fail)
    : close(out);
}
export function decodeJson(text) {
  return JSON.parse(text, (key, item) =>
    item !== null && typeof item === "object" && !Array.isArray(item) && typeof item[BYTES] === "string" && Object.keys(item).length === 1
      ? fromBase64(item[BYTES])
      : item,
  );
}
"#)]
extern "C" {
    #[wasm_bindgen(catch, js_name = encodeJson)]
    fn encode_json(value: &JsValue) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(catch, js_name = decodeJson)]
    fn decode_json(text: &str) -> Result<JsValue, JsValue>;
    /// `call(args, ctx)` with `ctx = {callNumber, waitOnPerson}`: its value, or
    /// a promise when it returned a thenable.
    #[wasm_bindgen(catch, js_name = invokeTool)]
    fn invoke_tool(
        call: &Function,
        args_text: &str,
        call_number: u32,
        hold: &Function,
    ) -> Result<JsValue, JsValue>;
}

/// A page value as JSON text (bytes as `{"$bytes"}`), or why it is not JSON.
fn to_json_text(value: &JsValue) -> Result<String, String> {
    match encode_json(value) {
        Ok(text) => Ok(text.as_string().unwrap_or_else(|| "null".into())),
        Err(error) => Err(format!("is not JSON: {}", describe(&error))),
    }
}

/// JSON text as a page value (`{"$bytes"}` as `Uint8Array`).
fn from_json_text(text: &str) -> JsValue {
    decode_json(text).unwrap_or_default()
}

use kiln_runtime_client::error_text as describe;

/// Each page tool's `call` (their specs travel in the request, checked by
/// the worker's parser).
fn tool_calls(tools: &JsValue) -> Result<HashMap<String, Function>, String> {
    let mut calls = HashMap::new();
    if tools.is_undefined() || tools.is_null() {
        return Ok(calls);
    }
    let Some(object) = tools.dyn_ref::<Object>() else {
        return Err(
            "`tools` must be an object of {name: {description, input_schema, category?, call}}"
                .into(),
        );
    };
    for entry in Object::entries(object).iter() {
        let entry: js_sys::Array = entry.unchecked_into();
        let name = entry.get(0).as_string().unwrap_or_default();
        let call = Reflect::get(&entry.get(1), &JsValue::from_str("call")).unwrap_or_default();
        let Some(call) = call.dyn_into::<Function>().ok() else {
            return Err(format!(
                "`tools.{name}.call` must be a function (args, ctx) => value"
            ));
        };
        calls.insert(name, call);
    }
    Ok(calls)
}

/// A thrown value as a tool failure: the error's snake_case `code` (else
/// `tool_error`), its message, and its `detail` when that is JSON.
fn failure(error: &JsValue) -> ToolFailure {
    let get = |field: &str| Reflect::get(error, &JsValue::from_str(field)).unwrap_or_default();
    let code = get("code")
        .as_string()
        .filter(|code| {
            code.starts_with(|c: char| c.is_ascii_lowercase())
                && code
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .unwrap_or_else(|| "tool_error".into());
    let outcome = serde_json::from_value::<CallOutcome>(json!(code))
        .ok()
        .filter(|outcome| *outcome != CallOutcome::Ok)
        .unwrap_or(CallOutcome::Error);
    let detail = get("detail");
    let detail = (!detail.is_undefined())
        .then(|| to_json_text(&detail).ok())
        .flatten()
        .and_then(|text| serde_json::from_str(&text).ok());
    ToolFailure {
        code,
        message: describe(error),
        detail,
        outcome,
    }
}
