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
mod sleep;

use std::cell::RefCell;
use std::rc::Rc;

use boa_engine::builtins::promise::PromiseState;
use boa_engine::job::JobExecutor;
use boa_engine::object::builtins::JsPromise;
use boa_engine::{Context, JsError, Script, Source};
use kiln_types::{RunError, RunErrorKind, RunLimits, RunOutcome, RunReport};
use web_time::Instant;

use crate::console::ConsoleBuffer;
use crate::executor::HostJobExecutor;

/// The name of the engine, as reported to hosts.
pub const ENGINE: &str = "boa 0.22";

pub use sleep::MAX_SLEEP_MS;

/// Guest code is placed inside this wrapper so that top-level `await` and `return`
/// work. The body starts on the wrapper's second line; [`program_position`]
/// turns positions in syntax errors back into the program's own.
const WRAPPER_OPEN: &str = "(async function () {\n";
const WRAPPER_CLOSE: &str = "\n})()";

/// Runs `code` to completion in a fresh context and reports the outcome.
///
/// Never panics on guest input: every failure becomes a [`RunOutcome::Failed`].
/// The wall budget in `limits` is enforced by the caller (the sandbox worker's
/// host terminates the worker; the CLI has a process deadline), since Boa has no
/// interrupt hook.
pub async fn run(code: &str, limits: &RunLimits) -> RunReport {
    let started = Instant::now();
    let executor = Rc::new(HostJobExecutor::default());
    let console = ConsoleBuffer::new(limits.console_bytes);

    let outcome = match new_context(executor.clone(), console.clone()) {
        Ok(mut context) => evaluate(code, &executor, &mut context).await,
        Err(error) => RunOutcome::Failed(RunError::new(
            RunErrorKind::Engine,
            format!("the sandbox could not set up a JavaScript context: {error}"),
        )),
    };

    let (console, console_dropped) = console.take();
    RunReport {
        outcome,
        console,
        console_dropped,
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
    }
}

fn new_context(executor: Rc<HostJobExecutor>, console: ConsoleBuffer) -> Result<Context, JsError> {
    let mut context = Context::builder()
        .job_executor(executor)
        .host_hooks(Rc::new(hooks::GuestHooks))
        .build()?;
    console::install(&mut context, console)?;
    sleep::install(&mut context)?;
    Ok(context)
}

async fn evaluate(code: &str, executor: &Rc<HostJobExecutor>, context: &mut Context) -> RunOutcome {
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
        Err(error) => return failed(RunErrorKind::Script, &error, context),
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
        return failed(RunErrorKind::Script, &error, context);
    }

    match promise.state() {
        PromiseState::Fulfilled(value) => match inspect::to_json(&value, context) {
            Ok(value) => RunOutcome::Completed { value },
            Err(error) => failed(RunErrorKind::Script, &error, context),
        },
        PromiseState::Rejected(reason) => {
            let error = JsError::from_opaque(reason);
            failed(RunErrorKind::Script, &error, context)
        }
        PromiseState::Pending => RunOutcome::Failed(RunError::new(
            RunErrorKind::NeverSettled,
            "the program is waiting on a promise that nothing can settle (nothing is left to run)",
        )),
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

fn failed(kind: RunErrorKind, error: &JsError, context: &mut Context) -> RunOutcome {
    RunOutcome::Failed(RunError::new(kind, inspect::error_message(error, context)))
}
