//! `kiln agents`: the workspace's agent profiles (`kiln_types::profile`)
//! from a terminal, kept in the on-disk store (`--store DIR`) that the other
//! commands share: list, show, create, edit, remove.
//!
//! A profile is held to [`AgentRecord::check`], the rules the app and the
//! runtime worker hold it to, and a named provider must be one the workspace
//! keeps, all before anything is written. Every write is a compare-and-swap
//! at the version this command read, so an edit made elsewhere meanwhile is
//! refused, never lost. Text from the store is escaped for the terminal
//! (`crate::terminal`); `--json` prints the records as they are.
//!
//! Exit codes: 0 done; 1 the store refused or has no such agent (it exists
//! already, another writer changed it, the default agent stays, the store
//! could not be read); 2 a flag's value was refused, before anything was
//! written.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

use kiln_store::StoreError;
use kiln_store::config::Config;
use kiln_store::native::LogBackend;
use kiln_types::permission::Autonomy;
use kiln_types::profile::{AgentRecord, AgentRole, AgentServer, MAX_SYSTEM_PROMPT};

use crate::terminal::escaped;

/// `kiln agents`' subcommands.
#[derive(clap::Args)]
pub struct AgentsArgs {
    #[command(subcommand)]
    command: AgentsCommand,
}

/// Where the store is: every subcommand takes it.
#[derive(clap::Args)]
struct StoreArg {
    /// The store's folder (created if needed), as `kiln memory` and
    /// `kiln run --store` use it.
    #[arg(long, value_name = "DIR", env = "KILN_STORE")]
    store: PathBuf,
}

