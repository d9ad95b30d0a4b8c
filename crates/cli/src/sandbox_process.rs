//! A sandbox in a process of its own, speaking the sandbox protocol
//! (`ToSandbox` / `FromSandbox`, one JSON line each) over its stdin and
//! stdout: the native twin of the browser's sandbox worker, for runs that
//! must end without ending the caller (an agent's actions).
//!
//! **The child** (this binary with [`PROCESS_ENV`] set to the parent's pid)
//! runs one program at a time, each in a fresh engine built while it waits
//! for the program. It sends its tool calls when the guest goes idle
//! and waits for each reply; its own watchdog thread ends the process when
//! the guest's CPU time or the run's wall time passes its budget, and the
//! memory hook when the heap does, each after sending `Lost` with the
//! budget's error. Its guest's console lines go out as they are printed
//! (`FromSandbox::Console`, see `kiln_sandbox::server`), ahead of anything
//! that ends the process. **The parent** ([`ProcessRunner`]) answers the calls
//! through the run's dispatcher, keeps the console lines and calls it has
//! seen, kills the child on cancel or past the wall budget plus a grace (and
//! then reads what the child wrote before it died), and turns a child that
//! died without a report (a stack overflow aborts a process) into an `engine`
//! failure that says so. A run that answers is reported as the child's report
//! says, whole console included: the lines seen on the way are the parent's
//! copy only for a run that ends without one. A child whose run answered
//! waits for the next; one that was lost is ended, and [`ProcessRunner::warm`]
//! keeps a few started ahead of the runs (`kiln mcp serve`).

use std::cell::RefCell;
use std::io::{BufRead as _, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::future::LocalBoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt as _, StreamExt as _};
use kiln_capabilities::{Dispatcher, HeldSignal};
use kiln_run::SandboxRunner;
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::server::{Order, Server, Transport};
use kiln_sandbox::{CpuGauge, Sandbox};
use kiln_types::cancel::AbortSignal;
use kiln_types::protocol::{FromSandbox, ToSandbox, decode, encode};
use kiln_types::tool_result::{CallOutcome, CallSummary, ToolReply};
use kiln_types::{ConsoleLine, RunError, RunErrorKind, RunLimits, RunReport, RunResult};

/// Set (to the parent's pid) in the environment of a sandbox process.
pub const PROCESS_ENV: &str = "KILN_SANDBOX_PROCESS";

/// How long past its wall budget the parent waits for a child before it kills it.
const WALL_GRACE: Duration = Duration::from_secs(5);

/// How long the parent reads a killed child's last messages, at most.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

fn send(message: &FromSandbox) {
    let line = encode(message);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

static RUN_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static MEMORY_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn memory_exhausted(_limit: usize) {
    send(&FromSandbox::Lost {
        run_id: RUN_ID.load(std::sync::atomic::Ordering::SeqCst),
        error: RunError::memory_budget(MEMORY_BYTES.load(std::sync::atomic::Ordering::SeqCst)),
    });
    std::process::exit(1);
}

/// The child's messages go out on stdout, one JSON line each.
struct Stdout;

impl Transport for Stdout {
    fn send(&self, message: &FromSandbox) {
        send(message);
    }
}

/// The child: serves one run from stdin and ends, on a thread with the stack
/// the engine may need ([`kiln_sandbox::NATIVE_STACK_BYTES`]).
pub fn serve(parent: &std::ffi::OsStr) -> std::process::ExitCode {
    let parent = parent.to_owned();
    let served = std::thread::Builder::new()
        .name("kiln-sandbox".into())
        .stack_size(kiln_sandbox::NATIVE_STACK_BYTES)
        .spawn(move || serve_here(&parent));
    match served.map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        // A panic has printed itself on stderr, which the parent reads.
        _ => std::process::ExitCode::FAILURE,
    }
}

