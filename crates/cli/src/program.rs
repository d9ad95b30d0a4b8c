//! `kiln run`: a program run through `kiln_run::run_program`, in a child
//! process under a watchdog.
//!
//! The parent reads and checks the request (exit 2 on a problem), then runs
//! the program in a child process (this same binary, `KILN_SANDBOX_CHILD=1`,
//! the program on its stdin) and passes its answer through: some engine work
//! recurses on the host stack without a bound of its own (`JSON.stringify` of
//! a value nested a million levels deep), and a stack overflow aborts a
//! process — the child's, and the parent still answers with a result. In the
//! child the run (ladder, store, MCP sessions, sandbox) happens on a thread of
//! its own; the main thread is the watchdog that ends the process's wait at
//! the wall budget or when the sandbox's `CpuGauge` passes the JS CPU budget.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use futures::future::LocalBoxFuture;
use kiln_capabilities::gate::{Fixed, Headless, SessionAllow};
use kiln_capabilities::{Answer, Approver, Dispatcher, HeldSignal, Registry};
use kiln_run::Environment;
use kiln_run::RunId;
use kiln_run::{People, RunRequest, SandboxRunner, Workspace};
use kiln_sandbox::catalog::Admission;
use kiln_sandbox::clock::{IdleState, PersonSignal};
use kiln_sandbox::tools::{ToolCall, ToolHost, ToolReply};
use kiln_sandbox::{CpuGauge, Sandbox};
use kiln_types::cancel::AbortSignal;
use kiln_types::protocol::CallRequest;
use kiln_types::tool_result::{CallOutcome, CallSummary, ToolResult, Warning};
use kiln_types::{ConsoleLine, RunError, RunErrorKind, RunLimits, RunReport, RunResult};
use serde_json::{Value, json};

use crate::{ApproveWith, Permissions};

/// How the parent tells the child that its stderr is a terminal it may ask on.
const TERMINAL_ENV: &str = "KILN_ASK_TERMINAL";

/// Set in the environment of the process that runs the program itself.
const CHILD_ENV: &str = "KILN_SANDBOX_CHILD";
/// Set by `kiln mcp serve` for each call's `kiln run`: the server's pid, so the
/// run ends with the server however that ends (its job is then `interrupted`
/// at the server's next start), and an interrupt is the MCP client's doing.
pub(crate) const SERVED_ENV: &str = "KILN_SERVED_BY";
/// The gate's host in a served run: who denies what would ask.
pub(crate) const SERVED_HOST: &str =
    "kiln mcp serve (its MCP client's person is not reachable from here)";

/// Every allocation of the process counts against the run's memory budget.
#[global_allocator]
static ALLOCATOR: kiln_alloc::Budgeted = kiln_alloc::Budgeted;

/// What the memory hook needs to answer for the run: it runs inside a refused
/// allocation on the sandbox thread, the last thing before the process ends.
struct MemoryStop {
    progress: Arc<Mutex<Progress>>,
    run_id: RunId,
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
    let run = progress_run(
        RunError::memory_budget(stop.memory_bytes),
        stop.started,
        &stop.progress,
    );
    answer(&stop.run_id, run, stop.raw);
    let _ = std::io::stdout().flush();
    std::process::exit(1);
}

/// `kiln run`: refuses a bad request with exit 2; else runs it (in the child)
/// or supervises the child that runs it.
pub fn run(
    file: &PathBuf,
    tools: Option<&PathBuf>,
    limits: Option<&PathBuf>,
    raw: bool,
    permissions: &Permissions,
) -> ExitCode {
    let child = std::env::var_os(CHILD_ENV);
    if let Some(parent) = &child {
        end_with_parent(parent);
    }
    let child = child.is_some();
    match prepare(file, tools, limits, permissions) {
        Ok(run) if !child => supervise(&run, tools, limits, raw, permissions),
        Ok(run) => run_here(run, raw),
        Err(error) => {
            // A store that cannot open says what to do about it.
            eprintln!("{}", crate::memory::shown(&error));
            ExitCode::from(2)
        }
    }
}

