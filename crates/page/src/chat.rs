//! `kiln.chat(request)` and `kiln.models(provider)`: LLM providers from the page, through
//! `kiln-providers` in the runtime worker (the same adapters as `kiln chat`, over `fetch`);
//! the request is read there, by `kiln_agent::TurnRequest`.
//!
//! ```js
//! const controller = new AbortController();
//! const message = await kiln.chat({
//!   provider: {kind: "openai", base_url: "https://api.openai.com/v1", key: "sk-…"},
//!   messages: [{role: "user", text: "Hello"}],
//!   tools: [{name, description, input_schema}],          // optional
//!   options: {model: "gpt-4o-mini", max_tokens: 256},    // temperature, tool_choice, response_format
//!   budget: {max_usd: 0.05, deadline_ms: 60000, max_turns: 1},  // optional: this turn's own
//!   // or one budget shared by every turn of a run (reserve, then commit, per turn):
//!   // budget: kiln.budget({max_usd: 0.50, deadline_ms: 600000, max_turns: 20}),
//!   onEvent: (event) => {},  // text_delta, tool_call_start|delta|end, usage, stop, done
//!   signal: controller.signal,  // abort → the turn ends with stop `aborted`
//! });
//! // message: {text, tool_calls, usage, stop: {reason, message?}, model, spend?}
//! ```
//!
//! `kiln.budget(limits)` makes a run budget whose `spend()` reports what every turn given it
//! spent (`{spent_usd, lower_bound, unpriced_turns, turns, held_usd, exhausted, calls}`), as of
//! the last of those turns that ended (the budget itself lives in the runtime worker).
//!
//! A provider failure rejects with an `Error` whose `code` is the error kind
//! (`key_rejected`, `model_not_found`, `rate_limited`, `server_error`, `context_overflow`,
//! `bad_request`, `network`, `timeout`, `stream`, `invalid_tool_call`), with `hint` and
//! `status` where known. A request that cannot be read rejects with a `TypeError` naming the
//! field. The key is sent only to the provider's base URL and never appears in an event.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};

use js_sys::{Function, Promise, Reflect};
use kiln_types::runtime::{BudgetLimits, ExchangeEvent, ToRuntime};
use serde_json::{Value, json};
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::*;

use crate::{Kiln, from_json_text, rejection, to_json_text};

fn chat_error(message: impl AsRef<str>) -> JsValue {
    js_sys::TypeError::new(&format!("kiln.chat: {}", message.as_ref())).into()
}

/// What each budget handle of this page reports, by the budget's number.
#[derive(Default, Clone)]
pub(crate) struct Budgets(Rc<RefCell<HashMap<u32, Rc<RefCell<Value>>>>>);

static NEXT_BUDGET_ID: AtomicU32 = AtomicU32::new(1);

/// The property a budget handle answers with its number.
const BUDGET_ID: &str = "kilnBudget";

/// A run budget for `chat({budget})`, shared by every turn it is given to.
#[wasm_bindgen]
pub struct Budget {
    id: u32,
    spend: Rc<RefCell<Value>>,
}

#[wasm_bindgen]
impl Budget {
    #[wasm_bindgen(getter, js_name = kilnBudget)]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// What the turns given this budget spent, as of the last one that ended.
    pub fn spend(&self) -> JsValue {
        from_json_text(&self.spend.borrow().to_string())
    }
}

/// Reads `request[name]`: `None` when it is missing, `null` or `undefined`.
fn present(request: &JsValue, name: &str) -> Option<JsValue> {
    Reflect::get(request, &JsValue::from_str(name))
        .ok()
        .filter(|value| !value.is_undefined() && !value.is_null())
}

/// A page's chat call: the JSON the worker reads, and what stays on the page.
struct ChatCall {
    request: Value,
    /// The shared budget's number, when the request names a handle.
    shared: Option<u32>,
    on_event: Option<Function>,
    signal: Option<kiln_runtime_client::Signal>,
}

