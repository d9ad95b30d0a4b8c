//! The guest's `tools` object and the [`ToolHost`] seam through which every call
//! leaves the sandbox.
//!
//! `tools` is a Proxy over a frozen, prototype-less object holding one function
//! per exposed name. Reading a name the run does not have throws the reference's
//! `TypeError`; `then`, `toJSON` and symbol keys read as `undefined` so that
//! `await tools` and `JSON.stringify(tools)` do not throw. A call converts its
//! arguments to JSON inside the guest, asks the host, and settles its promise
//! with the host's reply; the host future is awaited by the job executor, never
//! polled in a loop.

use std::cell::RefCell;
use std::rc::Rc;

use boa_engine::error::{EngineError, PanicError};
use boa_engine::job::NativeAsyncJob;
use boa_engine::object::builtins::{JsPromise, JsProxy};
use boa_engine::object::{FunctionObjectBuilder, IntegrityLevel, ObjectInitializer};
use boa_engine::property::{Attribute, PropertyKey};
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction,
    js_string,
};
use futures::future::LocalBoxFuture;
use kiln_types::tool_result::{Budget, CallOutcome, CallSummary};
pub use kiln_types::tool_result::{ToolFailure, ToolReply};
use kiln_types::{ConsoleLine, Progress};
use serde_json::Value;

use crate::catalog::Admission;
use crate::clock::{IdleState, Moment, PersonSignal, RunClock};
use crate::inspect;

/// One call as the host receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// 1-based, in the order the program made its calls.
    pub call_number: u32,
    pub tool: String,
    pub args: Value,
}

/// Where tool calls go. The sandbox knows nothing of what a tool does.
pub trait ToolHost {
    /// Starts one call. `person` lets the host say when the call is held on a
    /// person (an approval, a decision), which the person-wait budget counts.
    fn call(&self, call: ToolCall, person: PersonSignal) -> LocalBoxFuture<'static, ToolReply>;

    /// The guest stopped running JavaScript and waits on its calls and sleeps.
    /// A host across a worker boundary sends the calls made so far now.
    fn idle(&self, _state: IdleState) {}

    /// The guest printed: `lines` were kept within the run's console budget
    /// and `dropped` is how many lines the budget has cut so far. Called as
    /// the guest prints (see `console`), also in the middle of a loop that
    /// never goes idle, so a host that ends the run from outside still has
    /// its output.
    fn console(&self, _lines: &[ConsoleLine], _dropped: usize) {}

    /// The guest reported how far it has come (`progress`), already clamped,
    /// cut and rate-limited. Called as it reports, like [`ToolHost::console`].
    fn progress(&self, _progress: &Progress) {}
}

/// A host with no tools: every call is refused (admission exposes none anyway).
pub struct NoTools;

impl ToolHost for NoTools {
    fn call(&self, call: ToolCall, _person: PersonSignal) -> LocalBoxFuture<'static, ToolReply> {
        let failure = ToolFailure {
            code: "tool_unavailable".into(),
            message: format!("{} is not served by this host", call.tool),
            detail: None,
            outcome: CallOutcome::ToolUnavailable,
        };
        Box::pin(async move { Err(failure) })
    }
}

/// A tool rejection handed to the guest, remembered so that an uncaught one
/// fails the run with the call's code.
pub(crate) struct RaisedFailure {
    pub object: JsObject,
    pub call_number: u32,
    pub tool: String,
    pub failure: ToolFailure,
}

/// The run's tool state, kept in the context's host data.
pub(crate) struct RunTools {
    host: Rc<dyn ToolHost>,
    admission: Rc<Admission>,
    max_calls: u32,
    pub calls: RefCell<Vec<CallSummary>>,
    pub raised: RefCell<Vec<RaisedFailure>>,
    /// Keeps the calls in flight and records a budget stop.
    clock: Rc<RunClock>,
}

#[derive(Clone)]
pub(crate) struct SharedRunTools(pub Rc<RunTools>);

/// Defines `tools` on the context's global object.
pub(crate) fn install(
    context: &mut Context,
    host: Rc<dyn ToolHost>,
    admission: Rc<Admission>,
    max_calls: u32,
    clock: Rc<RunClock>,
) -> JsResult<SharedRunTools> {
    let state = SharedRunTools(Rc::new(RunTools {
        host,
        admission: admission.clone(),
        max_calls,
        calls: RefCell::new(Vec::new()),
        raised: RefCell::new(Vec::new()),
        clock,
    }));
    context.insert_data(state.clone());

    let functions: Vec<(JsString, JsObject)> = admission
        .exposed_names()
        .into_iter()
        .map(|name| (JsString::from(name), tool_function(name, context)))
        .collect();
    let describe = !admission.tools.contains_key(DESCRIBE);
    let mut target = ObjectInitializer::new(context);
    for (name, function) in functions {
        target.property(name, function, Attribute::ENUMERABLE);
    }
    // Not a tool: not enumerable, and a tool of that name keeps it.
    if describe {
        target.function(
            NativeFunction::from_fn_ptr(describe_tool),
            js_string!("describe"),
            1,
        );
    }
    let target = target.build();
    target.set_prototype(None);
    target.set_integrity_level(IntegrityLevel::Frozen, context)?;

    let proxy = JsProxy::builder(target)
        .get(get_trap)
        .set(refuse_write)
        .build(context)?;
    context.register_global_property(js_string!("tools"), proxy, Attribute::empty())?;
    Ok(state)
}