fn serve_here(parent: &std::ffi::OsStr) -> std::process::ExitCode {
    crate::commands::run::end_with_parent(parent);
    let (lines, mut inbox) = mpsc::unbounded::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines.unbounded_send(line).is_err() {
                break;
            }
        }
        // The parent is gone: nobody reads what this process would answer.
        std::process::exit(0);
    });
    kiln_alloc::set_exhausted_hook(memory_exhausted);
    let mut pool = futures::executor::LocalPool::new();
    // Runs come one at a time; a call's reply or hold goes to the run waiting on it.
    let server = Server::new(Rc::new(Stdout));
    let (runs, mut asked) = mpsc::unbounded::<Order>();
    let _ = futures::task::LocalSpawnExt::spawn_local(&pool.spawner(), {
        let server = server.clone();
        async move {
            while let Some(line) = inbox.next().await {
                if let Some(order) = server.receive(&line) {
                    let _ = runs.unbounded_send(order);
                }
            }
        }
    });
    loop {
        // The engine is made before the run is asked for: a waiting process
        // (see [`ProcessRunner`]) has it ready when its program comes.
        let sandbox = Sandbox::new();
        let Some(Order {
            run_id,
            code,
            limits,
            admission,
        }) = pool.run_until(asked.next())
        else {
            return std::process::ExitCode::SUCCESS;
        };
        RUN_ID.store(run_id, std::sync::atomic::Ordering::SeqCst);
        MEMORY_BYTES.store(limits.memory_bytes, std::sync::atomic::Ordering::SeqCst);
        let gauge = Arc::new(CpuGauge::default());
        let watching = watch(run_id, &limits, gauge.clone());
        kiln_alloc::set_limit(usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX));
        let warnings = admission.warnings.clone();
        let catalog_digest = admission.digest();
        let report = pool.run_until(async {
            match sandbox {
                Ok(sandbox) => {
                    sandbox
                        .run(
                            &code,
                            &limits,
                            Rc::new(admission),
                            server.host(run_id),
                            Some(gauge),
                        )
                        .await
                }
                Err(report) => *report,
            }
        });
        // The run is over: the watchdog stands down before the report goes,
        // so it cannot end the process over a run that already answered.
        watching.stop();
        kiln_alloc::set_limit(usize::MAX);
        server.report(run_id, report, warnings, catalog_digest);
    }
}

/// The child's watchdog over one run: Boa has no interrupt hook, so a guest
/// past its CPU or wall budget ends with the process. [`Watching::stop`]
/// stands it down when the run answers, so the process can take the next.
#[expect(
    clippy::disallowed_methods,
    reason = "the watchdog enforces the wall budget in real time: it is what ends a guest that never yields"
)]
fn watch(run_id: u64, limits: &RunLimits, gauge: Arc<CpuGauge>) -> Watching {
    let started = Instant::now();
    let wall = Duration::from_millis(limits.wall_ms);
    let js_cpu = Duration::from_millis(limits.js_cpu_ms);
    let (wall_ms, js_cpu_ms) = (limits.wall_ms, limits.js_cpu_ms);
    let state = Arc::new(std::sync::Mutex::new(false));
    let stopped = state.clone();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(5));
            // Held while deciding, so a stop and an overrun never cross: once
            // stopped, this watchdog never speaks.
            let stopped = stopped
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *stopped {
                return;
            }
            let error = if started.elapsed() >= wall {
                RunError::wall_budget(wall_ms)
            } else if gauge.spent() > js_cpu {
                RunError::js_cpu_budget(js_cpu_ms)
            } else {
                continue;
            };
            send(&FromSandbox::Lost { run_id, error });
            std::process::exit(1);
        }
    });
    Watching(state)
}

/// A run's watchdog, until it is stopped.
struct Watching(Arc<std::sync::Mutex<bool>>);

impl Watching {
    fn stop(self) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
    }
}

/// Runs each program in a sandbox process: one run at a time each, a fresh
/// engine every run, as the browser's pool of sandbox workers does.
///
/// A process whose run answered goes back to wait for the next (kept up to
/// `keep_idle`, at least one); one that was lost (a budget ended it, it
/// died, the run was cancelled) is ended and, below [`ProcessRunner::warm`]'s
/// count, replaced at once. With `warm(n)` that many wait from the start, so
/// a run does not wait for a process to start (`kiln mcp serve`). Waiting
/// processes end when the runner is dropped, or with this process.
#[derive(Default, Clone)]
pub struct ProcessRunner {
    idle: Rc<Idle>,
}

/// The processes waiting for a run.
#[derive(Default)]
struct Idle {
    /// How many to keep started ahead of the runs.
    keep_warm: usize,
    waiting: RefCell<Vec<Started>>,
}

impl Idle {
    /// Starts processes until `keep_warm` wait; one that cannot start is left
    /// to the run that needs it (which says why).
    fn refill(&self) {
        let mut waiting = self.waiting.borrow_mut();
        while waiting.len() < self.keep_warm {
            match Started::spawn() {
                Ok(started) => waiting.push(started),
                Err(_) => break,
            }
        }
    }

