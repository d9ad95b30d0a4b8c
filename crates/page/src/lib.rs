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
//! The built-in `http_request` is always offered (category `external`). When
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
use kiln_capabilities::gate::{Headless, SessionAllow};
use kiln_capabilities::mcp::McpServer;
use kiln_capabilities::{
    Answer, ApprovalRequest, Approver, Autonomy, CallContext, CapabilitySpec, Category, Dispatcher,
    Gate, GateSettings, HeldSignal, Implementation, Mode, Permit, Registry, Secret, SecretScope,
    Source,
};
use kiln_host::SandboxPool;
use kiln_http::HttpClient;
use kiln_types::RunLimits;
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
        let pool = self.pool.clone();
        let prepared = self.prepare(&request);
        wasm_bindgen_futures::future_to_promise(async move {
            let (code, limits, dispatcher, servers, record) = prepared?.await;
            let result = pool.run(code, limits, dispatcher).await;
            close(servers).await;
            let job_id = storage::finish_run(record, &result.clone().into_tool_result()).await;
            let json = json!({
                "job_id": job_id,
                "report": result.report,
                "warnings": result.warnings,
                "catalog_digest": result.catalog_digest,
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
        let pool = self.pool.clone();
        let prepared = self.prepare(&request);
        wasm_bindgen_futures::future_to_promise(async move {
            let (code, limits, dispatcher, servers, record) = prepared?.await;
            let result = pool.run(code, limits, dispatcher).await;
            close(servers).await;
            let result = result.into_tool_result();
            storage::finish_run(record, &result).await;
            let json = serde_json::to_string(&result)
                .map_err(|error| type_error(format!("the result could not be encoded: {error}")))?;
            JSON::parse(&json)
        })
    }
}

/// What a run needs once its MCP servers answered.
type Ready = (
    String,
    RunLimits,
    Rc<Dispatcher>,
    Vec<McpServer>,
    Option<storage::RunRecord>,
);

impl Kiln {
    /// Reads the request now (so a bad one rejects before anything starts)
    /// and returns the rest: connecting MCP servers, then the ladder.
    fn prepare(&self, request: &JsValue) -> Result<LocalBoxFuture<'static, Ready>, JsValue> {
        let parsed = read_request(request).map_err(type_error)?;
        let session = self.session.clone();
        let http = self.http.clone();
        let storage = self.storage.clone();
        Ok(Box::pin(async move {
            let Parsed {
                code,
                tools,
                limits,
                settings,
                approve,
                mcp,
                secrets,
                agent,
                inputs,
            } = parsed;
            let mut registry = Registry::new();
            tools.register(&mut registry);
            kiln_capabilities::builtin::add_builtins(&mut registry, &http);
            let record = storage::prepare_run(&storage, &mut registry, &code, &agent, inputs).await;
            let mut servers = Vec::new();
            for (name, url, category) in mcp {
                match kiln_capabilities::mcp::connect(&name, &url, category, http.clone()).await {
                    Ok(server) => {
                        kiln_capabilities::mcp::add_server(&mut registry, &server);
                        servers.push(server);
                    }
                    Err(warning) => registry.warn(*warning),
                }
            }
            let (host, approver): (&str, Rc<dyn Approver>) = match approve {
                Some(callback) => ("page", Rc::new(JsApprover { callback })),
                None => {
                    let host = "kiln.run (no approve callback)";
                    (host, Rc::new(Headless::new(host)))
                }
            };
            // Settings were checked when the request was read.
            let gate = Gate::in_session(host, settings, approver, session).ok();
            let dispatcher = Dispatcher::new(Rc::new(registry), gate, secrets, limits, "kiln.run");
            (code, limits, Rc::new(dispatcher), servers, record)
        }))
    }
}

/// Ends the run's MCP sessions (HTTP DELETE); a server that is gone is fine.
async fn close(servers: Vec<McpServer>) {
    for server in servers {
        let _ = server.client.close().await;
    }
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

/// A request, read and checked.
struct Parsed {
    code: String,
    tools: JsTools,
    limits: RunLimits,
    settings: GateSettings,
    approve: Option<Function>,
    mcp: Vec<(String, String, Category)>,
    secrets: SecretScope,
    /// Who the run's memories are saved for.
    agent: String,
    /// `input:<name>` entries of the run memory.
    inputs: serde_json::Map<String, Value>,
}

/// Reads the request, naming the first thing that is wrong.
fn read_request(request: &JsValue) -> Result<Parsed, String> {
    if !request.is_object() {
        return Err(
            "takes one object, {code, tools?, limits?, permission?, approve?, mcp?, secrets?, agent?, inputs?}"
                .into(),
        );
    }
    let field = |name: &str| Reflect::get(request, &JsValue::from_str(name)).unwrap_or_default();
    let absent = |value: &JsValue| value.is_undefined() || value.is_null();
    let code = field("code")
        .as_string()
        .ok_or("`code` must be a string of JavaScript (the body of an async function)")?;
    let tools = JsTools::read(&field("tools"))?;
    let limits = field("limits");
    let limits = if absent(&limits) {
        RunLimits::default()
    } else {
        let text = to_json_text(&limits).map_err(|problem| format!("`limits` {problem}"))?;
        serde_json::from_str::<RunLimits>(&text)
            .map_err(|error| format!("`limits` are not valid: {error}"))?
    };
    let approve = field("approve");
    let approve = if absent(&approve) {
        None
    } else {
        Some(approve.dyn_into::<Function>().map_err(|_| {
            "`approve` must be a function (request) => \"approve\" | \"deny\" | \"allow_for_session\""
                .to_owned()
        })?)
    };
    let settings = read_permission(&field("permission"), approve.is_some())?;
    let mcp = read_mcp(&field("mcp"))?;
    let secrets = read_secrets(&field("secrets"))?;
    let agent = field("agent");
    let agent = if absent(&agent) {
        String::new()
    } else {
        agent
            .as_string()
            .ok_or("`agent` must be a string (who the run's memories are saved for)")?
    };
    let inputs = field("inputs");
    let inputs = if absent(&inputs) {
        serde_json::Map::new()
    } else {
        let text = to_json_text(&inputs).map_err(|problem| format!("`inputs` {problem}"))?;
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(inputs)) => inputs,
            _ => return Err("`inputs` must be an object of {name: value}".into()),
        }
    };
    Ok(Parsed {
        agent,
        inputs,
        code,
        tools,
        limits,
        settings,
        approve,
        mcp,
        secrets,
    })
}

