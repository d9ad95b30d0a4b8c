//! `kiln agent run "OBJECTIVE"`: one agent turn, the CodeAct loop of
//! `kiln_agent::codeact`, each action in a sandbox process of its own
//! ([`crate::sandbox_process::ProcessRunner`]).
//!
//! Without `--json` the answer (or the finish value, as JSON) goes to
//! stdout and the progress — the model's text, each action's code and
//! result, approvals, stops — to stderr. With `--json` every event is one
//! JSON line on stdout, the last `{"type": "done", ...}` with the page API's
//! result fields. Exit 0 when the turn answered or finished, 1 for a stop or
//! a failure (a guard, the budget, the provider, the schema), 2 for bad
//! flags or input.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, Result, bail};
use kiln_agent::codeact::history::Compaction;
use kiln_agent::codeact::tools::Person;
use kiln_agent::codeact::{AgentRequest, AgentSetup, run_agent};
use kiln_capabilities::Mode;
use kiln_providers::budget::BudgetLimits;
use kiln_providers::{ApiKey, ChatOptions, Message, ProviderConfig, ProviderKind};
use kiln_types::RunLimits;
use kiln_types::agent::{AgentEvent, Guards, StopReason};
use kiln_types::cancel::AbortSignal;
use serde_json::Value;

use crate::program::Asker;
use crate::{ApproveWith, Permissions};

/// `kiln agent`'s commands.
#[derive(clap::Subcommand)]
pub enum AgentCommand {
    /// Run one agent turn: the model acts by writing programs that call the
    /// tools, until it answers, calls finish, or a guard stops it.
    Run(RunArgs),
}

/// `kiln agent run`'s options.
#[derive(clap::Args)]
pub struct RunArgs {
    /// What to do.
    objective: String,
    /// The wire format: openai (any OpenAI-compatible server), anthropic, ollama.
    #[arg(long)]
    provider: String,
    /// The API root, e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1.
    #[arg(long, value_name = "URL")]
    base_url: String,
    /// The model id, as the provider's model list names it.
    #[arg(long)]
    model: String,
    /// The environment variable holding the API key (never the key itself).
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
    /// Scripted tools for the belt, as for `kiln run`.
    #[arg(long, value_name = "CATALOG.json")]
    tools: Option<PathBuf>,
    /// Mount an MCP server's tools (Streamable HTTP), as `NAME_<tool>`. Repeatable.
    #[arg(long, value_name = "NAME=URL")]
    mcp: Vec<String>,
    /// A store on disk: the turn is a job in its history, with memory, history and file tools.
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Give the belt `http_request`: alone, any public address; with origins, exactly those.
    #[arg(long, value_name = "ORIGIN,...", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    allow_net: Option<String>,
    /// A JSON Schema the answer must match: the turn then ends only when a
    /// program calls finish(value) with a value that does.
    #[arg(long, value_name = "FILE")]
    output_schema: Option<PathBuf>,
    /// A system prompt, layered before Kiln's own as a preamble.
    #[arg(long)]
    system: Option<String>,
    /// The permission mode (as for `kiln run`).
    #[arg(long, value_name = "MODE")]
    permission_mode: Option<Mode>,
    /// Who answers when the ladder asks (as for `kiln run`).
    #[arg(long, value_enum, default_value_t = ApproveWith::Ask)]
    approve: ApproveWith,
    /// Model turns in the job (the max_turns guard).
    #[arg(long, value_name = "N", default_value_t = Guards::default().max_turns)]
    max_turns: u32,
    /// USD the job may spend (the max_cost guard; each turn reserves its worst case first).
    #[arg(long, value_name = "USD", default_value_t = Guards::default().max_cost)]
    max_usd: f64,
    /// Tokens the model may write per turn.
    #[arg(long, default_value_t = 4096)]
    max_tokens: u32,
    /// A JSON file of each action's limits, as for `kiln run`.
    #[arg(long, value_name = "LIMITS.json")]
    limits: Option<PathBuf>,
    /// Put an environment variable into the belt's secret scope (as for `kiln run`).
    #[arg(long, value_name = "NAME[=ENV][@ORIGIN,...]")]
    secret: Vec<String>,
    /// Whose job it is: the history records it under this agent.
    #[arg(long, value_name = "NAME", default_value = "cli")]
    agent: String,
    /// Every event as one JSON line on stdout, the last one `done`.
    #[arg(long)]
    json: bool,
}

