//! The records a workspace keeps, as they cross to the page: memories, jobs,
//! history hits, run-memory entries, file listings, the committed changes the
//! feed reports, and the configuration the app edits (settings, agents, a
//! provider without its key). `kiln-store` keeps them; the runtime worker
//! answers storage operations with them; the app reads them back typed.
//! Every record carries its `version`, the compare-and-swap token a later
//! edit or removal names.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The agent a memory belongs to when none is named.
pub const DEFAULT_AGENT: &str = "default";

/// One memory, as stored and as printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub id: String,
    pub text: String,
    pub agent: String,
    /// How many times it was marked helpful.
    #[serde(default)]
    pub helpful: u32,
    #[serde(default)]
    pub outdated: bool,
    pub created_ms: u64,
    #[serde(default)]
    pub updated_ms: u64,
    /// The record's version (compare-and-swap for edits); not stored.
    #[serde(default)]
    pub version: u64,
}

/// A rating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    Helpful,
    Outdated,
}

impl std::str::FromStr for Mark {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "helpful" => Ok(Mark::Helpful),
            "outdated" => Ok(Mark::Outdated),
            other => Err(format!(
                "`{other}` is not a mark; expected `helpful` or `outdated`"
            )),
        }
    }
}

/// One job: a program run, a chat turn, an agent's job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub id: String,
    /// `program`, `chat` or `agent`.
    pub kind: String,
    pub agent: String,
    pub title: String,
    /// `running`, then `ok`, `error` or `cancelled`; `interrupted` when its
    /// owner ended before it did.
    pub status: String,
    /// The program or the prompt.
    #[serde(default)]
    pub input: String,
    /// The result or the error, as text.
    #[serde(default)]
    pub output: String,
    pub started_ms: u64,
    #[serde(default)]
    pub finished_ms: Option<u64>,
    /// The runtime that ran it ((`kiln_store::custody`)); empty in records
    /// written before owners were kept.
    #[serde(default)]
    pub owner: String,
    /// The codemode run's id, for a program run called with a key (a retry
    /// with the same key is the same run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// A keyed run's `tool-result/v1` object once it ended, so a retry or a
    /// `late_results` after the process that ran it restarted gets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// The conversation an agent turn was kept in ([`Thread`]): History opens it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    #[serde(default)]
    pub version: u64,
}

/// A `search_history` hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryHit {
    /// `job` or `message`.
    pub kind: String,
    /// The job's id, or the message's thread id.
    pub id: String,
    pub agent: String,
    pub title: String,
    /// The lines that matched, shortened.
    pub excerpt: String,
    pub created_ms: u64,
    pub score: f64,
}

/// A conversation: its messages are [`ThreadMessage`]s keyed under its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub id: String,
    /// The first message, cut, until the person renames it ([`Thread::titled`]).
    pub title: String,
    pub agent: String,
    pub created_ms: u64,
    pub updated_ms: u64,
    #[serde(default)]
    pub n_messages: u64,
    /// The person named it: a later title from the model leaves it alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub titled: bool,
    /// Kept at the top of the list.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// The provider (its kept name) and model its last turn used.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// Deleted at this time: hidden from the list, restorable until the
    /// store purges it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_ms: Option<u64>,
    /// The record's version (compare-and-swap for edits); not stored.
    #[serde(default)]
    pub version: u64,
}

impl Thread {
    /// A new, empty thread made at `now_ms`: not pinned, titled from its first
    /// message until the person renames it.
    #[must_use]
    pub fn new(id: String, title: String, agent: String, now_ms: u64) -> Self {
        Self {
            id,
            title,
            agent,
            created_ms: now_ms,
            updated_ms: now_ms,
            n_messages: 0,
            titled: false,
            pinned: false,
            provider: String::new(),
            model: String::new(),
            deleted_ms: None,
            version: 0,
        }
    }
}

