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
//! - `mcp: {name: url | {url, category?}}`: mounts an MCP server's tools
//!   (Streamable HTTP) as `name_<tool>`.
//! - `secrets: {NAME: value | {value, origins: [...]}}`: the run's secret
//!   scope (`http_request`'s `secret_headers`); the program never sees a
//!   value, and a secret bound to origins is sent to no other.
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
//! read by `kiln_agent::RunRequest`, the one parser every entrance shares;
//! the run is assembled and recorded by `kiln_agent::run_program`. When
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

mod chat;
mod storage;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use js_sys::{Function, JSON, Object, Promise, Reflect};
use kiln_agent::ladder::Environment;
use kiln_agent::{People, RunRequest, SandboxRunner, ToolBridge};
use kiln_capabilities::gate::{Headless, SessionAllow};
use kiln_capabilities::{
    Answer, ApprovalRequest, Approver, CallContext, Dispatcher, HeldSignal, Implementation, Permit,
};
use kiln_host::SandboxPool;
use kiln_http::HttpClient;
use kiln_types::RunLimits;
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// A loaded runtime: a pool of sandbox workers, ready for runs.
#[wasm_bindgen]
pub struct Kiln {
    pool: SandboxPool,
    /// "Allow for this session" answers, shared by every run of this `Kiln`.
    session: SessionAllow,
    http: Rc<dyn HttpClient>,
    /// Run budgets made by `kiln.budget()`, by id, for `chat({budget})` to share.
    budgets: chat::Budgets,
    /// The workspace's stores, or why they did not open.
    storage: storage::PageStorage,
}

#[wasm_bindgen]
impl Kiln {
    /// Starts the pool (workers load `worker_url`, up to `pool_size` kept
    /// started), opens `workspace`'s stores, and resolves once the first
    /// worker is ready. Storage that cannot open (a private window, blocked
    /// site data) does not fail the load: runs go on without the storage
    /// tools, and `storageError` says why.
    ///
    /// # Errors
    ///
    /// Why the first sandbox worker could not start.
    pub async fn load(
        worker_url: String,
        pool_size: usize,
        workspace: Option<String>,
    ) -> Result<Self, JsError> {
        let pool = SandboxPool::new(worker_url, pool_size);
        let storage = storage::open(workspace.as_deref().unwrap_or("default")).await;
        pool.ready()
            .await
            .map_err(|problem| JsError::new(&problem))?;
        Ok(Self {
            pool,
            session: SessionAllow::default(),
            http: kiln_http::default_client(),
            budgets: chat::Budgets::default(),
            storage,
        })
    }

    /// Why the workspace's storage did not open (an `Error` with `code` and
    /// `hint`), or `null` when it did.
    #[wasm_bindgen(getter, js_name = storageError)]
    pub fn storage_error(&self) -> JsValue {
        match &*self.storage {
            Ok(_) => JsValue::NULL,
            Err(error) => storage::store_error(error),
        }
    }

    /// Runs one program like [`Kiln::run`] and resolves to the sandbox's own
    /// account of it instead: `{report, warnings, catalog_digest}`, where
    /// `report` has the outcome, console lines, calls and the timings
    /// (`duration_ms`, `start_ms`, `context_ms`, `person_wait_ms`). For tools
    /// and benchmarks; a model reads `run`'s result.
    pub fn report(&self, request: JsValue) -> Promise {
        let prepared = self.prepare(&request);
        wasm_bindgen_futures::future_to_promise(async move {
            let (request, environment, runner, cancel) = prepared?;
            let ran = kiln_agent::run_program(request, &environment, &runner, cancel.abort.clone())
                .await
                .map_err(type_error)?;
            drop(cancel);
            let json = json!({
                "job_id": ran.job_id,
                "report": ran.run.report,
                "warnings": ran.run.warnings,
                "catalog_digest": ran.run.catalog_digest,
            });
            Ok(from_json_text(&json.to_string()))
        })
    }

    /// For `cargo xtask bench`: the ladder's cost per call and its parts in
    /// this page's wasm, `{iterations, call_ns, lookup_ns, arguments_ns,
    /// decision_ns}` (medians over batches of 1,000 calls).
    #[wasm_bindgen(js_name = benchLadder)]
    pub fn bench_ladder(&self, iterations: u32) -> JsValue {
        let figures = kiln_capabilities::bench::ladder(iterations, &kiln_host::now_ms);
        from_json_text(&serde_json::to_string(&figures).unwrap_or_default())
    }