/// Loads Kiln's own model when the run's `tools.model` asks it, and answers
/// the bytes in use then (0 when it does not). A model that fails to load is
/// the model call's failure, said then.
fn preload_model(request: &kiln_run::RunRequest) -> usize {
    let Some(setup) = &request.model else {
        return 0;
    };
    let kind = setup
        .provider
        .get("kind")
        .and_then(serde_json::Value::as_str);
    if kind.and_then(kiln_providers::ProviderKind::parse)
        != Some(kiln_providers::ProviderKind::InProcess)
    {
        return 0;
    }
    let base_url = setup
        .provider
        .get("base_url")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let _ = kiln_llm::native::model_for(base_url).load();
    // The weights in use now, and room for the caches of the model's kept
    // states, which grow with the turns the program asks for.
    kiln_alloc::in_use().saturating_add(kiln_llm::STATE_BYTES_BOUND)
}

/// The child: runs the program under the memory budget and the watchdog.
fn run_here(run: Prepared, raw: bool) -> ExitCode {
    let run_id = RunId::for_request(&run.request, &kiln_store::ids::random_bytes);
    let progress = Arc::new(Mutex::new(Progress {
        warnings: run.admission.warnings.clone(),
        digest: run.admission.digest(),
        ..Progress::default()
    }));
    let memory_bytes = run.request.limits.get().memory_bytes;
    let _ = MEMORY_STOP.set(MemoryStop {
        progress: progress.clone(),
        run_id: run_id.clone(),
        memory_bytes,
        started: Instant::now(),
        raw,
    });
    kiln_alloc::set_exhausted_hook(memory_exhausted);
    // Ctrl-C (or the supervising process passing it on) cancels the run: the
    // watchdog answers with the output and call outcomes so far.
    let interrupted = Arc::new(AtomicBool::new(false));
    let _ = ctrlc::set_handler({
        let interrupted = interrupted.clone();
        move || interrupted.store(true, Ordering::SeqCst)
    });
    // The budget counts the process's whole heap, from here on; Kiln's own
    // model (`--provider local`), loaded first, is the host's and not the
    // program's, so the budget then starts above it.
    let host_bytes = preload_model(&run.request);
    kiln_alloc::set_limit(
        usize::try_from(memory_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(host_bytes),
    );
    let finished = run_with_deadline(run, &run_id, &progress, &interrupted);
    kiln_alloc::set_limit(usize::MAX);
    match finished {
        Finished::Answered(result, sandbox_run) => {
            if raw {
                print_report(&sandbox_run)
            } else {
                print_result(&result)
            }
        }
        Finished::Stopped(sandbox_run) => answer(&run_id, sandbox_run, raw),
    }
}

/// Prints a run ended from outside the sandbox thread.
fn answer(run_id: &RunId, run: RunResult, raw: bool) -> ExitCode {
    if raw {
        print_report(&run)
    } else {
        print_result(&run_id.result_of(run))
    }
}

/// Runs the program in a child process and passes its answer through (see
/// the module's docs for why).
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
            RunError::new(RunErrorKind::Engine, problem),
            started.elapsed().as_secs_f64() * 1e3,
        );
        let sandbox_run = RunResult {
            report,
            warnings: run.admission.warnings.clone(),
            catalog_digest: run.admission.digest(),
        };
        answer(
            &RunId::for_request(&run.request, &kiln_store::ids::random_bytes),
            sandbox_run,
            raw,
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
    if let Some(origins) = &permissions.allow_net {
        command.arg(format!("--allow-net={origins}"));
    }
    command.arg("--agent").arg(&permissions.agent);
    if let Some(key) = &permissions.key {
        command.arg("--key").arg(key);
    }
    // The key stays in its variable, which the child inherits.
    command.args(permissions.model.to_args());
    // The child's streams are pipes; it asks on /dev/tty when ours is a
    // terminal. Only this decision reaches it, not a stray setting of the
    // caller's environment.
    command.env_remove(TERMINAL_ENV);
    if permissions.approve == ApproveWith::Ask && std::io::stderr().is_terminal() {
        command.env(TERMINAL_ENV, "1");
    }
    let child = command
        .env(CHILD_ENV, std::process::id().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => return crashed(format!("could not start the sandbox process: {error}")),
    };
    // Ctrl-C reaches the child too when it comes from the terminal; a
    // SIGINT sent to this process alone is passed on, and the child answers
    // `cancelled` with what it has.
    let pid = child.id();
    let _ = ctrlc::set_handler(move || pass_on_interrupt(pid));
    if let Some(mut stdin) = child.stdin.take() {
        // A child that died before reading its program is reported below.
        let _ = stdin.write_all(run.request.code.as_bytes());
    }
    // The child keeps the run's budgets itself; this deadline is for a child
    // that cannot answer (wedged, say): past its wall budget and a grace, it
    // is killed and the run answered from here.
    let wall = Duration::from_millis(run.request.limits.get().wall_ms);
    let output = match wait_until(child, started + wall + CHILD_GRACE) {
        Ok(Some(output)) => output,
        Ok(None) => {
            return crashed(format!(
                "the sandbox process did not answer within its wall budget of {} ms and {} s \
                 more, and was killed",
                wall.as_millis(),
                CHILD_GRACE.as_secs()
            ));
        }
        Err(error) => return crashed(format!("lost the sandbox process: {error}")),
    };
    let answered = serde_json::from_slice::<Value>(&output.stdout).is_ok();
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

/// How long past its wall budget the supervisor waits for the child's answer.
const CHILD_GRACE: Duration = Duration::from_secs(5);
/// How long an interrupted run has to answer itself (close its MCP sessions, settle its
/// record) before the watchdog answers for it.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Waits for `child` to end, reading its output meanwhile, until `deadline`;
/// then kills it and answers `None`.
fn wait_until(
    mut child: std::process::Child,
    deadline: Instant,
) -> std::io::Result<Option<std::process::Output>> {
    use std::io::Read as _;
    let drain = |stream: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut stream) = stream {
                let _ = stream.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    );
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ok(Some(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }))
}