    /// A waiting process that is still alive, else a new one.
    fn take(&self) -> std::io::Result<Started> {
        loop {
            let taken = self.waiting.borrow_mut().pop();
            match taken {
                Some(mut started) => {
                    if matches!(started.child.try_wait(), Ok(None)) {
                        return Ok(started);
                    }
                    // It died while it waited (killed from outside): reaped, not used.
                }
                None => return Started::spawn(),
            }
        }
    }

    /// A process whose run answered: kept for the next run while there is
    /// room, else ended.
    fn give_back(&self, mut started: Started) {
        let mut waiting = self.waiting.borrow_mut();
        if waiting.len() < self.keep_warm.max(1) {
            waiting.push(started);
        } else {
            let _ = started.child.kill();
            let _ = started.child.wait();
        }
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        for mut started in self.waiting.take() {
            let _ = started.child.kill();
            let _ = started.child.wait();
        }
    }
}

impl ProcessRunner {
    /// A runner that keeps `processes` sandbox processes started ahead of
    /// the runs.
    #[must_use]
    pub fn warm(processes: usize) -> Self {
        let idle = Rc::new(Idle {
            keep_warm: processes,
            waiting: RefCell::default(),
        });
        idle.refill();
        Self { idle }
    }
}

/// A sandbox process with its pipes read: its stdout lines come on
/// `lines`, its stderr is gathered by `errors` until it ends.
struct Started {
    child: Child,
    stdin: Rc<RefCell<ChildStdin>>,
    lines: mpsc::UnboundedReceiver<String>,
    errors: std::thread::JoinHandle<String>,
}

impl Started {
    fn spawn() -> std::io::Result<Self> {
        let mut command = Command::new(std::env::current_exe()?);
        command
            .env(PROCESS_ENV, std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group: a Ctrl-C on the terminal reaches the runner,
        // which cancels the run and ends the child itself, instead of killing
        // the child before the run can answer `cancelled`.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("the sandbox process has no pipes"));
        };
        let (sender, lines) = mpsc::unbounded::<String>();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.unbounded_send(line).is_err() {
                    break;
                }
            }
        });
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stderr), &mut text);
            text
        });
        Ok(Self {
            child,
            stdin: Rc::new(RefCell::new(stdin)),
            lines,
            errors,
        })
    }
}

/// Why a sandbox process that ended without a report ended, from what it
/// said on stderr: the stack overflow or panic line when there is one (Rust
/// prints them before it aborts), else its last line.
pub(crate) fn death_cause(stderr: &str) -> String {
    stderr
        .lines()
        .rev()
        .find(|line| line.contains("overflowed its stack") || line.contains("panicked"))
        .or_else(|| stderr.lines().rev().find(|line| !line.trim().is_empty()))
        .map_or_else(|| "nothing".to_owned(), |line| line.trim().to_owned())
}

/// What the parent knows of a run in flight.
struct Seen {
    /// The lines the child sent as its guest printed them.
    console: Vec<ConsoleLine>,
    /// The lines the console budget cut, as the child last told (exact up
    /// to 1,024, at least half the count past that).
    console_dropped: usize,
    calls: Vec<(u32, CallSummary)>,
    /// When the run began, on `kiln_clock::now_ms`.
    started_ms: f64,
}

impl Seen {
    /// The result of a run the parent ended (or lost) with `error`: the
    /// output and calls it saw, calls still out `cancelled` unless they
    /// reached their tool.
    fn ended(self, error: RunError, dispatcher: &Dispatcher, admission: &Admission) -> RunResult {
        let mut report = RunReport::stopped(error, kiln_clock::now_ms() - self.started_ms);
        report.console = self.console;
        report.console_dropped = self.console_dropped;
        report.calls = self
            .calls
            .into_iter()
            .map(|(number, mut call)| {
                if call.outcome == CallOutcome::OutcomeUnknown
                    && !dispatcher.run_state().started(number)
                {
                    call.outcome = CallOutcome::Cancelled;
                }
                call
            })
            .collect();
        RunResult {
            report,
            warnings: admission.warnings.clone(),
            catalog_digest: admission.digest(),
        }
    }

    /// The child said its guest printed `lines`, and `dropped` were cut so far.
    fn printed(&mut self, lines: Vec<ConsoleLine>, dropped: usize) {
        self.console.extend(lines);
        self.console_dropped = dropped;
    }