    /// For `cargo xtask bench`: `calls` MCP round trips to `url` through
    /// `fetch`, `{calls, connect_ms, median_ms, p90_ms}`.
    #[wasm_bindgen(js_name = benchMcp)]
    pub fn bench_mcp(&self, url: String, calls: u32) -> Promise {
        let http = self.http.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let figures =
                kiln_capabilities::bench::mcp_round_trips(&url, calls, http, &kiln_host::now_ms)
                    .await
                    .map_err(|problem| JsValue::from(JsError::new(&problem)))?;
            Ok(from_json_text(
                &serde_json::to_string(&figures).unwrap_or_default(),
            ))
        })
    }

    /// Runs one program; resolves to its `tool-result/v1` object.
    pub fn run(&self, request: JsValue) -> Promise {
        let prepared = self.prepare(&request);
        wasm_bindgen_futures::future_to_promise(async move {
            let (request, environment, runner, cancel) = prepared?;
            let ran = kiln_agent::run_program(request, &environment, &runner, cancel.abort.clone())
                .await
                .map_err(type_error)?;
            drop(cancel);
            let json = serde_json::to_string(&ran.result)
                .map_err(|error| type_error(format!("the result could not be encoded: {error}")))?;
            JSON::parse(&json)
        })
    }
}

/// The page's pool as the agent layer's sandbox runner.
struct PoolRunner(SandboxPool);

impl SandboxRunner for PoolRunner {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, kiln_types::RunResult> {
        let pool = self.0.clone();
        Box::pin(async move { pool.run(code, limits, tools, cancel).await })
    }
}

impl Kiln {
    /// Reads the request now, so a bad one rejects before anything starts:
    /// the page's functions here, the rest by the shared parser.
    fn prepare(
        &self,
        request: &JsValue,
    ) -> Result<(RunRequest, Environment, PoolRunner, Cancel), JsValue> {
        if !request.is_object() {
            return Err(type_error(
                "takes one object, {code, tools?, limits?, permission?, approve?, mcp?, secrets?, agent?, inputs?, builtins?, allow_net?}",
            ));
        }
        let field =
            |name: &str| Reflect::get(request, &JsValue::from_str(name)).unwrap_or_default();
        if field("code").as_string().is_none() {
            return Err(type_error(
                "`code` must be a string of JavaScript (the body of an async function)",
            ));
        }
        let tools = JsTools::read(&field("tools")).map_err(type_error)?;
        let approve = field("approve");
        let approve = if approve.is_undefined() || approve.is_null() {
            None
        } else {
            Some(approve.dyn_into::<Function>().map_err(|_| {
                type_error(
                    "`approve` must be a function (request) => \"approve\" | \"deny\" | \"allow_for_session\"",
                )
            })?)
        };
        let cancel = match field("signal") {
            value if value.is_undefined() || value.is_null() => Cancel::default(),
            value => {
                let signal = chat::web_sys_abort::Signal::from_value(value).ok_or_else(|| {
                    type_error("`signal` must be an AbortSignal (from an AbortController)")
                })?;
                let abort = AbortSignal::new();
                let listener = signal.on_abort(abort.clone());
                Cancel {
                    abort,
                    _listener: Some(listener),
                }
            }
        };
        // Functions (`approve`, each tool's `call`) are left out of the JSON,
        // and so is the signal.
        let copy = Object::assign(&Object::new(), request.unchecked_ref());
        let _ = Reflect::delete_property(&copy, &JsValue::from_str("signal"));
        let text =
            to_json_text(&copy).map_err(|problem| type_error(format!("the request {problem}")))?;
        let parsed = RunRequest::parse(&text).map_err(type_error)?;
        let (host, approver): (String, Rc<dyn Approver>) = match approve {
            Some(callback) => ("page".into(), Rc::new(JsApprover { callback })),
            None => {
                let host = "kiln.run (no approve callback)";
                (host.into(), Rc::new(Headless::new(host)))
            }
        };
        let environment = Environment {
            entrance: "kiln.run".into(),
            tools_host: "page".into(),
            http: self.http.clone(),
            people: People::Approver {
                host,
                approver,
                session: self.session.clone(),
            },
            own_tools: None,
            bridge: Some(Rc::new(tools)),
            workspace: Some(self.storage.clone()),
            random: Rc::new(kiln_host::random_bytes),
        };
        Ok((parsed, environment, PoolRunner(self.pool.clone()), cancel))
    }
}

/// A run's cancel switch and the page signal's listener that throws it,
/// removed when the run is done.
#[derive(Default)]
struct Cancel {
    abort: AbortSignal,
    _listener: Option<chat::web_sys_abort::Listener>,
}

/// Asks the page's `approve(request)` callback.
struct JsApprover {
    callback: Function,
}

