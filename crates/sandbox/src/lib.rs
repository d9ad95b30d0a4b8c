//! Runs one guest JavaScript program in a fresh Boa context and reports what happened.
//!
//! This is the only crate that knows Boa. A program is the body of an async
//! function: it may `await`, `return` a value and call `console.*`. The guest gets
//! no ambient authority: string compilation (`eval`, `Function`) is refused at the
//! engine's host hook, and there are no timers, no network and no host objects:
//! everything the program can do to the world goes through [`tools`] (and
//! [`workspace`], a layer over the file tools), one host call at a time.
//!
//! The run is `async` because the guest's promises may wait on host futures; the
//! job executor (`executor`) awaits them instead of spinning, so in a Web Worker
//! the event loop keeps turning while a run is parked.
//!
//! Boa recurses on the host's stack with no bound of its own, so the sandbox
//! bounds what it can see: a program's source nesting (`kiln_jscheck`'s
//! depth check, before the parse), the native built-ins that recurse over a
//! value (the `depth` module, [`MAX_NATIVE_DEPTH`]) and values leaving the guest
//! ([`kiln_types::MAX_VALUE_DEPTH`]), each chosen with the stacks the hosts give
//! ([`NATIVE_STACK_BYTES`]; 8 MiB in the sandbox worker's wasm). One thing is
//! not bounded: a long prototype chain, since an ordinary property lookup
//! recurses once per link and literals and `class extends` make links no
//! wrapper sees. What contains it is the host: the sandbox process dies
//! natively, the worker dies in the page, and either is the run's `engine`
//! failure.
//!
//! The other modules:
//!
//! - [`agents`]: the guest's `agents` object, sub-agents for programs over the
//!   delegation capabilities.
//! - [`catalog`]: admission of a run's tool catalog: what `tools` exposes, which
//!   names only reject, the warnings a reader sees. Pure.
//! - [`clock`]: the run's clock: guest CPU, sleeps, in-flight calls, person wait,
//!   and which budget stopped the run.
//! - `console`: the guest's `console`, kept in a bounded buffer the report takes
//!   and sent to the host line by line as the guest prints.
//! - `finish`: `finish(value)`, which ends the run at once with `value` as its
//!   result.
//! - `format`: the guest's `format` global, numbers, dates, relative times and
//!   lists for a locale: the worker's own `Intl` in the browser, ICU4X natively.
//! - `hooks`: the host hooks of a guest context: the host grants powers, the
//!   default refuses.
//! - `imports`: a program's `import … from "kiln:…"` declarations, rewritten
//!   in place into calls of the run's importer.
//! - `inspect`: guest values turned into text and JSON for the host, bounded
//!   like the program.
//! - [`modules`]: the `kiln:` modules a program imports.
//! - [`server`]: the sandbox protocol's serving side, written once over a
//!   [`server::Transport`] (stdio natively, `postMessage` in the worker).
//! - `progress`: `progress(percent, message)`, a long program's reports of
//!   how far it has come, sent to the host as it makes them, rate-limited.
//! - `namespace`: the guest's tool namespaces (`workspace`, `agents`) written once: a
//!   JavaScript factory per namespace, each method one call of one tool.
//! - `sleep`: `sleep(ms)`, the guest's only way to wait on time, and `waitFor`.
//! - [`stdlib`]: the guest's standard library: text, bytes, crypto, URLs,
//!   `structuredClone`, `parallelMap`.

pub mod agents;
pub mod catalog;
pub mod clock;
mod console;
mod depth;
mod executor;
mod finish;
mod format;
mod hooks;
mod imports;
mod inspect;
pub mod modules;
mod namespace;
mod progress;
mod sleep;
pub mod stdlib;
pub use kiln_jscheck::source_depth;
pub mod server;
pub mod tools;
pub mod workspace;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use boa_engine::builtins::promise::PromiseState;
use boa_engine::error::{EngineError, RuntimeLimitError};
use boa_engine::job::JobExecutor;
use boa_engine::object::builtins::JsPromise;
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsValue, Script, Source, js_string,
};
use kiln_types::tool_result::Budget;
use kiln_types::{RunError, RunErrorKind, RunLimits, RunOutcome, RunReport};

use crate::catalog::Admission;
pub use crate::clock::CpuGauge;
use crate::clock::RunClock;
use crate::console::ConsoleBuffer;
use crate::executor::HostJobExecutor;
use crate::namespace::Factory;
use crate::tools::{NoTools, SharedRunTools, ToolHost};