    /// The child was just killed: what it wrote before it died is still in
    /// the pipe, read to its end (the end comes with the process's) for the
    /// lines its guest printed, so a run ended in the middle of a loop keeps
    /// them all. Bounded by [`DRAIN_GRACE`] in case the end never comes.
    async fn drain(&mut self, messages: &mut mpsc::UnboundedReceiver<String>) {
        let mut grace = Box::pin(kiln_http::sleep(
            u64::try_from(DRAIN_GRACE.as_millis()).unwrap_or(u64::MAX),
        ))
        .fuse();
        loop {
            futures::select_biased! {
                line = messages.next() => match line {
                    Some(line) => {
                        if let Ok(FromSandbox::Console { lines, dropped, .. }) = decode(&line) {
                            self.printed(lines, dropped);
                        }
                    }
                    None => return,
                },
                () = grace => return,
            }
        }
    }
}

fn engine(problem: String) -> RunResult {
    RunResult {
        report: RunReport::stopped(RunError::new(RunErrorKind::Engine, problem), 0.0),
        warnings: Vec::new(),
        catalog_digest: String::new(),
    }
}

/// How a run in a sandbox process ended.
enum Ending {
    /// The child sent its report.
    Answered(RunResult),
    /// The child ended the run (a budget its watchdog enforces, a refusal) or died.
    Ended(RunError),
    /// The parent ends the child: the run was cancelled or passed its wall backstop.
    Killed(RunError),
}

fn write(stdin: &RefCell<ChildStdin>, message: &ToSandbox) {
    let mut stdin = stdin.borrow_mut();
    // A child that is gone is noticed on its stdout.
    let _ = writeln!(stdin, "{}", encode(message));
    let _ = stdin.flush();
}

/// A program written in TypeScript runs too: when a process would not
/// parse it, its types are blanked here (`kiln-ts`) and it runs again.
impl SandboxRunner for ProcessRunner {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        kiln_run::TypeScript {
            runner: Rc::new(JavaScript(self.clone())),
            stripper: Rc::new(Types),
        }
        .run(code, limits, tools, cancel)
    }

    fn stripper(&self) -> Option<Rc<dyn kiln_run::Stripper>> {
        Some(Rc::new(Types))
    }
}

/// `kiln-ts`, in this process.
struct Types;

impl kiln_run::Stripper for Types {
    fn strip(&self, source: String) -> LocalBoxFuture<'static, Result<Option<String>, String>> {
        let answer = kiln_ts::javascript_of(&source);
        Box::pin(async move { answer })
    }
}

/// The runner's processes, given the program as it is.
struct JavaScript(ProcessRunner);

impl SandboxRunner for JavaScript {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        self.0.run_javascript(code, limits, tools, cancel)
    }
}

