//! The Agents view (`#/agents`): the workspace's agent profiles
//! (`kiln_types::profile::AgentRecord`) listed with New, and for each Edit,
//! Duplicate and Delete (with Undo; the default agent stays), and the form
//! that writes one: name, slug, avatar, system prompt, provider and model,
//! role, whether it may change its team, its MCP servers, and each tool's
//! autonomy over the tool list the app draws up for Settings.
//!
//! Every write goes through the runtime worker (`agents.put` at the version
//! read, `agents.remove`), which holds the record to `AgentRecord::check`
//! (the form checks it first, in the same words) and refuses a stale version
//! with `conflict`: the form then reads the record again. [`WorkspaceAgents`]
//! is the list the page holds, read again at each change of the
//! configuration (another tab's too); the chat's agent picker reads it as
//! well. The plain logic (a slug from a name, a duplicate's name and slug,
//! form to record, what a turn of another agent sends) is apart and tested
//! natively.

use std::collections::BTreeMap;

use crate::said::said;
use leptos::ev::KeyboardEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde::Deserialize;
use serde_json::{Value, json};

use kiln_types::permission::Autonomy;
use kiln_types::profile::{AgentRecord, AgentRole, AgentServer, UNBLOCKABLE, UNBLOCKABLE_REASON};
use kiln_types::records::DEFAULT_AGENT;
use kiln_types::vault::SecretInfo;

use crate::ToolRow;
use crate::chat_model::Origin;
use crate::panel::{
    PanelNames, PanelState, Undoable, config_read, copy_slug, escape_cancels, focus_soon,
};
use crate::provider_store::ProviderStore;
use crate::storage::{StorageSignals, error_alert};
use crate::storage_model::ErrorText;

mod schedules;

/// The longest slug (`kiln_types::profile::check_slug`).
const MAX_SLUG: usize = 64;
/// The longest name (`AgentRecord::check`).
const MAX_NAME: usize = 100;
/// What a duplicate's name ends with.
const COPY: &str = " (copy)";

/// A Latin letter with a mark, as the plain letters a slug keeps.
fn folded(c: char) -> Option<&'static str> {
    Some(match c.to_lowercase().next().unwrap_or(c) {
        'à'..='å' | 'ā' | 'ą' => "a",
        'æ' => "ae",
        'ç' | 'ć' | 'č' => "c",
        'è'..='ë' | 'ē' | 'ę' | 'ě' => "e",
        'ì'..='ï' | 'ī' => "i",
        'ł' => "l",
        'ñ' | 'ń' | 'ň' => "n",
        'ò'..='ö' | 'ø' | 'ō' | 'ő' => "o",
        'œ' => "oe",
        'ř' => "r",
        'ß' => "ss",
        'ś' | 'š' => "s",
        'ù'..='ü' | 'ū' | 'ů' | 'ű' => "u",
        'ý' | 'ÿ' => "y",
        'ź' | 'ż' | 'ž' => "z",
        _ => return None,
    })
}

/// The slug a new agent named `name` gets until the person types one: its
/// letters and digits in lower case (accents dropped), one `-` for each run
/// of anything else, at most 64, never starting or ending with `-`;
/// `agent` when nothing is left (a name of emoji).
pub(crate) fn slug_from_name(name: &str) -> String {
    let mut slug = String::new();
    let mut gap = false;
    for c in name.chars() {
        let letters = match c {
            'a'..='z' | '0'..='9' => c.encode_utf8(&mut [0; 4]).to_owned(),
            'A'..='Z' => c.to_ascii_lowercase().to_string(),
            _ => match folded(c) {
                Some(letters) => letters.to_owned(),
                None => {
                    gap = true;
                    continue;
                }
            },
        };
        if gap && !slug.is_empty() {
            slug.push('-');
        }
        gap = false;
        slug.push_str(&letters);
        if slug.len() >= MAX_SLUG {
            break;
        }
    }
    slug.truncate(MAX_SLUG);
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        "agent".to_owned()
    } else {
        slug.to_owned()
    }
}

/// A copy of `agent` to save as a new one: named `NAME (copy)` (the name cut
/// to leave room), with a free slug, everything else as it is.
pub(crate) fn duplicate(agent: &AgentRecord, taken: &[String]) -> AgentRecord {
    let room = MAX_NAME - COPY.chars().count();
    let name: String = agent.name.trim().chars().take(room).collect();
    AgentRecord {
        slug: copy_slug(&agent.slug, taken),
        name: format!("{}{COPY}", name.trim_end()),
        version: 0,
        ..agent.clone()
    }
}

/// The agent form's fields as plain data.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Form {
    /// The agent being edited, whose slug is fixed; `None` for a new one.
    pub editing: Option<String>,
    pub name: String,
    pub slug: String,
    pub avatar: String,
    pub system_prompt: String,
    /// A kept provider's name; empty: the chat's.
    pub provider: String,
    pub model: String,
    pub role: AgentRole,
    pub may_change_team: bool,
    /// Each MCP server's name, URL and the secret its `Authorization`
    /// header comes from, as typed; a row with neither a name nor a URL is dropped.
    pub mcp: Vec<AgentServer>,
    /// Each tool's setting; a tool left out follows the mode.
    pub autonomy: BTreeMap<String, Autonomy>,
    /// The skills assigned to it, in the order they were checked.
    pub skills: Vec<String>,
    /// The vault's secrets its jobs may use, in the order they were checked.
    pub secrets: Vec<String>,
    /// The version the record was read at (0: a new one).
    pub version: u64,
}

impl Form {
    /// An empty form for a new agent.
    pub(crate) fn new_agent() -> Self {
        Self {
            editing: None,
            ..Self::of(&AgentRecord::new("", ""))
        }
    }

    /// The form showing `agent`, to edit it.
    pub(crate) fn of(agent: &AgentRecord) -> Self {
        Self {
            editing: Some(agent.slug.clone()),
            name: agent.name.clone(),
            slug: agent.slug.clone(),
            avatar: agent.avatar.clone(),
            system_prompt: agent.system_prompt.clone(),
            provider: agent.provider.clone(),
            model: agent.model.clone(),
            role: agent.role,
            may_change_team: agent.may_change_team,
            mcp: agent.mcp.clone(),
            autonomy: agent.autonomy.clone(),
            skills: agent.skills.clone(),
            secrets: agent.secrets.clone(),
            version: agent.version,
        }
    }

    /// The record to save: the fields trimmed, held to `AgentRecord::check`;
    /// a new agent may not take a slug in `taken`.
    ///
    /// # Errors
    ///
    /// The first problem, as a sentence for the form.
    pub(crate) fn to_record(&self, taken: &[String]) -> Result<AgentRecord, String> {
        let slug = self.slug.trim();
        if self.editing.is_none() && taken.iter().any(|other| other == slug) {
            return Err(format!(
                "There is already an agent `{slug}`: choose another slug."
            ));
        }
        let record = AgentRecord {
            slug: slug.to_owned(),
            name: self.name.trim().to_owned(),
            avatar: self.avatar.trim().to_owned(),
            system_prompt: self.system_prompt.clone(),
            provider: self.provider.clone(),
            model: self.model.trim().to_owned(),
            skills: self.skills.clone(),
            mcp: self
                .mcp
                .iter()
                .filter(|server| !(server.name.trim().is_empty() && server.url.trim().is_empty()))
                .map(|server| AgentServer {
                    name: server.name.trim().to_owned(),
                    url: server.url.trim().to_owned(),
                    auth_secret: server
                        .auth_secret
                        .as_deref()
                        .map(str::trim)
                        .filter(|secret| !secret.is_empty())
                        .map(str::to_owned),
                })
                .collect(),
            secrets: self.secrets.clone(),
            autonomy: self.autonomy.clone(),
            role: self.role,
            may_change_team: self.may_change_team,
            version: self.version,
        };
        record.check()?;
        Ok(record)
    }
}

/// The rows of the form's tool table, each a tool's name and description:
/// the tools the app lists (`catalog`), then `return_result` (every job has
/// it; it cannot be blocked), then any other tool the agent has a setting
/// for (one of its MCP servers' tools, say), so that no setting is hidden.
pub(crate) fn tool_names(
    catalog: &[ToolRow],
    autonomy: &BTreeMap<String, Autonomy>,
) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = catalog
        .iter()
        .map(|tool| (tool.name.clone(), tool.description.clone()))
        .collect();
    if !rows.iter().any(|(name, _)| name == UNBLOCKABLE) {
        rows.push((
            UNBLOCKABLE.to_owned(),
            "Reports that a job finished, or why it could not.".to_owned(),
        ));
    }
    for tool in autonomy.keys() {
        if !rows.iter().any(|(name, _)| name == tool) {
            rows.push((tool.clone(), String::new()));
        }
    }
    rows
}

