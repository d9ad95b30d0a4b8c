//! `kiln.chat(request)` and `kiln.models(provider)`: LLM providers from the page, through
//! `kiln-providers` (the same adapters as `kiln chat`, over `fetch`).
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
//! spent (`{spent_usd, lower_bound, unpriced_turns, turns, held_usd, exhausted, calls}`).
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

use futures::StreamExt as _;
use js_sys::{Function, Promise, Reflect};
use kiln_providers::budget::{BudgetLimits, RunBudget};
use kiln_providers::cost::PriceCatalog;
use kiln_providers::{
    AbortSignal, ChatOptions, ChatRequest, Event, HttpProvider, Message, ProviderConfig,
    ProviderError, ToolDef,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::*;

use crate::{Kiln, from_json_text};

/// `budget` of a chat request.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetRequest {
    max_usd: Option<f64>,
    deadline_ms: Option<f64>,
    max_turns: Option<u32>,
    unpriced_token_ceiling: Option<u64>,
}

fn chat_error(message: impl AsRef<str>) -> JsValue {
    js_sys::TypeError::new(&format!("kiln.chat: {}", message.as_ref())).into()
}

/// Reads `request[name]` as `T`, naming the field when it does not fit.
fn field<T: DeserializeOwned>(
    request: &JsValue,
    name: &str,
    required: bool,
    what: &str,
) -> Result<Option<T>, String> {
    let value = Reflect::get(request, &JsValue::from_str(name)).unwrap_or_default();
    if value.is_undefined() || value.is_null() {
        return if required {
            Err(format!("`{name}` is missing: {what}"))
        } else {
            Ok(None)
        };
    }
    let text = js_sys::JSON::stringify(&value)
        .ok()
        .and_then(|text| text.as_string())
        .ok_or_else(|| format!("`{name}` is not JSON: {what}"))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|error| format!("`{name}` is not valid ({error}): {what}"))
}

/// The run budgets `kiln.budget()` made, shared with the handles it gave out.
#[derive(Default, Clone)]
pub(crate) struct Budgets(Rc<RefCell<HashMap<u32, RunBudget>>>);

static NEXT_BUDGET_ID: AtomicU32 = AtomicU32::new(1);

/// The property a budget handle answers with its id.
const BUDGET_ID: &str = "kilnBudget";

fn new_budget(limits: BudgetRequest) -> RunBudget {
    let defaults = BudgetLimits::default();
    RunBudget::new(
        BudgetLimits {
            max_usd: limits.max_usd,
            deadline_ms: limits.deadline_ms,
            max_turns: limits.max_turns,
            unpriced_token_ceiling: limits
                .unpriced_token_ceiling
                .unwrap_or(defaults.unpriced_token_ceiling),
        },
        Rc::new(PriceCatalog::builtin()),
        Rc::new(kiln_http::SystemClock),
    )
}

/// A run budget for `chat({budget})`, shared by every turn it is given to.
#[wasm_bindgen]
pub struct Budget {
    id: u32,
    budget: RunBudget,
}

#[wasm_bindgen]
impl Budget {
    #[wasm_bindgen(getter, js_name = kilnBudget)]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// What the turns given this budget spent so far.
    pub fn spend(&self) -> JsValue {
        to_js(&self.budget.spend())
    }
}

/// `budget` of a chat request: limits for this turn alone, or a shared budget's handle.
enum BudgetField {
    Own(BudgetRequest),
    Shared(u32),
}

struct ChatCall {
    provider: ProviderConfig,
    request: ChatRequest,
    budget: Option<BudgetField>,
    on_event: Option<Function>,
    signal: Option<web_sys_abort::Signal>,
}