fn read_chat(request: &JsValue) -> Result<ChatCall, String> {
    if !request.is_object() {
        return Err(
            "takes one object, {provider, messages, options, tools?, budget?, onEvent?, signal?}"
                .into(),
        );
    }
    let on_event = present(request, "onEvent")
        .map(|value| {
            value
                .dyn_into::<Function>()
                .map_err(|_| "`onEvent` must be a function")
        })
        .transpose()?;
    let signal = present(request, "signal")
        .map(|value| {
            kiln_runtime_client::Signal::from_value(value)
                .ok_or("`signal` must be an AbortSignal (from an AbortController)")
        })
        .transpose()?;
    let shared = present(request, "budget")
        .and_then(|budget| Reflect::get(&budget, &JsValue::from_str(BUDGET_ID)).ok())
        .and_then(|id| id.as_f64())
        .map(|id| id as u32);
    // Functions and the signal stay here; a budget handle crosses as its number.
    let copy = js_sys::Object::assign(&js_sys::Object::new(), request.unchecked_ref());
    for name in ["onEvent", "signal"] {
        let _ = Reflect::delete_property(&copy, &JsValue::from_str(name));
    }
    if let Some(id) = shared {
        let handle = js_sys::Object::new();
        let _ = Reflect::set(&handle, &JsValue::from_str("shared"), &id.into());
        let _ = Reflect::set(&copy, &JsValue::from_str("budget"), &handle);
    }
    let text = to_json_text(&copy).map_err(|problem| format!("the request {problem}"))?;
    let request =
        serde_json::from_str(&text).map_err(|error| format!("the request is not JSON: {error}"))?;
    Ok(ChatCall {
        request,
        shared,
        on_event,
        signal,
    })
}

/// A provider's failure as the page rejects it: an `Error` named `ProviderError`.
fn chat_rejection(problem: &kiln_types::runtime::Problem) -> JsValue {
    let error = rejection("kiln.chat", problem);
    if !problem.bad_request
        && let Some(error) = error.dyn_ref::<js_sys::Error>()
    {
        error.set_name("ProviderError");
    }
    error
}

#[wasm_bindgen]
impl Kiln {
    /// Streams one chat turn (see the module docs); resolves to the final message.
    pub fn chat(&self, request: JsValue) -> Promise {
        let call = read_chat(&request);
        let sent = call.map(|call| {
            let on_event = call.on_event.map(|on_event| {
                Rc::new(move |event: Value| {
                    // A throwing listener loses nothing: the turn goes on.
                    let _ = on_event.call1(&JsValue::NULL, &from_json_text(&event.to_string()));
                }) as crate::runtime::Listener
            });
            let request = call.request;
            let answered = self.runtime.call(
                move |id| ToRuntime::Chat { id, request },
                on_event,
                call.signal,
            );
            let spend = call
                .shared
                .and_then(|id| self.budgets.0.borrow().get(&id).cloned());
            (answered, spend)
        });
        wasm_bindgen_futures::future_to_promise(async move {
            let (answered, spend) = sent.map_err(chat_error)?;
            match answered.await {
                Ok(Ok(message)) => {
                    if let (Some(spend), Some(now)) = (spend, message.get("spend")) {
                        *spend.borrow_mut() = now.clone();
                    }
                    Ok(from_json_text(&message.to_string()))
                }
                Ok(Err(problem)) => Err(chat_rejection(&problem)),
                Err(_) => Err(chat_error("the runtime worker went away during the turn")),
            }
        })
    }

