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
//! Bad input (a request that is not an object, code that is not a string, a
//! tool without `call`, unknown limits) rejects with a `TypeError` naming what
//! was wrong; everything the program does comes back as a `tool-result/v1`
//! object, never as a rejection.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use js_sys::{Function, JSON, Object, Promise, Reflect};
use kiln_host::{PageTools, PersonHold, SandboxPool};
use kiln_types::RunLimits;
use kiln_types::protocol::CallRequest;
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// A loaded runtime: a pool of sandbox workers, ready for runs.
#[wasm_bindgen]
pub struct Kiln {
    pool: SandboxPool,
}

#[wasm_bindgen]
impl Kiln {
    /// Starts the pool (workers load `worker_url`, up to `pool_size` kept
    /// started) and resolves once the first worker is ready.
    ///
    /// # Errors
    ///
    /// Why the first sandbox worker could not start.
    pub async fn load(worker_url: String, pool_size: usize) -> Result<Self, JsError> {
        let pool = SandboxPool::new(worker_url, pool_size);
        pool.ready()
            .await
            .map_err(|problem| JsError::new(&problem))?;
        Ok(Self { pool })
    }

    /// Runs one program like [`Kiln::run`] and resolves to the sandbox's own
    /// account of it instead: `{report, warnings, catalog_digest}`, where
    /// `report` has the outcome, console lines, calls and the timings
    /// (`duration_ms`, `start_ms`, `context_ms`, `person_wait_ms`). For tools
    /// and benchmarks; a model reads `run`'s result.
    pub fn report(&self, request: JsValue) -> Promise {
        let pool = self.pool.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let (code, tools, limits) = read_request(&request).map_err(type_error)?;
            let result = pool.run(code, limits, Rc::new(tools)).await;
            let json = json!({
                "report": result.report,
                "warnings": result.warnings,
                "catalog_digest": result.catalog_digest,
            });
            Ok(from_json_text(&json.to_string()))
        })
    }

    /// Runs one program; resolves to its `tool-result/v1` object.
    pub fn run(&self, request: JsValue) -> Promise {
        let pool = self.pool.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let (code, tools, limits) = read_request(&request).map_err(type_error)?;
            let result = pool.run(code, limits, Rc::new(tools)).await;
            let json = serde_json::to_string(&result.into_tool_result())
                .map_err(|error| type_error(format!("the result could not be encoded: {error}")))?;
            JSON::parse(&json)
        })
    }
}

fn type_error(message: impl AsRef<str>) -> JsValue {
    js_sys::TypeError::new(&format!("kiln.run: {}", message.as_ref())).into()
}

/// Reads `{code, tools?, limits?}`, naming the first thing that is wrong.
fn read_request(request: &JsValue) -> Result<(String, JsTools, RunLimits), String> {
    if !request.is_object() {
        return Err("takes one object, {code, tools?, limits?}".into());
    }
    let field = |name: &str| Reflect::get(request, &JsValue::from_str(name)).unwrap_or_default();
    let code = field("code")
        .as_string()
        .ok_or("`code` must be a string of JavaScript (the body of an async function)")?;
    let tools = JsTools::read(&field("tools"))?;
    let limits = field("limits");
    let limits = if limits.is_undefined() || limits.is_null() {
        RunLimits::default()
    } else {
        let text = to_json_text(&limits).map_err(|problem| format!("`limits` {problem}"))?;
        serde_json::from_str::<RunLimits>(&text)
            .map_err(|error| format!("`limits` are not valid: {error}"))?
    };
    Ok((code, tools, limits))
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

/// The page's tools: their catalog entries and their `call` functions.
struct JsTools {
    catalog: Value,
    calls: HashMap<String, Function>,
    /// The calls in flight, for `ctx.waitOnPerson`.
    holds: Rc<RefCell<HashMap<u32, PersonHold>>>,
    /// `hold(callNumber, held)`, one function for the run's every call.
    hold: Function,
}

impl JsTools {
    fn read(tools: &JsValue) -> Result<Self, String> {
        let mut catalog = Vec::new();
        let mut calls = HashMap::new();
        let holds: Rc<RefCell<HashMap<u32, PersonHold>>> = Rc::default();
        let hold = {
            let holds = holds.clone();
            Closure::<dyn FnMut(u32, bool)>::new(move |call_number: u32, held: bool| {
                if let Some(person) = holds.borrow().get(&call_number) {
                    person.held(held);
                }
            })
            .into_js_value()
            .unchecked_into::<Function>()
        };
        if tools.is_undefined() || tools.is_null() {
            return Ok(Self {
                catalog: Value::Array(catalog),
                calls,
                holds,
                hold,
            });
        }
        let Some(object) = tools.dyn_ref::<Object>() else {
            return Err(
                "`tools` must be an object of {name: {description, input_schema, call}}".into(),
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
            let mut spec = serde_json::Map::new();
            spec.insert("name".into(), Value::String(name.clone()));
            for field in ["description", "input_schema"] {
                let value = get(field);
                if value.is_undefined() {
                    continue;
                }
                let text = to_json_text(&value)
                    .map_err(|problem| format!("`tools.{name}.{field}` {problem}"))?;
                let value = serde_json::from_str(&text)
                    .map_err(|error| format!("`tools.{name}.{field}` is not JSON: {error}"))?;
                spec.insert(field.into(), value);
            }
            catalog.push(Value::Object(spec));
            calls.insert(name, call);
        }
        Ok(Self {
            catalog: Value::Array(catalog),
            calls,
            holds,
            hold,
        })
    }
}

impl PageTools for JsTools {
    fn catalog(&self) -> Value {
        self.catalog.clone()
    }

    fn call(&self, call: CallRequest, person: PersonHold) -> LocalBoxFuture<'static, ToolReply> {
        let function = self.calls.get(&call.tool).cloned();
        let holds = self.holds.clone();
        let hold = self.hold.clone();
        Box::pin(async move {
            let Some(function) = function else {
                return Err(ToolFailure {
                    code: "tool_unavailable".into(),
                    message: format!("the page serves no tool `{}`", call.tool),
                    detail: None,
                    outcome: CallOutcome::ToolUnavailable,
                });
            };
            let tool = call.tool.clone();
            let args = serde_json::to_string(&call.args).unwrap_or_else(|_| "{}".into());
            holds.borrow_mut().insert(call.call_number, person);
            let settled = match invoke_tool(&function, &args, call.call_number, &hold) {
                Ok(value) => match value.dyn_into::<Promise>() {
                    Ok(promise) => JsFuture::from(promise).await,
                    Err(value) => Ok(value),
                },
                Err(error) => Err(error),
            };
            holds.borrow_mut().remove(&call.call_number);
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