/// The child ends when its supervising process does, however that ends (a
/// `kill -9` included): an orphan would go on running the program and
/// holding the store's owner lock, so its job could never be seen as
/// interrupted. `parent` is the supervisor's pid, from [`CHILD_ENV`].
#[cfg(target_os = "linux")]
pub(crate) fn end_with_parent(parent: &std::ffi::OsStr) {
    use nix::sys::signal::Signal;
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    // The supervisor may have ended before the line above took effect.
    let expected = parent.to_str().and_then(|pid| pid.parse::<i32>().ok());
    if expected.is_some_and(|pid| nix::unistd::getppid().as_raw() != pid) {
        std::process::exit(2);
    }
}

/// A `kiln run` that `kiln mcp serve` started ([`SERVED_ENV`]) ends with the
/// server (its own sandbox child ends with it in turn, by [`CHILD_ENV`]).
pub(crate) fn end_with_server() {
    if std::env::var_os(CHILD_ENV).is_none()
        && let Some(server) = std::env::var_os(SERVED_ENV)
    {
        end_with_parent(&server);
    }
}

/// Elsewhere a child outlives a killed supervisor until its wall budget ends.
#[cfg(not(target_os = "linux"))]
pub(crate) fn end_with_parent(_parent: &std::ffi::OsStr) {}

#[cfg(unix)]
pub(crate) fn pass_on_interrupt(pid: u32) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    if let Ok(pid) = i32::try_from(pid) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGINT);
    }
}

/// Elsewhere the console's Ctrl-C reaches the whole process group already.
#[cfg(not(unix))]
pub(crate) fn pass_on_interrupt(_pid: u32) {}

/// Everything a run needs, read and checked before it starts.
pub(crate) struct Prepared {
    pub request: RunRequest,
    /// The scripted part of the catalog (`--tools`).
    pub catalog: Value,
    /// The scripted catalog's admission: what the supervising process reports
    /// if the run's process dies.
    pub admission: Admission,
    pub asker: Asker,
    pub store: Option<PathBuf>,
}

/// Who answers the ladder's questions in the run's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asker {
    Terminal,
    Headless,
    Yes,
    No,
}

impl Asker {
    pub(crate) fn new(approve: ApproveWith, terminal: bool) -> Self {
        match approve {
            ApproveWith::Yes => Self::Yes,
            ApproveWith::No => Self::No,
            ApproveWith::Ask if terminal => Self::Terminal,
            ApproveWith::Ask => Self::Headless,
        }
    }