/// One message of a thread as the thread shows it and the model reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadMessage {
    pub thread_id: String,
    /// 1-based within the thread.
    pub seq: u64,
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// What was said (an agent turn's final reply), which the history's
    /// search finds.
    pub text: String,
    pub created_ms: u64,
    /// An agent turn's steps as the thread shows them: its events, each run
    /// of text deltas joined into one, ending with `done`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<crate::agent::AgentEvent>,
    /// How this turn changed what the model reads next; absent when it left
    /// it as it was (a turn that failed or was stopped before any answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextChange>,
    /// The turn could not run or ended without its answer: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<TurnFailure>,
    /// The provider (its kept name) and model that answered an agent turn.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
}

/// How one turn changed the conversation the model reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "change", content = "messages", rename_all = "snake_case")]
pub enum ContextChange {
    /// These messages follow what it read before (the person's message first).
    Append(Vec<crate::chat::Message>),
    /// It reads these instead (the turn compacted what came before).
    Replace(Vec<crate::chat::Message>),
}

/// Why a turn has no answer, as the thread says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnFailure {
    /// A stable code (`bad_request`, `runtime_gone`, …).
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// A thread opened: its record, its messages in order, and what the model
/// reads at the next turn (the messages' context changes folded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    pub thread: Thread,
    pub messages: Vec<ThreadMessage>,
    pub context: Vec<crate::chat::Message>,
}

impl Conversation {
    /// What the model reads after `messages`: their context changes in order.
    #[must_use]
    pub fn fold(messages: &[ThreadMessage]) -> Vec<crate::chat::Message> {
        let mut context = Vec::new();
        for message in messages {
            match &message.context {
                Some(ContextChange::Append(more)) => context.extend(more.iter().cloned()),
                Some(ContextChange::Replace(all)) => context.clone_from(all),
                None => {}
            }
        }
        context
    }
}

/// An entry's metadata: what `list_shared` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryMeta {
    pub key: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// `step_result`, `task_result`, `input` or `shared` unless the writer says.
    pub kind: String,
    /// The value's size as JSON.
    pub bytes: u64,
    pub created_ms: u64,
}

/// The largest file `file_write` and `workspace.write` take.
pub const MAX_FILE_BYTES: usize = 16 * 1024 * 1024;

/// One entry of a folder listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub path: String,
    pub is_dir: bool,
    pub size: u64,
    pub modified_ms: Option<u64>,
}

/// The tables. Their names are the IndexedDB object store names and the
/// names in the on-disk log, so they never change once shipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    /// Durable memories, keyed by id (`m-<created ms>-<random>`).
    Memories,
    /// Run memory entries, keyed `<run id>/<namespace>:<name>`.
    RunEntries,
    /// Conversations, keyed by id.
    Threads,
    /// Messages, keyed `<thread id>/<sequence>`.
    Messages,
    /// Job records (runs of programs, chats and agents), keyed by id.
    Jobs,
    /// Agents, providers and settings, keyed `agent:<slug>`, `provider:<id>`, `settings`.
    Config,
}

impl Table {
    pub const ALL: [Table; 6] = [
        Table::Memories,
        Table::RunEntries,
        Table::Threads,
        Table::Messages,
        Table::Jobs,
        Table::Config,
    ];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Table::Memories => "memories",
            Table::RunEntries => "run_entries",
            Table::Threads => "threads",
            Table::Messages => "messages",
            Table::Jobs => "jobs",
            Table::Config => "config",
        }
    }

    #[must_use]
    pub fn from_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|table| table.name() == name)
    }

    /// Whether records of this table are indexed by their words
    /// (`kiln_store::text::terms_for`).
    #[must_use]
    pub fn has_terms(self) -> bool {
        matches!(self, Table::Memories | Table::Messages | Table::Jobs)
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A committed change, as the change feed reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub table: Table,
    pub key: String,
    /// The new version; `None` when the record was deleted.
    pub version: Option<u64>,
}

pub use crate::profile::AgentRecord;

/// The workspace's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// `plan`, `default` or `auto`.
    pub permission_mode: String,
    /// The auto-run brake: every execute call asks.
    #[serde(default)]
    pub brake: bool,
    /// The provider the chat uses, when the person picked one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_provider: Option<String>,
    /// The model code nodes are written with (the code-model setting), when
    /// the person picked one; else the chat's, else the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_model: Option<String>,
    /// What the app's programs may reach with `http_request`: nothing until
    /// the person says otherwise.
    #[serde(default)]
    pub network: Network,
    /// Whether agents whose profile has `may_change_team` may add agents to
    /// the workspace (`create_agent`): off until the person turns it on.
    #[serde(default)]
    pub allow_team_changes: bool,
    /// The search API agents' `web_search` asks; no such tool until set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_search: Option<crate::search::WebSearch>,
    /// A reply's limits in the app's chat, when the person set them; else
    /// Kiln's guards' defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_limits: Option<TurnLimits>,
    #[serde(default)]
    pub version: u64,
}