/// `tools.describe(name)`'s name.
const DESCRIBE: &str = "describe";

/// `tools.describe(name)`: the tool's TypeScript declaration, written from its
/// schema ([`kiln_types::declaration`]).
fn describe_tool(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let name = args
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string(context)?
        .to_std_string_lossy();
    let Some(state) = context.get_data::<SharedRunTools>().cloned() else {
        return Err(JsNativeError::typ()
            .with_message("tools.describe: this run has no tools")
            .into());
    };
    let admission = &state.0.admission;
    match admission.tools.get(&name) {
        Some(entry) => Ok(JsString::from(kiln_types::declaration::declaration(
            &entry.name,
            &entry.description,
            &entry.input_schema,
            None,
        ))
        .into()),
        None => Err(JsNativeError::typ()
            .with_message(format!(
                "tools.describe: this run has no tool `{name}`; it has {}",
                admission.exposed_names().join(", ")
            ))
            .into()),
    }
}

/// The guest function that calls the tool `name`: what `tools.<name>` reads,
/// and what `workspace`'s methods call. Every call through it is one tool
/// call of the run (counted, summarised, under the call budget).
pub(crate) fn tool_function(name: &str, context: &mut Context) -> JsObject {
    let function = NativeFunction::from_copy_closure_with_captures(call_tool, JsString::from(name));
    FunctionObjectBuilder::new(context.realm(), function)
        .name(JsString::from(name))
        .length(1)
        .build()
        .into()
}

/// `get` trap: known names read their function; `then`, `toJSON` and symbols read
/// `undefined`; anything else throws naming the run's tools.
fn get_trap(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let target = args.first().and_then(JsValue::as_object);
    let key = args.get(1).cloned().unwrap_or_default();
    let Some(target) = target else {
        return Ok(JsValue::undefined());
    };
    if key.is_symbol() {
        return Ok(JsValue::undefined());
    }
    let name = key.to_string(context)?;
    let property = PropertyKey::from(name.clone());
    if target.has_own_property(property.clone(), context)? {
        return target.get(property, context);
    }
    let name = name.to_std_string_escaped();
    if name == "then" || name == "toJSON" {
        return Ok(JsValue::undefined());
    }
    let names = context.get_data::<SharedRunTools>().map(|state| {
        state
            .0
            .admission
            .exposed_names()
            .iter()
            .map(|name| (*name).to_owned())
            .collect::<Vec<_>>()
    });
    let names = names.unwrap_or_default();
    Err(JsNativeError::typ()
        .with_message(format!(
            "tools.{name} is not available in this codemode run. Available tools: {} ({}). \
             Not every tool is available inside programs yet.",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            },
            names.len()
        ))
        .into())
}

fn refuse_write(_this: &JsValue, _args: &[JsValue], _context: &mut Context) -> JsResult<JsValue> {
    Err(JsNativeError::typ()
        .with_message("tools is read-only")
        .into())
}