/// The provider and model a reply is headed with: those `agent` names, where
/// it names them (a provider without a model: that provider's saved model),
/// else the chat's.
pub(crate) fn reply_header(
    agent: Option<&AgentRecord>,
    chat_provider: &str,
    chat_model: &str,
    saved_model: impl Fn(&str) -> Option<String>,
) -> (String, String) {
    let Some(agent) = agent else {
        return (chat_provider.to_owned(), chat_model.to_owned());
    };
    match (agent.provider.as_str(), agent.model.as_str()) {
        ("", "") => (chat_provider.to_owned(), chat_model.to_owned()),
        ("", model) => (chat_provider.to_owned(), model.to_owned()),
        (provider, "") => (
            provider.to_owned(),
            saved_model(provider).unwrap_or_default(),
        ),
        (provider, model) => (provider.to_owned(), model.to_owned()),
    }
}

/// Makes an agent turn's `request` one of agent `slug`. The page's own
/// per-tool settings and MCP servers are the default agent's: another
/// agent's turn carries none, and the runtime worker applies that agent's
/// own.
pub(crate) fn for_agent(request: &mut Value, slug: &str) {
    request["agent"] = slug.into();
    if slug == DEFAULT_AGENT {
        return;
    }
    if let Some(permission) = request.get_mut("permission").and_then(Value::as_object_mut) {
        permission.insert("autonomy".to_owned(), json!({}));
    }
    if let Some(object) = request.as_object_mut()
        && object.contains_key("mcp")
    {
        object.insert("mcp".to_owned(), json!({}));
    }
}

/// The agent the chat goes on with when `wanted` was chosen: `wanted` while
/// the list is not read yet or when the workspace has it, else the default
/// agent (it was deleted, in another tab perhaps).
pub(crate) fn settle_choice(wanted: &str, agents: &[AgentRecord], loaded: bool) -> String {
    if !loaded || agents.iter().any(|agent| agent.slug == wanted) {
        wanted.to_owned()
    } else {
        DEFAULT_AGENT.to_owned()
    }
}

/// A skill as the form lists it: a line of `skills.list`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub(crate) struct SkillInfo {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Shipped with the build, read-only.
    #[serde(default)]
    pub system: bool,
    /// The built-in tools it unlocks for the agents it is assigned to.
    #[serde(default)]
    pub required_tools: Vec<String>,
}

/// One line of the Skills checklist: a skill of the catalog, or one the
/// agent is assigned that the catalog no longer has (`known` false).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SkillLine {
    pub name: String,
    pub description: String,
    pub system: bool,
    pub required_tools: Vec<String>,
    pub known: bool,
}

/// The Skills checklist: the catalog's skills in its order, then those the
/// agent is `assigned` that the catalog lacks, so that none is hidden.
pub(crate) fn skill_lines(catalog: &[SkillInfo], assigned: &[String]) -> Vec<SkillLine> {
    let mut lines: Vec<SkillLine> = catalog
        .iter()
        .map(|skill| SkillLine {
            name: skill.name.clone(),
            description: skill.description.clone(),
            system: skill.system,
            required_tools: skill.required_tools.clone(),
            known: true,
        })
        .collect();
    for name in assigned {
        if !catalog.iter().any(|skill| &skill.name == name) {
            lines.push(SkillLine {
                name: name.clone(),
                description: String::new(),
                system: false,
                required_tools: Vec::new(),
                known: false,
            });
        }
    }
    lines
}

/// One line of the Secrets checklist: a secret of the vault (never its
/// value), or one the agent names that the vault does not have.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SecretLine {
    pub name: String,
    /// Where the vault sends it.
    pub origins: Vec<String>,
    /// The agents the vault lets use it; empty: any whose profile names it.
    pub agents: Vec<String>,
    pub known: bool,
}

/// The Secrets checklist: the vault's secrets in its order, then those the
/// agent names that the vault lacks.
pub(crate) fn secret_lines(vault: &[SecretInfo], named: &[String]) -> Vec<SecretLine> {
    let mut lines: Vec<SecretLine> = vault
        .iter()
        .map(|secret| SecretLine {
            name: secret.name.clone(),
            origins: secret.origins.clone(),
            agents: secret.agents.clone(),
            known: true,
        })
        .collect();
    for name in named {
        if !vault.iter().any(|secret| &secret.name == name) {
            lines.push(SecretLine {
                name: name.clone(),
                origins: Vec::new(),
                agents: Vec::new(),
                known: false,
            });
        }
    }
    lines
}

/// What a secret's line says under its name: where the vault sends it and,
/// when the vault names the agents that may use it, whether agent `slug`
/// is one of them.
pub(crate) fn secret_reach(line: &SecretLine, slug: &str) -> String {
    if !line.known {
        return "Not in the vault: its jobs cannot get it. Uncheck it, or add it again in Settings → Secrets.".to_owned();
    }
    let mut said = format!("Sent only to {}.", line.origins.join(", "));
    if !line.agents.is_empty() {
        let agents = line.agents.join(", ");
        if line.agents.iter().any(|agent| agent == slug) {
            said.push_str(&format!(" The vault lets only {agents} use it."));
        } else {
            said.push_str(&format!(
                " The vault lets only {agents} use it, not this agent: its jobs will not get it until the vault allows them."
            ));
        }
    }
    said
}

/// Adds `name` to `list` (at its end) or takes it out.
pub(crate) fn set_listed(list: &mut Vec<String>, name: &str, on: bool) {
    let listed = list.iter().any(|item| item == name);
    if on && !listed {
        list.push(name.to_owned());
    } else if !on {
        list.retain(|item| item != name);
    }
}

/// The choices of an MCP server's "Authorization from secret": none, then
/// the secrets the agent may use (`allowed`); a `current` one it may no
/// longer use stays listed, said so, until the person changes it (saving
/// refuses it in the record's words). Each is its value and its label.
pub(crate) fn auth_options(allowed: &[String], current: &str) -> Vec<(String, String)> {
    let mut options = vec![(String::new(), "None: no Authorization header".to_owned())];
    options.extend(
        allowed
            .iter()
            .map(|secret| (secret.clone(), secret.clone())),
    );
    if !current.is_empty() && !allowed.iter().any(|secret| secret == current) {
        options.push((
            current.to_owned(),
            format!("{current} (not among the secrets checked above)"),
        ));
    }
    options
}

/// `scheme://host[:port]` of an http(s) URL, lower-cased, as the vault
/// writes a secret's origins; `None` when `url` is not one.
pub(crate) fn origin_of(url: &str) -> Option<String> {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    (!host.is_empty()).then(|| format!("{scheme}://{}", host.to_ascii_lowercase()))
}

/// Why the server at `url` will not be given the secret `line` as its
/// `Authorization`, when the vault does not send it to the server's origin.
pub(crate) fn auth_problem(url: &str, line: &SecretLine) -> Option<String> {
    let origin = origin_of(url)?;
    (line.known && !line.origins.contains(&origin)).then(|| {
        format!(
            "The vault sends {} only to {}: add {origin} to it in Settings → Secrets, or this server will not be given it.",
            line.name,
            line.origins.join(", ")
        )
    })
}

/// What an agent's row says under its name: its role, its provider and
/// model, and how many skills, secrets and MCP servers it has.
pub(crate) fn summary(agent: &AgentRecord) -> String {
    let role = match agent.role {
        AgentRole::Agent => "Agent",
        AgentRole::Orchestrator => "Orchestrator",
    };
    let model = match (agent.provider.as_str(), agent.model.as_str()) {
        ("", "") => "the chat’s provider and model".to_owned(),
        ("", model) => format!("the chat’s provider, model {model}"),
        (provider, "") => format!("{provider}, its saved model"),
        (provider, model) => format!("{provider}, model {model}"),
    };
    let count = |n: usize, one: &str, many: &str| match n {
        0 => String::new(),
        1 => format!(" · 1 {one}"),
        n => format!(" · {n} {many}"),
    };
    format!(
        "{role} · {model}{}{}{}",
        count(agent.skills.len(), "skill", "skills"),
        count(agent.secrets.len(), "secret", "secrets"),
        count(agent.mcp.len(), "MCP server", "MCP servers"),
    )
}