    /// The people of `entrance` (`kiln run`, `kiln chat`): the gate's host
    /// name and its approver. The mode a request names none of follows from
    /// it (`default` on a terminal, `auto` otherwise: the reference's CLI rows).
    pub(crate) fn people(self, entrance: &str) -> People {
        let (host, approver): (String, Rc<dyn Approver>) = match self {
            Self::Yes => (
                format!("{entrance} --approve yes"),
                Rc::new(Fixed(Answer::Approve)),
            ),
            Self::No => (
                format!("{entrance} --approve no"),
                Rc::new(Fixed(Answer::Deny)),
            ),
            Self::Terminal => (entrance.to_owned(), Rc::new(crate::approve::Terminal)),
            Self::Headless => {
                let host = if std::env::var_os(SERVED_ENV).is_some() {
                    SERVED_HOST.to_owned()
                } else {
                    format!("{entrance} (no terminal to ask on)")
                };
                let approver = Rc::new(Headless::new(&host));
                (host, approver)
            }
        };
        People::Approver {
            host,
            approver,
            session: SessionAllow::default(),
        }
    }
}

/// Reads a JSON file the run names (`--tools`, `--limits`).
pub(crate) fn read_json(path: &Path, what: &str) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the {what} `{}`", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("the {what} `{}` is not JSON", path.display()))
}

/// Splits `{"name": "http_request"}` out of the catalog: naming the built-in
/// asks for the network, like `--allow-net` alone.
fn split_builtins(catalog: Value, path: &str) -> Result<(Value, bool)> {
    let Value::Array(entries) = catalog else {
        return Ok((catalog, false));
    };
    let mut scripted = Vec::new();
    let mut network = false;
    for entry in entries {
        if entry.get("name").and_then(Value::as_str) == Some(kiln_capabilities::http_request::NAME)
        {
            if entry.as_object().is_some_and(|fields| fields.len() > 1) {
                anyhow::bail!(
                    "the tool catalog `{path}`: `http_request` is the built-in; name it alone \
                     ({{\"name\": \"http_request\"}}) to ask for the network, or use --allow-net"
                );
            }
            network = true;
        } else {
            scripted.push(entry);
        }
    }
    Ok((Value::Array(scripted), network))
}

/// Reads and checks the scripted catalog (`--tools`): its scripted part, whether it
/// names `http_request`, and its admission. A bad entry refuses the run (or the
/// server) instead of failing a call.
pub(crate) fn check_catalog(tools: Option<&PathBuf>) -> Result<(Value, bool, Admission)> {
    let shown = tools.map(|p| p.display().to_string()).unwrap_or_default();
    let (catalog, catalog_net) = match tools {
        None => (Value::Array(Vec::new()), false),
        Some(path) => split_builtins(read_json(path, "tool catalog")?, &shown)?,
    };
    let refused = || format!("the tool catalog `{shown}` was refused");
    let mut registry = Registry::new();
    kiln_capabilities::scripted::add_catalog(&mut registry, &catalog, "scripted")
        .map_err(anyhow::Error::msg)
        .with_context(refused)?;
    let admission = Admission::admit(&registry.catalog(), "scripted").with_context(refused)?;
    Ok((catalog, catalog_net, admission))
}

/// Reads and checks the run, so that a bad request is refused (exit 2) before
/// anything runs, in the supervising process and again in the child.
fn prepare(
    file: &PathBuf,
    tools: Option<&PathBuf>,
    limits: Option<&PathBuf>,
    permissions: &Permissions,
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
    let (catalog, catalog_net, admission) = check_catalog(tools)?;
    let terminal = std::env::var_os(TERMINAL_ENV).is_some();
    let request = request_of(code, limits, permissions, catalog_net)?;
    if let Some(dir) = &permissions.store {
        // Refuse a store that cannot open now, with exit 2, not mid-run.
        open_store(dir).with_context(|| format!("--store {}", dir.display()))?;
    }
    Ok(Prepared {
        request,
        catalog,
        admission,
        asker: Asker::new(permissions.approve, terminal),
        store: permissions.store.clone(),
    })
}

