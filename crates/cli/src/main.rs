//! `kiln`: run a program in the same Boa sandbox the browser uses, from a terminal.
//!
//! `kiln run FILE` prints the run's `tool-result/v1` object as JSON. Exit codes:
//! 0 the program completed, 1 the result is an error (threw, did not parse, a
//! tool call failed uncaught, a budget ran out), 2 the run was refused
//! (unreadable file, invalid catalog or limits).

mod approve;
mod chat;
mod memory;

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand, ValueEnum};
use futures::future::LocalBoxFuture;
use kiln_capabilities::gate::{Fixed, Headless};
use kiln_capabilities::mcp::McpServer;
use kiln_capabilities::{
    Answer, Approver, Category, Dispatcher, Gate, GateSettings, HeldSignal, Mode, Registry, Secret,
    SecretScope,
};
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::clock::{IdleState, PersonSignal};
use kiln_sandbox::tools::{ToolCall, ToolHost, ToolReply};
use kiln_sandbox::{CpuGauge, Sandbox};
use kiln_types::protocol::CallRequest;
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
        /// category?: read|write|execute|external (default external), returns?,
        /// error?: {code, message, detail?}, delay_ms?, person_wait_ms?}`.
        #[arg(long, value_name = "CATALOG.json")]
        tools: Option<PathBuf>,
        /// Mount an MCP server's tools (Streamable HTTP), as `NAME_<tool>`.
        /// Repeatable.
        #[arg(long, value_name = "NAME=URL")]
        mcp: Vec<String>,
        /// The permission mode: plan runs only read calls, default asks before
        /// anything else, auto allows. Default: `default` when kiln can ask on
        /// a terminal, `auto` otherwise.
        #[arg(long, value_name = "MODE")]
        permission_mode: Option<Mode>,
        /// Who answers when the ladder asks: `ask` prompts on the terminal
        /// (the headless deny when there is none), `yes` approves, `no` denies.
        #[arg(long, value_enum, default_value_t = ApproveWith::Ask)]
        approve: ApproveWith,
        /// Put the environment variable ENV (default NAME) into the run's secret
        /// scope as NAME, sent only to the listed origins when given
        /// (`API_KEY=MY_KEY@https://api.example.com`). Capabilities read it by
        /// name; the program never sees it.
        #[arg(long, value_name = "NAME[=ENV][@ORIGIN,...]")]
        secret: Vec<String>,
        /// A JSON file of limits: `js_cpu_ms`, `tool_calls`, `wall_ms`,
        /// `person_wait_ms`, `return_bytes`, `console_bytes`, `memory_bytes`.
        #[arg(long, value_name = "LIMITS.json")]
        limits: Option<PathBuf>,
        /// Print the sandbox's own report (outcome, console, calls, timings)
        /// instead of the tool-result/v1 object. For tools and benchmarks.
        #[arg(long)]
        report: bool,
        /// Give the program a store on disk (the one `kiln memory --store`
        /// uses): the run is recorded in its history and gets run memory,
        /// the durable memory, history and file capabilities and
        /// `workspace.*` over `DIR/files`.
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
    },
    /// Chat with an LLM provider: the reply streams to standard output, tool
    /// calls and their results are shown, and usage goes to standard error.
    Chat(chat::ChatArgs),
    /// Keep and find durable memories in an on-disk store that several
    /// processes share: save, query, list, mark, export, import.
    Memory(memory::MemoryArgs),
}

/// `--approve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ApproveWith {
    Ask,
    Yes,
    No,
}

impl ApproveWith {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Yes => "yes",
            Self::No => "no",
        }
    }
}

/// How the parent tells the child that its stderr is a terminal it may ask on.
const TERMINAL_ENV: &str = "KILN_ASK_TERMINAL";

/// The permission options of one run, as parsed.
pub(crate) struct Permissions {
    mcp: Vec<String>,
    mode: Option<Mode>,
    approve: ApproveWith,
    secrets: Vec<String>,
    /// `--store DIR`: the run's memory, history and files.
    store: Option<PathBuf>,
}

/// Every allocation of the process counts against the run's memory budget.
#[global_allocator]
static ALLOCATOR: kiln_alloc::Budgeted = kiln_alloc::Budgeted;

