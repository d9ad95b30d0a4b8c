//! `kiln`: run a program in the same Boa sandbox the browser uses, from a terminal.
//!
//! `kiln run FILE` prints the run's `tool-result/v1` object as JSON. Exit codes:
//! 0 the program completed, 1 the result is an error (threw, did not parse, a
//! tool call failed uncaught, a budget ran out), 2 the run was refused
//! (unreadable file, invalid catalog or limits).

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use futures::future::LocalBoxFuture;
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::clock::{IdleState, PersonSignal};
use kiln_sandbox::scripted::ScriptedTools;
use kiln_sandbox::tools::{ToolCall, ToolHost, ToolReply};
use kiln_sandbox::{CpuGauge, Sandbox};
use kiln_types::tool_result::{CallOutcome, CallSummary, ToolResult, run_id_from};
use kiln_types::{ConsoleLine, RunError, RunLimits, RunReport};

#[derive(Parser)]
#[command(
    name = "kiln",
    version,
    about = "Run JavaScript programs in Kiln's Boa sandbox"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program (the body of an async function) and print its tool-result/v1 as JSON.
    Run {
        /// The program's file, or `-` for standard input.
        file: PathBuf,
        /// A JSON array of tool entries: `{name, description?, input_schema?,
        /// returns?, error?: {code, message, detail?}, delay_ms?, person_wait_ms?}`.
        #[arg(long, value_name = "CATALOG.json")]
        tools: Option<PathBuf>,
        /// A JSON file of limits: `js_cpu_ms`, `tool_calls`, `wall_ms`,
        /// `person_wait_ms`, `return_bytes`, `console_bytes`, `memory_bytes`.
        #[arg(long, value_name = "LIMITS.json")]
        limits: Option<PathBuf>,
        /// Print the sandbox's own report (outcome, console, calls, timings)
        /// instead of the tool-result/v1 object. For tools and benchmarks.
        #[arg(long)]
        report: bool,
    },
}

/// Every allocation of the process counts against the run's memory budget.
#[global_allocator]
static ALLOCATOR: kiln_alloc::Budgeted = kiln_alloc::Budgeted;

/// What the memory hook needs to answer for the run: it runs inside a refused
/// allocation on the sandbox thread, the last thing before the process ends.
struct MemoryStop {
    progress: Arc<Mutex<Progress>>,
    run_id: String,
    warnings: Vec<kiln_types::tool_result::Warning>,
    digest: String,
    memory_bytes: u64,
    started: Instant,
    raw: bool,
}

static MEMORY_STOP: OnceLock<MemoryStop> = OnceLock::new();

/// The memory budget ran out: print the run's result and end the process, since
/// the refused allocation would abort it.
fn memory_exhausted(_limit: usize) {
    let Some(stop) = MEMORY_STOP.get() else {
        return;
    };
    let report = progress_report(
        RunError::memory_budget(stop.memory_bytes),
        stop.started,
        &stop.progress,
    );
    if stop.raw {
        print_report(&report, &stop.warnings, &stop.digest);
    } else {
        let summary = report.into_summary(
            stop.run_id.clone(),
            stop.warnings.clone(),
            stop.digest.clone(),
            true,
        );
        print_result(&summary.into_result());
    }
    let _ = std::io::stdout().flush();
    std::process::exit(1);
}

/// Set in the environment of the process that runs the program itself.
const CHILD_ENV: &str = "KILN_SANDBOX_CHILD";

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            file,
            tools,
            limits,
            report: raw,
        } => match prepare(&file, tools.as_ref(), limits.as_ref()) {
            Ok(run) if std::env::var_os(CHILD_ENV).is_none() => {
                supervise(&run, tools.as_ref(), limits.as_ref(), raw)
            }
            Ok(run) => {
                let warnings = run.admission.warnings.clone();
                let digest = run.admission.digest();
                let run_id = new_run_id();
                let progress = Arc::new(Mutex::new(Progress::default()));
                let _ = MEMORY_STOP.set(MemoryStop {
                    progress: progress.clone(),
                    run_id: run_id.clone(),
                    warnings: warnings.clone(),
                    digest: digest.clone(),
                    memory_bytes: run.limits.memory_bytes,
                    started: Instant::now(),
                    raw,
                });
                kiln_alloc::set_exhausted_hook(memory_exhausted);
                // The budget counts the process's whole heap, from here on.
                kiln_alloc::set_limit(
                    usize::try_from(run.limits.memory_bytes).unwrap_or(usize::MAX),
                );
                let report = run_with_deadline(run, &progress);
                kiln_alloc::set_limit(usize::MAX);
                if raw {
                    return print_report(&report, &warnings, &digest);
                }
                let summary = report.into_summary(run_id, warnings, digest, true);
                print_result(&summary.into_result())
            }
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::from(2)
            }
        },
    }
}

