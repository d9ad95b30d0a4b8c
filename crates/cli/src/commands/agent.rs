//! `kiln agent run "OBJECTIVE"`: one agent turn, the CodeAct loop of
//! `kiln_agent::run_agent`, each action in a sandbox process of its own
//! ([`crate::sandbox_process::ProcessRunner`]).
//!
//! Without `--json` the answer (or the finish value, as JSON) goes to
//! stdout and the progress — the model's text, each action's code and
//! result, approvals, stops — to stderr. With `--json` every event is one
//! JSON line on stdout, the last `{"type": "done", ...}` with the page API's
//! result fields. Exit 0 when the turn answered or finished, 1 for a stop or
//! a failure (a guard, the budget, the provider, the schema), 2 for bad
//! flags or input.

use std::cell::RefCell;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Result, bail};
use kiln_agent::{AgentOutcome, AgentRequest, AgentSetup, Compaction, Person, run_agent};
use kiln_capabilities::Mode;
use kiln_providers::budget::BudgetLimits;
use kiln_providers::{ApiKey, ChatOptions, Message, ProviderConfig, ProviderKind};
use kiln_run::RunRequest;
use kiln_types::RunLimits;
use kiln_types::agent::{AgentEvent, Guards, StopReason};
use kiln_types::cancel::AbortSignal;
use serde_json::Value;

use crate::commands::run::Asker;
use crate::common::Belt;

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
    /// A JSON Schema the answer must match: the turn then ends only when a
    /// program calls finish(value) with a value that does.
    #[arg(long, value_name = "FILE")]
    output_schema: Option<PathBuf>,
    #[command(flatten)]
    session: SessionArgs,
}

/// What every agent turn from the terminal works with: `kiln agent run`'s,
/// `kiln chat`'s and `kiln schedules run-due`'s options.
#[derive(clap::Args, Clone)]
pub struct SessionArgs {
    #[command(flatten)]
    provider: crate::ProviderFlags,
    #[command(flatten)]
    belt: crate::BeltFlags,
    #[command(flatten)]
    gate: crate::GateFlags,
    /// A system prompt, layered before Kiln's own as a preamble (after the agent's own, when
    /// --agent names an agent of the store).
    #[arg(long)]
    system: Option<String>,
    /// Model turns in each job, its sub-agents' and plan steps' included (the max_turns guard).
    #[arg(long, value_name = "N", default_value_t = Guards::default().max_turns)]
    max_turns: u32,
    /// How long each job may last, its sub-agents included: past it no model call starts and
    /// the job stops (`deadline`).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_DEADLINE_S)]
    deadline: u32,
    /// USD each job may spend (the max_cost guard; each model call reserves its worst case first).
    #[arg(long, value_name = "USD", default_value_t = Guards::default().max_cost)]
    max_usd: f64,
    /// Tokens the model may write per model call.
    #[arg(long, default_value_t = 4096)]
    max_tokens: u32,
    /// Give agents `web_search` over this search API: `searxng=URL` (a SearXNG
    /// instance's JSON API), `brave` or `tavily` (their key from --web-search-key-env).
    #[arg(long, value_name = "API[=URL]")]
    web_search: Option<String>,
    /// The environment variable holding the search API's key (never the key itself).
    #[arg(long, value_name = "VAR")]
    web_search_key_env: Option<String>,
    /// Every event as one JSON line on stdout, each turn's last one `done`.
    #[arg(long)]
    json: bool,
}

impl SessionArgs {
    /// `--store DIR`, read before (or without) the rest of the session.
    pub(crate) fn store(&self) -> Option<&std::path::Path> {
        self.belt.store.as_deref()
    }

    /// `--json`.
    pub(crate) fn json(&self) -> bool {
        self.json
    }

    /// These options with the runs as agent `slug` (a scheduled job's).
    pub(crate) fn as_agent(&self, slug: &str) -> Self {
        let mut args = self.clone();
        slug.clone_into(&mut args.gate.agent);
        args
    }
}