/// `permission: {mode?, autonomy?, brake?}`.
fn read_permission(permission: &JsValue, can_ask: bool) -> Result<GateSettings, String> {
    let mut settings = GateSettings {
        mode: if can_ask { Mode::Default } else { Mode::Auto },
        ..GateSettings::default()
    };
    if permission.is_undefined() || permission.is_null() {
        return Ok(settings);
    }
    let text = to_json_text(permission).map_err(|problem| format!("`permission` {problem}"))?;
    let Value::Object(map) = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null) else {
        return Err("`permission` must be an object {mode?, autonomy?, brake?}".into());
    };
    for (key, value) in map {
        match key.as_str() {
            "mode" => {
                let mode = value.as_str().ok_or("`permission.mode` must be a string")?;
                settings.mode = mode
                    .parse()
                    .map_err(|why| format!("`permission.mode`: {why}"))?;
            }
            "brake" => {
                settings.brake = value
                    .as_bool()
                    .ok_or("`permission.brake` must be true or false")?;
            }
            "autonomy" => {
                let Value::Object(rules) = value else {
                    return Err("`permission.autonomy` must be an object {tool: \"auto\" | \"ask\" | \"block\"}".into());
                };
                for (tool, rule) in rules {
                    let rule = rule
                        .as_str()
                        .ok_or_else(|| format!("`permission.autonomy.{tool}` must be a string"))?;
                    let rule: Autonomy = rule
                        .parse()
                        .map_err(|why| format!("`permission.autonomy.{tool}`: {why}"))?;
                    settings.autonomy.insert(tool, rule);
                }
            }
            other => {
                return Err(format!(
                    "`permission.{other}` is not a setting; expected mode, autonomy or brake"
                ));
            }
        }
    }
    settings
        .check()
        .map_err(|why| format!("`permission.autonomy`: {why}"))?;
    Ok(settings)
}

/// `mcp: {name: url | {url, category?}}`.
fn read_mcp(mcp: &JsValue) -> Result<Vec<(String, String, Category)>, String> {
    if mcp.is_undefined() || mcp.is_null() {
        return Ok(Vec::new());
    }
    let text = to_json_text(mcp).map_err(|problem| format!("`mcp` {problem}"))?;
    let Value::Object(map) = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null) else {
        return Err("`mcp` must be an object {name: url | {url, category?}}".into());
    };
    let mut servers = Vec::new();
    for (name, server) in map {
        if !kiln_capabilities::registry::is_identifier(&name) {
            return Err(format!(
                "`mcp.{name}`: a server name must be a JavaScript identifier, since it prefixes its tools' names"
            ));
        }
        let (url, category) = match &server {
            Value::String(url) => (url.clone(), Category::External),
            Value::Object(fields) => {
                let url = fields
                    .get("url")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("`mcp.{name}.url` must be a string"))?;
                let category = match fields.get("category") {
                    None => Category::External,
                    Some(value) => value
                        .as_str()
                        .ok_or_else(|| format!("`mcp.{name}.category` must be a string"))?
                        .parse()
                        .map_err(|why| format!("`mcp.{name}.category`: {why}"))?,
                };
                (url.to_owned(), category)
            }
            _ => {
                return Err(format!(
                    "`mcp.{name}` must be a URL string or {{url, category?}}"
                ));
            }
        };
        servers.push((name, url, category));
    }
    Ok(servers)
}