/// Runs the program in a child process (this same binary, with the program on
/// its standard input) and passes its answer through. Some engine work recurses
/// on the host's stack without a bound of its own (`JSON.stringify` of a value
/// nested a million levels deep, say), and a stack overflow aborts a process:
/// the child is what aborts, and this process still answers with a result.
fn supervise(
    run: &Prepared,
    tools: Option<&PathBuf>,
    limits: Option<&PathBuf>,
    raw: bool,
) -> ExitCode {
    let started = Instant::now();
    let crashed = |problem: String| {
        let report = RunReport::stopped(
            RunError::new(kiln_types::RunErrorKind::Engine, problem),
            started.elapsed().as_secs_f64() * 1e3,
        );
        let warnings = run.admission.warnings.clone();
        let digest = run.admission.digest();
        if raw {
            return print_report(&report, &warnings, &digest);
        }
        print_result(
            &report
                .into_summary(new_run_id(), warnings, digest, true)
                .into_result(),
        )
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => {
            return crashed(format!(
                "could not find the kiln binary to run the sandbox: {error}"
            ));
        }
    };
    let mut command = std::process::Command::new(exe);
    command.args(["run", "-"]);
    if let Some(tools) = tools {
        command.arg("--tools").arg(tools);
    }
    if let Some(limits) = limits {
        command.arg("--limits").arg(limits);
    }
    if raw {
        command.arg("--report");
    }
    let child = command
        .env(CHILD_ENV, "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => return crashed(format!("could not start the sandbox process: {error}")),
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A child that died before reading its program is reported below.
        let _ = stdin.write_all(run.code.as_bytes());
    }
    let output = match child.wait_with_output() {
        Ok(output) => output,
        Err(error) => return crashed(format!("lost the sandbox process: {error}")),
    };
    let answered = serde_json::from_slice::<serde_json::Value>(&output.stdout).is_ok();
    match output.status.code() {
        Some(code @ (0 | 1)) if answered => {
            let _ = std::io::stdout().write_all(&output.stdout);
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let cause = stderr
                .lines()
                .rev()
                .find(|line| line.contains("overflowed its stack") || line.contains("panicked"))
                .or_else(|| stderr.lines().rev().find(|line| !line.trim().is_empty()))
                .map(|line| format!(": {}", line.trim()))
                .unwrap_or_default();
            crashed(format!(
                "the sandbox process ended without a result ({}){cause}",
                output.status
            ))
        }
    }
}

/// Everything a run needs, read and checked before it starts.
struct Prepared {
    code: String,
    limits: RunLimits,
    host: ScriptedTools,
    admission: Admission,
}

fn prepare(file: &PathBuf, tools: Option<&PathBuf>, limits: Option<&PathBuf>) -> Result<Prepared> {
    let code = if file.as_os_str() == "-" {
        let mut code = String::new();
        std::io::stdin()
            .read_to_string(&mut code)
            .context("reading the program from standard input")?;
        code
    } else {
        std::fs::read_to_string(file)
            .with_context(|| format!("reading the program `{}`", file.display()))?
    };
    let limits = match limits {
        None => RunLimits::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the limits `{}`", path.display()))?;
            serde_json::from_str::<RunLimits>(&text)
                .with_context(|| format!("the limits `{}` are not valid", path.display()))?
        }
    };
    let catalog = match tools {
        None => serde_json::Value::Array(Vec::new()),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the tool catalog `{}`", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("the tool catalog `{}` is not JSON", path.display()))?
        }
    };
    let admission = Admission::admit(&catalog, "scripted").with_context(|| {
        format!(
            "the tool catalog `{}` was refused",
            tools.map(|p| p.display().to_string()).unwrap_or_default()
        )
    })?;
    // Read the scripts now, so a bad one refuses the run instead of failing a call.
    let host = ScriptedTools::from_catalog(&catalog).map_err(anyhow::Error::msg)?;
    Ok(Prepared {
        code,
        limits: limits.clamped(),
        host,
        admission,
    })
}

/// `codemode:` and 16 random hex digits.
fn new_run_id() -> String {
    let mut bytes = [0_u8; 8];
    // Without OS randomness the id is still unique enough for one process's output.
    if getrandom::fill(&mut bytes).is_err() {
        let pid = std::process::id().to_le_bytes();
        bytes[..4].copy_from_slice(&pid);
        bytes[4..].copy_from_slice(&pid);
    }
    run_id_from(bytes)
}