/// The name of the engine, as reported to hosts.
pub const ENGINE: &str = "boa 0.22";

pub use depth::MAX_NATIVE_DEPTH;
pub use sleep::MAX_SLEEP_MS;

/// Guest code is placed inside this wrapper so that top-level `await` and `return`
/// work; the run calls it with its importer (`imports`). The body starts on
/// the wrapper's second line; [`program_position`] turns positions in syntax
/// errors back into the program's own.
const WRAPPER_OPEN: &str = "(async function (__kiln_import) {\n";
const WRAPPER_CLOSE: &str = "\n})";

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
pub async fn run_with_tools(
    code: &str,
    limits: &RunLimits,
    admission: Rc<Admission>,
    host: Rc<dyn ToolHost>,
) -> RunReport {
    match Sandbox::new() {
        Ok(sandbox) => sandbox.run(code, limits, admission, host, None).await,
        Err(report) => *report,
    }
}

/// A fresh JavaScript context with the guest's globals defined, ready for one
/// run. Making one is most of the cost of starting a run, so a worker makes
/// the next one while it waits for work ([`Sandbox::new`] then
/// [`Sandbox::run`]); a context is never used for a second run.
pub struct Sandbox {
    context: Context,
    executor: Rc<HostJobExecutor>,
    console: ConsoleBuffer,
    /// Where the run's `progress` reports go.
    progress: progress::ProgressReports,
    /// Makes the run's `workspace` (when its catalog has file tools).
    workspace: Factory,
    /// Makes the run's `agents` (when its catalog has the delegation tools).
    agents: Factory,
    /// What `finish` was given.
    finished: finish::Finished,
    /// How long building the context took, in milliseconds.
    context_ms: f64,
}

/// Removes `Atomics.wait` and `Atomics.waitAsync`. The guest has no other
/// thread to wake it: `wait` would block its worker, and `waitAsync`'s
/// time-out is a timer job, which a guest never gets, so its promise would
/// hold the run open until the wall budget long after the program returned.
fn remove_waits(context: &mut Context) -> JsResult<()> {
    let atomics = context.intrinsics().objects().atomics();
    for name in [js_string!("wait"), js_string!("waitAsync")] {
        atomics.delete_property_or_throw(name, context)?;
    }
    Ok(())
}

/// The stack a native host gives the thread a sandbox runs on. The engine
/// recurses on it (the parser once per level of a program's nesting, the
/// built-ins once per level of a value's, both bounded here), and a debug
/// build's frames are large; the memory is reserved, and only what a run
/// touches is used. (The page's sandbox worker links with an 8 MiB stack, see
/// its `build.rs`.)
pub const NATIVE_STACK_BYTES: usize = 64 << 20;

impl Sandbox {
    /// Builds the context: intrinsics, the string-compilation hook, the
    /// bounds on native recursion, `console`, `sleep`, `waitFor`, the
    /// standard library's placeholders and the built-ins the namespaces
    /// capture. No JavaScript is parsed here: what is written in JavaScript
    /// (`waitFor`, the standard library, `workspace`, `agents`) is evaluated
    /// when a program first touches it. `tools`, `workspace`, `agents` and
    /// the budgets come with the run.
    ///
    /// # Errors
    ///
    /// A report of the engine failure when the context cannot be built.
    pub fn new() -> Result<Self, Box<RunReport>> {
        let started = clock::Moment::now();
        let executor = Rc::new(HostJobExecutor::default());
        let console = ConsoleBuffer::new(0);
        let progress = progress::ProgressReports::default();
        let finished = finish::Finished::default();
        let built = (|| {
            let mut context = Context::builder()
                .job_executor(executor.clone())
                .host_hooks(Rc::new(hooks::GuestHooks))
                .build()?;
            inspect::capture_intrinsics(&mut context)?;
            remove_waits(&mut context)?;
            depth::install(&mut context)?;
            console::install(&mut context, console.clone())?;
            sleep::install(&mut context)?;
            progress::install(&mut context, progress.clone())?;
            stdlib::install(&mut context)?;
            finish::install(&mut context, &finished)?;
            let workspace = workspace::NAMESPACE.prepare(&mut context)?;
            let agents = agents::NAMESPACE.prepare(&mut context)?;
            Ok::<_, JsError>((context, workspace, agents))
        })();
        match built {
            Ok((context, workspace, agents)) => Ok(Self {
                context,
                executor,
                console,
                progress,
                workspace,
                agents,
                finished,
                context_ms: started.elapsed().as_secs_f64() * 1e3,
            }),
            Err(error) => Err(Box::new(RunReport::stopped(
                RunError::new(
                    RunErrorKind::Engine,
                    format!("the sandbox could not set up a JavaScript context: {error}"),
                ),
                0.0,
            ))),
        }
    }