pub fn run(command: &AgentCommand) -> ExitCode {
    let AgentCommand::Run(args) = command;
    let prepared = (|| {
        let session = Session::prepare(&args.session)?;
        if args.objective.trim().is_empty() {
            bail!("the objective is empty: say what the agent should do");
        }
        let output_schema = match &args.output_schema {
            None => None,
            Some(path) => Some(crate::commands::run::read_json(path, "output schema")?),
        };
        Ok((session, output_schema))
    })();
    let (session, output_schema) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => {
            eprintln!("error: {}", crate::terminal::escaped(&format!("{error:#}")));
            return ExitCode::from(2);
        }
    };
    let interrupt = Interrupt::install();
    let mut pool = futures::executor::LocalPool::new();
    let messages = vec![Message::User {
        text: args.objective.clone(),
    }];
    match session.turn(
        &mut pool,
        &interrupt,
        messages,
        output_schema,
        "kiln agent",
        None,
    ) {
        Ok(outcome) => session.finish(&outcome.result, "kiln agent"),
        Err(error) => {
            eprintln!("error: {}", crate::terminal::escaped(error.as_ref()));
            ExitCode::from(2)
        }
    }
}

/// Ctrl-C: during a turn it stops the turn (its action and its model call);
/// at a prompt it ends the process.
pub(crate) struct Interrupt {
    pressed: Arc<AtomicBool>,
    at_prompt: Arc<AtomicBool>,
}

impl Interrupt {
    pub(crate) fn install() -> Self {
        let pressed = Arc::new(AtomicBool::new(false));
        let at_prompt = Arc::new(AtomicBool::new(false));
        {
            let pressed = pressed.clone();
            let at_prompt = at_prompt.clone();
            let _ = ctrlc::set_handler(move || {
                if at_prompt.load(Ordering::SeqCst) {
                    eprintln!();
                    std::process::exit(130);
                }
                pressed.store(true, Ordering::SeqCst);
            });
        }
        Self { pressed, at_prompt }
    }

    /// Whether the process waits on the person's next line.
    pub(crate) fn at_prompt(&self, waiting: bool) {
        self.at_prompt.store(waiting, Ordering::SeqCst);
    }

    /// A switch that a Ctrl-C from now on throws, watched on `pool` until
    /// it is thrown (the turn's end throws it too).
    fn switch(&self, pool: &futures::executor::LocalPool) -> AbortSignal {
        self.pressed.store(false, Ordering::SeqCst);
        let cancel = AbortSignal::new();
        let pressed = self.pressed.clone();
        let watched = cancel.clone();
        let _ = futures::task::LocalSpawnExt::spawn_local(&pool.spawner(), async move {
            while !pressed.load(Ordering::SeqCst) && !watched.is_aborted() {
                kiln_http::sleep(50).await;
            }
            watched.abort();
        });
        cancel
    }
}

/// Whose runs a session's are when --agent does not say.
const DEFAULT_CLI_AGENT: &str = "cli";