/// The run request of the command line, read by the one parser every
/// entrance shares (`kiln_run::RunRequest`).
pub(crate) fn request_of(
    code: String,
    limits: RunLimits,
    permissions: &Permissions,
    catalog_net: bool,
) -> Result<RunRequest> {
    // `--secret NAME[=ENV][@ORIGIN,...]`: the value comes from the
    // environment, never the command line.
    let mut secrets = serde_json::Map::new();
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
        secrets.insert(name.to_owned(), json!({"value": value, "origins": origins}));
    }
    let mut mcp = serde_json::Map::new();
    for spec in &permissions.mcp {
        let Some((name, url)) = spec.split_once('=') else {
            anyhow::bail!(
                "--mcp {spec}: expected NAME=URL, e.g. --mcp everything=http://127.0.0.1:3001/mcp"
            );
        };
        mcp.insert(name.to_owned(), json!(url));
    }
    let mut request = json!({
        "code": code,
        "limits": limits,
        "agent": permissions.agent,
        "mcp": mcp,
        "secrets": secrets,
    });
    if let Some(mode) = permissions.mode {
        request["permission"] = json!({"mode": mode.as_str()});
    }
    if let Some(key) = &permissions.key {
        request["key"] = json!(key);
    }
    if let Some(model) = permissions.model.setup()? {
        request["model"] = model;
    }
    match permissions.allow_net.as_deref() {
        Some("") => request["builtins"] = json!([kiln_capabilities::http_request::NAME]),
        Some(origins) => {
            request["allow_net"] = json!(origins.split(',').map(str::trim).collect::<Vec<_>>());
        }
        None if catalog_net => request["builtins"] = json!([kiln_capabilities::http_request::NAME]),
        None => {}
    }
    RunRequest::from_value(request).map_err(|error| {
        anyhow::anyhow!("{error}").context(
            "the run was refused (flags --mcp, --secret, --allow-net, --agent, --permission-mode, --provider, --model-budget)",
        )
    })
}

/// The on-disk store in `dir` (the log, and `dir/files` for the workspace),
/// under this process's owner lock (`dir/owners/`); the jobs a process that
/// died left running are marked `interrupted` first.
pub(crate) fn open_store(dir: &Path) -> Result<Workspace, kiln_store::StoreError> {
    let backend: Rc<dyn kiln_store::Backend> = kiln_store::native::LogBackend::open(dir)?;
    let files: Rc<dyn kiln_store::files::FileTree> =
        kiln_store::native::DirTree::open(&dir.join("files"))?;
    let custody = Rc::new(kiln_store::native::FileCustody::acquire(dir)?);
    let workspace = Workspace {
        backend,
        files,
        custody,
    };
    futures::executor::block_on(workspace.interrupt_abandoned())?;
    Ok(workspace)
}

/// The CLI's environment for a run: the scripted catalog as its own tools,
/// the platform's HTTP client, who answers, the store when asked for.
pub(crate) fn environment(
    entrance: &str,
    catalog: Value,
    asker: Asker,
    store: Option<&Path>,
    run_id: Option<RunId>,
) -> Environment {
    let own_tools: Rc<dyn Fn(&mut Registry)> = Rc::new(move |registry: &mut Registry| {
        // Checked when the run was prepared.
        let _ = kiln_capabilities::scripted::add_catalog(registry, &catalog, "scripted");
    });
    let random: Rc<dyn Fn() -> [u8; 8]> = match run_id {
        // The watchdog and the memory hook answer under the same id.
        Some(run_id) => {
            let bytes = id_bytes(&run_id.id);
            Rc::new(move || bytes)
        }
        None => Rc::new(kiln_store::ids::random_bytes),
    };
    Environment {
        entrance: entrance.to_owned(),
        tools_host: "scripted".into(),
        http: kiln_http::default_client(),
        people: asker.people(entrance),
        own_tools: Some(own_tools),
        bridge: None,
        workspace: store.map(|dir| Rc::new(open_store(dir))),
        random,
        on_gate: None,
    }
}

/// The bytes of a `codemode:<16 hex>` id.
fn id_bytes(id: &str) -> [u8; 8] {
    let hex = id.strip_prefix("codemode:").unwrap_or(id);
    let value = u64::from_str_radix(hex, 16).unwrap_or_default();
    value.to_be_bytes()
}

/// How a run in the child ended.
enum Finished {
    /// The sandbox thread answered.
    Answered(Box<ToolResult>, RunResult),
    /// The watchdog ended it (wall or JS CPU budget, a lost thread).
    Stopped(RunResult),
}