impl ProcessRunner {
    fn run_javascript(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        let limits = limits.clamped();
        let catalog = tools.catalog();
        let admission = match Admission::admit(&catalog, "host") {
            Ok(admission) => admission,
            Err(invalid) => {
                let failed = engine(format!(
                    "the run's capabilities could not be set up: {invalid}"
                ));
                return Box::pin(async move { failed });
            }
        };
        let Started {
            mut child,
            stdin,
            lines: mut messages,
            errors,
        } = match self.idle.take() {
            Ok(started) => started,
            Err(error) => {
                let failed = engine(format!("could not start a sandbox process: {error}"));
                return Box::pin(async move { failed });
            }
        };
        let run_id = 1;
        write(
            &stdin,
            &ToSandbox::Run {
                run_id,
                code,
                limits,
                catalog,
            },
        );
        let idle = self.idle.clone();
        Box::pin(async move {
            let mut seen = Seen {
                console: Vec::new(),
                console_dropped: 0,
                calls: Vec::new(),
                started_ms: kiln_clock::now_ms(),
            };
            let mut out = FuturesUnordered::new();
            let backstop = Duration::from_millis(limits.wall_ms) + WALL_GRACE;
            let mut deadline = Box::pin(kiln_http::sleep(
                u64::try_from(backstop.as_millis()).unwrap_or(u64::MAX),
            ))
            .fuse();
            let mut cancelled = cancel.aborted().fuse();
            // Whether the process answered with its report, and so may take another run.
            let mut answered = false;
            let mut errors = Some(errors);
            // How the run ended: answered, or with an error and whether the
            // parent is the one ending the child.
            let ending = loop {
                futures::select_biased! {
                    () = cancelled => {
                        let why = cancel.reason().unwrap_or_else(|| "the run was stopped before it finished".into());
                        break Ending::Killed(RunError::cancelled(&why));
                    },
                    () = deadline => {
                        break Ending::Killed(RunError::wall_budget(limits.wall_ms));
                    },
                    replied = out.select_next_some() => {
                        let (call_number, reply): (u32, ToolReply) = replied;
                        if let Some((_, call)) = seen.calls.iter_mut().find(|(number, _)| *number == call_number) {
                            call.outcome = match &reply {
                                Ok(_) => CallOutcome::Ok,
                                Err(failure) => failure.outcome,
                            };
                        }
                        write(&stdin, &ToSandbox::ToolReply { run_id, call_number, reply });
                    },
                    line = messages.next() => {
                        let Some(line) = line else {
                            let _ = child.wait();
                            let said = errors
                                .take()
                                .and_then(|errors| errors.join().ok())
                                .unwrap_or_default();
                            let said = death_cause(&said);
                            break Ending::Ended(RunError::new(
                                RunErrorKind::Engine,
                                format!("the sandbox process ended without a report: {said}"),
                            ));
                        };
                        match decode::<FromSandbox>(&line) {
                            Ok(FromSandbox::Report { report, warnings, catalog_digest, .. }) => {
                                answered = true;
                                break Ending::Answered(RunResult { report, warnings, catalog_digest });
                            }
                            Ok(FromSandbox::Console { lines, dropped, .. }) => seen.printed(lines, dropped),
                            Ok(FromSandbox::Progress { progress, .. }) => tools.run_state().progress(&progress),
                            Ok(FromSandbox::Idle { calls, .. }) => {
                                for request in calls {
                                    let call_number = request.call_number;
                                    seen.calls.push((call_number, CallSummary {
                                        tool: request.tool.clone(),
                                        outcome: CallOutcome::OutcomeUnknown,
                                        waited_on_person: false,
                                        duration_ms: 0,
                                    }));
                                    let held: HeldSignal = Rc::new({
                                        let stdin = stdin.clone();
                                        move |held| write(&stdin, &ToSandbox::ToolHeld { run_id, call_number, held })
                                    });
                                    let reply = tools.call(request, held);
                                    out.push(reply.map(move |reply| (call_number, reply)));
                                }
                            }
                            Ok(FromSandbox::Lost { error, .. }) => break Ending::Ended(error),
                            Ok(FromSandbox::Rejected { problem }) => {
                                break Ending::Ended(RunError::new(RunErrorKind::Engine, format!("the sandbox process refused the run: {problem}")));
                            }
                            Ok(FromSandbox::Ready) => {}
                            Err(problem) => {
                                break Ending::Ended(RunError::new(RunErrorKind::Engine, format!("the sandbox process said something unreadable: {problem}")));
                            }
                        }
                    },
                }
            };
            let result = match ending {
                Ending::Answered(result) => result,
                Ending::Ended(error) => seen.ended(error, &tools, &admission),
                Ending::Killed(error) => {
                    let _ = child.kill();
                    seen.drain(&mut messages).await;
                    seen.ended(error, &tools, &admission)
                }
            };
            // Calls the program never awaited end with it: no late reply reaches the process.
            drop(out);
            if let (true, Some(errors)) = (answered, errors) {
                idle.give_back(Started {
                    child,
                    stdin,
                    lines: messages,
                    errors,
                });
            } else {
                let _ = child.kill();
                let _ = child.wait();
                idle.refill();
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::death_cause;

    #[test]
    fn a_dead_sandbox_is_named_by_its_overflow_or_panic_else_its_last_words() {
        let overflow = "warming up\nthread 'kiln-sandbox' has overflowed its stack\nfatal runtime error: stack overflow, aborting\n";
        assert_eq!(
            death_cause(overflow),
            "thread 'kiln-sandbox' has overflowed its stack"
        );
        let panic = "thread 'kiln-sandbox' panicked at src/x.rs:1:1:\nboom\nnote: run with RUST_BACKTRACE=1\n";
        assert_eq!(
            death_cause(panic),
            "thread 'kiln-sandbox' panicked at src/x.rs:1:1:"
        );
        assert_eq!(death_cause("one\n  two  \n\n"), "two");
        assert_eq!(death_cause(""), "nothing");
    }
}