    /// A run budget to share across `chat` calls: `{max_usd?, deadline_ms?, max_turns?,
    /// unpriced_token_ceiling?, max_concurrency?}` (the deadline runs from now).
    ///
    /// # Errors
    ///
    /// A `TypeError` naming what in `limits` is wrong.
    pub fn budget(&self, limits: JsValue) -> Result<Budget, JsValue> {
        let refused = |message: String| {
            JsValue::from(js_sys::TypeError::new(&format!("kiln.budget: {message}")))
        };
        let text =
            to_json_text(&limits).map_err(|problem| refused(format!("the limits {problem}")))?;
        let limits: BudgetLimits = serde_json::from_str(&text).map_err(|error| {
            refused(format!(
                "the limits are not valid ({error}): {{max_usd?, deadline_ms?, max_turns?, unpriced_token_ceiling?, max_concurrency?}}"
            ))
        })?;
        // Numbers are unique across every `Kiln` of the page, so a handle given to another
        // `Kiln`'s chat is refused by name instead of naming one of its budgets.
        let id = NEXT_BUDGET_ID.fetch_add(1, Ordering::Relaxed);
        self.runtime
            .client
            .tell(&ToRuntime::Budget { budget: id, limits });
        // Nothing spent yet: the shape `spend()` has once a turn ended.
        let spend = Rc::new(RefCell::new(json!({
            "spent_usd": 0.0, "lower_bound": false, "unpriced_turns": 0, "turns": 0,
            "held_usd": 0.0, "exhausted": null, "calls": [],
        })));
        self.budgets.0.borrow_mut().insert(id, spend.clone());
        Ok(Budget { id, spend })
    }

    /// Deletes Kiln's own model's cached files (the in-browser model downloads
    /// again at its next turn): resolves to `undefined`.
    #[wasm_bindgen(js_name = clearModel)]
    pub fn clear_model(&self) -> Promise {
        let answered = self
            .runtime
            .call(|id| ToRuntime::ClearModel { id }, None, None);
        wasm_bindgen_futures::future_to_promise(async move {
            match answered.await {
                Ok(Ok(_)) => Ok(JsValue::UNDEFINED),
                Ok(Err(problem)) => Err(rejection("kiln.clearModel", &problem)),
                Err(_) => Err(JsValue::from(js_sys::TypeError::new(
                    "kiln.clearModel: the runtime worker went away",
                ))),
            }
        })
    }

    /// Calls `callback({type: "model_status", state, …})` each time loading
    /// Kiln's own model moves on: `downloading` (`loaded_bytes`,
    /// `total_bytes`), `reading`, `loading`, `ready` (`from_cache`,
    /// `load_ms`, `weights_bytes`, `memory_bytes`, `warning?`), `prompt`
    /// (`read_tokens`, `total_tokens`: a turn's prompt being read) or `failed`
    /// (`failure: {code, message, hint?}`).
    #[wasm_bindgen(js_name = onModelStatus)]
    pub fn on_model_status(&self, callback: js_sys::Function) {
        self.runtime.client.on_model_status(Rc::new(move |status| {
            let event = crate::runtime::event_json(ExchangeEvent::ModelStatus(status));
            let _ = callback.call1(&JsValue::NULL, &from_json_text(&event.to_string()));
        }));
    }

    /// The models a provider offers: resolves to `[{id, display_name?}]`.
    pub fn models(&self, provider: JsValue) -> Promise {
        let provider = to_json_text(&provider)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .ok_or_else(|| {
                JsValue::from(js_sys::TypeError::new(
                    "kiln.models: takes {kind, base_url, key?}",
                ))
            });
        let answered = provider.map(|provider| {
            self.runtime
                .call(move |id| ToRuntime::Models { id, provider }, None, None)
        });
        wasm_bindgen_futures::future_to_promise(async move {
            match answered?.await {
                Ok(Ok(models)) => Ok(from_json_text(&models.to_string())),
                Ok(Err(problem)) => {
                    let error = rejection("kiln.models", &problem);
                    if !problem.bad_request
                        && let Some(error) = error.dyn_ref::<js_sys::Error>()
                    {
                        error.set_name("ProviderError");
                    }
                    Err(error)
                }
                Err(_) => Err(JsValue::from(js_sys::TypeError::new(
                    "kiln.models: the runtime worker went away",
                ))),
            }
        })
    }
}