/// Runs the program on its own thread and watches it: Boa has no interrupt
/// hook, so a guest that runs JavaScript past its CPU budget without stopping,
/// or a run past its wall budget, is given up on here, and the abandoned thread
/// ends with the process. Both budgets are also kept inside the sandbox, which
/// reports them itself whenever the guest stops in time.
fn run_with_deadline(
    run: Prepared,
    run_id: &RunId,
    progress: &Arc<Mutex<Progress>>,
    interrupted: &AtomicBool,
) -> Finished {
    /// How often the watchdog reads the guest's CPU time.
    const TICK: Duration = Duration::from_millis(5);
    let started = Instant::now();
    let limits = run.request.limits.get();
    let gauge = Arc::new(CpuGauge::default());
    let (sender, receiver) = mpsc::channel();
    let (cancel, cancelled) = futures::channel::oneshot::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("kiln-sandbox".into())
        // The engine recurses on this stack, as deep as the sandbox allows.
        .stack_size(kiln_sandbox::NATIVE_STACK_BYTES)
        .spawn({
            let gauge = gauge.clone();
            let progress = progress.clone();
            let run_id = run_id.clone();
            move || {
                let environment = environment(
                    "kiln run",
                    run.catalog,
                    run.asker,
                    run.store.as_deref(),
                    Some(run_id),
                );
                let runner = ThreadRunner { gauge, progress };
                // The watchdog's interrupt, as the run's cancel: the program stops where it
                // waits, and the run closes its scope (MCP sessions) and settles its
                // record before the process ends.
                let cancel = AbortSignal::new();
                let ran = futures::executor::block_on(async {
                    let run =
                        kiln_run::run_program(run.request, &environment, &runner, cancel.clone());
                    let watch = async {
                        if cancelled.await.is_ok() {
                            cancel.abort();
                        }
                    };
                    futures::pin_mut!(run, watch);
                    match futures::future::select(run, watch).await {
                        futures::future::Either::Left((ran, _)) => ran,
                        futures::future::Either::Right(((), run)) => run.await,
                    }
                });
                let finished = match ran {
                    Ok(ran) => Finished::Answered(Box::new(ran.result), ran.run),
                    Err(problem) => Finished::Stopped(RunResult {
                        report: RunReport::stopped(
                            RunError::new(
                                RunErrorKind::Engine,
                                format!("the run's capabilities could not be set up: {problem}"),
                            ),
                            0.0,
                        ),
                        warnings: Vec::new(),
                        catalog_digest: String::new(),
                    }),
                };
                let _ = sender.send(finished);
            }
        });
    if let Err(error) = spawned {
        return Finished::Stopped(progress_run(
            RunError::new(
                RunErrorKind::Engine,
                format!("could not start the sandbox thread: {error}"),
            ),
            started,
            progress,
        ));
    }
    let wall = Duration::from_millis(limits.wall_ms);
    let js_cpu = Duration::from_millis(limits.js_cpu_ms);
    loop {
        let left = wall.saturating_sub(started.elapsed());
        match receiver.recv_timeout(left.min(TICK)) {
            Ok(finished) => return finished,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Finished::Stopped(progress_run(
                    RunError::new(
                        RunErrorKind::Engine,
                        "the sandbox thread ended without a report",
                    ),
                    started,
                    progress,
                ));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if interrupted.load(Ordering::SeqCst) {
            // A program waiting (on a tool, a sleep) ends at once and answers itself,
            // its scope closed and its record settled; one running JavaScript does not
            // listen, and is answered for from here.
            let _ = cancel.send(());
            return match receiver.recv_timeout(CANCEL_GRACE) {
                Ok(finished) => finished,
                Err(_) => Finished::Stopped(cancelled_run(started, progress)),
            };
        }
        let stop = if started.elapsed() >= wall {
            RunError::wall_budget(limits.wall_ms)
        } else if gauge.spent() > js_cpu {
            RunError::js_cpu_budget(limits.js_cpu_ms)
        } else {
            continue;
        };
        return Finished::Stopped(progress_run(stop, started, progress));
    }
}

/// The sandbox on the run's own thread, its CPU mirrored in `gauge` for the
/// watchdog and its calls and console in `progress`.
struct ThreadRunner {
    gauge: Arc<CpuGauge>,
    progress: Arc<Mutex<Progress>>,
}

/// `cancel` (the watchdog's interrupt) ends a program where it waits: its
/// sandbox is dropped at that await, and the run answers with the output and
/// call outcomes so far, like the watchdog would. A program running
/// JavaScript does not wait, so the watchdog answers for it after its grace.
impl SandboxRunner for ThreadRunner {
    fn run(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
        cancel: AbortSignal,
    ) -> LocalBoxFuture<'static, RunResult> {
        let started = Instant::now();
        let shared = self.progress.clone();
        let run = self.run_here(code, limits, tools);
        Box::pin(async move {
            let aborted = cancel.aborted();
            futures::pin_mut!(run, aborted);
            match futures::future::select(run, aborted).await {
                futures::future::Either::Left((result, _)) => result,
                futures::future::Either::Right(((), _dropped)) => cancelled_run(started, &shared),
            }
        })
    }
}