impl Approver for JsApprover {
    fn ask(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        let object = json!({
            "tool": request.tool,
            "callNumber": request.call_number,
            "category": request.category,
            "module": request.module,
            "description": request.description,
            "args": request.args,
            "reason": request.reason,
            "why": request.reason.sentence(),
            "host": request.host,
        });
        let called = self
            .callback
            .call1(&JsValue::NULL, &from_json_text(&object.to_string()));
        Box::pin(async move {
            let settled = match called {
                Ok(value) => match value.dyn_into::<Promise>() {
                    Ok(promise) => JsFuture::from(promise).await,
                    Err(value) => Ok(value),
                },
                Err(error) => Err(error),
            };
            match settled {
                Ok(value) => match value.as_string().as_deref() {
                    Some("approve") => Answer::Approve,
                    Some("deny") => Answer::Deny,
                    Some("allow_for_session") => Answer::AllowForSession,
                    _ => Answer::Unavailable {
                        reason: format!(
                            "the page's approve callback answered {}; expected \"approve\", \"deny\" or \"allow_for_session\"",
                            answer_text(&value)
                        ),
                    },
                },
                Err(error) => Answer::Unavailable {
                    reason: format!("the page's approve callback failed: {}", describe(&error)),
                },
            }
        })
    }
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

fn describe(error: &JsValue) -> String {
    if let Some(error) = error.dyn_ref::<js_sys::Error>() {
        return String::from(error.message());
    }
    error
        .as_string()
        .or_else(|| {
            JSON::stringify(error)
                .ok()
                .and_then(|text| text.as_string())
        })
        .unwrap_or_else(|| "an unreadable error".into())
}

/// The page's tools' `call` functions (their specs travel in the request),
/// reached by the agent layer through [`ToolBridge`].
struct JsTools {
    calls: HashMap<String, Function>,
    /// The calls in flight, for `ctx.waitOnPerson`.
    holds: Rc<RefCell<HashMap<u32, HeldSignal>>>,
    /// `hold(callNumber, held)`, one function for the run's every call.
    hold: Function,
}

impl JsTools {
    fn read(tools: &JsValue) -> Result<Self, String> {
        let holds: Rc<RefCell<HashMap<u32, HeldSignal>>> = Rc::default();
        let hold = {
            let holds = holds.clone();
            Closure::<dyn FnMut(u32, bool)>::new(move |call_number: u32, held: bool| {
                let signal = holds.borrow().get(&call_number).cloned();
                if let Some(signal) = signal {
                    signal(held);
                }
            })
            .into_js_value()
            .unchecked_into::<Function>()
        };
        let mut calls = HashMap::new();
        if !(tools.is_undefined() || tools.is_null()) {
            let Some(object) = tools.dyn_ref::<Object>() else {
                return Err(
                    "`tools` must be an object of {name: {description, input_schema, category?, call}}"
                        .into(),
                );
            };
            for entry in Object::entries(object).iter() {
                let entry: js_sys::Array = entry.unchecked_into();
                let name = entry.get(0).as_string().unwrap_or_default();
                let call =
                    Reflect::get(&entry.get(1), &JsValue::from_str("call")).unwrap_or_default();
                let Some(call) = call.dyn_into::<Function>().ok() else {
                    return Err(format!(
                        "`tools.{name}.call` must be a function (args, ctx) => value"
                    ));
                };
                calls.insert(name, call);
            }
        }
        Ok(Self { calls, holds, hold })
    }
}

impl ToolBridge for JsTools {
    fn implementation(&self, name: &str) -> Option<Rc<dyn Implementation>> {
        let function = self.calls.get(name)?.clone();
        Some(Rc::new(JsTool {
            function,
            holds: self.holds.clone(),
            hold: self.hold.clone(),
        }))
    }
}

/// One page tool: its `call(args, ctx)`.
struct JsTool {
    function: Function,
    holds: Rc<RefCell<HashMap<u32, HeldSignal>>>,
    hold: Function,
}

impl Implementation for JsTool {
    fn call(
        &self,
        args: Value,
        context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        let function = self.function.clone();
        let holds = self.holds.clone();
        let hold = self.hold.clone();
        Box::pin(async move {
            let tool = context.tool.clone();
            let call_number = context.call_number;
            let args = serde_json::to_string(&args).unwrap_or_else(|_| "{}".into());
            holds.borrow_mut().insert(call_number, context.held.clone());
            let settled = match invoke_tool(&function, &args, call_number, &hold) {
                Ok(value) => match value.dyn_into::<Promise>() {
                    Ok(promise) => JsFuture::from(promise).await,
                    Err(value) => Ok(value),
                },
                Err(error) => Err(error),
            };
            holds.borrow_mut().remove(&call_number);
            match settled {
                Ok(value) if value.is_undefined() => Ok(Value::Null),
                Ok(value) => {
                    let text = to_json_text(&value).map_err(|problem| ToolFailure {
                        code: "invalid_result".into(),
                        message: format!("{tool} returned a value that {problem}"),
                        detail: None,
                        outcome: CallOutcome::Error,
                    })?;
                    serde_json::from_str(&text).map_err(|error| ToolFailure {
                        code: "invalid_result".into(),
                        message: format!("{tool} returned a value that is not JSON: {error}"),
                        detail: None,
                        outcome: CallOutcome::Error,
                    })
                }
                Err(error) => Err(failure(&error)),
            }
        })
    }
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