fn read_chat(request: &JsValue) -> Result<ChatCall, String> {
    if !request.is_object() {
        return Err(
            "takes one object, {provider, messages, options, tools?, budget?, onEvent?, signal?}"
                .into(),
        );
    }
    let provider: ProviderConfig = field(
        request,
        "provider",
        true,
        "{kind: \"openai\" | \"anthropic\" | \"ollama\", base_url, key?}",
    )?
    .ok_or("`provider` is missing")?;
    let messages: Vec<Message> = field(
        request,
        "messages",
        true,
        "an array of {role: \"system\" | \"user\" | \"assistant\" | \"tool\", text, …}",
    )?
    .unwrap_or_default();
    let tools: Vec<ToolDef> = field(
        request,
        "tools",
        false,
        "an array of {name, description, input_schema}",
    )?
    .unwrap_or_default();
    let options: ChatOptions = field(
        request,
        "options",
        true,
        "{model, max_tokens, temperature?, tool_choice?, response_format?}",
    )?
    .ok_or("`options` is missing")?;
    let handle = Reflect::get(request, &JsValue::from_str("budget"))
        .ok()
        .filter(JsValue::is_object)
        .and_then(|budget| Reflect::get(&budget, &JsValue::from_str(BUDGET_ID)).ok())
        .and_then(|id| id.as_f64());
    let budget = match handle {
        Some(id) => Some(BudgetField::Shared(id as u32)),
        None => field::<BudgetRequest>(
            request,
            "budget",
            false,
            "{max_usd?, deadline_ms?, max_turns?, unpriced_token_ceiling?}, or a handle from kiln.budget()",
        )?
        .map(BudgetField::Own),
    };
    let on_event = match Reflect::get(request, &JsValue::from_str("onEvent")) {
        Ok(value) if value.is_undefined() || value.is_null() => None,
        Ok(value) => Some(
            value
                .dyn_into::<Function>()
                .map_err(|_| "`onEvent` must be a function")?,
        ),
        Err(_) => None,
    };
    let signal = match Reflect::get(request, &JsValue::from_str("signal")) {
        Ok(value) if value.is_undefined() || value.is_null() => None,
        Ok(value) => Some(
            web_sys_abort::Signal::from_value(value)
                .ok_or("`signal` must be an AbortSignal (from an AbortController)")?,
        ),
        Err(_) => None,
    };
    Ok(ChatCall {
        provider,
        request: ChatRequest {
            messages,
            tools,
            options,
        },
        budget,
        on_event,
        signal,
    })
}

/// A provider error as a page `Error` with `code`, `hint` and `status`.
fn provider_error(error: &ProviderError) -> JsValue {
    let js = js_sys::Error::new(&error.to_string());
    js.set_name("ProviderError");
    let _ = Reflect::set(&js, &"code".into(), &error.code().into());
    if let Some(hint) = &error.hint {
        let _ = Reflect::set(&js, &"hint".into(), &hint.into());
    }
    if let Some(status) = error.status {
        let _ = Reflect::set(&js, &"status".into(), &status.into());
    }
    js.into()
}

fn to_js<T: serde::Serialize>(value: &T) -> JsValue {
    from_json_text(&serde_json::to_string(value).unwrap_or_else(|_| "null".into()))
}

#[wasm_bindgen]
impl Kiln {
    /// Streams one chat turn (see the module docs); resolves to the final message.
    pub fn chat(&self, request: JsValue) -> Promise {
        let http = self.http.clone();
        let budgets = self.budgets.clone();
        let call = read_chat(&request);
        wasm_bindgen_futures::future_to_promise(async move {
            let call = call.map_err(chat_error)?;
            let provider = HttpProvider::new(call.provider, http);
            let budget = match call.budget {
                None => None,
                Some(BudgetField::Own(limits)) => Some(new_budget(limits)),
                Some(BudgetField::Shared(id)) => {
                    Some(budgets.0.borrow().get(&id).cloned().ok_or_else(|| {
                        chat_error(format!(
                            "`budget` names budget {id}, which this Kiln did not make"
                        ))
                    })?)
                }
            };
            let abort = AbortSignal::new();
            // Held for the turn: the listener must outlive it.
            let _listener = call
                .signal
                .as_ref()
                .map(|signal| signal.on_abort(abort.clone()));
            let mut stream =
                kiln_providers::turn(&provider, call.request, budget.clone(), Some(abort));
            let mut done = None;
            while let Some(item) = stream.next().await {
                let event = item.map_err(|error| provider_error(&error))?;
                if let Some(on_event) = &call.on_event {
                    // A throwing listener loses nothing: the turn goes on.
                    let _ = on_event.call1(&JsValue::NULL, &to_js(&event));
                }
                if let Event::Done { message } = event {
                    done = Some(message);
                }
            }
            let message = done.unwrap_or_default();
            let mut value = serde_json::to_value(&message).unwrap_or_default();
            if let (Some(budget), Some(object)) = (budget, value.as_object_mut()) {
                object.insert(
                    "spend".into(),
                    serde_json::to_value(budget.spend()).unwrap_or_default(),
                );
            }
            Ok(to_js(&value))
        })
    }