impl ThreadRunner {
    fn run_here(
        &self,
        code: String,
        limits: RunLimits,
        tools: Rc<Dispatcher>,
    ) -> LocalBoxFuture<'static, RunResult> {
        let gauge = self.gauge.clone();
        let progress = self.progress.clone();
        Box::pin(async move {
            let admission = match Admission::admit(&tools.catalog(), "scripted") {
                Ok(admission) => admission,
                Err(error) => {
                    return RunResult {
                        report: RunReport::stopped(
                            RunError::new(
                                RunErrorKind::Engine,
                                format!("the run's capabilities could not be set up: {error}"),
                            ),
                            0.0,
                        ),
                        warnings: Vec::new(),
                        catalog_digest: String::new(),
                    };
                }
            };
            let warnings = admission.warnings.clone();
            let catalog_digest = admission.digest();
            if let Ok(mut progress) = progress.lock() {
                let mut all = tools.warnings().to_vec();
                all.extend(warnings.iter().cloned());
                progress.warnings = all;
                progress.digest = catalog_digest.clone();
            }
            // Which calls reached their tool, for a run cancelled meanwhile.
            tools.run_state().on_start(Rc::new({
                let progress = progress.clone();
                move |call_number| {
                    if let Ok(mut progress) = progress.lock() {
                        progress.started.push(call_number);
                    }
                }
            }));
            let host = WatchedTools {
                dispatcher: tools,
                progress,
            };
            let report = match Sandbox::new() {
                Ok(sandbox) => {
                    sandbox
                        .run(
                            &code,
                            &limits,
                            Rc::new(admission),
                            Rc::new(host),
                            Some(gauge),
                        )
                        .await
                }
                Err(report) => *report,
            };
            RunResult {
                report,
                warnings,
                catalog_digest,
            }
        })
    }
}

/// What a run has shown so far, kept where the watchdog and the memory hook can
/// read it when they end the run from outside the sandbox thread.
#[derive(Default)]
struct Progress {
    console: Vec<ConsoleLine>,
    calls: Vec<CallSummary>,
    /// The call number of each of `calls`.
    numbers: Vec<u32>,
    /// The calls that reached their tool.
    started: Vec<u32>,
    warnings: Vec<Warning>,
    digest: String,
}

/// A run cancelled by Ctrl-C: the calls still out that never reached their
/// tool are `cancelled`, the ones that did `outcome_unknown`.
fn cancelled_run(started: Instant, progress: &Mutex<Progress>) -> RunResult {
    if let Some(mut progress) = patient_lock(progress) {
        let Progress {
            calls,
            numbers,
            started,
            ..
        } = &mut *progress;
        for (summary, number) in calls.iter_mut().zip(numbers.iter()) {
            if summary.outcome == CallOutcome::OutcomeUnknown && !started.contains(number) {
                summary.outcome = CallOutcome::Cancelled;
            }
        }
    }
    let why = if std::env::var_os(SERVED_ENV).is_some() {
        "the MCP client withdrew or cancelled the run"
    } else {
        "Ctrl-C stopped the run"
    };
    progress_run(RunError::cancelled(why), started, progress)
}