    /// Runs `code` to completion under `limits` (already clamped by the
    /// caller, or taken as given). `gauge`, when given, lets another thread
    /// read the guest's CPU time while the run goes on.
    ///
    /// Never panics on guest input: every failure becomes a
    /// [`RunOutcome::Failed`]. A guest that runs JavaScript without ever
    /// stopping cannot be interrupted from inside (Boa has no interrupt hook):
    /// its JS CPU and wall budgets are enforced by the caller (the page
    /// terminates the worker; the CLI's watchdog reads `gauge`). Every other
    /// budget is enforced here.
    pub async fn run(
        self,
        code: &str,
        limits: &RunLimits,
        admission: Rc<Admission>,
        host: Rc<dyn ToolHost>,
        gauge: Option<Arc<CpuGauge>>,
    ) -> RunReport {
        let Self {
            mut context,
            executor,
            console,
            progress,
            workspace,
            agents,
            finished,
            context_ms,
        } = self;
        let clock = Rc::new(RunClock::new(
            limits.js_cpu_ms,
            limits.person_wait_ms,
            gauge,
        ));
        console.start(limits.console_bytes, host.clone());
        progress.start(host.clone());
        executor.attach(clock.clone(), host.clone(), console.clone());
        context.insert_data(clock.clone());
        let installed = tools::install(
            &mut context,
            host,
            admission.clone(),
            limits.tool_calls,
            clock.clone(),
        )
        .map_err(|error| format!("the sandbox could not define `tools`: {error}"))
        .and_then(|tools| {
            workspace
                .install(&mut context, &admission)
                .map_err(|error| format!("the sandbox could not define `workspace`: {error}"))?;
            agents
                .install(&mut context, &admission)
                .map_err(|error| format!("the sandbox could not define `agents`: {error}"))?;
            Ok(tools)
        });
        let outcome = match installed {
            Ok(tools) => {
                let evaluation = Evaluation {
                    executor: &executor,
                    tools: &tools,
                    clock: &clock,
                    limits,
                    finished: &finished,
                };
                let outcome = evaluation.run(code, &mut context).await;
                cap_return_value(outcome, limits.return_bytes)
            }
            Err(message) => RunOutcome::Failed(RunError::new(RunErrorKind::Engine, message)),
        };
        let mut calls = context
            .get_data::<SharedRunTools>()
            .map(|tools| tools.0.calls.borrow().clone())
            .unwrap_or_default();
        // Calls still in flight when a budget ended the run keep what is known.
        for (number, call) in (1..).zip(calls.iter_mut()) {
            call.waited_on_person |= clock.was_held(number);
        }

        let (console, console_dropped) = console.take();
        RunReport {
            outcome,
            console,
            console_dropped,
            duration_ms: clock.elapsed().as_secs_f64() * 1e3,
            person_wait_ms: clock.person_wait().as_secs_f64() * 1e3,
            start_ms: clock
                .start_time()
                .map_or(0.0, |start| start.as_secs_f64() * 1e3),
            context_ms,
            calls,
            finished: finished.value().is_some(),
        }
    }
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

/// What a run's evaluation needs besides the context: the executor that drives
/// its jobs, its tools (for uncaught tool rejections), its clock (for budget
/// stops) and its limits (for their messages).
struct Evaluation<'a> {
    executor: &'a Rc<HostJobExecutor>,
    tools: &'a SharedRunTools,
    clock: &'a RunClock,
    limits: &'a RunLimits,
    finished: &'a finish::Finished,
}