/// Runs the program on its own thread and watches it: Boa has no interrupt
/// hook, so a guest that runs JavaScript past its CPU budget without stopping,
/// or a run past its wall budget, is given up on here, and the abandoned thread
/// ends with the process. Both budgets are also kept inside the sandbox, which
/// reports them itself whenever the guest stops in time.
fn run_with_deadline(run: Prepared, progress: &Arc<Mutex<Progress>>) -> RunReport {
    /// How often the watchdog reads the guest's CPU time.
    const TICK: Duration = Duration::from_millis(5);
    let started = Instant::now();
    let limits = run.limits;
    let gauge = Arc::new(CpuGauge::default());
    let (sender, receiver) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("kiln-sandbox".into())
        .spawn({
            let gauge = gauge.clone();
            let host = WatchedTools {
                inner: run.host,
                progress: progress.clone(),
            };
            move || {
                let report = match Sandbox::new() {
                    Ok(sandbox) => futures::executor::block_on(sandbox.run(
                        &run.code,
                        &run.limits,
                        Rc::new(run.admission),
                        Rc::new(host),
                        Some(gauge),
                    )),
                    Err(report) => *report,
                };
                let _ = sender.send(report);
            }
        });
    if let Err(error) = spawned {
        return RunReport::stopped(
            RunError::new(
                kiln_types::RunErrorKind::Engine,
                format!("could not start the sandbox thread: {error}"),
            ),
            0.0,
        );
    }
    let wall = Duration::from_millis(limits.wall_ms);
    let js_cpu = Duration::from_millis(limits.js_cpu_ms);
    loop {
        let left = wall.saturating_sub(started.elapsed());
        match receiver.recv_timeout(left.min(TICK)) {
            Ok(report) => return report,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return RunReport::stopped(
                    RunError::new(
                        kiln_types::RunErrorKind::Engine,
                        "the sandbox thread ended without a report",
                    ),
                    started.elapsed().as_secs_f64() * 1e3,
                );
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let stop = if started.elapsed() >= wall {
            RunError::wall_budget(limits.wall_ms)
        } else if gauge.spent() > js_cpu {
            RunError::js_cpu_budget(limits.js_cpu_ms)
        } else {
            continue;
        };
        return progress_report(stop, started, progress);
    }
}

/// What a run has shown so far, kept where the watchdog and the memory hook can
/// read it when they end the run from outside the sandbox thread.
#[derive(Default)]
struct Progress {
    console: Vec<ConsoleLine>,
    calls: Vec<CallSummary>,
}

/// A report for a run ended from outside: `error`, with the output and the
/// calls seen so far.
fn progress_report(error: RunError, started: Instant, progress: &Mutex<Progress>) -> RunReport {
    let mut report = RunReport::stopped(error, started.elapsed().as_secs_f64() * 1e3);
    if let Ok(progress) = progress.lock() {
        report.console = progress.console.clone();
        report.calls = progress.calls.clone();
    }
    report
}

/// The scripted tools, recording each call and the console output as the run
/// goes (the console reaches the host each time the guest goes idle).
struct WatchedTools {
    inner: ScriptedTools,
    progress: Arc<Mutex<Progress>>,
}

impl ToolHost for WatchedTools {
    fn call(&self, call: ToolCall, person: PersonSignal) -> LocalBoxFuture<'static, ToolReply> {
        let index = self.progress.lock().ok().map(|mut progress| {
            progress.calls.push(CallSummary {
                tool: call.tool.clone(),
                outcome: CallOutcome::OutcomeUnknown,
                waited_on_person: false,
                duration_ms: 0,
            });
            progress.calls.len() - 1
        });
        let started = Instant::now();
        let reply = self.inner.call(call, person);
        let progress = self.progress.clone();
        Box::pin(async move {
            let reply = reply.await;
            if let (Some(index), Ok(mut progress)) = (index, progress.lock())
                && let Some(summary) = progress.calls.get_mut(index)
            {
                summary.outcome = match &reply {
                    Ok(_) => CallOutcome::Ok,
                    Err(failure) => failure.outcome,
                };
                summary.duration_ms =
                    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            }
            reply
        })
    }

    fn idle(&self, state: IdleState) {
        if let Ok(mut progress) = self.progress.lock() {
            progress.console.extend(state.console);
        }
    }
}

/// `--report`: the sandbox's own report, admission's warnings and the digest.
fn print_report(
    report: &RunReport,
    warnings: &[kiln_types::tool_result::Warning],
    digest: &str,
) -> ExitCode {
    let json = serde_json::json!({
        "report": report,
        "warnings": warnings,
        "catalog_digest": digest,
    });
    println!("{json:#}");
    if matches!(report.outcome, kiln_types::RunOutcome::Failed(_)) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn print_result(result: &ToolResult) -> ExitCode {
    match serde_json::to_string_pretty(result) {
        Ok(json) => println!("{json}"),
        Err(error) => {
            eprintln!("error: the result could not be written as JSON: {error}");
            return ExitCode::FAILURE;
        }
    }
    if result.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