/// What the memory hook needs to answer for the run: it runs inside a refused
/// allocation on the sandbox thread, the last thing before the process ends.
struct MemoryStop {
    progress: Arc<Mutex<Progress>>,
    run_id: String,
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
    let (warnings, digest) = admitted(&stop.progress);
    if stop.raw {
        print_report(&report, &warnings, &digest);
    } else {
        let summary = report.into_summary(stop.run_id.clone(), warnings, digest, true);
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
        Command::Chat(args) => chat::run(&args),
        Command::Memory(args) => memory::run(&args),
        Command::Run {
            file,
            tools,
            limits,
            report: raw,
            mcp,
            permission_mode,
            approve,
            secret,
            store,
        } => {
            let permissions = Permissions {
                mcp,
                mode: permission_mode,
                approve,
                secrets: secret,
                store,
            };
            let child = std::env::var_os(CHILD_ENV).is_some();
            match prepare(&file, tools.as_ref(), limits.as_ref(), &permissions, child) {
                Ok(run) if !child => {
                    supervise(&run, tools.as_ref(), limits.as_ref(), raw, &permissions)
                }
                Ok(run) => {
                    let run_id = new_run_id();
                    let progress = Arc::new(Mutex::new(Progress {
                        warnings: run.admission.warnings.clone(),
                        digest: run.admission.digest(),
                        ..Progress::default()
                    }));
                    let _ = MEMORY_STOP.set(MemoryStop {
                        progress: progress.clone(),
                        run_id: run_id.clone(),
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
                    let (warnings, digest) = admitted(&progress);
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
            }
        }
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
    permissions: &Permissions,
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
    for server in &permissions.mcp {
        command.arg("--mcp").arg(server);
    }
    for secret in &permissions.secrets {
        command.arg("--secret").arg(secret);
    }
    if let Some(mode) = permissions.mode {
        command.arg("--permission-mode").arg(mode.as_str());
    }
    command.arg("--approve").arg(permissions.approve.as_str());
    if let Some(store) = &permissions.store {
        command.arg("--store").arg(store);
    }
    // The child's streams are pipes; it asks on /dev/tty when ours is a
    // terminal. Only this decision reaches it, not a stray setting of the
    // caller's environment.
    command.env_remove(TERMINAL_ENV);
    if permissions.approve == ApproveWith::Ask && std::io::stderr().is_terminal() {
        command.env(TERMINAL_ENV, "1");
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
    catalog: serde_json::Value,
    /// The scripted catalog's admission: what the supervising process reports
    /// if the run's process dies.
    admission: Admission,
    /// How to build the ladder (in the process that runs the program).
    ladder: Option<Ladder>,
}

/// Who answers the ladder's questions in the run's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asker {
    Terminal,
    Headless,
    Yes,
    No,
}

/// The run's gate, secrets and MCP servers, checked before the run starts and
/// built on the sandbox's thread (the ladder is single-threaded).
struct Ladder {
    /// The command, for the gate's host name: `kiln run`, `kiln chat`.
    entrance: &'static str,
    mode: Mode,
    asker: Asker,
    secrets: Vec<(String, String, Vec<String>)>,
    mcp: Vec<(String, String)>,
    store: Option<PathBuf>,
}

/// A run recorded in a store's history, settled when the run ends.
struct JobRecord {
    history: kiln_store::history::History,
    job_id: String,
}

impl JobRecord {
    /// Settles the job with the run's outcome; a store that fails now does
    /// not change the run's answer.
    fn finish(self, report: &RunReport) {
        let (status, output) = match &report.outcome {
            kiln_types::RunOutcome::Completed { value } => ("ok", value.to_string()),
            kiln_types::RunOutcome::Failed(error) => ("error", error.message.clone()),
        };
        let _ = futures::executor::block_on(self.history.finish_job(&self.job_id, status, &output));
    }
}

impl Ladder {
    /// The registry (scripted tools, MCP servers), the gate and the
    /// dispatcher, and the sandbox's admission of what they serve.
    fn build(
        self,
        catalog: &serde_json::Value,
        limits: RunLimits,
        code: &str,
    ) -> Result<(Dispatcher, Admission, Vec<McpServer>, Option<JobRecord>), String> {
        let mut registry = Registry::new();
        kiln_capabilities::scripted::add_catalog(&mut registry, catalog, "scripted")?;
        let http = kiln_http::default_client();
        kiln_capabilities::builtin::add_builtins(&mut registry, &http);
        let job = match &self.store {
            Some(dir) => {
                Some(add_store(&mut registry, dir, code).map_err(|error| error.to_string())?)
            }
            None => None,
        };
        let mut servers = Vec::new();
        for (name, url) in &self.mcp {
            let connected = futures::executor::block_on(kiln_capabilities::mcp::connect(
                name,
                url,
                Category::External,
                http.clone(),
            ));
            match connected {
                Ok(server) => {
                    kiln_capabilities::mcp::add_server(&mut registry, &server);
                    servers.push(server);
                }
                Err(warning) => registry.warn(*warning),
            }
        }
        let entrance = self.entrance;
        let (host, approver): (String, Rc<dyn Approver>) = match self.asker {
            Asker::Yes => (
                format!("{entrance} --approve yes"),
                Rc::new(Fixed(Answer::Approve)),
            ),
            Asker::No => (
                format!("{entrance} --approve no"),
                Rc::new(Fixed(Answer::Deny)),
            ),
            Asker::Terminal => (entrance.to_owned(), Rc::new(approve::Terminal)),
            Asker::Headless => {
                let host = format!("{entrance} (no terminal to ask on)");
                let approver = Rc::new(Headless::new(&host));
                (host, approver)
            }
        };
        let settings = GateSettings {
            mode: self.mode,
            ..GateSettings::default()
        };
        let gate = Gate::new(&host, settings, approver)?;
        let mut secrets = SecretScope::new();
        for (name, value, origins) in self.secrets {
            secrets.insert(name, Secret::for_origins(value, origins));
        }
        let dispatcher = Dispatcher::new(Rc::new(registry), Some(gate), secrets, limits, entrance);
        let mut admission =
            Admission::admit(&dispatcher.catalog(), "scripted").map_err(|e| e.to_string())?;
        let mut warnings = dispatcher.warnings().to_vec();
        warnings.append(&mut admission.warnings);
        admission.warnings = warnings;
        Ok((dispatcher, admission, servers, job))
    }
}

/// Opens the store in `dir` (the log, and `dir/files` for the workspace),
/// records the run as a job and mounts the storage capabilities for it.
fn add_store(
    registry: &mut Registry,
    dir: &std::path::Path,
    code: &str,
) -> Result<JobRecord, kiln_store::StoreError> {
    use kiln_store::history::{History, JobStart, title_of_program};
    let backend: Rc<dyn kiln_store::Backend> = kiln_store::native::LogBackend::open(dir)?;
    let files: Rc<dyn kiln_store::files::FileTree> =
        kiln_store::native::DirTree::open(&dir.join("files"))?;
    let history = History::new(backend.clone());
    let job = futures::executor::block_on(history.start_job(JobStart {
        kind: "program".into(),
        agent: "cli".into(),
        title: title_of_program(code),
        input: code.to_owned(),
    }))?;
    kiln_capabilities::builtin::add_storage(
        registry,
        &kiln_capabilities::Storage::new(backend, files, &job.id, "cli"),
    );
    Ok(JobRecord {
        history,
        job_id: job.id,
    })
}

/// Reads and checks the run, so that a bad request is refused (exit 2) before
/// anything runs. The process that runs the program (`child`) keeps the
/// ladder's settings to build its registry and gate from; the supervising one
/// only admits the catalog, for the answer it gives if the run's process dies.
fn prepare(
    file: &PathBuf,
    tools: Option<&PathBuf>,
    limits: Option<&PathBuf>,
    permissions: &Permissions,
    child: bool,
) -> Result<Prepared> {
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
    let refused = || {
        format!(
            "the tool catalog `{}` was refused",
            tools.map(|p| p.display().to_string()).unwrap_or_default()
        )
    };
    let mut registry = Registry::new();
    // Read the scripts now, so a bad one refuses the run instead of failing a call.
    kiln_capabilities::scripted::add_catalog(&mut registry, &catalog, "scripted")
        .map_err(anyhow::Error::msg)
        .with_context(refused)?;
    let admission = Admission::admit(&registry.catalog(), "scripted").with_context(refused)?;
    let terminal = std::env::var_os(TERMINAL_ENV).is_some();
    let ladder = ladder(permissions, "kiln run", terminal)?;
    let ladder = child.then_some(ladder);
    Ok(Prepared {
        code,
        limits: limits.clamped(),
        catalog,
        admission,
        ladder,
    })
}

/// The run's ladder settings: the mode asked for (or the reference's
/// default: `default` when a terminal can be asked, `auto` otherwise), who
/// answers, the secrets and the MCP servers.
fn ladder(permissions: &Permissions, entrance: &'static str, terminal: bool) -> Result<Ladder> {
    let asker = match permissions.approve {
        ApproveWith::Yes => Asker::Yes,
        ApproveWith::No => Asker::No,
        ApproveWith::Ask if terminal => Asker::Terminal,
        ApproveWith::Ask => Asker::Headless,
    };
    let mode = permissions.mode.unwrap_or(if asker == Asker::Terminal {
        Mode::Default
    } else {
        Mode::Auto
    });
    // `--secret NAME[=ENV]`: the value comes from the environment, never the
    // command line.
    let mut secrets = Vec::new();
    for spec in &permissions.secrets {
        let (spec, origins) = match spec.split_once('@') {
            Some((spec, origins)) => (spec, origins.split(',').map(str::to_owned).collect()),
            None => (spec.as_str(), Vec::new()),
        };
        for origin in &origins {
            if kiln_capabilities::secrets::origin_of(origin).is_none() {
                anyhow::bail!("--secret {spec}@…: `{origin}` is not an http(s) origin");
            }
        }
        let (name, variable) = spec.split_once('=').unwrap_or((spec, spec));
        let value = std::env::var(variable).map_err(|_| {
            anyhow::anyhow!(
                "--secret {spec}: the environment variable `{variable}` is not set (or not UTF-8)"
            )
        })?;
        secrets.push((name.to_owned(), value, origins));
    }
    let mut mcp = Vec::new();
    for spec in &permissions.mcp {
        let Some((name, url)) = spec.split_once('=') else {
            anyhow::bail!(
                "--mcp {spec}: expected NAME=URL, e.g. --mcp everything=http://127.0.0.1:3001/mcp"
            );
        };
        if !kiln_capabilities::registry::is_identifier(name) {
            anyhow::bail!(
                "--mcp {spec}: the server name `{name}` must be a JavaScript identifier, since it prefixes its tools' names"
            );
        }
        mcp.push((name.to_owned(), url.to_owned()));
    }
    Ok(Ladder {
        entrance,
        mode,
        asker,
        secrets,
        mcp,
        store: permissions.store.clone(),
    })
}

/// The warnings and catalog digest of the run as admitted so far.
fn admitted(progress: &Mutex<Progress>) -> (Vec<kiln_types::tool_result::Warning>, String) {
    progress
        .lock()
        .map(|progress| (progress.warnings.clone(), progress.digest.clone()))
        .unwrap_or_default()
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
            let progress = progress.clone();
            move || {
                let (dispatcher, admission, servers, job) = match run.ladder {
                    Some(ladder) => match ladder.build(&run.catalog, run.limits, &run.code) {
                        Ok((dispatcher, admission, servers, job)) => {
                            (Some(dispatcher), admission, servers, job)
                        }
                        Err(problem) => {
                            let error = RunError::new(
                                kiln_types::RunErrorKind::Engine,
                                format!("the run's capabilities could not be set up: {problem}"),
                            );
                            let _ = sender.send(RunReport::stopped(error, 0.0));
                            return;
                        }
                    },
                    None => (None, run.admission, Vec::new(), None),
                };
                if let Ok(mut progress) = progress.lock() {
                    progress.warnings = admission.warnings.clone();
                    progress.digest = admission.digest();
                }
                let host = WatchedTools {
                    dispatcher,
                    progress,
                };
                let report = match Sandbox::new() {
                    Ok(sandbox) => futures::executor::block_on(sandbox.run(
                        &run.code,
                        &run.limits,
                        Rc::new(admission),
                        Rc::new(host),
                        Some(gauge),
                    )),
                    Err(report) => *report,
                };
                // End the MCP sessions (HTTP DELETE) before answering: the
                // process ends soon after the answer.
                for server in servers {
                    let _ = futures::executor::block_on(server.client.close());
                }
                if let Some(job) = job {
                    job.finish(&report);
                }
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
    warnings: Vec<kiln_types::tool_result::Warning>,
    digest: String,
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

/// The run's door to its capabilities (the ladder), recording each call and
/// the console output as the run goes (the console reaches the host each time
/// the guest goes idle).
struct WatchedTools {
    dispatcher: Option<Dispatcher>,
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
        let held: HeldSignal = Rc::new(move |on| person.held(on));
        let request = CallRequest {
            call_number: call.call_number,
            tool: call.tool,
            args: call.args,
        };
        let reply = match &self.dispatcher {
            Some(dispatcher) => dispatcher.call(request, held),
            // Only the supervising process has no ladder, and it runs nothing.
            None => Box::pin(async move {
                Err(kiln_types::tool_result::ToolFailure {
                    code: "tool_unavailable".into(),
                    message: format!("{} is not served by this process", request.tool),
                    detail: None,
                    outcome: CallOutcome::ToolUnavailable,
                })
            }),
        };
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