/// `--agent SLUG` with `--store DIR`: the store's configuration and the
/// agent's record, when the store keeps that agent. A name it does not keep
/// only says whose memories and history the runs are (as without a store),
/// and the session says so once.
fn read_agent(
    store: Option<&std::path::Path>,
    slug: &str,
) -> Result<Option<(kiln_store::config::Config, kiln_types::profile::AgentRecord)>> {
    let Some(dir) = store else {
        return Ok(None);
    };
    let backend: Rc<dyn kiln_store::Backend> = kiln_store::native::LogBackend::open(dir)
        .map_err(|error| anyhow::anyhow!("--store {}: {}", dir.display(), error.with_hint()))?;
    let config = kiln_store::config::Config::new(backend);
    let agents = futures::executor::block_on(config.agents())
        .map_err(|error| anyhow::anyhow!("--store {}: {}", dir.display(), error.with_hint()))?;
    if let Some(agent) = agents.iter().find(|agent| agent.slug == slug) {
        return Ok(Some((config, agent.clone())));
    }
    if slug != DEFAULT_CLI_AGENT {
        eprintln!(
            "kiln: `{}` is not an agent of {} (it has {}), so the runs are only recorded under that name",
            crate::terminal::escaped(slug),
            dir.display(),
            agents
                .iter()
                .map(|agent| format!("`{}`", agent.slug))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(None)
}

/// The provider and model of a session run as `agent` with no --provider:
/// the agent's kept provider and its model (or --model, or the provider's
/// saved one).
fn agent_model(
    config: &kiln_store::config::Config,
    agent: &kiln_types::profile::AgentRecord,
    model_flag: &str,
) -> Result<(ProviderConfig, String)> {
    let (provider, model) = futures::executor::block_on(kiln_agent::own_model(config, agent))
        .map_err(|why| anyhow::anyhow!("--agent {}: {why}", agent.slug))?;
    let Some(provider) = provider else {
        bail!(
            "--agent {}: the agent uses the chat's provider, so give one: --provider KIND --base-url URL",
            agent.slug
        );
    };
    let provider = futures::executor::block_on(kiln_run::provider_config(Some(config), &provider))
        .map_err(|error| anyhow::anyhow!("--agent {}: {error}", agent.slug))?;
    let model = Some(model_flag.to_owned())
        .filter(|model| !model.is_empty())
        .or(model);
    let model = model_id(&provider, &model.unwrap_or_default())?;
    Ok((provider, model))
}

/// `--web-search API[=URL]` with `--web-search-key-env VAR`, checked.
fn web_search(
    given: Option<&str>,
    key_env: Option<&str>,
) -> Result<Option<(kiln_types::search::WebSearch, Option<kiln_types::Redacted>)>> {
    use kiln_types::search::{SearchProvider, WebSearch};
    let Some(given) = given else {
        if key_env.is_some() {
            bail!("--web-search-key-env: give --web-search too (brave or tavily)");
        }
        return Ok(None);
    };
    let (api, base_url) = given.split_once('=').unwrap_or((given, ""));
    let provider = match api {
        "searxng" => SearchProvider::Searxng,
        "brave" => SearchProvider::Brave,
        "tavily" => SearchProvider::Tavily,
        other => bail!("--web-search {other}: expected searxng=URL, brave or tavily"),
    };
    let key = match key_env {
        None => None,
        Some(variable) => Some(kiln_types::Redacted::new(std::env::var(variable).map_err(|_| {
            anyhow::anyhow!("--web-search-key-env {variable}: the environment variable is not set (or not UTF-8)")
        })?)),
    };
    let search = WebSearch {
        provider,
        base_url: base_url.to_owned(),
        key_secret: key.as_ref().map(|_| "WEB_SEARCH_KEY".to_owned()),
    };
    search
        .check()
        .map_err(|why| anyhow::anyhow!("--web-search: {why} (here: --web-search-key-env VAR)"))?;
    Ok(Some((search, key)))
}

/// How long a job may last when `--deadline` does not say: half an hour.
const DEFAULT_DEADLINE_S: u32 = 30 * 60;

/// A session's settings, checked once: the provider, the model, the belt,
/// the guards. `kiln agent run` runs one turn of it; `kiln chat` many, and
/// may change its provider and model between them.
pub(crate) struct Session {
    pub(crate) provider: ProviderConfig,
    pub(crate) model: String,
    max_tokens: u32,
    run: RunRequest,
    catalog: Value,
    asker: Asker,
    store: Option<PathBuf>,
    system: Option<String>,
    /// `--agent`: the store's agent each turn runs as.
    agent: Option<String>,
    guards: Guards,
    /// `--deadline`, in seconds.
    deadline: u32,
    pub(crate) json: bool,
    printer: Rc<RefCell<Printer>>,
    /// `--web-search`, with its key.
    web_search: Option<(kiln_types::search::WebSearch, Option<kiln_types::Redacted>)>,
}

/// `--provider KIND --base-url URL [--key-env VAR]`, checked.
pub(crate) fn provider_config(
    kind: &str,
    base_url: &str,
    key_env: Option<&str>,
) -> Result<ProviderConfig> {
    let Some(kind) = ProviderKind::parse(kind) else {
        bail!("--provider {kind}: expected one of openai, anthropic, ollama, local");
    };
    if kind == ProviderKind::InProcess {
        // Kiln's own model: `--base-url` is the folder of its prepared files.
        if let Some(variable) = key_env {
            bail!("--key-env {variable}: Kiln's own model (--provider local) takes no key");
        }
        return Ok(ProviderConfig {
            kind,
            base_url: base_url.trim().to_owned(),
            key: None,
        });
    }
    if base_url.trim().is_empty() {
        bail!(
            "--base-url: give the provider's API root, e.g. {}",
            kind.default_base_url()
        );
    }
    kiln_http::check_scheme(base_url).map_err(|error| anyhow::anyhow!("--base-url: {error}"))?;
    let key = match key_env {
        None => None,
        Some(variable) => Some(ApiKey::new(std::env::var(variable).map_err(|_| {
            anyhow::anyhow!(
                "--key-env {variable}: the environment variable is not set (or not UTF-8)"
            )
        })?)),
    };
    Ok(ProviderConfig {
        kind,
        base_url: base_url.to_owned(),
        key,
    })
}

/// The model id a session asks: the one given, or Kiln's own model's when the
/// provider is `local` and none is.
pub(crate) fn model_id(config: &ProviderConfig, model: &str) -> Result<String> {
    match (config.kind, model.trim()) {
        (ProviderKind::InProcess, "") => Ok(kiln_types::chat::IN_PROCESS_MODEL_ID.to_owned()),
        (_, "") => bail!("--model: give the model id (the provider's model list has them)"),
        (_, model) => Ok(model.to_owned()),
    }
}

impl Session {
    /// Everything checked before anything is sent: exit 2 on a problem.
    pub(crate) fn prepare(args: &SessionArgs) -> Result<Self> {
        let agent = read_agent(args.store(), &args.gate.agent)?;
        let (provider, model) = match &agent {
            Some((config, record)) if args.provider.provider.is_none() => {
                agent_model(config, record, &args.provider.model)?
            }
            Some((_, record)) if args.provider.model.is_empty() && !record.model.is_empty() => {
                let (provider, _) = crate::ProviderFlags {
                    model: record.model.clone(),
                    ..args.provider.clone()
                }
                .read()?;
                (provider, record.model.clone())
            }
            None if args.provider.provider.is_none() && args.gate.agent != DEFAULT_CLI_AGENT => {
                bail!(
                    "--agent {}: agents are kept in a store; give --store DIR (see `kiln agents list`), or --provider",
                    args.gate.agent
                )
            }
            _ => args.provider.read()?,
        };
        if args.max_tokens == 0 {
            bail!("--max-tokens: must be at least 1");
        }
        let guards = Guards {
            max_turns: args.max_turns,
            max_cost: args.max_usd,
            ..Guards::default()
        };
        guards
            .check()
            .map_err(|why| anyhow::anyhow!("{why} (--max-turns, --max-usd)"))?;
        if args.deadline == 0 {
            bail!("--deadline: must be at least 1 second");
        }
        let belt = Belt::read(
            String::new(),
            &args.belt,
            &args.gate,
            RunLimits::default(),
            None,
            &crate::ModelFlags::default(),
        )?;
        Ok(Self {
            provider,
            model,
            max_tokens: args.max_tokens,
            run: belt.request,
            catalog: belt.catalog,
            asker: belt.asker,
            store: belt.store,
            system: args.system.clone(),
            agent: agent.as_ref().map(|(_, record)| record.slug.clone()),
            guards,
            deadline: args.deadline,
            json: args.json,
            printer: Rc::default(),
            web_search: web_search(
                args.web_search.as_deref(),
                args.web_search_key_env.as_deref(),
            )?,
        })
    }

    /// The agent a turn runs as (`--agent`), with its team, read from the
    /// turn's store; `None` without --agent.
    async fn profile(
        &self,
        environment: &kiln_run::Environment,
        request: &AgentRequest,
    ) -> Result<Option<kiln_agent::Profiled>, kiln_run::RequestError> {
        let Some(slug) = &self.agent else {
            return Ok(None);
        };
        let backend = match environment.workspace.as_deref() {
            Some(Ok(workspace)) => workspace.backend.clone(),
            Some(Err(error)) => return Err(kiln_run::RequestError(error.with_hint().to_string())),
            None => return Ok(None),
        };
        let config = kiln_store::config::Config::new(backend.clone());
        let connect = |config| kiln_providers::connect(config);
        let mut profile =
            kiln_agent::load_profile(&config, slug, &request.provider, &request.options, &connect)
                .await
                .map_err(kiln_run::RequestError)?;
        // The vault's secrets this agent and each of its team may use, each
        // bound to its origins, as in the app. Without a keyring the job goes
        // on without them, said (`--secret NAME=ENV` still gives one).
        if let Some(profiled) = &mut profile {
            let vault = crate::vault::KeyringSealer::vault(backend);
            let now = kiln_store::clock::epoch_ms();
            let problems = match kiln_agent::open_vault(profiled, &vault, now).await {
                Ok(problems) => problems,
                Err(error @ kiln_store::StoreError::KeyUnavailable { .. }) => {
                    vec![format!(
                        "its secrets were not opened: {}",
                        error.with_hint()
                    )]
                }
                Err(error) => {
                    return Err(kiln_run::RequestError(format!(
                        "--agent {slug}: the vault: {}",
                        error.with_hint()
                    )));
                }
            };
            for problem in problems {
                eprintln!(
                    "kiln: --agent {slug}: {}",
                    crate::terminal::escaped(&problem)
                );
            }
        }
        Ok(profile)
    }

    /// The permission mode the session's turns ask for (`None`: the mode rule's).
    pub(crate) fn run_mode(&self) -> Option<Mode> {
        self.run.mode
    }

    /// Switches the mode of the session's next turns.
    pub(crate) fn set_mode(&mut self, mode: Mode) {
        self.run.mode = Some(mode);
    }

    /// Where the session's turns are assembled: its belt, its asker, its store.
    pub(crate) fn environment(&self, entrance: &str) -> kiln_run::Environment {
        let mut environment = crate::commands::run::environment(
            entrance,
            self.catalog.clone(),
            self.asker,
            self.store.as_deref(),
        );
        if let Some((search, key)) = self.web_search.clone() {
            let http = environment.http.clone();
            environment.add_own_tools(move |registry| {
                kiln_capabilities::web_search::add_web_search(
                    registry,
                    &http,
                    &search,
                    key.clone(),
                );
            });
        }
        environment
    }

    /// The store's folder (`--store DIR`), when the session has one.
    pub(crate) fn store(&self) -> Option<&std::path::Path> {
        self.store.as_deref()
    }

    /// The run request every turn's belt is assembled from.
    pub(crate) fn run_request(&self) -> &RunRequest {
        &self.run
    }

    pub(crate) fn options(&self) -> ChatOptions {
        ChatOptions {
            max_tokens: self.max_tokens,
            ..ChatOptions::new(self.model.clone())
        }
    }

    /// Runs one agent turn over `messages`, its progress printed as it
    /// comes (and its events kept in `kept`'s thread, when it is one);
    /// Ctrl-C stops it. `Err` is a request the loop refused.
    pub(crate) fn turn(
        &self,
        pool: &mut futures::executor::LocalPool,
        interrupt: &Interrupt,
        messages: Vec<Message>,
        output_schema: Option<Value>,
        entrance: &str,
        kept: Option<&kiln_agent::ThreadTurn>,
    ) -> Result<AgentOutcome, kiln_run::RequestError> {
        let json = self.json;
        let sink: kiln_agent::Sink = {
            let printer = self.printer.clone();
            Rc::new(move |event: AgentEvent| printer.borrow_mut().show(&event, json))
        };
        let sink = match kept {
            Some(kept) => kept.sink(sink),
            None => sink,
        };
        entrance.clone_into(&mut self.printer.borrow_mut().who);
        let environment = self.environment(entrance);
        let person: Option<Rc<dyn Person>> =
            (self.asker == Asker::Terminal).then(|| Rc::new(crate::approve::TerminalPerson) as _);
        let cancel = interrupt.switch(pool);
        let setup = AgentSetup {
            environment: &environment,
            runner: Rc::new(crate::sandbox_process::ProcessRunner::warm(1)),
            person,
            clock: Rc::new(kiln_http::SystemClock),
            sink,
            cancel: cancel.clone(),
        };
        let request = AgentRequest {
            run: self.run.clone(),
            provider: kiln_providers::connect(self.provider.clone()),
            options: self.options(),
            messages,
            system: self.system.clone(),
            output_schema,
            guards: self.guards,
            budget: BudgetLimits {
                deadline_ms: Some(f64::from(self.deadline) * 1000.0),
                ..BudgetLimits::default()
            },
            direct: Vec::new(),
            compaction: Compaction::default(),
            profile: None,
        };
        let outcome = pool.run_until(async {
            let mut request = request;
            request.profile = self.profile(&environment, &request).await?;
            run_agent(request, setup).await
        });
        cancel.abort();
        if !json {
            self.printer.borrow_mut().end_line();
        }
        outcome
    }

    /// Prints a turn's answer (unless it already streamed to a terminal) and
    /// what it used; the exit code it stands for.
    pub(crate) fn finish(&self, result: &kiln_types::agent::AgentResult, who: &str) -> ExitCode {
        if !self.json {
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
                crate::out::line(crate::terminal::escaped(&shown));
            }
            eprintln!(
                "{who}: {} turn(s), {} action(s), {} input + {} output tokens, ${:.6}",
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
}

/// Shows a turn's progress on stderr, or every event as a JSON line on stdout.
#[derive(Default)]
pub(crate) struct Printer {
    mid_line: bool,
    /// Who speaks in the progress lines (`kiln agent`, `kiln chat`).
    who: String,
    /// The running plan's tree, and how many lines of it are on screen.
    tree: Option<(crate::tree::PlanTree, usize)>,
}

/// A direct call's arguments on one line: a plan by its title and size,
/// anything else cut at 200 characters.
fn call_summary(name: &str, args: &Value) -> String {
    if name == kiln_types::agent::EXECUTE_PLAN
        && let Ok(plan) = serde_json::from_value::<kiln_types::plan::Plan>(args.clone())
    {
        return format!(
            "\u{201c}{}\u{201d} ({} tasks, {} steps)",
            kiln_types::permission::card_text(&plan.title),
            plan.tasks.len(),
            plan.step_count()
        );
    }
    let text = kiln_types::permission::card_text(&args.to_string());
    if text.chars().count() > 200 {
        format!("{}…", text.chars().take(200).collect::<String>())
    } else {
        text
    }
}

/// How wide the terminal is (`COLUMNS`, else 100).
fn columns() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|columns| columns.parse().ok())
        .filter(|columns: &usize| *columns >= 40)
        .unwrap_or(100)
}

impl Printer {
    fn end_line(&mut self) {
        if self.mid_line {
            eprintln!();
            self.mid_line = false;
        }
    }

    /// Draws the plan's tree: in place on a terminal, as it changes; once,
    /// when the plan ends, anywhere else.
    fn draw_tree(&mut self) {
        let live = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let Some((tree, drawn)) = &mut self.tree else {
            return;
        };
        if !live && !tree.is_finished() {
            return;
        }
        let lines = tree.render(columns());
        let mut err = std::io::stderr().lock();
        if live && *drawn > 0 {
            // Up to the tree's first line, and clear what was there.
            let _ = write!(err, "\x1b[{}A\x1b[J", *drawn);
        }
        for line in &lines {
            let _ = writeln!(err, "{line}");
        }
        *drawn = lines.len();
        if tree.is_finished() {
            self.tree = None;
        }
    }

    /// A child's event outside a plan's tree: one line, indented by depth.
    fn show_child(&mut self, label: &str, child: &str, depth: u32, event: &AgentEvent) {
        let indent = "  ".repeat(depth as usize);
        let first = |text: &str| -> String {
            let line: String = text
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(120)
                .collect();
            kiln_types::permission::card_text(&line)
        };
        let line = match event {
            AgentEvent::ToolCallUpdate { name, .. } => format!("── {name}"),
            AgentEvent::ToolResultUpdate {
                is_error, content, ..
            } => format!(
                "└ {}: {}",
                if *is_error { "error" } else { "result" },
                first(content)
            ),
            AgentEvent::Stop { stop } => format!(
                "stopped ({}): {}",
                stop.code.as_deref().unwrap_or("stop"),
                stop.message.as_deref().unwrap_or_default()
            ),
            AgentEvent::Done { result } if result.stop.is_success() => {
                format!("✓ done: {}", first(&result.text))
            }
            AgentEvent::LogUpdate { message } => message.clone(),
            _ => return,
        };
        self.end_line();
        eprintln!(
            "{indent}↳ {}",
            crate::terminal::escaped(&format!("{label} {child}: {line}"))
        );
    }

    fn show(&mut self, event: &AgentEvent, json: bool) {
        if json {
            crate::out::line(serde_json::to_string(event).unwrap_or_default());
            return;
        }
        // Anything else printed while a plan's tree is on screen: the next
        // drawing starts below it, rather than over it.
        if !matches!(
            event,
            AgentEvent::TaskUpdate { .. }
                | AgentEvent::Child { .. }
                | AgentEvent::StepResult { .. }
                | AgentEvent::LlmCall { .. }
        ) && let Some((_, drawn)) = &mut self.tree
        {
            *drawn = 0;
        }
        match event {
            AgentEvent::TextDelta { text } => {
                eprint!("{}", crate::terminal::escaped(text));
                self.mid_line = !text.ends_with('\n');
            }
            AgentEvent::ToolCallUpdate {
                name, args, code, ..
            } => {
                self.end_line();
                match code {
                    Some(code) => {
                        eprintln!("── {}", crate::terminal::escaped(name));
                        for line in code.lines() {
                            eprintln!("│ {}", kiln_types::permission::card_text(line));
                        }
                    }
                    None => eprintln!(
                        "── {} {}",
                        crate::terminal::escaped(name),
                        call_summary(name, args)
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
                    "{} asks: {}",
                    self.who,
                    kiln_types::permission::card_text(question)
                );
            }
            AgentEvent::LogUpdate { message } => {
                self.end_line();
                eprintln!("{}: {}", self.who, crate::terminal::escaped(message));
            }
            AgentEvent::Compaction { replaced, .. } => {
                self.end_line();
                eprintln!(
                    "{}: earlier conversation summarized ({replaced} messages)",
                    self.who
                );
            }
            AgentEvent::Stop { stop } => {
                self.end_line();
                eprintln!(
                    "{}: stopped ({}): {}",
                    self.who,
                    crate::terminal::escaped(stop.code.as_deref().unwrap_or("stop")),
                    crate::terminal::escaped(stop.message.as_deref().unwrap_or_default())
                );
            }
            AgentEvent::PlanningUpdate {
                phase,
                status,
                content,
            } => {
                self.end_line();
                let mark = match status.as_str() {
                    "ok" => "✓",
                    "failed" => "✗",
                    _ => "◐",
                };
                eprintln!(
                    "{mark} {:<16}{}",
                    phase.as_str(),
                    crate::terminal::escaped(content)
                );
            }
            AgentEvent::TaskUpdate {
                event: kind, plan, ..
            } => {
                if let (kiln_types::plan::TaskEvent::PlanStarted, Some(plan)) = (kind, plan) {
                    self.end_line();
                    self.tree = Some((crate::tree::PlanTree::new(plan), 0));
                    self.draw_tree();
                } else if let Some((tree, _)) = &mut self.tree
                    && tree.apply(event)
                {
                    self.draw_tree();
                }
            }
            AgentEvent::StepResult { .. } => {}
            AgentEvent::Child {
                child,
                depth,
                label,
                event: inner,
                ..
            } => match &mut self.tree {
                Some((tree, _)) => {
                    if tree.apply(event) {
                        self.draw_tree();
                    }
                }
                None => self.show_child(label, child, *depth, inner),
            },
            AgentEvent::ApprovalRequest { .. }
            | AgentEvent::ApprovalAnswer { .. }
            | AgentEvent::LlmCall { .. }
            | AgentEvent::Done { .. } => {}
        }
    }
}