/// The workspace's agents as the page holds them: read through the runtime
/// worker once storage is open and again at each change of the configuration
/// (another tab's too), for the Agents view and the chat's picker alike.
#[derive(Clone, Copy)]
pub(crate) struct WorkspaceAgents {
    /// The default agent first, then the others by slug.
    pub(crate) list: RwSignal<Vec<AgentRecord>>,
    /// Whether the list has been read.
    pub(crate) loaded: RwSignal<bool>,
    /// Why the list could not be read, the last time it could not.
    pub(crate) problem: RwSignal<Option<ErrorText>>,
}

impl WorkspaceAgents {
    /// Reads the list once storage is open, and follows its changes.
    pub(crate) fn follow(storage: StorageSignals) -> Self {
        let agents = Self {
            list: RwSignal::new(Vec::new()),
            loaded: RwSignal::new(false),
            problem: RwSignal::new(None),
        };
        let read = config_read::<Vec<AgentRecord>>(
            storage,
            "agents.list",
            "The agents could not be read: ",
        );
        Effect::new(move || match read.get() {
            Some(Ok(Some(list))) => {
                agents.list.set(list);
                agents.problem.set(None);
                agents.loaded.set(true);
            }
            Some(Err(problem)) => agents.problem.set(Some(problem)),
            _ => {}
        });
        agents
    }

    /// Agent `slug`, if the workspace has it (not tracked).
    pub(crate) fn find(self, slug: &str) -> Option<AgentRecord> {
        self.list
            .with_untracked(|list| list.iter().find(|agent| agent.slug == slug).cloned())
    }

    fn slugs(self) -> Vec<String> {
        self.list
            .with_untracked(|list| list.iter().map(|agent| agent.slug.clone()).collect())
    }
}

/// One MCP server row of the form, keyed so that typing keeps the row.
#[derive(Clone, Debug, PartialEq)]
struct ServerRow {
    id: usize,
    name: String,
    url: String,
    /// The secret its `Authorization` header comes from; empty: none.
    auth_secret: String,
}

/// The form's fields as signals: loaded from a [`Form`], read back as one.
#[derive(Clone, Copy)]
struct Editor {
    editing: RwSignal<Option<String>>,
    name: RwSignal<String>,
    slug: RwSignal<String>,
    /// The person typed the slug: the name no longer makes it.
    slug_typed: RwSignal<bool>,
    avatar: RwSignal<String>,
    prompt: RwSignal<String>,
    provider: RwSignal<String>,
    model: RwSignal<String>,
    role: RwSignal<AgentRole>,
    team: RwSignal<bool>,
    servers: RwSignal<Vec<ServerRow>>,
    next_row: StoredValue<usize>,
    autonomy: RwSignal<BTreeMap<String, Autonomy>>,
    /// Tools added by name in this form (an MCP server's), listed even while
    /// they follow the mode.
    more_tools: RwSignal<Vec<String>>,
    skills: RwSignal<Vec<String>>,
    secrets: RwSignal<Vec<String>>,
    /// The version the record was read at.
    version: StoredValue<u64>,
}

impl Editor {
    fn new() -> Self {
        Self {
            editing: RwSignal::new(None),
            name: RwSignal::new(String::new()),
            slug: RwSignal::new(String::new()),
            slug_typed: RwSignal::new(false),
            avatar: RwSignal::new(String::new()),
            prompt: RwSignal::new(String::new()),
            provider: RwSignal::new(String::new()),
            model: RwSignal::new(String::new()),
            role: RwSignal::new(AgentRole::Agent),
            team: RwSignal::new(false),
            servers: RwSignal::new(Vec::new()),
            next_row: StoredValue::new(0),
            autonomy: RwSignal::new(BTreeMap::new()),
            more_tools: RwSignal::new(Vec::new()),
            skills: RwSignal::new(Vec::new()),
            secrets: RwSignal::new(Vec::new()),
            version: StoredValue::new(0),
        }
    }

    fn load(self, form: Form) {
        self.slug_typed.set(form.editing.is_some());
        self.editing.set(form.editing);
        self.name.set(form.name);
        self.slug.set(form.slug);
        self.avatar.set(form.avatar);
        self.prompt.set(form.system_prompt);
        self.provider.set(form.provider);
        self.model.set(form.model);
        self.role.set(form.role);
        self.team.set(form.may_change_team);
        self.servers.set(Vec::new());
        for server in form.mcp {
            self.add_server(server);
        }
        self.autonomy.set(form.autonomy);
        self.more_tools.set(Vec::new());
        self.skills.set(form.skills);
        self.secrets.set(form.secrets);
        self.version.set_value(form.version);
    }

    fn read(self) -> Form {
        Form {
            editing: self.editing.get_untracked(),
            name: self.name.get_untracked(),
            slug: self.slug.get_untracked(),
            avatar: self.avatar.get_untracked(),
            system_prompt: self.prompt.get_untracked(),
            provider: self.provider.get_untracked(),
            model: self.model.get_untracked(),
            role: self.role.get_untracked(),
            may_change_team: self.team.get_untracked(),
            mcp: self.servers.with_untracked(|rows| {
                rows.iter()
                    .map(|row| AgentServer {
                        name: row.name.clone(),
                        url: row.url.clone(),
                        auth_secret: Some(row.auth_secret.clone())
                            .filter(|secret| !secret.is_empty()),
                    })
                    .collect()
            }),
            autonomy: self.autonomy.get_untracked(),
            skills: self.skills.get_untracked(),
            secrets: self.secrets.get_untracked(),
            version: self.version.get_value(),
        }
    }

    /// Adds an MCP server row; its id.
    fn add_server(self, server: AgentServer) -> usize {
        let id = self.next_row.get_value();
        self.next_row.set_value(id + 1);
        self.servers.update(|rows| {
            rows.push(ServerRow {
                id,
                name: server.name,
                url: server.url,
                auth_secret: server.auth_secret.unwrap_or_default(),
            });
        });
        id
    }

    fn edit_server(self, id: usize, edit: impl FnOnce(&mut ServerRow)) {
        self.servers.update(|rows| {
            if let Some(row) = rows.iter_mut().find(|row| row.id == id) {
                edit(row);
            }
        });
    }

    /// The name typed: a new agent's slug follows it until the person types one.
    fn set_name(self, name: String) {
        if self.editing.with_untracked(Option::is_none) && !self.slug_typed.get_untracked() {
            self.slug.set(if name.trim().is_empty() {
                String::new()
            } else {
                slug_from_name(&name)
            });
        }
        self.name.set(name);
    }
}

impl Undoable for AgentRecord {
    const UNDO: &'static str = "agent-undo";
    const AFTER_UNDO: &'static str = "agent-new";

    fn remove_op(&self) -> (&'static str, Value) {
        (
            "agents.remove",
            json!({"slug": self.slug, "version": self.version}),
        )
    }

    fn restore_op(&self) -> (&'static str, Value) {
        let record = AgentRecord {
            version: 0,
            ..self.clone()
        };
        ("agents.put", json!(record))
    }

    fn key(&self) -> &str {
        &self.slug
    }

    fn title(&self) -> String {
        format!("{} (`{}`)", self.name, self.slug)
    }
}