impl Evaluation<'_> {
    /// Runs `code` to an outcome, counting the JavaScript it runs as CPU.
    async fn run(&self, code: &str, context: &mut Context) -> RunOutcome {
        self.clock.busy();
        let outcome = self.run_busy(code, context).await;
        // A program that finished inside one long span of JavaScript still spent it.
        self.clock.idle();
        if let Some(value) = self.finished.value() {
            return RunOutcome::Completed { value };
        }
        match self.clock.stopped() {
            Some(budget) => self.budget_stop(budget),
            None => outcome,
        }
    }

    async fn run_busy(&self, code: &str, context: &mut Context) -> RunOutcome {
        if let Err(message) = source_depth::check(code) {
            return RunOutcome::Failed(RunError::new(RunErrorKind::Syntax, message));
        }
        let code = match imports::rewrite(code) {
            Ok(code) => code,
            Err(message) => {
                return RunOutcome::Failed(RunError::new(RunErrorKind::Syntax, message));
            }
        };
        let wrapped = format!("{WRAPPER_OPEN}{code}{WRAPPER_CLOSE}");
        let script = match Script::parse(Source::from_bytes(wrapped.as_bytes()), None, context) {
            Ok(script) => script,
            Err(error) => {
                let message = program_position(&inspect::error_message(&error, context), &code);
                return RunOutcome::Failed(RunError::new(RunErrorKind::Syntax, message));
            }
        };
        self.clock.starting();
        let importer = modules::importer(context);
        let promise = match script.evaluate(context).and_then(|program| {
            let program = program.as_callable().ok_or_else(|| {
                JsNativeError::typ().with_message("the program's wrapper is not a function")
            })?;
            program.call(&JsValue::undefined(), &[importer.into()], context)
        }) {
            Ok(value) => value,
            Err(error) => return self.failed(&error, context),
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

        let jobs = self
            .executor
            .clone()
            .run_jobs_async(&RefCell::new(&mut *context))
            .await;
        if let Err(error) = jobs {
            return self.failed(&error, context);
        }
        if let Some(budget) = self.clock.stopped() {
            return self.budget_stop(budget);
        }

        match promise.state() {
            PromiseState::Fulfilled(value) => match inspect::to_json(&value, context) {
                Ok(value) => RunOutcome::Completed { value },
                Err(error) => self.failed(&error, context),
            },
            PromiseState::Rejected(reason) => self.failed(&JsError::from_opaque(reason), context),
            PromiseState::Pending => RunOutcome::Failed(RunError::new(
                RunErrorKind::NeverSettled,
                "the program is waiting on a promise that nothing can settle (nothing is left to run)",
            )),
        }
    }

    /// Classifies an uncaught error: a budget stop, an uncaught tool rejection (with
    /// that call's code and a one-line message naming the tool and call), or a
    /// script error.
    fn failed(&self, error: &JsError, context: &mut Context) -> RunOutcome {
        if let Some(budget) = self.clock.stopped() {
            return self.budget_stop(budget);
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
            let raised = self.tools.0.raised.borrow();
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

    /// The outcome of a stop by `budget`, in words that name the limit.
    fn budget_stop(&self, budget: Budget) -> RunOutcome {
        let limits = self.limits;
        let message = match budget {
            Budget::ToolCalls => format!(
                "{}: the program made more than {} tool calls",
                budget.error_code(),
                limits.tool_calls
            ),
            Budget::JsCpu => return RunOutcome::Failed(RunError::js_cpu_budget(limits.js_cpu_ms)),
            Budget::PersonWait => {
                return RunOutcome::Failed(RunError::person_wait_budget(limits.person_wait_ms));
            }
            other => format!(
                "{}: the program ran out of its {} budget",
                other.error_code(),
                other.as_str()
            ),
        };
        RunOutcome::Failed(RunError::budget(budget, message))
    }
}

fn engine_error(error: &JsError, context: &mut Context) -> Option<EngineError> {
    match error.try_native(context) {
        Err(boa_engine::error::TryNativeError::EngineError { source }) => Some(source),
        _ => None,
    }
}

/// Rewrites Boa's `at line N, col M` for the wrapper's extra first line; an
/// error Boa finds in the wrapper's closing line is the program ending before
/// what it opened was closed, and is said so, at the program's own end.
fn program_position(message: &str, code: &str) -> String {
    const MARK: &str = " at line ";
    let Some(start) = message.rfind(MARK) else {
        return message.to_owned();
    };
    let digits_start = start + MARK.len();
    let digits_len = message[digits_start..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    let Ok(line) = message[digits_start..digits_start + digits_len].parse::<usize>() else {
        return message.to_owned();
    };
    let lines = code.split('\n').count();
    if line > lines + 1 {
        let last = code.split('\n').next_back().unwrap_or("");
        // Boa's own words name the wrapper's `)`, which the program never wrote.
        let kind = message[..start].split(':').next().unwrap_or("SyntaxError");
        return format!(
            "{kind}: the program ends before something it opened (a `{{`, `(`, `[` or string) \
             is closed, at line {lines}, col {}",
            last.chars().count() + 1
        );
    }
    if line > 1 {
        return format!(
            "{}{}{}",
            &message[..digits_start],
            line - 1,
            &message[digits_start + digits_len..]
        );
    }
    message.to_owned()
}
