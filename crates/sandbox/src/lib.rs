//! Runs one guest JavaScript program in a fresh Boa context and reports what happened.
//!
//! This is the only crate that knows Boa. A program is the body of an async
//! function: it may `await`, `return` a value and call `console.*`. The guest gets
//! no ambient authority: string compilation (`eval`, `Function`) is refused at the
//! engine's host hook, and there are no timers, no network and no host objects.
//!
//! The run is `async` because the guest's promises may wait on host futures; the
//! job executor ([`executor`]) awaits them instead of spinning, so in a Web Worker
//! the event loop keeps turning while a run is parked.

pub mod catalog;
mod console;
mod executor;
mod hooks;
mod inspect;
pub mod scripted;
mod sleep;
pub mod tools;

use std::cell::RefCell;
use std::rc::Rc;

use boa_engine::builtins::promise::PromiseState;
use boa_engine::error::{EngineError, RuntimeLimitError};
use boa_engine::job::JobExecutor;
use boa_engine::object::builtins::JsPromise;
use boa_engine::{Context, JsError, JsObject, JsValue, Script, Source};
use kiln_types::tool_result::Budget;
use kiln_types::{RunError, RunErrorKind, RunLimits, RunOutcome, RunReport};
use web_time::Instant;

use crate::catalog::Admission;
use crate::console::ConsoleBuffer;
use crate::executor::HostJobExecutor;
use crate::tools::{NoTools, SharedRunTools, ToolHost};

/// The name of the engine, as reported to hosts.
pub const ENGINE: &str = "boa 0.22";

pub use sleep::MAX_SLEEP_MS;

/// Guest code is placed inside this wrapper so that top-level `await` and `return`
/// work. The body starts on the wrapper's second line; [`program_position`]
/// turns positions in syntax errors back into the program's own.
const WRAPPER_OPEN: &str = "(async function () {\n";
const WRAPPER_CLOSE: &str = "\n})()";

/// Runs `code` to completion in a fresh context with no tools.
pub async fn run(code: &str, limits: &RunLimits) -> RunReport {
    run_with_tools(
        code,
        limits,
        Rc::new(Admission::default()),
        Rc::new(NoTools),
    )
    .await
}

/// Runs `code` to completion in a fresh context whose `tools` object exposes
/// what `admission` admitted, every call going to `host`.
///
/// Never panics on guest input: every failure becomes a [`RunOutcome::Failed`].
/// The wall budget in `limits` is enforced by the caller (the sandbox worker's
/// host terminates the worker; the CLI has a process deadline), since Boa has no
/// interrupt hook.
pub async fn run_with_tools(
    code: &str,
    limits: &RunLimits,
    admission: Rc<Admission>,
    host: Rc<dyn ToolHost>,
) -> RunReport {
    let started = Instant::now();
    let executor = Rc::new(HostJobExecutor::default());
    let console = ConsoleBuffer::new(limits.console_bytes);

    let setup = new_context(
        executor.clone(),
        console.clone(),
        admission,
        host,
        limits.tool_calls,
    );
    let (outcome, calls) = match setup {
        Ok((mut context, tools)) => {
            let outcome = evaluate(code, &executor, &mut context, &tools).await;
            let outcome = cap_return_value(outcome, limits.return_bytes);
            (outcome, tools.0.calls.borrow().clone())
        }
        Err(error) => (
            RunOutcome::Failed(RunError::new(
                RunErrorKind::Engine,
                format!("the sandbox could not set up a JavaScript context: {error}"),
            )),
            Vec::new(),
        ),
    };

    let (console, console_dropped) = console.take();
    RunReport {
        outcome,
        console,
        console_dropped,
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
        calls,
    }
}

fn new_context(
    executor: Rc<HostJobExecutor>,
    console: ConsoleBuffer,
    admission: Rc<Admission>,
    host: Rc<dyn ToolHost>,
    tool_calls: u32,
) -> Result<(Context, SharedRunTools), JsError> {
    let mut context = Context::builder()
        .job_executor(executor.clone())
        .host_hooks(Rc::new(hooks::GuestHooks))
        .build()?;
    console::install(&mut context, console)?;
    sleep::install(&mut context)?;
    let halt = executor.halt_flag();
    let tools = tools::install(&mut context, host, admission, tool_calls, halt)?;
    Ok((context, tools))
}

/// Ends a run whose returned value is larger than `return_bytes` of JSON with
/// `budget_exhausted:return_value`, naming both sizes.
fn cap_return_value(outcome: RunOutcome, return_bytes: usize) -> RunOutcome {
    let RunOutcome::Completed { value } = &outcome else {
        return outcome;
    };
    let size = serde_json::to_string(value).map_or(usize::MAX, |json| json.len());
    if size <= return_bytes {
        return outcome;
    }
    RunOutcome::Failed(RunError::budget(
        Budget::ReturnValue,
        format!(
            "{}: the returned value is {size} bytes of JSON, more than the {return_bytes} bytes a run may return",
            Budget::ReturnValue.error_code()
        ),
    ))
}