/// The Agents view: the list, and the form that writes one agent.
#[component]
pub(crate) fn AgentsPanel(
    storage: StorageSignals,
    agents: WorkspaceAgents,
    providers: ProviderStore,
    /// The tools a run of this page gets (the list Settings shows).
    tools: ReadSignal<Vec<ToolRow>>,
) -> impl IntoView {
    let editor = Editor::new();
    let panel = PanelState::<AgentRecord>::new(PanelNames {
        status: "agents-status",
        action_error: "agents-action-error",
        unavailable: "Storage is not available: agents cannot be kept until it is. Reload the page to try again.",
    });
    let open_form = move |form: Form| {
        editor.load(form);
        panel.open_form("agent-name");
    };
    let close_form = move || {
        panel.close_form();
        focus_soon("agent-new");
    };
    let save = move || {
        let form = editor.read();
        let Some((stores, record)) = panel.begin_save(storage, || form.to_record(&agents.slugs()))
        else {
            return;
        };
        spawn_local(async move {
            match panel
                .finish_save(stores.act("agents.put", json!(record)))
                .await
            {
                Ok(()) => {
                    panel.say(format!("Saved {} (`{}`).", record.name, record.slug));
                    close_form();
                }
                Err(problem) if problem.code.as_deref() == Some("conflict") => {
                    if form.editing.is_none() {
                        panel.form_failed(ErrorText::plain(format!(
                            "There is already an agent `{}` (saved meanwhile, in another tab perhaps): choose another slug.",
                            record.slug
                        )));
                        return;
                    }
                    // Another tab saved it since it was read: show what is kept now.
                    match stores
                        .op::<AgentRecord>("agents.get", json!({"slug": record.slug}))
                        .await
                    {
                        Ok(kept) => {
                            editor.load(Form::of(&kept));
                            panel.form_failed(ErrorText::plain(format!(
                                "`{}` was changed in another tab after you opened it, so your changes were not saved. The form now shows what is kept: make your changes again, then save.",
                                record.slug
                            )));
                        }
                        Err(problem) => panel.form_failed(ErrorText::with_prefix(
                            "Not saved: it was changed elsewhere and could not be read again: ",
                            &problem,
                        )),
                    }
                }
                Err(problem) => {
                    panel.form_failed(ErrorText::with_prefix("Not saved: ", &problem));
                }
            }
        });
    };
    let copy = move |agent: AgentRecord| {
        let Some(stores) = panel.stores(storage) else {
            return;
        };
        let record = duplicate(&agent, &agents.slugs());
        spawn_local(async move {
            match stores.act("agents.put", json!(record)).await {
                Ok(()) => panel.say(format!(
                    "Duplicated {} as {} (`{}`).",
                    agent.name, record.name, record.slug
                )),
                Err(problem) => panel.failed(ErrorText::with_prefix(
                    &format!("`{}` was not duplicated: ", agent.slug),
                    &problem,
                )),
            }
        });
    };
    let remove = move |agent: AgentRecord| {
        panel.remove(storage, agent, move |agent| {
            editor.editing.get_untracked().as_deref() == Some(agent.slug.as_str())
        });
    };
    let state_line = move || {
        if !storage.settled.get() {
            return Some(
                view! { <p class="hint loading" data-testid="loading">"Loading…"</p> }.into_any(),
            );
        }
        if storage.stores.with(Option::is_none) {
            return Some(view! {
                <p class="hint" data-testid="agents-unavailable">"Storage is not available: agents cannot be kept, and the chat uses the default agent."</p>
            }.into_any());
        }
        agents
            .problem
            .get()
            .map(|problem| error_alert("agents-error", problem).into_any())
    };
    view! {
        <section class="agents storage-panel" data-testid="agents-panel" aria-labelledby="agents-title">
            <div class="agents-head">
                <h2 id="agents-title">"Agents"</h2>
                <button type="button" id="agent-new" data-testid="agent-new" disabled=move || storage.stores.with(Option::is_none)
                    on:click=move |_| open_form(Form::new_agent())>"New agent"</button>
            </div>
            <p class="hint">"Each agent has its own instructions, model, tools and MCP servers. Pick one in the chat, beside the message box; an orchestrator hands parts of a job to other agents by their slug."</p>
            {state_line}
            <ul class="agent-list" data-testid="agent-list" aria-label="Agents">
                <For each=move || agents.list.get() key=|agent| (agent.slug.clone(), agent.version) let:agent>
                    <AgentRow agent=agent on_edit=move |agent: AgentRecord| open_form(Form::of(&agent))
                        on_copy=copy on_delete=remove />
                </For>
            </ul>
            {panel.status_line_with_undo(storage)}
            <Show when=move || panel.form_open.get()>
                <AgentForm storage=storage editor=editor agents=agents providers=providers tools=tools saving=panel.saving
                    failure=panel.form_failure on_save=save on_cancel=close_form />
                {move || editor.editing.get().map(|slug| {
                    let name = agents.find(&slug).map_or_else(|| slug.clone(), |agent| agent.name);
                    view! { <schedules::AgentSchedules storage=storage agent=slug name=name /> }
                })}
            </Show>
        </section>
    }
}

/// One agent in the list: its badge, name, slug and summary, with Edit,
/// Duplicate and Delete (the default agent says why it has no Delete).
#[component]
fn AgentRow(
    agent: AgentRecord,
    on_edit: impl Fn(AgentRecord) + Copy + Send + Sync + 'static,
    on_copy: impl Fn(AgentRecord) + Copy + Send + Sync + 'static,
    on_delete: impl Fn(AgentRecord) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let name = agent.name.clone();
    let slug = agent.slug.clone();
    let kept = slug == DEFAULT_AGENT;
    let (edited, copied, removed) = (agent.clone(), agent.clone(), agent.clone());
    view! {
        <li class="agent-row" data-testid="agent-row" data-slug=slug.clone()>
            <span class="agent-badge" aria-hidden="true">{agent.badge()}</span>
            <div class="agent-who">
                <p class="agent-title"><strong data-testid="agent-row-name">{name.clone()}</strong>" "<code data-testid="agent-row-slug">{slug.clone()}</code></p>
                <p class="agent-meta" data-testid="agent-row-meta">{summary(&agent)}</p>
                {kept.then(|| view! {
                    <p class="agent-meta" data-testid="agent-kept">"Cannot be deleted: every workspace has a default agent. Edit it instead."</p>
                })}
            </div>
            <div class="agent-actions">
                <button type="button" class="secondary small" data-testid="agent-edit" aria-label=format!("Edit {name}")
                    on:click=move |_| on_edit(edited.clone())>"Edit"</button>
                <button type="button" class="secondary small" data-testid="agent-duplicate" aria-label=format!("Duplicate {name}")
                    on:click=move |_| on_copy(copied.clone())>"Duplicate"</button>
                {(!kept).then(|| view! {
                    <button type="button" class="secondary small danger" data-testid="agent-delete" aria-label=format!("Delete {name}")
                        on:click=move |_| on_delete(removed.clone())>"Delete"</button>
                })}
            </div>
        </li>
    }
}

/// One line of a checklist of the form (`kind` `skill` or `secret`, which
/// names its ids): the checkbox that puts `name` in `list` or takes it out,
/// the name with `badge` after it, and the note under it (`children`).
#[component]
fn CheckLine(
    kind: &'static str,
    name: String,
    list: RwSignal<Vec<String>>,
    badge: Option<AnyView>,
    children: Children,
) -> impl IntoView {
    let checked = {
        let name = name.clone();
        move || list.with(|listed| listed.contains(&name))
    };
    let toggled = name.clone();
    let on_change = move |event: leptos::ev::Event| {
        let on = event_target_checked(&event);
        list.update(|listed| set_listed(listed, &toggled, on));
    };
    let id = format!("agent-{kind}-{name}");
    let note_id = format!("agent-{kind}-note-{name}");
    view! {
        <div class="agent-check" data-testid=format!("agent-{kind}-line") data-name=name.clone()>
            <label class="inline" for=id.clone()>
                <input type="checkbox" id=id.clone() data-testid=format!("agent-{kind}") data-name=name.clone()
                    aria-describedby=note_id.clone() prop:checked=checked on:change=on_change />
                <code>{name.clone()}</code>
                {badge}
            </label>
            <p class="hint" id=note_id data-testid=format!("agent-{kind}-note")>{children()}</p>
        </div>
    }
}

