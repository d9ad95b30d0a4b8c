//! The page API's side of the runtime protocol, over the one client
//! (`kiln-runtime-client`): the page's functions as a [`PageSide`] — each
//! tool's `call(args, ctx)`, `approve(request)`, `ask(question)` — and the
//! page's shapes of what crosses: an approval request with `callNumber` and
//! its `why`, events as the objects `onEvent` documents. The page holds no
//! ladder, provider, store, sandbox pool or run record: those are the
//! worker's.

use std::collections::HashMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use js_sys::{Function, Promise};
use kiln_runtime_client::{Answered, PageCall, PageSide, RuntimeClient, Signal, With};
use kiln_types::permission::{Answer, ApprovalRequest};
use kiln_types::runtime::{ExchangeEvent, ToRuntime, Told};
use kiln_types::tool_result::{CallOutcome, ToolFailure, ToolReply};
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::{answer_text, describe, failure, from_json_text, invoke_tool, to_json_text};

/// Where a streamed event or a change goes, in the page's shape.
pub(crate) type Listener = Rc<dyn Fn(Value)>;

/// The page's functions an exchange calls back: its tools' `call`s, and
/// its `approve` and `ask` callbacks.
pub(crate) struct JsPage {
    pub(crate) calls: HashMap<String, Function>,
    pub(crate) approve: Option<Function>,
    pub(crate) ask: Option<Function>,
}

impl PageSide for JsPage {
    fn call(&self, call: PageCall, held: Rc<dyn Fn(bool)>) -> LocalBoxFuture<'static, ToolReply> {
        let function = self.calls.get(&call.tool).cloned();
        Box::pin(async move {
            match function {
                Some(function) => call_tool(call, &function, held).await,
                None => Err(ToolFailure {
                    code: "tool_unavailable".into(),
                    message: format!("the page has no `{}` for this run", call.tool),
                    detail: None,
                    outcome: CallOutcome::ToolUnavailable,
                }),
            }
        })
    }

    fn can_approve(&self) -> bool {
        self.approve.is_some()
    }

    fn approve(&self, request: ApprovalRequest) -> LocalBoxFuture<'static, Answer> {
        let approve = self.approve.clone();
        Box::pin(async move {
            match approve {
                Some(approve) => ask_page(&approve, &request).await,
                None => Answer::Unavailable {
                    reason: "the page gave no approve callback".into(),
                },
            }
        })
    }

    fn can_ask(&self) -> bool {
        self.ask.is_some()
    }

    fn ask(&self, question: String) -> LocalBoxFuture<'static, Told> {
        let ask = self.ask.clone();
        Box::pin(async move {
            match ask {
                Some(ask) => ask_person(&ask, &question).await,
                None => Told::Unavailable {
                    reason: "the page gave no ask callback".into(),
                },
            }
        })
    }
}

/// An exchange's event as the page's `onEvent` sees it: an agent's or a
/// chat's event as it is, a node's report with `type: "node"`, a program's
/// progress as `{type: "progress", node?, percent, message?}`, the model's
/// loading with `type: "model_status"`.
pub(crate) fn event_json(event: ExchangeEvent) -> Value {
    let tagged = |value: Value, kind: &str| {
        let mut value = value;
        if let Some(object) = value.as_object_mut() {
            object.insert("type".into(), Value::from(kind));
        }
        value
    };
    match event {
        ExchangeEvent::Agent(event) => serde_json::to_value(event).unwrap_or(Value::Null),
        ExchangeEvent::Chat(event) => serde_json::to_value(event).unwrap_or(Value::Null),
        ExchangeEvent::Node(report) => {
            tagged(serde_json::to_value(report).unwrap_or(Value::Null), "node")
        }
        ExchangeEvent::Progress { node, progress } => {
            let mut value = tagged(
                serde_json::to_value(progress).unwrap_or(Value::Null),
                "progress",
            );
            if let (Some(node), Some(object)) = (node, value.as_object_mut()) {
                object.insert("node".into(), Value::from(node));
            }
            value
        }
        ExchangeEvent::ModelStatus(status) => tagged(
            serde_json::to_value(status).unwrap_or(Value::Null),
            "model_status",
        ),
    }
}