/// A run ended from outside: `error`, with the output, the calls and the
/// warnings seen so far. It never blocks on the progress lock: the memory hook
/// runs inside a refused allocation, perhaps on the thread that holds the lock
/// (appending a console line), and waiting there would never end. When the
/// lock stays taken for [`PROGRESS_PATIENCE`] the run is answered without
/// its output, and says so.
fn progress_run(error: RunError, started: Instant, progress: &Mutex<Progress>) -> RunResult {
    let mut report = RunReport::stopped(error, started.elapsed().as_secs_f64() * 1e3);
    let mut warnings = Vec::new();
    let mut catalog_digest = String::new();
    match patient_lock(progress) {
        Some(progress) => {
            report.console = progress.console.clone();
            report.calls = progress.calls.clone();
            warnings = progress.warnings.clone();
            catalog_digest = progress.digest.clone();
        }
        None => warnings.push(Warning {
            code: "progress_unavailable".into(),
            message: "the run's console output and calls so far could not be read when it \
                      was stopped"
                .into(),
            module: None,
            tool: None,
            index: None,
            reason: None,
        }),
    }
    RunResult {
        report,
        warnings,
        catalog_digest,
    }
}

/// How long a run stopped from outside waits for the progress lock.
const PROGRESS_PATIENCE: Duration = Duration::from_millis(200);

/// The progress, unless its lock stays taken for [`PROGRESS_PATIENCE`].
fn patient_lock(progress: &Mutex<Progress>) -> Option<std::sync::MutexGuard<'_, Progress>> {
    let patience = Instant::now() + PROGRESS_PATIENCE;
    loop {
        match progress.try_lock() {
            Ok(progress) => return Some(progress),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => return Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < patience => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

/// The run's door to its capabilities (the ladder), recording each call and
/// the console output as the run goes (the console reaches the host each time
/// the guest goes idle).
struct WatchedTools {
    dispatcher: Rc<Dispatcher>,
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
            progress.numbers.push(call.call_number);
            progress.calls.len() - 1
        });
        let started = Instant::now();
        let held: HeldSignal = Rc::new(move |on| person.held(on));
        let request = CallRequest {
            call_number: call.call_number,
            tool: call.tool,
            args: call.args,
        };
        let reply = self.dispatcher.call(request, held);
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

/// `--report`: the sandbox's own report, the warnings and the digest.
fn print_report(run: &RunResult) -> ExitCode {
    let json = json!({
        "report": run.report,
        "warnings": run.warnings,
        "catalog_digest": run.catalog_digest,
    });
    println!("{json:#}");
    if matches!(run.report.outcome, kiln_types::RunOutcome::Failed(_)) {
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

#[cfg(test)]
mod stop_tests {
    use super::*;

    /// The memory hook answers a run while the same thread holds the progress
    /// lock (it was appending a console line when the budget ran out): it
    /// answers without the output, and says so, instead of waiting for ever
    /// (issue 15 #4).
    #[test]
    fn a_run_stopped_while_its_progress_is_locked_is_still_answered() {
        let progress = Mutex::new(Progress::default());
        let held = progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let answered = progress_run(RunError::memory_budget(1024), Instant::now(), &progress);
        drop(held);
        assert_eq!(
            answered.report.outcome,
            kiln_types::RunOutcome::Failed(RunError::memory_budget(1024))
        );
        assert_eq!(answered.warnings.len(), 1);
        assert_eq!(answered.warnings[0].code, "progress_unavailable");
        // Unlocked, the progress is read as before.
        let answered = progress_run(RunError::memory_budget(1024), Instant::now(), &progress);
        assert!(answered.warnings.is_empty());
    }

    /// A child that never answers is killed at its deadline.
    #[test]
    fn a_child_that_never_answers_is_killed_at_its_deadline() {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("sleep: {error}"));
        let waited = wait_until(child, Instant::now() + Duration::from_millis(50));
        assert!(matches!(waited, Ok(None)), "{waited:?}");
        let child = std::process::Command::new("echo")
            .arg("answered")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("echo: {error}"));
        let output = wait_until(child, Instant::now() + Duration::from_secs(30))
            .ok()
            .flatten()
            .map(|output| String::from_utf8_lossy(&output.stdout).into_owned());
        assert_eq!(output.as_deref(), Some("answered\n"));
    }
}
