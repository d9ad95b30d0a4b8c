//! `kiln run`: a program run through `kiln_run::run_program` in this
//! process, like every other native entrance: the ladder, the store, the MCP
//! sessions and the run's record here, the program itself in a sandbox
//! process of its own ([`ProcessRunner`]), which keeps the JS CPU, wall and
//! memory budgets and whose death (a stack overflow aborts a process) is the
//! run's `engine` failure, never this process's. Ctrl-C cancels the run: the
//! program stops where it is, its sandbox process is ended, and the run
//! closes its MCP sessions and settles its record before the result is
//! printed.

use std::io::{IsTerminal as _, Read as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

use anyhow::{Context as _, Result};
use futures::StreamExt as _;
use kiln_capabilities::gate::{Fixed, Headless, SessionAllow};
use kiln_capabilities::{Answer, Approver, Registry};
use kiln_run::{Environment, People, RunRequest, Workspace};
use kiln_sandbox::catalog::Admission;
use kiln_types::RunLimits;
use kiln_types::RunResult;
use kiln_types::cancel::AbortSignal;
use kiln_types::tool_result::ToolResult;
use serde_json::{Value, json};

use crate::common::Belt;
use crate::sandbox_process::ProcessRunner;
use crate::terminal::escaped;
use crate::{ApproveWith, BeltFlags, GateFlags, ModelFlags, Permissions};

/// The gate's host in a served run (`kiln mcp serve`): who denies what would ask.
pub(crate) const SERVED_HOST: &str =
    "kiln mcp serve (its MCP client's person is not reachable from here)";

/// How a run's answer is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// The `tool-result/v1` object as JSON: what scripts and pipes get.
    Json,
    /// Its text part (status, value, console, calls, warnings), for a person
    /// at a terminal.
    Summary,
    /// The sandbox's own report (`--report`).
    Report,
}

impl Output {
    /// A summary on a terminal unless `--json`; JSON everywhere else.
    pub(crate) fn chosen(json: bool) -> Self {
        if !json && std::io::stdout().is_terminal() {
            Self::Summary
        } else {
            Self::Json
        }
    }
}

/// `kiln run`: refuses a bad request with exit 2; else runs it and prints
/// its result as `output` says (exit 0 completed, 1 `isError`).
pub fn run(
    file: &PathBuf,
    belt: &BeltFlags,
    gate: &GateFlags,
    key: Option<String>,
    model: ModelFlags,
    output: Output,
) -> ExitCode {
    let prepared = read_program(file)
        .and_then(|code| Belt::read(code, belt, gate, RunLimits::default(), key, &model));
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(error) => {
            // A store that cannot open says what to do about it.
            eprintln!("{}", escaped(&crate::commands::memory::shown(&error)));
            return ExitCode::from(2);
        }
    };
    let environment = prepared.environment("kiln run");
    let runner = ProcessRunner::default();
    let cancel = AbortSignal::new();
    // Ctrl-C (or a SIGINT sent to this process alone) cancels the run.
    let (interrupts, mut interrupted) = futures::channel::mpsc::unbounded::<()>();
    let _ = ctrlc::set_handler(move || {
        let _ = interrupts.unbounded_send(());
    });
    let mut pool = futures::executor::LocalPool::new();
    let ran = pool.run_until(async {
        let run = kiln_run::run_program(prepared.request, &environment, &runner, cancel.clone());
        let watch = async {
            if interrupted.next().await.is_some() {
                cancel.abort_because("Ctrl-C stopped the run");
            }
            std::future::pending::<()>().await;
        };
        futures::pin_mut!(run, watch);
        match futures::future::select(run, watch).await {
            futures::future::Either::Left((ran, _)) => ran,
            futures::future::Either::Right(((), run)) => run.await,
        }
    });
    match ran {
        Ok(ran) => {
            if let Some(error) = &ran.record_error {
                eprintln!(
                    "kiln: the run's record could not be settled: {}",
                    escaped(&error.to_string())
                );
            }
            match output {
                Output::Report => print_report(&ran.run),
                Output::Json => print_result(&ran.result),
                Output::Summary => print_summary(&ran.result),
            }
        }
        Err(refusal) => {
            eprintln!("error: the run was refused: {}", escaped(refusal.as_ref()));
            ExitCode::from(2)
        }
    }
}

/// A sandbox process ends when its parent does, however that ends (a
/// `kill -9` included): an orphan would go on running its program. `parent`
/// is the parent's pid, from [`crate::sandbox_process::PROCESS_ENV`].
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

/// Elsewhere a sandbox process outlives a killed parent until its wall budget ends.
#[cfg(not(target_os = "linux"))]
pub(crate) fn end_with_parent(_parent: &std::ffi::OsStr) {}

/// Who answers the ladder's questions in the run's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asker {
    Terminal,
    Headless,
    /// `kiln mcp serve`: no person of its client can be reached from here.
    Served,
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
                let host = format!("{entrance} (no terminal to ask on)");
                let approver = Rc::new(Headless::new(&host));
                (host, approver)
            }
            Self::Served => (SERVED_HOST.to_owned(), Rc::new(Headless::new(SERVED_HOST))),
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

/// The program `file` names (`-`: standard input).
fn read_program(file: &PathBuf) -> Result<String> {
    if file.as_os_str() == "-" {
        let mut code = String::new();
        std::io::stdin()
            .read_to_string(&mut code)
            .context("reading the program from standard input")?;
        Ok(code)
    } else {
        std::fs::read_to_string(file)
            .with_context(|| format!("reading the program `{}`", file.display()))
    }
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
    let owners = Rc::new(kiln_store::native::FileOwners::acquire(dir)?);
    let workspace = Workspace {
        backend,
        files,
        owners,
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
) -> Environment {
    let own_tools: Rc<dyn Fn(&mut Registry)> = Rc::new(move |registry: &mut Registry| {
        // Checked when the run was prepared.
        let _ = kiln_capabilities::scripted::add_catalog(registry, &catalog, "scripted");
    });
    Environment {
        entrance: entrance.to_owned(),
        tools_host: "scripted".into(),
        http: kiln_http::default_client(),
        people: asker.people(entrance),
        own_tools: Some(own_tools),
        bridge: None,
        workspace: store.map(|dir| Rc::new(open_store(dir))),
        random: Rc::new(kiln_store::ids::random_bytes),
        on_gate: None,
        on_progress: Some(Rc::new(|progress: &kiln_types::Progress| {
            eprintln!("{}", crate::terminal::progress_line(None, progress));
        })),
    }
}

/// `--report`: the sandbox's own report, the warnings and the digest.
fn print_report(run: &RunResult) -> ExitCode {
    let json = json!({
        "report": run.report,
        "warnings": run.warnings,
        "catalog_digest": run.catalog_digest,
    });
    crate::out::line(format_args!("{json:#}"));
    if matches!(run.report.outcome, kiln_types::RunOutcome::Failed(_)) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The result's text part, as a model reads it: the status line, the
/// returned value, the console, the calls and the warnings; what the program
/// printed, returned or threw is escaped for the terminal.
pub(crate) fn print_summary(result: &ToolResult) -> ExitCode {
    crate::out::line(escaped(&result.text()));
    if result.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn print_result(result: &ToolResult) -> ExitCode {
    match serde_json::to_string_pretty(result) {
        Ok(json) => crate::out::line(json),
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