/// The approval card's content as the page's `approve` receives it.
fn approval_json(request: &ApprovalRequest) -> Value {
    json!({
        "tool": request.tool,
        "callNumber": request.call_number,
        "category": request.category,
        "module": request.module,
        "description": request.description,
        "args": request.args,
        "reason": request.reason,
        "why": request.reason.sentence(),
        "host": request.host,
    })
}

/// The started runtime worker, as the page API sends to it.
pub(crate) struct Runtime {
    pub(crate) client: RuntimeClient,
}

impl Runtime {
    /// Sends the exchange `message(id, approve)` makes, `approve` saying
    /// whether the page gave an `approve` callback; its page tools, approvals
    /// and questions are answered by `page`, its events go to `on_event`.
    pub(crate) fn exchange(
        &self,
        message: impl FnOnce(u64, bool) -> ToRuntime,
        page: JsPage,
        signal: Option<Signal>,
        on_event: Option<Listener>,
    ) -> Answered {
        let approve = page.can_approve();
        let with = With {
            page: Some(Rc::new(page)),
            on_event: on_event.map(page_listener),
            signal,
        };
        self.client.send(move |id| message(id, approve), with).1
    }

    /// Sends the request `message(id)` makes; resolves to its answer, its
    /// streamed events going to `on_event`. The page's `signal` sends
    /// `cancel`.
    pub(crate) fn call(
        &self,
        message: impl FnOnce(u64) -> ToRuntime,
        on_event: Option<Listener>,
        signal: Option<Signal>,
    ) -> Answered {
        let with = With {
            page: None,
            on_event: on_event.map(page_listener),
            signal,
        };
        self.client.send(message, with).1
    }
}

/// A page listener as the client's: each event in the page's shape.
fn page_listener(listener: Listener) -> kiln_runtime_client::Listener {
    Rc::new(move |event| listener(event_json(event)))
}

/// What a page function's call answered: its value, or the value its
/// promise settled with.
async fn settle(called: Result<JsValue, JsValue>) -> Result<JsValue, JsValue> {
    match called?.dyn_into::<Promise>() {
        Ok(promise) => JsFuture::from(promise).await,
        Err(value) => Ok(value),
    }
}

/// Asks the page's `ask(question)` callback, which answers with text.
async fn ask_person(ask: &Function, question: &str) -> Told {
    let called = ask.call1(&JsValue::NULL, &JsValue::from_str(question));
    let settled = settle(called).await;
    match settled {
        Ok(value) => match value.as_string() {
            Some(text) => Told::Said { text },
            None => Told::Unavailable {
                reason: format!(
                    "the page's ask callback answered {}; expected a string",
                    answer_text(&value)
                ),
            },
        },
        Err(error) => Told::Unavailable {
            reason: format!("the page's ask callback failed: {}", describe(&error)),
        },
    }
}

/// Calls a page tool: `call(args, ctx)`, `ctx.waitOnPerson` telling the
/// worker the call is held on a person.
async fn call_tool(call: PageCall, function: &Function, held: Rc<dyn Fn(bool)>) -> ToolReply {
    let PageCall {
        call_number,
        tool,
        args,
    } = call;
    let hold = Closure::<dyn FnMut(u32, bool)>::new(move |_call_number: u32, is_held: bool| {
        held(is_held);
    })
    .into_js_value()
    .unchecked_into::<Function>();
    let args = serde_json::to_string(&args).unwrap_or_else(|_| "{}".into());
    let settled = settle(invoke_tool(function, &args, call_number, &hold)).await;
    match settled {
        Ok(value) if value.is_undefined() => Ok(Value::Null),
        Ok(value) => {
            let invalid = |problem: String| ToolFailure {
                code: "invalid_result".into(),
                message: format!("{tool} returned a value that {problem}"),
                detail: None,
                outcome: CallOutcome::Error,
            };
            let text = to_json_text(&value).map_err(invalid)?;
            let value: Value = serde_json::from_str(&text)
                .map_err(|error| invalid(format!("is not JSON: {error}")))?;
            // Deeper, its reply's envelope would be past what the worker reads.
            kiln_types::check_depth(&value).map_err(|problem| invalid(problem.to_string()))?;
            Ok(value)
        }
        Err(error) => Err(failure(&error)),
    }
}

/// Asks the page's `approve(request)` callback.
async fn ask_page(approve: &Function, request: &ApprovalRequest) -> Answer {
    let request = from_json_text(&approval_json(request).to_string());
    let settled = settle(approve.call1(&JsValue::NULL, &request)).await;
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
}