fn call_tool(
    _this: &JsValue,
    args: &[JsValue],
    name: &JsString,
    context: &mut Context,
) -> JsResult<JsValue> {
    let Some(state) = context.get_data::<SharedRunTools>().cloned() else {
        return Err(JsNativeError::typ()
            .with_message("tools are not available in this context")
            .into());
    };
    let state = state.0;
    let tool = name.to_std_string_escaped();
    // The arguments are read first: reading them may run the program's own
    // getters, which may call tools themselves. The number and the budget
    // check come after, with no guest code between them and the call's
    // entry, so nested calls get numbers of their own and count.
    let input = args.first().cloned().unwrap_or_default();
    let converted = inspect::to_json(&input, context);
    let call_number = u32::try_from(state.calls.borrow().len())
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let args = match converted {
        Ok(Value::Null) if input.is_undefined() => Value::Object(serde_json::Map::new()),
        Ok(args) => args,
        // A budget stop raised by a nested call stays uncatchable.
        Err(error) if error.as_engine().is_some() => return Err(error),
        Err(error) => {
            let problem = inspect::error_message(&error, context);
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "tools.{tool} (call {call_number}): its arguments are not JSON: {problem}"
                ))
                .into());
        }
    };
    if call_number > state.max_calls {
        state.clock.stop(Budget::ToolCalls);
        // Uncatchable: a budget stop ends the run, whatever the program catches.
        return Err(JsError::from(EngineError::from(PanicError::new(format!(
            "budget_exhausted:tool_calls: the program made more than {} tool calls",
            state.max_calls
        )))));
    }
    let started = Moment::now();
    state.calls.borrow_mut().push(CallSummary {
        tool: tool.clone(),
        outcome: CallOutcome::OutcomeUnknown,
        waited_on_person: false,
        duration_ms: 0,
    });
    let index = state.calls.borrow().len() - 1;

    let (promise, resolvers) = JsPromise::new_pending(context);
    let reply: LocalBoxFuture<'static, ToolReply> = match state.admission.unavailable.get(&tool) {
        Some(unavailable) => {
            let failure = ToolFailure {
                code: "tool_unavailable".into(),
                message: format!("{tool} is unavailable in this run ({})", unavailable.reason),
                detail: Some(
                    serde_json::json!({"reason": unavailable.reason, "module": unavailable.module}),
                ),
                outcome: CallOutcome::ToolUnavailable,
            };
            Box::pin(async move { Err(failure) })
        }
        None => state.host.call(
            ToolCall {
                call_number,
                tool: tool.clone(),
                args,
            },
            state.clock.person_signal(call_number),
        ),
    };
    state.clock.call_started(call_number);
    context.enqueue_job(
        NativeAsyncJob::new(async move |context| {
            let reply = reply.await;
            // Guest code can run from here on (resolving reads `then`, which a
            // getter may define; a failure object's `code` can meet a setter):
            // it is charged to the CPU budget like any other.
            state.clock.busy();
            let waited_on_person = state.clock.call_settled(call_number);
            let context = &mut context.borrow_mut();
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let reply = receive(reply, context);
            let outcome = match &reply {
                Received::Answer(_) => CallOutcome::Ok,
                Received::Refusal { failure, .. } => failure.outcome,
            };
            if let Some(summary) = state.calls.borrow_mut().get_mut(index) {
                summary.outcome = outcome;
                summary.duration_ms = duration_ms;
                summary.waited_on_person = waited_on_person;
            }
            match reply {
                Received::Answer(value) => {
                    resolvers
                        .resolve
                        .call(&JsValue::undefined(), &[value], context)
                }
                Received::Refusal { failure, detail } => {
                    let error = failure_object(&failure, detail, context)?;
                    state.raised.borrow_mut().push(RaisedFailure {
                        object: error.clone(),
                        call_number,
                        tool,
                        failure,
                    });
                    resolvers
                        .reject
                        .call(&JsValue::undefined(), &[error.into()], context)
                }
            }
        })
        .into(),
    );
    Ok(promise.into())
}

/// A reply as the guest receives it.
enum Received {
    /// The answer, as a guest value.
    Answer(JsValue),
    /// The refusal the call's promise rejects with, its `detail` already a
    /// guest value (`undefined` when it has none).
    Refusal {
        failure: ToolFailure,
        detail: JsValue,
    },
}

/// Turns a reply into what the guest receives. A value the guest cannot
/// receive (a malformed `$bytes`, in the answer or in a refusal's detail)
/// fails the call as `invalid_result`, catchably, like any other bad reply:
/// it never ends the run.
fn receive(reply: ToolReply, context: &mut Context) -> Received {
    let unreceivable = |message: String| Received::Refusal {
        failure: ToolFailure {
            code: "invalid_result".into(),
            message,
            detail: None,
            outcome: CallOutcome::Error,
        },
        detail: JsValue::undefined(),
    };
    match reply {
        Ok(value) => match inspect::from_json(&value, context) {
            Ok(value) => Received::Answer(value),
            Err(error) => {
                let problem = inspect::error_message(&error, context);
                unreceivable(format!("its answer cannot reach the program: {problem}"))
            }
        },
        Err(failure) => {
            let Some(detail) = &failure.detail else {
                return Received::Refusal {
                    failure,
                    detail: JsValue::undefined(),
                };
            };
            match inspect::from_json(detail, context) {
                Ok(detail) => Received::Refusal { failure, detail },
                Err(error) => {
                    let problem = inspect::error_message(&error, context);
                    unreceivable(format!(
                        "its refusal ({}: {}) has a detail that cannot reach the program: {problem}",
                        failure.code, failure.message
                    ))
                }
            }
        }
    }
}

/// An `Error` with `code` and `detail` (already a guest value), as the guest
/// sees a tool's refusal.
fn failure_object(
    failure: &ToolFailure,
    detail: JsValue,
    context: &mut Context,
) -> JsResult<JsObject> {
    let error: JsObject = JsNativeError::error()
        .with_message(failure.message.clone())
        .into_opaque(context);
    error.set(
        js_string!("code"),
        JsString::from(failure.code.as_str()),
        false,
        context,
    )?;
    error.set(js_string!("detail"), detail, false, context)?;
    Ok(error)
}