pub fn run(command: &AgentCommand) -> ExitCode {
    let AgentCommand::Run(args) = command;
    let prepared = match prepare(args) {
        Ok(prepared) => prepared,
        Err(error) => {
            eprintln!("error: {error:#}");
            return ExitCode::from(2);
        }
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let interrupted = interrupted.clone();
        let _ = ctrlc::set_handler(move || interrupted.store(true, Ordering::SeqCst));
    }
    let cancel = AbortSignal::new();
    let mut pool = futures::executor::LocalPool::new();
    {
        let cancel = cancel.clone();
        let _ = futures::task::LocalSpawnExt::spawn_local(&pool.spawner(), async move {
            while !interrupted.load(Ordering::SeqCst) {
                kiln_http::sleep(50).await;
            }
            cancel.abort();
        });
    }
    let json = args.json;
    let printer = Rc::new(std::cell::RefCell::new(Printer::default()));
    let sink: kiln_agent::codeact::tools::Sink = {
        let printer = printer.clone();
        Rc::new(move |event: AgentEvent| printer.borrow_mut().show(&event, json))
    };
    let environment = crate::program::environment(
        "kiln agent",
        prepared.catalog,
        prepared.asker,
        prepared.store.as_deref(),
        None,
    );
    let person: Option<Rc<dyn Person>> =
        (prepared.asker == Asker::Terminal).then(|| Rc::new(crate::approve::TerminalPerson) as _);
    let setup = AgentSetup {
        environment: &environment,
        runner: Rc::new(crate::sandbox_process::ProcessRunner),
        person,
        clock: Rc::new(kiln_http::SystemClock),
        sink,
        cancel,
    };
    let outcome = match pool.run_until(run_agent(prepared.request, setup)) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let result = outcome.result;
    if !json {
        printer.borrow_mut().end_line();
        // An answer already streamed to a terminal is not shown twice.
        let streamed = result.stop.reason == StopReason::Answered
            && std::io::IsTerminal::is_terminal(&std::io::stdout())
            && std::io::IsTerminal::is_terminal(&std::io::stderr());
        if result.stop.is_success() && !streamed {
            let shown = match (&result.stop.reason, &result.value) {
                (StopReason::Finished, value) if !value.is_string() => {
                    serde_json::to_string_pretty(value).unwrap_or_default()
                }
                _ => result.text.clone(),
            };
            println!("{shown}");
        }
        eprintln!(
            "kiln agent: {} turn(s), {} action(s), {} input + {} output tokens, ${:.6}",
            result.turns,
            result.actions,
            result.usage.input_tokens,
            result.usage.output_tokens,
            result.spend
        );
    }
    if result.stop.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

struct Prepared {
    request: AgentRequest,
    catalog: Value,
    asker: Asker,
    store: Option<PathBuf>,
}

/// Everything checked before anything is sent: exit 2 on a problem.
fn prepare(args: &RunArgs) -> Result<Prepared> {
    let Some(kind) = ProviderKind::parse(&args.provider) else {
        bail!(
            "--provider {}: expected one of openai, anthropic, ollama",
            args.provider
        );
    };
    kiln_http::check_scheme(&args.base_url)
        .map_err(|error| anyhow::anyhow!("--base-url: {error}"))?;
    if args.model.trim().is_empty() {
        bail!("--model: give the model id (the provider's model list has them)");
    }
    if args.objective.trim().is_empty() {
        bail!("the objective is empty: say what the agent should do");
    }
    if args.max_tokens == 0 {
        bail!("--max-tokens: must be at least 1");
    }
    let key = match &args.key_env {
        None => None,
        Some(variable) => Some(ApiKey::new(std::env::var(variable).map_err(|_| {
            anyhow::anyhow!(
                "--key-env {variable}: the environment variable is not set (or not UTF-8)"
            )
        })?)),
    };
    let catalog = match &args.tools {
        None => Value::Array(Vec::new()),
        Some(path) => crate::program::read_json(path, "tool catalog")?,
    };
    let mut registry = kiln_capabilities::Registry::new();
    kiln_capabilities::scripted::add_catalog(&mut registry, &catalog, "scripted")
        .map_err(|error| anyhow::anyhow!("the tool catalog was refused: {error}"))?;
    let limits: RunLimits = match &args.limits {
        None => RunLimits::default(),
        Some(path) => serde_json::from_value(crate::program::read_json(path, "limits file")?)
            .with_context(|| format!("the limits `{}` are not valid", path.display()))?,
    };
    let output_schema = match &args.output_schema {
        None => None,
        Some(path) => Some(crate::program::read_json(path, "output schema")?),
    };
    let guards = Guards {
        max_turns: args.max_turns,
        max_cost: args.max_usd,
        ..Guards::default()
    };
    guards
        .check()
        .map_err(|why| anyhow::anyhow!("{why} (--max-turns, --max-usd)"))?;
    let permissions = Permissions {
        mcp: args.mcp.clone(),
        mode: args.permission_mode,
        approve: args.approve,
        secrets: args.secret.clone(),
        store: args.store.clone(),
        allow_net: args.allow_net.clone(),
        agent: args.agent.clone(),
    };
    let run = crate::program::request_of(String::new(), limits, &permissions, false)?;
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let provider = kiln_providers::connect(ProviderConfig {
        kind,
        base_url: args.base_url.clone(),
        key,
    });
    Ok(Prepared {
        request: AgentRequest {
            run,
            provider,
            options: ChatOptions {
                max_tokens: args.max_tokens,
                ..ChatOptions::new(args.model.clone())
            },
            messages: vec![Message::User {
                text: args.objective.clone(),
            }],
            system: args.system.clone(),
            output_schema,
            guards,
            budget: BudgetLimits::default(),
            direct: Vec::new(),
            compaction: Compaction::default(),
        },
        catalog,
        asker: Asker::new(args.approve, terminal),
        store: args.store.clone(),
    })
}

/// Shows a turn's progress on stderr, or every event as a JSON line on stdout.
#[derive(Default)]
struct Printer {
    mid_line: bool,
}

impl Printer {
    fn end_line(&mut self) {
        if self.mid_line {
            eprintln!();
            self.mid_line = false;
        }
    }

    fn show(&mut self, event: &AgentEvent, json: bool) {
        if json {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", serde_json::to_string(event).unwrap_or_default());
            let _ = out.flush();
            return;
        }
        match event {
            AgentEvent::TextDelta { text } => {
                eprint!("{text}");
                self.mid_line = !text.ends_with('\n');
            }
            AgentEvent::ToolCallUpdate {
                name, args, code, ..
            } => {
                self.end_line();
                match code {
                    Some(code) => {
                        eprintln!("── {name}");
                        for line in code.lines() {
                            eprintln!("│ {}", kiln_types::permission::card_text(line));
                        }
                    }
                    None => eprintln!(
                        "── {name} {}",
                        kiln_types::permission::card_text(&args.to_string())
                    ),
                }
            }
            AgentEvent::ToolResultUpdate {
                content, is_error, ..
            } => {
                let label = if *is_error { "error" } else { "result" };
                let first: String = content
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect();
                eprintln!("└ {label}: {}", kiln_types::permission::card_text(&first));
            }
            AgentEvent::Question { question } => {
                self.end_line();
                eprintln!(
                    "kiln agent asks: {}",
                    kiln_types::permission::card_text(question)
                );
            }
            AgentEvent::LogUpdate { message } => {
                self.end_line();
                eprintln!("kiln agent: {message}");
            }
            AgentEvent::Compaction { replaced, .. } => {
                self.end_line();
                eprintln!("kiln agent: earlier conversation summarized ({replaced} messages)");
            }
            AgentEvent::Stop { stop } => {
                self.end_line();
                eprintln!(
                    "kiln agent: stopped ({}): {}",
                    stop.code.as_deref().unwrap_or("stop"),
                    stop.message.as_deref().unwrap_or_default()
                );
            }
            AgentEvent::ApprovalRequest { .. }
            | AgentEvent::ApprovalAnswer { .. }
            | AgentEvent::LlmCall { .. }
            | AgentEvent::Done { .. } => {}
        }
    }
}