async fn evaluate(
    code: &str,
    executor: &Rc<HostJobExecutor>,
    context: &mut Context,
    tools: &SharedRunTools,
) -> RunOutcome {
    let wrapped = format!("{WRAPPER_OPEN}{code}{WRAPPER_CLOSE}");
    let script = match Script::parse(Source::from_bytes(wrapped.as_bytes()), None, context) {
        Ok(script) => script,
        Err(error) => {
            let message = program_position(&inspect::error_message(&error, context));
            return RunOutcome::Failed(RunError::new(RunErrorKind::Syntax, message));
        }
    };
    let promise = match script.evaluate(context) {
        Ok(value) => value,
        Err(error) => return failed(&error, context, tools),
    };
    let Some(promise) = promise
        .as_object()
        .and_then(|object| JsPromise::from_object(object).ok())
    else {
        return RunOutcome::Failed(RunError::new(
            RunErrorKind::Engine,
            "the program's wrapper did not produce a promise",
        ));
    };

    let jobs = executor
        .clone()
        .run_jobs_async(&RefCell::new(&mut *context))
        .await;
    if let Err(error) = jobs {
        return failed(&error, context, tools);
    }
    if let Some(budget) = *tools.0.budget_stop.borrow() {
        return budget_stop(budget, tools);
    }

    match promise.state() {
        PromiseState::Fulfilled(value) => match inspect::to_json(&value, context) {
            Ok(value) => RunOutcome::Completed { value },
            Err(error) => failed(&error, context, tools),
        },
        PromiseState::Rejected(reason) => failed(&JsError::from_opaque(reason), context, tools),
        PromiseState::Pending => RunOutcome::Failed(RunError::new(
            RunErrorKind::NeverSettled,
            "the program is waiting on a promise that nothing can settle (nothing is left to run)",
        )),
    }
}

/// Classifies an uncaught error: a budget stop, an uncaught tool rejection (with
/// that call's code and a one-line message naming the tool and call), or a
/// script error.
fn failed(error: &JsError, context: &mut Context, tools: &SharedRunTools) -> RunOutcome {
    if let Some(budget) = *tools.0.budget_stop.borrow() {
        return budget_stop(budget, tools);
    }
    if let Some(EngineError::RuntimeLimit(limit)) = engine_error(error, context) {
        let budget = match limit {
            RuntimeLimitError::Recursion => Budget::Recursion,
            RuntimeLimitError::StackSize | RuntimeLimitError::LoopIteration => Budget::Stack,
        };
        return RunOutcome::Failed(RunError::budget(
            budget,
            format!("{}: {limit}", budget.error_code()),
        ));
    }
    if let Some(object) = error.as_opaque().and_then(JsValue::as_object) {
        let raised = tools.0.raised.borrow();
        if let Some(raised) = raised
            .iter()
            .find(|raised| JsObject::equals(&raised.object, &object))
        {
            return RunOutcome::Failed(RunError {
                code: Some(raised.failure.code.clone()),
                detail: raised.failure.detail.clone(),
                ..RunError::new(
                    RunErrorKind::Tool,
                    format!(
                        "{} (call {}) failed: {}",
                        raised.tool, raised.call_number, raised.failure.message
                    ),
                )
            });
        }
    }
    RunOutcome::Failed(RunError::new(
        RunErrorKind::Script,
        inspect::error_message(error, context),
    ))
}

fn budget_stop(budget: Budget, tools: &SharedRunTools) -> RunOutcome {
    let message = match budget {
        Budget::ToolCalls => format!(
            "{}: the program made more than {} tool calls",
            budget.error_code(),
            tools.0.max_calls()
        ),
        other => format!(
            "{}: the program ran out of its {} budget",
            other.error_code(),
            other.as_str()
        ),
    };
    RunOutcome::Failed(RunError::budget(budget, message))
}

fn engine_error(error: &JsError, context: &mut Context) -> Option<EngineError> {
    match error.try_native(context) {
        Err(boa_engine::error::TryNativeError::EngineError { source }) => Some(source),
        _ => None,
    }
}

/// Rewrites Boa's `at line N, col M` for the wrapper's extra first line.
fn program_position(message: &str) -> String {
    const MARK: &str = " at line ";
    let Some(start) = message.rfind(MARK) else {
        return message.to_owned();
    };
    let digits_start = start + MARK.len();
    let digits_len = message[digits_start..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    match message[digits_start..digits_start + digits_len].parse::<u64>() {
        Ok(line) if line > 1 => format!(
            "{}{}{}",
            &message[..digits_start],
            line - 1,
            &message[digits_start + digits_len..]
        ),
        _ => message.to_owned(),
    }
}