/// The form that writes one agent.
#[component]
fn AgentForm(
    storage: StorageSignals,
    editor: Editor,
    agents: WorkspaceAgents,
    providers: ProviderStore,
    tools: ReadSignal<Vec<ToolRow>>,
    saving: RwSignal<bool>,
    failure: RwSignal<Option<ErrorText>>,
    on_save: impl Fn() + Copy + Send + Sync + 'static,
    on_cancel: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let editing = move || editor.editing.with(Option::is_some);
    // The skills' catalog and the vault's secrets (names, never values), read
    // when the form opens and again at each change of the configuration.
    let skill_catalog =
        config_read::<Vec<SkillInfo>>(storage, "skills.list", "The skills could not be read: ");
    let vault =
        config_read::<Vec<SecretInfo>>(storage, "secrets.list", "The vault could not be read: ");
    let skill_rows = move || {
        let catalog = match skill_catalog.get() {
            Some(Ok(Some(catalog))) => catalog,
            _ => Vec::new(),
        };
        editor
            .skills
            .with(|assigned| skill_lines(&catalog, assigned))
    };
    let secret_rows = move || {
        let listed = match vault.get() {
            Some(Ok(Some(listed))) => listed,
            _ => Vec::new(),
        };
        editor.secrets.with(|named| secret_lines(&listed, named))
    };
    let skills_state = move || match skill_catalog.get() {
        None => Some(view! { <p class="hint loading">"Reading the skills…"</p> }.into_any()),
        Some(Err(error)) => Some(error_alert("agent-skills-error", error).into_any()),
        _ => None,
    };
    let secrets_state = move || {
        match vault.get() {
        None => Some(view! { <p class="hint loading">"Reading the vault…"</p> }.into_any()),
        Some(Err(error)) => Some(error_alert("agent-secrets-error", error).into_any()),
        Some(Ok(Some(listed))) if listed.is_empty() => Some(
            view! {
                <p class="hint" data-testid="agent-secrets-none">"The vault has no secrets yet. Add one in "
                    <a href="#/settings">"Settings → Secrets"</a>
                    " (its value is written once and never shown again), then check it here."</p>
            }
            .into_any(),
        ),
        _ => None,
    }
    };
    let title = move || match editor.editing.get() {
        None => "New agent".to_owned(),
        Some(slug) => format!(
            "Edit {}",
            agents.find(&slug).map_or(slug, |agent| agent.name)
        ),
    };
    // The providers an agent may name: those kept in the workspace.
    let kept = move || {
        providers
            .entries()
            .into_iter()
            .filter(|entry| entry.origin == Origin::Saved && entry.provider.stored)
            .map(|entry| (entry.provider.name, entry.provider.model))
            .collect::<Vec<_>>()
    };
    let provider_options = move || {
        let kept = kept();
        let chosen = editor.provider.get();
        let mut options = vec![
            view! {
                <option value="" prop:selected=chosen.is_empty()>"The chat’s provider"</option>
            }
            .into_any(),
        ];
        for (name, model) in &kept {
            let label = format!("{name} — {model}");
            options.push(
                view! {
                    <option value=name.clone() prop:selected=*name == chosen>{label}</option>
                }
                .into_any(),
            );
        }
        if !chosen.is_empty() && !kept.iter().any(|(name, _)| *name == chosen) {
            let label = format!("{chosen} (not kept in this workspace)");
            options.push(
                view! { <option value=chosen.clone() prop:selected=true>{label}</option> }
                    .into_any(),
            );
        }
        options.collect_view()
    };
    let model_placeholder = move || {
        let chosen = editor.provider.get();
        if chosen.is_empty() {
            providers.current().map_or_else(
                || "the chat’s model".to_owned(),
                |entry| entry.provider.model,
            )
        } else {
            kept()
                .into_iter()
                .find(|(name, _)| *name == chosen)
                .map(|(_, model)| model)
                .unwrap_or_default()
        }
    };
    let preview = move || {
        let mut agent = AgentRecord::new("", editor.name.get());
        agent.avatar = editor.avatar.get();
        agent.badge()
    };
    let add_server = move |_| {
        let id = editor.add_server(AgentServer {
            name: String::new(),
            url: String::new(),
            auth_secret: None,
        });
        request_animation_frame(move || {
            crate::focus_element(&format!("agent-server-name-{id}"));
        });
    };
    let position = move |id: usize| {
        editor.servers.with(|rows| {
            rows.iter()
                .position(|row| row.id == id)
                .map_or(0, |at| at + 1)
        })
    };
    let tool_rows = move || {
        let mut rows = editor
            .autonomy
            .with(|autonomy| tools.with(|tools| tool_names(tools, autonomy)));
        editor.more_tools.with(|more| {
            for tool in more {
                if !rows.iter().any(|(name, _)| name == tool) {
                    rows.push((tool.clone(), String::new()));
                }
            }
        });
        rows
    };
    let tools_summary = move || {
        let listed = tool_rows().len();
        let set = editor.autonomy.with(BTreeMap::len);
        match set {
            0 => format!("Each tool’s setting ({listed} tools, all following the mode)"),
            1 => format!("Each tool’s setting ({listed} tools, 1 set here)"),
            n => format!("Each tool’s setting ({listed} tools, {n} set here)"),
        }
    };
    let another = RwSignal::new(String::new());
    let add_tool = move || {
        let name = another.get_untracked().trim().to_owned();
        if name.is_empty() {
            return;
        }
        if !editor
            .more_tools
            .with_untracked(|more| more.contains(&name))
        {
            editor.more_tools.update(|more| more.push(name));
        }
        another.set(String::new());
    };
    view! {
        <form class="agent-form" data-testid="agent-form" aria-labelledby="agent-form-title" novalidate
            on:submit=move |event| { event.prevent_default(); on_save(); } on:keydown=escape_cancels(on_cancel)>
            <h3 id="agent-form-title">{title}</h3>
            <div class="agent-fields">
                <label for="agent-name">"Name"</label>
                <input id="agent-name" data-testid="agent-name" type="text" maxlength="100" autocomplete="off" required
                    prop:value=editor.name on:input=move |event| editor.set_name(event_target_value(&event)) />

                <label for="agent-slug">"Slug"</label>
                <div class="agent-field">
                    <input id="agent-slug" data-testid="agent-slug" type="text" maxlength="64" autocomplete="off" spellcheck="false"
                        aria-describedby="agent-slug-hint" readonly=editing prop:value=editor.slug
                        on:input=move |event| { editor.slug_typed.set(true); editor.slug.set(event_target_value(&event)); } />
                    <p id="agent-slug-hint" class="hint">{move || if editing() {
                        "Fixed once saved: other agents hand it work by this handle."
                    } else {
                        "The handle other agents hand it work by: a-z, 0-9 and -. Made from the name until you change it."
                    }}</p>
                </div>

                <label for="agent-avatar">"Avatar"</label>
                <div class="agent-field agent-avatar-field">
                    <span class="agent-badge" aria-hidden="true">{preview}</span>
                    <input id="agent-avatar" data-testid="agent-avatar" type="text" maxlength="8" autocomplete="off"
                        aria-describedby="agent-avatar-hint" prop:value=editor.avatar
                        on:input=move |event| editor.avatar.set(event_target_value(&event)) />
                    <p id="agent-avatar-hint" class="hint">"An emoji or up to two initials; empty: the name’s first letter."</p>
                </div>

                <label for="agent-prompt">"System prompt"</label>
                <div class="agent-field">
                    <textarea id="agent-prompt" data-testid="agent-prompt" rows="6" aria-describedby="agent-prompt-hint"
                        prop:value=editor.prompt on:input=move |event| editor.prompt.set(event_target_value(&event))></textarea>
                    <p id="agent-prompt-hint" class="hint">"Layered before Kiln’s own contract in every job of this agent: it adds to the contract (how the agent acts through tools and programs) and cannot replace it."</p>
                </div>

                <label for="agent-provider">"Provider"</label>
                <div class="agent-field">
                    <select id="agent-provider" data-testid="agent-provider" aria-describedby="agent-provider-hint"
                        on:change=move |event| editor.provider.set(event_target_value(&event))>{provider_options}</select>
                    <p id="agent-provider-hint" class="hint">"One kept in Settings → Providers, or whichever the chat has chosen."</p>
                </div>

                <label for="agent-model">"Model"</label>
                <div class="agent-field">
                    <input id="agent-model" data-testid="agent-model" type="text" autocomplete="off" spellcheck="false"
                        aria-describedby="agent-model-hint" placeholder=model_placeholder prop:value=editor.model
                        on:input=move |event| editor.model.set(event_target_value(&event)) />
                    <p id="agent-model-hint" class="hint">"Empty: the provider’s saved model."</p>
                </div>
            </div>

            <fieldset class="agent-role" data-testid="agent-role">
                <legend>"Role and team"</legend>
                <label class="inline"><input type="radio" name="agent-role" value="agent" data-testid="agent-role-agent"
                    prop:checked=move || editor.role.get() == AgentRole::Agent
                    on:change=move |_| editor.role.set(AgentRole::Agent) />"Agent: does the job itself"</label>
                <label class="inline"><input type="radio" name="agent-role" value="orchestrator" data-testid="agent-role-orchestrator"
                    aria-describedby="agent-role-hint" prop:checked=move || editor.role.get() == AgentRole::Orchestrator
                    on:change=move |_| editor.role.set(AgentRole::Orchestrator) />"Orchestrator"</label>
                <p id="agent-role-hint" class="hint">"An orchestrator may also hand parts of a job to the workspace’s other agents, by their slug."</p>
                <label class="inline"><input type="checkbox" id="agent-team" data-testid="agent-team" aria-describedby="agent-team-hint"
                    prop:checked=editor.team on:change=move |event| editor.team.set(event_target_checked(&event)) />"May change its team"</label>
                <p id="agent-team-hint" class="hint">"Lets it add, attach or detach team members, where the workspace allows it. Off unless you turn it on."</p>
            </fieldset>

            <fieldset class="agent-skills" data-testid="agent-skills">
                <legend>"Skills"</legend>
                <p class="hint" id="agent-skills-hint">"Every agent sees the catalog, one line per skill, and loads what it needs. A skill assigned here is marked as this agent’s, and it unlocks the built-in tools it names for this agent’s jobs."</p>
                {skills_state}
                <For each=skill_rows key=|line| line.clone() let:line>
                    {
                        let unlocks = (!line.required_tools.is_empty()).then(|| {
                            let tools = line.required_tools.iter().enumerate().map(|(at, tool)| view! {
                                {(at > 0).then_some(", ")}<code>{tool.clone()}</code>
                            }).collect_view();
                            view! { " Unlocks "{tools}"." }
                        });
                        let badge = line.system.then(|| view! {
                            <span class="badge" data-testid="agent-skill-system" title="Shipped with Kiln, read-only">"system"</span>
                        }.into_any());
                        view! {
                            <CheckLine kind="skill" name=line.name.clone() list=editor.skills badge=badge>
                                {if line.known { line.description.clone() } else { "Not in the catalog any more: it unlocks nothing. Uncheck it.".to_owned() }}
                                {unlocks}
                            </CheckLine>
                        }
                    }
                </For>
            </fieldset>

            <fieldset class="agent-secrets" data-testid="agent-secrets">
                <legend>"Secrets"</legend>
                <p class="hint">"The vault’s secrets this agent’s jobs may use, by name: a program passes one to "<code>"http_request"</code>" by reference, and an MCP server below can take one as its Authorization. The value never reaches the page, the model or the history. A secret that names its own agents in the vault goes only to those."</p>
                {secrets_state}
                <For each=secret_rows key=|line| line.clone() let:line>
                    {
                        let name = line.name.clone();
                        let reach = move || secret_reach(&line, &editor.slug.get());
                        view! { <CheckLine kind="secret" name=name list=editor.secrets badge=None>{reach}</CheckLine> }
                    }
                </For>
            </fieldset>

            <fieldset class="agent-servers" data-testid="agent-servers">
                <legend>"MCP servers"</legend>
                <p class="hint">"Each job of this agent connects to these (Streamable HTTP). A server’s tools are named "<code>"name_tool"</code>". “Authorization from secret” sends "<code>"Authorization: Bearer …"</code>" with one of the secrets checked above; the vault must allow the server’s origin for it."</p>
                <ul>
                    <For each=move || editor.servers.get() key=|row| row.id let:row>
                        {
                            let id = row.id;
                            let name = move || editor.servers.with(|rows| rows.iter().find(|row| row.id == id).map(|row| row.name.clone()).unwrap_or_default());
                            let url = move || editor.servers.with(|rows| rows.iter().find(|row| row.id == id).map(|row| row.url.clone()).unwrap_or_default());
                            let auth = move || editor.servers.with(|rows| rows.iter().find(|row| row.id == id).map(|row| row.auth_secret.clone()).unwrap_or_default());
                            let auth_choices = move || {
                                let current = auth();
                                editor.secrets.with(|allowed| auth_options(allowed, &current))
                                    .into_iter()
                                    .map(|(value, label)| {
                                        let selected = value == current;
                                        view! { <option value=value prop:selected=selected>{label}</option> }
                                    })
                                    .collect_view()
                            };
                            let auth_warning = move || {
                                let chosen = auth();
                                if chosen.is_empty() {
                                    return None;
                                }
                                let line = secret_rows().into_iter().find(|line| line.name == chosen)?;
                                let problem = auth_problem(&url(), &line)?;
                                Some(view! { <p class="hint" data-testid="agent-server-auth-problem">{said(problem)}</p> })
                            };
                            let auth_id = format!("agent-server-auth-{id}");
                            view! {
                                <li class="agent-server-item" data-testid="agent-server">
                                  <div class="agent-server">
                                    <input id=format!("agent-server-name-{id}") data-testid="agent-server-name" type="text" autocomplete="off" spellcheck="false"
                                        placeholder="docs" aria-label=move || format!("Name of MCP server {}", position(id))
                                        prop:value=name on:input=move |event| editor.edit_server(id, |row| row.name = event_target_value(&event)) />
                                    <input data-testid="agent-server-url" type="url" autocomplete="off" spellcheck="false"
                                        placeholder="https://example.com/mcp" aria-label=move || format!("URL of MCP server {}", position(id))
                                        prop:value=url on:input=move |event| editor.edit_server(id, |row| row.url = event_target_value(&event)) />
                                    <button type="button" class="secondary small" data-testid="agent-server-remove"
                                        aria-label=move || format!("Remove MCP server {}", position(id))
                                        on:click=move |_| {
                                            editor.servers.update(|rows| rows.retain(|row| row.id != id));
                                            focus_soon("agent-server-add");
                                        }>"Remove"</button>
                                  </div>
                                  <div class="agent-server-auth">
                                    <label class="inline" for=auth_id.clone()>"Authorization from secret"</label>
                                    " "
                                    <select id=auth_id data-testid="agent-server-auth"
                                        on:change=move |event| editor.edit_server(id, |row| row.auth_secret = event_target_value(&event))>
                                        {auth_choices}
                                    </select>
                                    {auth_warning}
                                  </div>
                                </li>
                            }
                        }
                    </For>
                </ul>
                <button type="button" class="secondary small" id="agent-server-add" data-testid="agent-server-add" on:click=add_server>"Add a server"</button>
            </fieldset>

            <fieldset class="agent-tools" data-testid="agent-tools">
                <legend>"Tools"</legend>
                <p class="hint">"What this agent’s jobs may do with each tool. “Follow the mode” leaves it to the permission mode set in Settings."</p>
                <details class="agent-tool-list" data-testid="agent-tool-list">
                    <summary>{tools_summary}</summary>
                    <div class="tool-scroll">
                        <table class="tool-table">
                            <thead><tr><th scope="col">"Tool"</th><th scope="col">"Setting"</th></tr></thead>
                            <tbody>
                                <For each=tool_rows key=|(name, _)| name.clone() let:((name, description))>
                                    {
                                        let unblockable = name == UNBLOCKABLE;
                                        let tool = name.clone();
                                        let current = move || editor.autonomy.with(|autonomy| autonomy.get(&tool).map_or("", |setting| setting.as_str()));
                                        let tool = name.clone();
                                        let on_change = move |event: leptos::ev::Event| {
                                            let value = event_target_value(&event);
                                            editor.autonomy.update(|autonomy| match value.parse::<Autonomy>() {
                                                Ok(Autonomy::Block) if unblockable => {}
                                                Ok(setting) => {
                                                    autonomy.insert(tool.clone(), setting);
                                                }
                                                Err(_) => {
                                                    autonomy.remove(&tool);
                                                }
                                            });
                                        };
                                        let reason_id = format!("agent-tool-reason-{name}");
                                        view! {
                                            <tr data-testid=format!("agent-tool-{name}")>
                                                <td>
                                                    <code>{name.clone()}</code>
                                                    {(!description.is_empty()).then(|| view! { <div class="description">{description.clone()}</div> })}
                                                    {unblockable.then(|| view! {
                                                        <p class="hint unblockable" id=reason_id.clone() data-testid="agent-unblockable">{UNBLOCKABLE_REASON}</p>
                                                    })}
                                                </td>
                                                <td>
                                                    <select aria-label=format!("Setting for {name}") data-testid=format!("agent-setting-{name}")
                                                        aria-describedby=unblockable.then(|| reason_id.clone()) prop:value=current on:change=on_change>
                                                        <option value="">"Follow the mode"</option>
                                                        <option value="auto">"Run without asking"</option>
                                                        <option value="ask">"Ask"</option>
                                                        <option value="block" disabled=unblockable>"Block"</option>
                                                    </select>
                                                </td>
                                            </tr>
                                        }
                                    }
                                </For>
                            </tbody>
                        </table>
                    </div>
                </details>
                <div class="agent-more-tool">
                    <label for="agent-more-tool">"Another tool"</label>
                    <input id="agent-more-tool" data-testid="agent-more-tool" type="text" autocomplete="off" spellcheck="false"
                        placeholder="docs_search" aria-describedby="agent-more-tool-hint" prop:value=another
                        on:input=move |event| another.set(event_target_value(&event))
                        on:keydown=move |event: KeyboardEvent| if event.key() == "Enter" { event.prevent_default(); add_tool(); } />
                    <button type="button" class="secondary small" data-testid="agent-more-tool-add" on:click=move |_| add_tool()>"Add to the table"</button>
                    <p id="agent-more-tool-hint" class="hint">"A tool the table does not list, such as one of this agent’s MCP servers’ tools."</p>
                </div>
            </fieldset>

            {move || failure.get().map(|error| error_alert("agent-form-error", error))}
            <div class="actions">
                <button type="submit" data-testid="agent-save" disabled=saving>{move || if saving.get() { "Saving…" } else { "Save" }}</button>
                <button type="button" class="secondary" data-testid="agent-cancel" on:click=move |_| on_cancel()>"Cancel"</button>
            </div>
        </form>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_types::permission::Category;

    fn taken(slugs: &[&str]) -> Vec<String> {
        slugs.iter().map(|slug| (*slug).to_owned()).collect()
    }

    fn server(name: &str, url: &str, auth_secret: Option<&str>) -> AgentServer {
        AgentServer {
            name: name.into(),
            url: url.into(),
            auth_secret: auth_secret.map(str::to_owned),
        }
    }

    #[test]
    fn a_new_agents_slug_comes_from_its_name() {
        let long = "x".repeat(80);
        let cases = [
            ("Research helper", "research-helper"),
            ("  Ada   Lovelace!  ", "ada-lovelace"),
            ("R2-D2", "r2-d2"),
            ("--Docs--bot--", "docs-bot"),
            ("Café crème", "cafe-creme"),
            ("Ærøskøbing", "aeroskobing"),
            ("🦊", "agent"),
            ("", "agent"),
            (long.as_str(), &long[..64]),
        ];
        for (name, slug) in cases {
            assert_eq!(slug_from_name(name), slug, "{name:?}");
            assert_eq!(
                kiln_types::profile::check_slug(&slug_from_name(name)),
                Ok(())
            );
        }
        // A cut never ends on a dash.
        let cut = format!("{}-b", "a".repeat(63));
        assert_eq!(slug_from_name(&cut), "a".repeat(63));
    }

    #[test]
    fn a_duplicate_is_named_a_copy_with_the_first_free_slug() {
        let mut ada = AgentRecord::new("ada", "Ada");
        ada.system_prompt = "Be brief.".into();
        ada.version = 7;
        let copy = duplicate(&ada, &taken(&["default", "ada"]));
        assert_eq!(
            (copy.slug.as_str(), copy.name.as_str(), copy.version),
            ("ada-copy", "Ada (copy)", 0)
        );
        assert_eq!(copy.system_prompt, "Be brief.");
        assert_eq!(
            duplicate(&ada, &taken(&["ada", "ada-copy"])).slug,
            "ada-copy-2"
        );
        assert_eq!(
            duplicate(&ada, &taken(&["ada", "ada-copy", "ada-copy-2"])).slug,
            "ada-copy-3"
        );
        // A long slug and name are cut to leave room: the copy passes its checks.
        let long = AgentRecord::new("a".repeat(64), "N".repeat(100));
        let copy = duplicate(&long, &taken(&[]));
        assert_eq!(copy.slug, format!("{}-copy", "a".repeat(59)));
        assert_eq!(copy.name.chars().count(), 100);
        assert!(copy.name.ends_with(" (copy)"));
        assert_eq!(copy.check(), Ok(()));
    }

    #[test]
    fn the_form_makes_the_record_it_shows() {
        let mut stored = AgentRecord::new("ada", "Ada");
        stored.skills = vec!["web".into()];
        stored.secrets = vec!["DOCS_KEY".into()];
        stored.autonomy = [("file_write".to_owned(), Autonomy::Block)].into();
        stored.version = 3;
        let mut form = Form::of(&stored);
        assert_eq!(form.editing.as_deref(), Some("ada"));
        form.name = "  Ada L.  ".into();
        form.avatar = " 🦊 ".into();
        form.system_prompt = "You answer in French.\n".into();
        form.model = " gpt-4o-mini ".into();
        form.role = AgentRole::Orchestrator;
        form.mcp = vec![
            server("docs", " http://127.0.0.1:3001/mcp ", None),
            server(" ", "", Some(" ")),
        ];
        let record = form
            .to_record(&taken(&["default", "ada"]))
            .expect("a good form");
        assert_eq!(
            record,
            AgentRecord {
                slug: "ada".into(),
                name: "Ada L.".into(),
                avatar: "🦊".into(),
                system_prompt: "You answer in French.\n".into(),
                provider: String::new(),
                model: "gpt-4o-mini".into(),
                skills: vec!["web".into()],
                mcp: vec![AgentServer {
                    name: "docs".into(),
                    url: "http://127.0.0.1:3001/mcp".into(),
                    auth_secret: None,
                }],
                secrets: vec!["DOCS_KEY".into()],
                autonomy: [("file_write".to_owned(), Autonomy::Block)].into(),
                role: AgentRole::Orchestrator,
                may_change_team: false,
                version: 3,
            }
        );
        // What the record's own checks refuse is said in their words.
        let mut bad = form.clone();
        bad.mcp = vec![server("Docs", "http://x/mcp", None)];
        assert!(
            bad.to_record(&taken(&[]))
                .unwrap_err()
                .contains("`mcp`: server name `Docs`")
        );
        let mut bad = form.clone();
        bad.autonomy.insert(UNBLOCKABLE.into(), Autonomy::Block);
        assert!(
            bad.to_record(&taken(&[]))
                .unwrap_err()
                .contains("return_result cannot be blocked")
        );
        // A new agent may not take a slug the workspace has.
        let mut fresh = Form::new_agent();
        assert_eq!(fresh.editing, None);
        fresh.name = "Ada".into();
        fresh.slug = "ada".into();
        assert_eq!(
            fresh.to_record(&taken(&["default", "ada"])).unwrap_err(),
            "There is already an agent `ada`: choose another slug."
        );
        assert_eq!(
            fresh
                .to_record(&taken(&["default"]))
                .map(|record| record.version),
            Ok(0)
        );
    }

    #[test]
    fn a_servers_authorization_secret_is_kept_through_the_form() {
        let mut stored = AgentRecord::new("ada", "Ada");
        stored.secrets = vec!["DOCS_TOKEN".into(), "OTHER".into()];
        stored.skills = vec!["web-research".into()];
        stored.mcp = vec![
            AgentServer {
                name: "docs".into(),
                url: "http://127.0.0.1:3001/mcp".into(),
                auth_secret: Some("DOCS_TOKEN".into()),
            },
            AgentServer {
                name: "open".into(),
                url: "http://127.0.0.1:3002/mcp".into(),
                auth_secret: None,
            },
        ];
        stored.version = 2;
        let mut form = Form::of(&stored);
        assert_eq!(
            form.to_record(&taken(&["default", "ada"])),
            Ok(stored.clone())
        );
        // Chosen in the form: trimmed; an empty choice is no header.
        form.mcp[0].auth_secret = Some(" OTHER ".into());
        form.mcp[1].auth_secret = Some(String::new());
        let record = form.to_record(&taken(&[])).expect("a good form");
        assert_eq!(record.mcp[0].auth_secret.as_deref(), Some("OTHER"));
        assert_eq!(record.mcp[1].auth_secret, None);
        // A secret the agent may not use is refused in the record's words.
        form.secrets = vec!["DOCS_TOKEN".into()];
        assert_eq!(
            form.to_record(&taken(&[])).unwrap_err(),
            "agent `ada`: MCP server `docs` sends the secret `OTHER`, which the agent's `secrets` does not name"
        );
    }

    #[test]
    fn the_checklists_list_the_catalog_then_what_only_the_agent_names() {
        let skill = |name: &str, system: bool, tools: &[&str]| SkillInfo {
            name: name.into(),
            description: format!("{name} helps."),
            system,
            required_tools: tools.iter().map(|tool| (*tool).to_owned()).collect(),
        };
        let lines = skill_lines(
            &[
                skill("web-research", true, &["http_request"]),
                skill("packing", false, &[]),
            ],
            &taken(&["gone", "packing"]),
        );
        let names: Vec<(&str, bool, bool)> = lines
            .iter()
            .map(|line| (line.name.as_str(), line.system, line.known))
            .collect();
        assert_eq!(
            names,
            [
                ("web-research", true, true),
                ("packing", false, true),
                ("gone", false, false)
            ]
        );
        assert_eq!(lines[0].required_tools, ["http_request"]);

        let secret = |name: &str, agents: &[&str]| SecretInfo {
            name: name.into(),
            origins: vec!["https://api.github.com".into(), "http://127.0.0.1:9".into()],
            agents: agents.iter().map(|agent| (*agent).to_owned()).collect(),
            set_ms: 1,
            used_ms: None,
            version: 1,
        };
        let lines = secret_lines(
            &[
                secret("GITHUB_TOKEN", &[]),
                secret("DOCS_TOKEN", &["ada", "bob"]),
            ],
            &taken(&["OLD_KEY"]),
        );
        let known: Vec<(&str, bool)> = lines
            .iter()
            .map(|line| (line.name.as_str(), line.known))
            .collect();
        assert_eq!(
            known,
            [
                ("GITHUB_TOKEN", true),
                ("DOCS_TOKEN", true),
                ("OLD_KEY", false)
            ]
        );
        assert_eq!(
            secret_reach(&lines[0], "ada"),
            "Sent only to https://api.github.com, http://127.0.0.1:9."
        );
        assert_eq!(
            secret_reach(&lines[1], "ada"),
            "Sent only to https://api.github.com, http://127.0.0.1:9. The vault lets only ada, bob use it."
        );
        assert!(
            secret_reach(&lines[1], "carol")
                .ends_with("not this agent: its jobs will not get it until the vault allows them."),
            "{}",
            secret_reach(&lines[1], "carol")
        );
        assert!(secret_reach(&lines[2], "ada").starts_with("Not in the vault"));

        // Checking keeps the order things were checked in; unchecking takes out.
        let mut list = taken(&["a"]);
        set_listed(&mut list, "b", true);
        set_listed(&mut list, "a", true);
        assert_eq!(list, ["a", "b"]);
        set_listed(&mut list, "a", false);
        set_listed(&mut list, "z", false);
        assert_eq!(list, ["b"]);
    }

    #[test]
    fn a_servers_authorization_offers_the_checked_secrets_and_says_a_wrong_origin() {
        let pair = |value: &str, label: &str| (value.to_owned(), label.to_owned());
        assert_eq!(
            auth_options(&taken(&["DOCS_TOKEN"]), ""),
            [
                pair("", "None: no Authorization header"),
                pair("DOCS_TOKEN", "DOCS_TOKEN")
            ]
        );
        assert_eq!(
            auth_options(&[], "DOCS_TOKEN")[1],
            pair(
                "DOCS_TOKEN",
                "DOCS_TOKEN (not among the secrets checked above)"
            )
        );
        let cases = [
            ("http://127.0.0.1:3001/mcp", Some("http://127.0.0.1:3001")),
            (
                " HTTPS://Docs.Example.com/mcp?x=1 ",
                Some("https://docs.example.com"),
            ),
            (
                "https://user@host.example#top",
                Some("https://host.example"),
            ),
            ("ftp://host/mcp", None),
            ("docs.example.com/mcp", None),
            ("https:///mcp", None),
        ];
        for (url, origin) in cases {
            assert_eq!(origin_of(url).as_deref(), origin, "{url}");
        }
        let line = SecretLine {
            name: "DOCS_TOKEN".into(),
            origins: vec!["http://127.0.0.1:3001".into()],
            agents: Vec::new(),
            known: true,
        };
        assert_eq!(auth_problem("http://127.0.0.1:3001/mcp", &line), None);
        assert_eq!(
            auth_problem("http://127.0.0.1:4000/mcp", &line).as_deref(),
            Some(
                "The vault sends DOCS_TOKEN only to http://127.0.0.1:3001: add http://127.0.0.1:4000 to it in Settings → Secrets, or this server will not be given it."
            )
        );
        // A URL still being typed says nothing yet.
        assert_eq!(auth_problem("http://", &line), None);
    }

    #[test]
    fn the_tool_table_lists_the_catalog_then_return_result_then_other_settings() {
        let row = |name: &str| ToolRow {
            name: name.into(),
            description: format!("{name}'s words"),
            category: Category::Read,
            module: String::new(),
        };
        let autonomy: BTreeMap<String, Autonomy> = [
            ("docs_search".to_owned(), Autonomy::Ask),
            ("echo".to_owned(), Autonomy::Auto),
        ]
        .into();
        let names: Vec<String> = tool_names(&[row("echo"), row("file_write")], &autonomy)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            names,
            ["echo", "file_write", "return_result", "docs_search"]
        );
        let listed = tool_names(&[row("return_result")], &BTreeMap::new());
        assert_eq!(
            listed,
            [(
                "return_result".to_owned(),
                "return_result's words".to_owned()
            )]
        );
    }

    #[test]
    fn a_reply_is_headed_with_the_agents_own_provider_and_model() {
        let saved = |name: &str| (name == "aimock").then(|| "gpt-4o".to_owned());
        let header = |provider: &str, model: &str| {
            let mut agent = AgentRecord::new("ada", "Ada");
            agent.provider = provider.into();
            agent.model = model.into();
            reply_header(Some(&agent), "chat", "chat-model", saved)
        };
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(
            reply_header(None, "chat", "chat-model", saved),
            pair("chat", "chat-model")
        );
        assert_eq!(header("", ""), pair("chat", "chat-model"));
        assert_eq!(header("", "small"), pair("chat", "small"));
        assert_eq!(header("aimock", ""), pair("aimock", "gpt-4o"));
        assert_eq!(
            header("aimock", "gpt-4o-mini"),
            pair("aimock", "gpt-4o-mini")
        );
        assert_eq!(header("gone", ""), pair("gone", ""));
    }

    #[test]
    fn another_agents_turn_carries_its_slug_and_none_of_the_pages_tool_settings_or_servers() {
        let session = json!({
            "agent": DEFAULT_AGENT,
            "permission": {"mode": "default", "autonomy": {"echo": "auto"}, "brake": true},
            "mcp": {"docs": {"url": "http://127.0.0.1:3001/mcp"}},
        });
        let mut request = session.clone();
        for_agent(&mut request, DEFAULT_AGENT);
        assert_eq!(request, session);
        for_agent(&mut request, "ada");
        assert_eq!(
            request,
            json!({
                "agent": "ada",
                "permission": {"mode": "default", "autonomy": {}, "brake": true},
                "mcp": {},
            })
        );
    }

    #[test]
    fn a_row_says_the_role_the_provider_and_model_and_the_servers() {
        let mut agent = AgentRecord::new("ada", "Ada");
        assert_eq!(summary(&agent), "Agent · the chat’s provider and model");
        agent.role = AgentRole::Orchestrator;
        agent.provider = "aimock".into();
        agent.mcp = vec![AgentServer {
            name: "docs".into(),
            url: "http://127.0.0.1:3001/mcp".into(),
            auth_secret: None,
        }];
        assert_eq!(
            summary(&agent),
            "Orchestrator · aimock, its saved model · 1 MCP server"
        );
        agent.model = "gpt-4o".into();
        agent.mcp.push(agent.mcp[0].clone());
        assert_eq!(
            summary(&agent),
            "Orchestrator · aimock, model gpt-4o · 2 MCP servers"
        );
        agent.provider.clear();
        assert!(summary(&agent).contains("the chat’s provider, model gpt-4o"));
        agent.skills = vec!["web-research".into()];
        agent.secrets = vec!["A".into(), "B".into()];
        assert_eq!(
            summary(&agent),
            "Orchestrator · the chat’s provider, model gpt-4o · 1 skill · 2 secrets · 2 MCP servers"
        );
    }

    #[test]
    fn a_choice_of_an_agent_that_is_gone_falls_back_to_the_default() {
        let agents = vec![AgentRecord::default_agent(), AgentRecord::new("ada", "Ada")];
        assert_eq!(settle_choice("ada", &agents, true), "ada");
        assert_eq!(settle_choice("gone", &agents, true), DEFAULT_AGENT);
        // Until the list is read, a thread's agent is taken at its word.
        assert_eq!(settle_choice("gone", &[], false), "gone");
    }
}