    /// A run budget to share across `chat` calls: `{max_usd?, deadline_ms?, max_turns?,
    /// unpriced_token_ceiling?}` (the deadline runs from now).
    ///
    /// # Errors
    ///
    /// A `TypeError` naming what in `limits` is wrong.
    pub fn budget(&self, limits: JsValue) -> Result<Budget, JsValue> {
        let wrapper = js_sys::Object::new();
        let _ = Reflect::set(&wrapper, &JsValue::from_str("budget"), &limits);
        let limits: BudgetRequest = field(
            &wrapper,
            "budget",
            true,
            "{max_usd?, deadline_ms?, max_turns?, unpriced_token_ceiling?}",
        )
        .map_err(|message| {
            JsValue::from(js_sys::TypeError::new(&format!("kiln.budget: {message}")))
        })?
        .ok_or_else(|| JsValue::from(js_sys::TypeError::new("kiln.budget: takes the limits")))?;
        let budget = new_budget(limits);
        // Ids are unique across every `Kiln` of the page, so a handle given to another
        // `Kiln`'s chat is refused by name instead of naming one of its budgets.
        let id = NEXT_BUDGET_ID.fetch_add(1, Ordering::Relaxed);
        self.budgets.0.borrow_mut().insert(id, budget.clone());
        Ok(Budget { id, budget })
    }

    /// The models a provider offers: resolves to `[{id, display_name?}]`.
    pub fn models(&self, provider: JsValue) -> Promise {
        let http = self.http.clone();
        let config = js_sys::JSON::stringify(&provider)
            .ok()
            .and_then(|text| text.as_string())
            .ok_or_else(|| "takes {kind, base_url, key?}".to_owned())
            .and_then(|text| {
                serde_json::from_str::<ProviderConfig>(&text).map_err(|error| {
                    format!("the provider is not valid ({error}): {{kind, base_url, key?}}")
                })
            });
        wasm_bindgen_futures::future_to_promise(async move {
            let config = config.map_err(|message| {
                JsValue::from(js_sys::TypeError::new(&format!("kiln.models: {message}")))
            })?;
            let provider = HttpProvider::new(config, http);
            let models = kiln_providers::Provider::models(&provider)
                .await
                .map_err(|error| provider_error(&error))?;
            Ok(to_js(&models))
        })
    }

    /// For `cargo xtask bench`: SSE parsing in this page's wasm,
    /// `{bytes, events, median_ms, mb_per_s}` over `rounds` passes of a recorded stream of
    /// about `bytes` bytes.
    #[wasm_bindgen(js_name = benchSse)]
    pub fn bench_sse(&self, bytes: usize, rounds: u32) -> JsValue {
        to_js(&kiln_providers::bench::sse_throughput(
            bytes,
            rounds,
            &kiln_http::now_ms,
        ))
    }
}

/// The page's `AbortSignal`, without web-sys's feature for it.
pub(crate) mod web_sys_abort {
    use js_sys::{Function, Reflect};
    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::{JsCast, JsValue};

    pub struct Signal(JsValue);

    impl Signal {
        /// `value` when it looks like an `AbortSignal` (`aborted` and `addEventListener`).
        pub fn from_value(value: JsValue) -> Option<Self> {
            let has = |name: &str| Reflect::has(&value, &JsValue::from_str(name)).unwrap_or(false);
            (value.is_object() && has("aborted") && has("addEventListener")).then_some(Self(value))
        }

        /// Aborts `abort` when the signal fires (or at once if it already has), for as long
        /// as the returned guard lives; dropping it removes the listener.
        pub fn on_abort(&self, abort: kiln_providers::AbortSignal) -> Listener {
            self.on_abort_do(move || abort.abort())
        }

        /// Runs `action` when the signal fires (or at once if it already has), for as long
        /// as the returned guard lives.
        pub fn on_abort_do(&self, mut action: impl FnMut() + 'static) -> Listener {
            if Reflect::get(&self.0, &JsValue::from_str("aborted"))
                .ok()
                .and_then(|value| value.as_bool())
                .unwrap_or(false)
            {
                action();
            }
            let closure = Closure::<dyn FnMut()>::new(action);
            if let Ok(add) = Reflect::get(&self.0, &JsValue::from_str("addEventListener"))
                .and_then(JsCast::dyn_into::<Function>)
            {
                let _ = add.call2(&self.0, &JsValue::from_str("abort"), closure.as_ref());
            }
            Listener {
                signal: self.0.clone(),
                closure,
            }
        }
    }

    /// An `abort` listener on a page's signal, removed when dropped (the page may abort its
    /// controller long after the turn ended).
    pub struct Listener {
        signal: JsValue,
        closure: Closure<dyn FnMut()>,
    }

    impl Drop for Listener {
        fn drop(&mut self) {
            if let Ok(remove) =
                Reflect::get(&self.signal, &JsValue::from_str("removeEventListener"))
                    .and_then(JsCast::dyn_into::<Function>)
            {
                let _ = remove.call2(
                    &self.signal,
                    &JsValue::from_str("abort"),
                    self.closure.as_ref(),
                );
            }
        }
    }
}