/// `secrets: {NAME: value}`.
fn read_secrets(secrets: &JsValue) -> Result<SecretScope, String> {
    let mut scope = SecretScope::new();
    if secrets.is_undefined() || secrets.is_null() {
        return Ok(scope);
    }
    let Some(object) = secrets.dyn_ref::<Object>() else {
        return Err("`secrets` must be an object {NAME: value | {value, origins}}".into());
    };
    for entry in Object::entries(object).iter() {
        let entry: js_sys::Array = entry.unchecked_into();
        let name = entry.get(0).as_string().unwrap_or_default();
        let item = entry.get(1);
        let secret = if let Some(value) = item.as_string() {
            Secret::new(value)
        } else {
            let field =
                |key: &str| Reflect::get(&item, &JsValue::from_str(key)).unwrap_or_default();
            let value = field("value").as_string().ok_or_else(|| {
                format!("`secrets.{name}` must be a string or {{value, origins}}")
            })?;
            let origins = field("origins");
            let origins = js_sys::Array::is_array(&origins)
                .then(|| {
                    js_sys::Array::from(&origins)
                        .iter()
                        .map(|origin| origin.as_string())
                        .collect::<Option<Vec<_>>>()
                })
                .flatten()
                .ok_or_else(|| format!("`secrets.{name}.origins` must be an array of origins"))?;
            for origin in &origins {
                if kiln_capabilities::secrets::origin_of(origin).is_none() {
                    return Err(format!(
                        "`secrets.{name}.origins`: `{origin}` is not an http(s) origin"
                    ));
                }
            }
            Secret::for_origins(value, origins)
        };
        scope.insert(name, secret);
    }
    Ok(scope)
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

/// The page's tools: their specs and their `call` functions.
struct JsTools {
    tools: Vec<(CapabilitySpec, Function)>,
    /// The calls in flight, for `ctx.waitOnPerson`.
    holds: Rc<RefCell<HashMap<u32, HeldSignal>>>,
    /// `hold(callNumber, held)`, one function for the run's every call.
    hold: Function,
}

impl JsTools {
    fn read(tools: &JsValue) -> Result<Self, String> {
        let mut specs = Vec::new();
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
        if tools.is_undefined() || tools.is_null() {
            return Ok(Self {
                tools: specs,
                holds,
                hold,
            });
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
            let tool = entry.get(1);
            let get =
                |field: &str| Reflect::get(&tool, &JsValue::from_str(field)).unwrap_or_default();
            let Some(call) = get("call").dyn_into::<Function>().ok() else {
                return Err(format!(
                    "`tools.{name}.call` must be a function (args, ctx) => value"
                ));
            };
            let json_field = |field: &str| -> Result<Option<Value>, String> {
                let value = get(field);
                if value.is_undefined() {
                    return Ok(None);
                }
                let text = to_json_text(&value)
                    .map_err(|problem| format!("`tools.{name}.{field}` {problem}"))?;
                serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|error| format!("`tools.{name}.{field}` is not JSON: {error}"))
            };
            let description = match json_field("description")? {
                None => String::new(),
                Some(Value::String(text)) => text,
                Some(_) => return Err(format!("`tools.{name}.description` must be a string")),
            };
            let input_schema =
                json_field("input_schema")?.unwrap_or_else(|| json!({"type": "object"}));
            let category = match json_field("category")? {
                None => Category::External,
                Some(Value::String(text)) => text
                    .parse()
                    .map_err(|why| format!("`tools.{name}.category`: {why}"))?,
                Some(_) => return Err(format!("`tools.{name}.category` must be a string")),
            };
            let spec = CapabilitySpec {
                name,
                description,
                input_schema,
                category,
                result: json!({}),
                source: Source::Host {
                    host: "page".into(),
                },
            };
            specs.push((spec, call));
        }
        Ok(Self {
            tools: specs,
            holds,
            hold,
        })
    }

    /// Adds the page's tools to the run's registry.
    fn register(self, registry: &mut Registry) {
        for (spec, function) in self.tools {
            let tool = JsTool {
                function,
                holds: self.holds.clone(),
                hold: self.hold.clone(),
            };
            // A name or schema the registry refuses becomes its warning.
            let _ = registry.add(spec, Rc::new(tool));
        }
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