/// What one reply of the app's chat may use: model calls, tokens (input
/// and output), and USD in cents. The three guards a person sets; the rest
/// keep their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnLimits {
    pub max_turns: u32,
    pub max_tokens: u64,
    pub max_cost_cents: u64,
}

impl TurnLimits {
    /// The most model calls a reply may be given.
    pub const MOST_TURNS: u32 = 1_000;
    /// The most tokens.
    pub const MOST_TOKENS: u64 = 100_000_000;
    /// The most cents ($1,000).
    pub const MOST_CENTS: u64 = 100_000;

    /// Kiln's defaults, as limits.
    #[must_use]
    pub fn defaults() -> Self {
        let guards = crate::agent::Guards::default();
        Self {
            max_turns: guards.max_turns,
            max_tokens: guards.max_tokens,
            max_cost_cents: (guards.max_cost * 100.0).round() as u64,
        }
    }

    /// The job's guards: these three, the others Kiln's defaults.
    #[must_use]
    pub fn guards(self) -> crate::agent::Guards {
        crate::agent::Guards {
            max_turns: self.max_turns,
            max_tokens: self.max_tokens,
            max_cost: self.max_cost_cents as f64 / 100.0,
            ..crate::agent::Guards::default()
        }
    }

    /// Holds each limit to its range.
    ///
    /// # Errors
    ///
    /// A sentence naming the limit and its range.
    pub fn check(self) -> Result<(), String> {
        if !(1..=Self::MOST_TURNS).contains(&self.max_turns) {
            return Err(format!(
                "a reply's model calls are 1 to {}, not {}",
                Self::MOST_TURNS,
                self.max_turns
            ));
        }
        if !(1_000..=Self::MOST_TOKENS).contains(&self.max_tokens) {
            return Err(format!(
                "a reply's tokens are 1,000 to 100,000,000, not {}",
                self.max_tokens
            ));
        }
        if self.max_cost_cents > Self::MOST_CENTS {
            return Err(format!(
                "a reply's spend is $0.00 to $1,000.00, not {} cents",
                self.max_cost_cents
            ));
        }
        Ok(())
    }
}

/// A workspace's network setting for the app's programs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reach", content = "origins")]
pub enum Network {
    /// No `http_request` at all (the default for a new workspace).
    #[default]
    Off,
    /// `http_request` to any public address.
    Public,
    /// `http_request` to exactly these origins (private ones included).
    Only(Vec<String>),
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            permission_mode: "default".into(),
            brake: false,
            selected_provider: None,
            code_model: None,
            network: Network::Off,
            allow_team_changes: false,
            web_search: None,
            turn_limits: None,
            version: 0,
        }
    }
}

/// A provider as the page sees it: everything but its key, and whether one
/// is kept (the key itself never leaves the runtime worker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderInfo {
    pub name: String,
    /// `openai`, `anthropic` or `ollama`.
    pub kind: String,
    pub base_url: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub has_key: bool,
    #[serde(default)]
    pub version: u64,
}

/// The workspace's configuration, as `config.get` answers it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ConfigView {
    pub settings: Settings,
    pub providers: Vec<ProviderInfo>,
    pub agents: Vec<AgentRecord>,
}

/// A graph of code nodes as the app keeps it, by name: its nodes and edges
/// (what `kiln.graph` runs), the sample values the person gave each node's
/// inputs (by node id, then slot), and the version its compare-and-swap
/// writes expect (0: never saved).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphRecord {
    pub name: String,
    #[serde(default)]
    pub nodes: Vec<crate::node::GraphNode>,
    #[serde(default)]
    pub edges: Vec<crate::node::Edge>,
    #[serde(default)]
    pub samples: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub version: u64,
}