#[derive(clap::Subcommand)]
enum AgentsCommand {
    /// One line per agent, the default agent first: its badge, slug, name,
    /// role, model, and how many MCP servers, skills and secrets it has.
    List {
        /// Print the records as a JSON array instead.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArg,
    },
    /// One agent's whole profile: its system prompt in full, its tool
    /// settings and its MCP servers.
    Show {
        /// The agent's slug.
        slug: String,
        /// Print the record as JSON instead.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Make a new agent (a slug the workspace has already is refused: edit
    /// it instead).
    Create {
        /// Its handle, which others delegate to: 1 to 64 of `a-z`, `0-9`
        /// and `-`.
        slug: String,
        /// Its name as people see it.
        #[arg(long, value_name = "NAME")]
        name: String,
        #[command(flatten)]
        profile: ProfileFlags,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Change an agent: each flag given changes its field; the rest stay.
    ///
    /// `--mcp`, `--skill` and `--secret` add one entry (`--remove-…` takes
    /// one away; to change a server's URL, remove it and add it again);
    /// `--tool` sets one tool's row (`--clear-tool` removes it). The agent
    /// is written at the version read: if another writer changed it
    /// meanwhile, nothing is written.
    Edit {
        /// The agent's slug.
        slug: String,
        /// Its name as people see it.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        #[command(flatten)]
        profile: ProfileFlags,
        #[command(flatten)]
        removals: RemovalFlags,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Remove an agent (the default agent stays: every workspace has it).
    Remove {
        /// The agent's slug.
        slug: String,
        #[command(flatten)]
        store: StoreArg,
    },
}

/// The fields `create` and `edit` set, each flag its own field.
#[derive(clap::Args)]
struct ProfileFlags {
    /// An emoji or up to two initials (empty: the name's first letter).
    #[arg(long, value_name = "A")]
    avatar: Option<String>,
    /// The system prompt: text layered before Kiln's own contract in every
    /// job of this agent (it cannot replace the contract).
    #[arg(long, value_name = "TEXT", group = "system_prompt")]
    system: Option<String>,
    /// The system prompt from FILE (`-`: standard input).
    #[arg(long, value_name = "FILE", group = "system_prompt")]
    system_file: Option<PathBuf>,
    /// A provider the workspace keeps, by name (empty: the chat's provider).
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,
    /// The model id (empty: the provider's saved model).
    #[arg(long, value_name = "ID")]
    model: Option<String>,
    /// `agent` does its jobs itself; an `orchestrator` may hand parts of a
    /// job to the workspace's other agents by slug.
    #[arg(long, value_enum, value_name = "ROLE")]
    role: Option<RoleArg>,
    /// Whether it may add, attach or detach team members (off unless given;
    /// `--may-change-team=false` turns it off again).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    may_change_team: Option<bool>,
    /// An MCP server its jobs mount, as NAME=URL (its tools are named
    /// `NAME_<tool>`); repeat for more.
    #[arg(long = "mcp", value_name = "NAME=URL", value_parser = parse_server)]
    mcp: Vec<AgentServer>,
    /// Send the secret SECRET to the MCP server NAME as `Authorization:
    /// Bearer <value>` (the agent's secrets must name it; `--secret`); repeat
    /// for more. An empty SECRET sends none.
    #[arg(long = "mcp-auth", value_name = "NAME=SECRET", value_parser = parse_auth)]
    mcp_auth: Vec<(String, String)>,
    /// One tool's autonomy: `auto` runs it without asking, `ask` asks,
    /// `block` refuses it (`return_result` cannot be blocked); a tool not set
    /// follows the permission mode. Repeat for more.
    #[arg(long = "tool", value_name = "TOOL=auto|ask|block", value_parser = parse_tool)]
    tools: Vec<ToolSetting>,
    /// A skill it is assigned, by name; repeat for more.
    #[arg(long = "skill", value_name = "NAME")]
    skills: Vec<String>,
    /// A secret its jobs may use, by name (the value stays in the vault);
    /// repeat for more.
    #[arg(long = "secret", value_name = "NAME")]
    secrets: Vec<String>,
}

/// What only `edit` takes away.
#[derive(clap::Args)]
struct RemovalFlags {
    /// Remove the MCP server NAME; repeat for more.
    #[arg(long, value_name = "NAME")]
    remove_mcp: Vec<String>,
    /// Remove TOOL's setting (it then follows the permission mode); repeat
    /// for more.
    #[arg(long, value_name = "TOOL")]
    clear_tool: Vec<String>,
    /// Unassign the skill NAME; repeat for more.
    #[arg(long, value_name = "NAME")]
    remove_skill: Vec<String>,
    /// Withdraw the secret NAME; repeat for more.
    #[arg(long, value_name = "NAME")]
    remove_secret: Vec<String>,
    /// Remove the system prompt (Kiln's contract alone).
    #[arg(long, conflicts_with = "system_prompt")]
    clear_system: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum RoleArg {
    Agent,
    Orchestrator,
}

impl From<RoleArg> for AgentRole {
    fn from(role: RoleArg) -> Self {
        match role {
            RoleArg::Agent => Self::Agent,
            RoleArg::Orchestrator => Self::Orchestrator,
        }
    }
}

/// `--tool TOOL=SETTING`.
#[derive(Debug, Clone)]
struct ToolSetting {
    tool: String,
    autonomy: Autonomy,
}

fn parse_auth(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(name, secret)| (name.to_owned(), secret.to_owned()))
        .ok_or_else(|| "expected NAME=SECRET, as in `docs=DOCS_TOKEN`".into())
}

fn parse_server(text: &str) -> Result<AgentServer, String> {
    let Some((name, url)) = text.split_once('=') else {
        return Err("expected NAME=URL, as in `docs=https://docs.example/mcp`".into());
    };
    Ok(AgentServer {
        name: name.to_owned(),
        url: url.to_owned(),
        auth_secret: None,
    })
}

fn parse_tool(text: &str) -> Result<ToolSetting, String> {
    let Some((tool, setting)) = text.split_once('=') else {
        return Err("expected TOOL=auto|ask|block, as in `shell=ask`".into());
    };
    Ok(ToolSetting {
        tool: tool.to_owned(),
        autonomy: setting.parse()?,
    })
}

/// Why a command did nothing; each says what to do about it.
#[derive(Debug, thiserror::Error)]
enum AgentsError {
    /// A flag's value, refused before anything was written (exit 2).
    #[error("{0}")]
    Flag(String),
    #[error("there is no agent `{slug}`; this workspace has {have}")]
    NoAgent { slug: String, have: String },
    #[error("agent `{0}` already exists; use `kiln agents edit` to change it")]
    Exists(String),
    #[error(
        "agent `{0}` was changed by another writer after this command read it; nothing was written"
    )]
    Raced(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the answer could not be written as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl AgentsError {
    fn code(&self) -> ExitCode {
        match self {
            Self::Flag(_) => ExitCode::from(2),
            Self::NoAgent { .. }
            | Self::Exists(_)
            | Self::Raced(_)
            | Self::Store(_)
            | Self::Json(_) => ExitCode::FAILURE,
        }
    }

    fn hint(&self) -> Option<&str> {
        match self {
            Self::Raced(_) => Some("try again: the command reads the agent afresh"),
            Self::Store(error) => error.hint(),
            Self::Flag(_) | Self::NoAgent { .. } | Self::Exists(_) | Self::Json(_) => None,
        }
    }
}

pub fn run(args: &AgentsArgs) -> ExitCode {
    match futures::executor::block_on(execute(&args.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Slugs, URLs and names in the sentence may come from the store or the flags.
            eprintln!("error: {}", escaped(&error.to_string()));
            if let Some(hint) = error.hint() {
                eprintln!("hint: {hint}");
            }
            error.code()
        }
    }
}

fn open(store: &StoreArg) -> Result<Config, AgentsError> {
    let backend: Rc<dyn kiln_store::Backend> = LogBackend::open(&store.store)?;
    Ok(Config::new(backend))
}

async fn execute(command: &AgentsCommand) -> Result<(), AgentsError> {
    match command {
        AgentsCommand::List { json, store } => {
            let agents = open(store)?.agents().await?;
            if *json {
                print_json(&agents)?;
            } else {
                crate::out::text(listing(&agents));
            }
            Ok(())
        }
        AgentsCommand::Show { slug, json, store } => {
            let agent = read(&open(store)?, slug).await?;
            if *json {
                print_json(&agent)?;
            } else {
                crate::out::text(profile(&agent));
            }
            Ok(())
        }
        AgentsCommand::Create {
            slug,
            name,
            profile,
            store,
        } => {
            let mut agent = AgentRecord::new(slug.as_str(), name.as_str());
            profile.apply(&mut agent)?;
            agent.check().map_err(AgentsError::Flag)?;
            let config = open(store)?;
            if config.agent(slug).await?.is_some() {
                return Err(AgentsError::Exists(slug.clone()));
            }
            check_provider_kept(&config, &agent).await?;
            let version = config
                .put_agent(&agent)
                .await
                .map_err(|error| lost_race(error, || AgentsError::Exists(agent.slug.clone())))?;
            crate::out::line(format!(
                "created agent `{}` ({}), version {version}",
                escaped(&agent.slug),
                escaped(&agent.name)
            ));
            Ok(())
        }
        AgentsCommand::Edit {
            slug,
            name,
            profile,
            removals,
            store,
        } => {
            if name.is_none() && profile.is_empty() && removals.is_empty() {
                return Err(AgentsError::Flag(
                    "nothing to change: give the flags of the fields to change, such as --name, --system or --tool (see `kiln agents edit --help`)"
                        .into(),
                ));
            }
            let config = open(store)?;
            let read = read(&config, slug).await?;
            let mut agent = read.clone();
            removals.apply(&mut agent)?;
            if let Some(name) = name {
                agent.name.clone_from(name);
            }
            profile.apply(&mut agent)?;
            agent.check().map_err(AgentsError::Flag)?;
            if agent == read {
                crate::out::line(format!(
                    "agent `{}` is already so; nothing was written",
                    escaped(&agent.slug)
                ));
                return Ok(());
            }
            check_provider_kept(&config, &agent).await?;
            let version = config
                .put_agent(&agent)
                .await
                .map_err(|error| lost_race(error, || AgentsError::Raced(agent.slug.clone())))?;
            crate::out::line(format!(
                "saved agent `{}`, version {version}",
                escaped(&agent.slug)
            ));
            Ok(())
        }
        AgentsCommand::Remove { slug, store } => {
            let config = open(store)?;
            let agent = read(&config, slug).await?;
            config
                .remove_agent(&agent.slug, agent.version)
                .await
                .map_err(|error| lost_race(error, || AgentsError::Raced(agent.slug.clone())))?;
            crate::out::line(format!("removed agent `{}`", escaped(&agent.slug)));
            Ok(())
        }
    }
}

/// The store's error, but a lost compare-and-swap said as `raced` says it.
fn lost_race(error: StoreError, raced: impl FnOnce() -> AgentsError) -> AgentsError {
    match error {
        StoreError::Conflict { .. } => raced(),
        other => AgentsError::Store(other),
    }
}

/// The agent `slug`, or the sentence naming the agents the workspace has.
async fn read(config: &Config, slug: &str) -> Result<AgentRecord, AgentsError> {
    if let Some(agent) = config.agent(slug).await? {
        return Ok(agent);
    }
    let have: Vec<String> = config
        .agents()
        .await?
        .iter()
        .map(|agent| format!("`{}`", agent.slug))
        .collect();
    Err(AgentsError::NoAgent {
        slug: slug.to_owned(),
        have: have.join(", "),
    })
}

/// Refuses a provider the workspace does not keep, as the runtime worker's
/// `agents.put` does (an empty provider is the chat's).
async fn check_provider_kept(config: &Config, agent: &AgentRecord) -> Result<(), AgentsError> {
    if agent.provider.is_empty() {
        return Ok(());
    }
    let kept = config.providers().await?;
    if kept.iter().any(|provider| provider.name == agent.provider) {
        return Ok(());
    }
    let names: Vec<String> = kept
        .iter()
        .map(|provider| format!("`{}`", provider.name))
        .collect();
    Err(AgentsError::Flag(format!(
        "agent `{}`: there is no kept provider `{}`; {}",
        agent.slug,
        agent.provider,
        if names.is_empty() {
            "the workspace keeps none: add one in the app's Settings → Providers first, or give `--provider ''` to use the chat's".to_owned()
        } else {
            format!("the workspace keeps {}", names.join(", "))
        }
    )))
}

impl ProfileFlags {
    fn is_empty(&self) -> bool {
        self.avatar.is_none()
            && self.system.is_none()
            && self.system_file.is_none()
            && self.provider.is_none()
            && self.model.is_none()
            && self.role.is_none()
            && self.may_change_team.is_none()
            && self.mcp.is_empty()
            && self.mcp_auth.is_empty()
            && self.tools.is_empty()
            && self.skills.is_empty()
            && self.secrets.is_empty()
    }

    /// Writes each field given into `agent`; a list entry given twice (here
    /// or already there) is left for [`AgentRecord::check`] to name.
    fn apply(&self, agent: &mut AgentRecord) -> Result<(), AgentsError> {
        if let Some(avatar) = &self.avatar {
            agent.avatar.clone_from(avatar);
        }
        if let Some(system) = &self.system {
            agent.system_prompt.clone_from(system);
        }
        if let Some(file) = &self.system_file {
            agent.system_prompt = system_prompt_from(file)?;
        }
        if let Some(provider) = &self.provider {
            agent.provider.clone_from(provider);
        }
        if let Some(model) = &self.model {
            agent.model.clone_from(model);
        }
        if let Some(role) = self.role {
            agent.role = role.into();
        }
        if let Some(may) = self.may_change_team {
            agent.may_change_team = may;
        }
        agent.mcp.extend(self.mcp.iter().cloned());
        agent.skills.extend(self.skills.iter().cloned());
        agent.secrets.extend(self.secrets.iter().cloned());
        for (name, secret) in &self.mcp_auth {
            let Some(server) = agent.mcp.iter_mut().find(|server| &server.name == name) else {
                return Err(AgentsError::Flag(format!(
                    "--mcp-auth {name}={secret}: the agent has no MCP server `{name}`; add it with --mcp"
                )));
            };
            server.auth_secret = Some(secret.clone()).filter(|secret| !secret.is_empty());
        }
        for (index, setting) in self.tools.iter().enumerate() {
            if self.tools[..index]
                .iter()
                .any(|earlier| earlier.tool == setting.tool)
            {
                return Err(AgentsError::Flag(format!(
                    "`--tool` sets `{}` twice; give each tool once",
                    setting.tool
                )));
            }
            agent
                .autonomy
                .insert(setting.tool.clone(), setting.autonomy);
        }
        Ok(())
    }
}

impl RemovalFlags {
    fn is_empty(&self) -> bool {
        self.remove_mcp.is_empty()
            && self.clear_tool.is_empty()
            && self.remove_skill.is_empty()
            && self.remove_secret.is_empty()
            && !self.clear_system
    }

    /// Takes each entry named away from `agent`; one it does not have is
    /// refused (a misspelt name would otherwise change nothing, silently).
    fn apply(&self, agent: &mut AgentRecord) -> Result<(), AgentsError> {
        let who = agent.slug.clone();
        for name in &self.remove_mcp {
            let at = agent.mcp.iter().position(|server| &server.name == name);
            let Some(at) = at else {
                let has: Vec<&str> = agent
                    .mcp
                    .iter()
                    .map(|server| server.name.as_str())
                    .collect();
                return Err(absent(&who, "MCP server", name, &has));
            };
            agent.mcp.remove(at);
        }
        for tool in &self.clear_tool {
            if agent.autonomy.remove(tool).is_none() {
                let has: Vec<&str> = agent.autonomy.keys().map(String::as_str).collect();
                return Err(absent(&who, "setting for tool", tool, &has));
            }
        }
        for (list, names, what) in [
            (&mut agent.skills, &self.remove_skill, "skill"),
            (&mut agent.secrets, &self.remove_secret, "secret"),
        ] {
            for name in names {
                let Some(at) = list.iter().position(|entry| entry == name) else {
                    let has: Vec<&str> = list.iter().map(String::as_str).collect();
                    return Err(absent(&who, what, name, &has));
                };
                list.remove(at);
            }
        }
        if self.clear_system {
            agent.system_prompt.clear();
        }
        Ok(())
    }
}

/// "agent `ada` has no skill `web`; it has `notes`".
fn absent(who: &str, what: &str, name: &str, has: &[&str]) -> AgentsError {
    let has = if has.is_empty() {
        "it has none".to_owned()
    } else {
        let named: Vec<String> = has.iter().map(|name| format!("`{name}`")).collect();
        format!("it has {}", named.join(", "))
    };
    AgentsError::Flag(format!("agent `{who}` has no {what} `{name}`; {has}"))
}

/// The system prompt in `file` (`-`: standard input), read no further than
/// the longest an agent may have could take: a larger file, a device or an
/// endless pipe is refused without being read whole.
fn system_prompt_from(file: &Path) -> Result<String, AgentsError> {
    // A character is at most 4 bytes of UTF-8; one byte more says "longer".
    let limit = u64::try_from(MAX_SYSTEM_PROMPT * 4 + 1).unwrap_or(u64::MAX);
    let place = if file == Path::new("-") {
        "standard input".to_owned()
    } else {
        format!("`{}`", file.display())
    };
    let mut bytes = Vec::new();
    let read = if file == Path::new("-") {
        std::io::stdin().lock().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|opened| opened.take(limit).read_to_end(&mut bytes))
    };
    read.map_err(|error| {
        AgentsError::Flag(format!(
            "could not read the system prompt from {place}: {error}"
        ))
    })?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) >= limit {
        return Err(AgentsError::Flag(format!(
            "the system prompt in {place} is longer than an agent's may be: at most {MAX_SYSTEM_PROMPT} characters"
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| AgentsError::Flag(format!("the system prompt in {place} is not UTF-8 text")))
}

fn print_json(value: &impl serde::Serialize) -> Result<(), AgentsError> {
    crate::out::line(serde_json::to_string(value)?);
    Ok(())
}

/// The model an agent's jobs use, in words.
fn model_of(agent: &AgentRecord) -> String {
    match (agent.provider.as_str(), agent.model.as_str()) {
        ("", "") => "the chat's provider".to_owned(),
        ("", model) => format!("{model} on the chat's provider"),
        (provider, "") => format!("{provider}'s saved model"),
        (provider, model) => format!("{provider}/{model}"),
    }
}

/// "1 skill", "2 skills".
fn counted(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `list`: one aligned line per agent.
fn listing(agents: &[AgentRecord]) -> String {
    let rows: Vec<[String; 6]> = agents
        .iter()
        .map(|agent| {
            [
                escaped(&agent.badge()),
                escaped(&agent.slug),
                escaped(&agent.name),
                agent.role.as_str().to_owned(),
                escaped(&model_of(agent)),
                format!(
                    "{}, {}, {}",
                    counted(agent.mcp.len(), "MCP server"),
                    counted(agent.skills.len(), "skill"),
                    counted(agent.secrets.len(), "secret")
                ),
            ]
        })
        .collect();
    let mut widths = [0; 6];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in &rows {
        let mut line = String::new();
        for (index, (cell, width)) in row.iter().zip(widths).enumerate() {
            if index + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', width - cell.chars().count() + 2));
            }
        }
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// `show`: the whole profile, a field a line, the system prompt last and whole.
fn profile(agent: &AgentRecord) -> String {
    let mut rows: Vec<(&str, Vec<String>)> = vec![
        (
            "role",
            vec![format!(
                "{}; {}",
                agent.role.as_str(),
                if agent.may_change_team {
                    "may change its team"
                } else {
                    "may not change its team"
                }
            )],
        ),
        ("model", vec![model_of(agent)]),
        ("skills", vec![listed(&agent.skills)]),
        ("secrets", vec![listed(&agent.secrets)]),
    ];
    let width = agent.mcp.iter().map(|server| server.name.chars().count());
    let width = width.max().unwrap_or(0);
    rows.push((
        "MCP servers",
        if agent.mcp.is_empty() {
            vec!["none".to_owned()]
        } else {
            agent
                .mcp
                .iter()
                .map(|server| match &server.auth_secret {
                    Some(secret) => format!(
                        "{:width$}  {}  (Authorization from the secret {secret})",
                        server.name, server.url
                    ),
                    None => format!("{:width$}  {}", server.name, server.url),
                })
                .collect()
        },
    ));
    let width = agent.autonomy.keys().map(|tool| tool.chars().count());
    let width = width.max().unwrap_or(0);
    let mut tools: Vec<String> = agent
        .autonomy
        .iter()
        .map(|(tool, setting)| format!("{tool:width$}  {}", setting.as_str()))
        .collect();
    tools.push(if tools.is_empty() {
        "none set: every tool follows the permission mode".to_owned()
    } else {
        "(any other tool follows the permission mode)".to_owned()
    });
    rows.push(("tools", tools));
    rows.push(("version", vec![agent.version.to_string()]));

    let mut text = format!(
        "{} {}: {}\n",
        escaped(&agent.badge()),
        escaped(&agent.slug),
        escaped(&agent.name)
    );
    let label_width = rows
        .iter()
        .map(|(label, _)| label.chars().count())
        .max()
        .unwrap_or(0);
    for (label, lines) in &rows {
        for (index, line) in lines.iter().enumerate() {
            let label = if index == 0 { *label } else { "" };
            text.push_str(&format!("  {label:label_width$}  {}\n", escaped(line)));
        }
    }
    if agent.system_prompt.is_empty() {
        text.push_str("system prompt: none (Kiln's contract alone)\n");
    } else {
        text.push_str("system prompt:\n");
        for line in escaped(&agent.system_prompt).lines() {
            text.push_str(&format!("  {line}\n"));
        }
    }
    text
}

/// Names joined by commas, or "none".
fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_store::native::MemoryBackend;

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        futures::executor::block_on(future)
    }

    #[test]
    fn a_write_that_lost_the_race_says_another_writer_changed_it() {
        let config = Config::new(MemoryBackend::new());
        let Ok(_) = block_on(config.put_agent(&AgentRecord::new("ada", "Ada"))) else {
            panic!("the first write is kept");
        };
        let Ok(Some(stale)) = block_on(config.agent("ada")) else {
            panic!("ada was kept");
        };
        let mut elsewhere = stale.clone();
        elsewhere.name = "Ada, changed elsewhere".into();
        let Ok(_) = block_on(config.put_agent(&elsewhere)) else {
            panic!("the other writer's edit is kept");
        };

        let error = block_on(config.put_agent(&stale))
            .map_err(|error| lost_race(error, || AgentsError::Raced("ada".into())));
        let Err(error) = error else {
            panic!("a write at a stale version is refused");
        };
        assert_eq!(
            error.to_string(),
            "agent `ada` was changed by another writer after this command read it; nothing was written"
        );
        assert_eq!(error.code(), ExitCode::FAILURE);
        assert!(error.hint().is_some_and(|hint| hint.contains("try again")));

        let removed = block_on(config.remove_agent("ada", stale.version))
            .map_err(|error| lost_race(error, || AgentsError::Raced("ada".into())));
        assert!(matches!(removed, Err(AgentsError::Raced(_))), "{removed:?}");
    }

    #[test]
    fn the_model_is_said_for_each_way_it_is_chosen() {
        let agent = |provider: &str, model: &str| AgentRecord {
            provider: provider.into(),
            model: model.into(),
            ..AgentRecord::new("ada", "Ada")
        };
        for (provider, model, said) in [
            ("", "", "the chat's provider"),
            ("", "gpt-4o", "gpt-4o on the chat's provider"),
            ("openai", "", "openai's saved model"),
            ("openai", "gpt-4o", "openai/gpt-4o"),
        ] {
            assert_eq!(model_of(&agent(provider, model)), said);
        }
    }
}
