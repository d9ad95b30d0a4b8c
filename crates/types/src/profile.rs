//! An agent profile (reference/003, "Configuration"): who an agent is and
//! what each of its jobs works with — its name, slug and avatar, its system
//! prompt (a preamble: Kiln's contract comes after it and cannot be
//! replaced), its model, skills, MCP servers and secrets, its per-tool
//! autonomy, its role and whether it may change its team.
//!
//! The workspace keeps one record per slug (`kiln_store::config`); a new
//! workspace has [`AgentRecord::default_agent`]. [`AgentRecord::check`] is
//! the one place a record is held to its rules, for the store, the runtime
//! worker, the app and the CLI alike, each problem named by its field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::permission::Autonomy;
use crate::records::DEFAULT_AGENT;

/// The tool that cannot be blocked, and why (the Agents view says so on its row).
pub const UNBLOCKABLE: &str = "return_result";
pub const UNBLOCKABLE_REASON: &str = "return_result cannot be blocked: it is how a job reports that it finished or got stuck, and an agent without it could never end or tell you why";

/// The most MCP servers, skills and secrets one agent names.
pub const MAX_LISTED: usize = 32;
/// The longest system prompt, in characters.
pub const MAX_SYSTEM_PROMPT: usize = 32_000;

/// What an agent may do with its team (reference/003).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentRole {
    /// A worker: it does the job itself (and may still split it into subtasks).
    #[default]
    Agent,
    /// It may hand parts of a job to the workspace's other agents by slug.
    Orchestrator,
}

impl AgentRole {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Orchestrator => "orchestrator",
        }
    }
}

/// An MCP server an agent's jobs mount; its tools are named `<name>_<tool>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentServer {
    pub name: String,
    /// Its Streamable HTTP endpoint.
    pub url: String,
    /// A vault secret sent as `Authorization: Bearer <value>` to this server
    /// (the agent's profile must name the secret, and it must allow the
    /// server's origin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret: Option<String>,
}

/// An agent, by its slug.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentRecord {
    /// The handle others delegate to: `a-z`, `0-9`, `-`.
    pub slug: String,
    pub name: String,
    /// An emoji or up to two initials; empty: the name's first letter.
    #[serde(default)]
    pub avatar: String,
    /// Text layered before Kiln's contract in every job of this agent.
    #[serde(default)]
    pub system_prompt: String,
    /// A kept provider's name; empty: the one the chat has chosen.
    #[serde(default)]
    pub provider: String,
    /// The model id; empty: the provider's saved model.
    #[serde(default)]
    pub model: String,
    /// The skills assigned to it, by name.
    #[serde(default)]
    pub skills: Vec<String>,
    #[serde(default)]
    pub mcp: Vec<AgentServer>,
    /// The secrets its jobs may use, by name.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Per-tool autonomy: run without asking, ask, block. A tool left out
    /// follows the permission mode.
    #[serde(default)]
    pub autonomy: BTreeMap<String, Autonomy>,
    #[serde(default)]
    pub role: AgentRole,
    /// Whether it may add, attach or detach team members (off by default).
    #[serde(default)]
    pub may_change_team: bool,
    /// The compare-and-swap token of its next write (0: never saved).
    #[serde(default)]
    pub version: u64,
}

impl AgentRecord {
    /// A new agent with `slug` and `name` and nothing else set.
    #[must_use]
    pub fn new(slug: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            slug: slug.into(),
            name: name.into(),
            avatar: String::new(),
            system_prompt: String::new(),
            provider: String::new(),
            model: String::new(),
            skills: Vec::new(),
            mcp: Vec::new(),
            secrets: Vec::new(),
            autonomy: BTreeMap::new(),
            role: AgentRole::Agent,
            may_change_team: false,
            version: 0,
        }
    }

    /// The agent a new workspace has: `default`, named Kiln, with no prompt
    /// of its own and the chat's provider.
    #[must_use]
    pub fn default_agent() -> Self {
        Self {
            avatar: "K".into(),
            ..Self::new(DEFAULT_AGENT, "Kiln")
        }
    }

    /// What the avatar shows: the avatar, or the name's first letter.
    #[must_use]
    pub fn badge(&self) -> String {
        if self.avatar.trim().is_empty() {
            self.name
                .chars()
                .find(|c| c.is_alphanumeric())
                .map_or_else(|| "?".into(), |c| c.to_uppercase().collect())
        } else {
            self.avatar.trim().to_owned()
        }
    }

    /// Holds the record to its rules; the first problem, named by its field.
    ///
    /// # Errors
    ///
    /// A sentence naming the agent, the field and what it must be.
    pub fn check(&self) -> Result<(), String> {
        check_slug(&self.slug)?;
        let who = &self.slug;
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
            return Err(format!(
                "agent `{who}`: `name` must be 1 to 100 characters with no control characters"
            ));
        }
        if self.avatar.chars().count() > 8
            || self
                .avatar
                .chars()
                .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(format!(
                "agent `{who}`: `avatar` must be an emoji or up to two initials (at most 8 characters, no spaces)"
            ));
        }
        if self.system_prompt.chars().count() > MAX_SYSTEM_PROMPT {
            return Err(format!(
                "agent `{who}`: `system_prompt` is {} characters; at most {MAX_SYSTEM_PROMPT}",
                self.system_prompt.chars().count()
            ));
        }
        if self.provider.chars().count() > 100 || self.model.chars().count() > 200 {
            return Err(format!(
                "agent `{who}`: `provider` is a kept provider's name (at most 100 characters) and `model` a model id (at most 200)"
            ));
        }
        if self.model.trim() != self.model || self.provider.trim() != self.provider {
            return Err(format!(
                "agent `{who}`: `provider` and `model` may not start or end with spaces"
            ));
        }
        listed(who, "skills", &self.skills, check_slug)?;
        listed(who, "secrets", &self.secrets, check_secret_name)?;
        let names: Vec<String> = self.mcp.iter().map(|server| server.name.clone()).collect();
        listed(who, "mcp", &names, check_server_name)?;
        for server in &self.mcp {
            if let Some(secret) = &server.auth_secret {
                check_secret_name(secret)
                    .map_err(|why| format!("agent `{who}`: MCP server `{}`: {why}", server.name))?;
                if !self.secrets.contains(secret) {
                    return Err(format!(
                        "agent `{who}`: MCP server `{}` sends the secret `{secret}`, which the agent's `secrets` does not name",
                        server.name
                    ));
                }
            }
            let url = server.url.trim();
            if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() > 2048 {
                return Err(format!(
                    "agent `{who}`: MCP server `{}` needs an http:// or https:// URL (at most 2048 bytes), not `{}`",
                    server.name,
                    crate::words::clip(url, 80)
                ));
            }
        }
        if self.autonomy.get(UNBLOCKABLE) == Some(&Autonomy::Block) {
            return Err(format!("agent `{who}`: {UNBLOCKABLE_REASON}"));
        }
        if let Some(tool) = self
            .autonomy
            .keys()
            .find(|tool| tool.is_empty() || tool.len() > 128 || tool.chars().any(char::is_control))
        {
            return Err(format!(
                "agent `{who}`: `autonomy` names a tool `{}` that is not a tool name",
                crate::words::clip(tool, 40)
            ));
        }
        Ok(())
    }

    /// This agent's setting for `tool`, if it has one.
    #[must_use]
    pub fn autonomy_of(&self, tool: &str) -> Option<Autonomy> {
        self.autonomy.get(tool).copied()
    }
}

/// A list field: at most [`MAX_LISTED`] entries, each passing `check`, no
/// name twice.
fn listed(
    who: &str,
    field: &str,
    names: &[String],
    check: fn(&str) -> Result<(), String>,
) -> Result<(), String> {
    if names.len() > MAX_LISTED {
        return Err(format!(
            "agent `{who}`: `{field}` names {} entries; at most {MAX_LISTED}",
            names.len()
        ));
    }
    for (index, name) in names.iter().enumerate() {
        check(name).map_err(|why| format!("agent `{who}`: `{field}`: {why}"))?;
        if names[..index].contains(name) {
            return Err(format!("agent `{who}`: `{field}` names `{name}` twice"));
        }
    }
    Ok(())
}

/// An agent's or a skill's slug: 1 to 64 of `a-z`, `0-9` and `-`, not
/// starting with `-`.
///
/// # Errors
///
/// What the slug must be.
pub fn check_slug(slug: &str) -> Result<(), String> {
    let good = !slug.is_empty()
        && slug.len() <= 64
        && slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !slug.starts_with('-');
    if good {
        Ok(())
    } else {
        Err(format!(
            "`{}` must be 1 to 64 of `a-z`, `0-9` and `-`, not starting with `-`",
            crate::words::clip(slug, 80)
        ))
    }
}

/// A secret's name, as programs and headers refer to it: 1 to 64 of
/// `A-Z`, `a-z`, `0-9` and `_`, not starting with a digit.
///
/// # Errors
///
/// What the name must be.
pub fn check_secret_name(name: &str) -> Result<(), String> {
    let good = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if good {
        Ok(())
    } else {
        Err(format!(
            "secret name `{}` must be 1 to 64 of `A-Z`, `a-z`, `0-9` and `_`, not starting with a digit",
            crate::words::clip(name, 80)
        ))
    }
}

/// An MCP server's name, the prefix of its tools' names: 1 to 32 of `a-z`,
/// `0-9` and `_`, starting with a letter.
///
/// # Errors
///
/// What the name must be.
pub fn check_server_name(name: &str) -> Result<(), String> {
    let good = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.starts_with(|c: char| c.is_ascii_lowercase());
    if good {
        Ok(())
    } else {
        Err(format!(
            "server name `{}` must be 1 to 32 of `a-z`, `0-9` and `_`, starting with a letter (its tools are named `<name>_<tool>`)",
            crate::words::clip(name, 80)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_agent_passes_its_own_checks() {
        let agent = AgentRecord::default_agent();
        assert_eq!(agent.check(), Ok(()));
        assert_eq!(agent.slug, "default");
        assert_eq!(agent.badge(), "K");
        assert_eq!(AgentRecord::new("ada", "ada lovelace").badge(), "A");
    }

    #[test]
    fn each_field_is_refused_by_name() {
        let base = AgentRecord::new("ada", "Ada");
        let cases: Vec<(AgentRecord, &str)> = vec![
            (AgentRecord::new("Ada", "Ada"), "must be 1 to 64 of `a-z`"),
            (AgentRecord::new("ada", " "), "`name` must be 1 to 100"),
            (
                AgentRecord {
                    avatar: "A B".into(),
                    ..base.clone()
                },
                "`avatar`",
            ),
            (
                AgentRecord {
                    system_prompt: "x".repeat(MAX_SYSTEM_PROMPT + 1),
                    ..base.clone()
                },
                "`system_prompt` is 32001 characters",
            ),
            (
                AgentRecord {
                    skills: vec!["web".into(), "web".into()],
                    ..base.clone()
                },
                "`skills` names `web` twice",
            ),
            (
                AgentRecord {
                    secrets: vec!["1KEY".into()],
                    ..base.clone()
                },
                "`secrets`: secret name `1KEY`",
            ),
            (
                AgentRecord {
                    mcp: vec![AgentServer {
                        name: "Docs".into(),
                        url: "https://docs.example/mcp".into(),
                        auth_secret: None,
                    }],
                    ..base.clone()
                },
                "`mcp`: server name `Docs`",
            ),
            (
                AgentRecord {
                    mcp: vec![AgentServer {
                        name: "docs".into(),
                        url: "file:///etc/passwd".into(),
                        auth_secret: None,
                    }],
                    ..base.clone()
                },
                "MCP server `docs` needs an http:// or https:// URL",
            ),
            (
                AgentRecord {
                    autonomy: [(UNBLOCKABLE.to_owned(), Autonomy::Block)].into(),
                    ..base.clone()
                },
                "return_result cannot be blocked",
            ),
        ];
        for (record, expected) in cases {
            let error = record.check().expect_err(expected);
            assert!(error.contains(expected), "{error} lacks {expected}");
        }
    }

    #[test]
    fn a_record_reads_with_every_field_defaulted_and_refuses_unknown_ones() {
        let agent: AgentRecord =
            serde_json::from_str(r#"{"slug": "ada", "name": "Ada", "autonomy": {"x": "block"}}"#)
                .unwrap();
        assert_eq!(agent.role, AgentRole::Agent);
        assert!(!agent.may_change_team);
        assert_eq!(agent.autonomy_of("x"), Some(Autonomy::Block));
        let unknown =
            serde_json::from_str::<AgentRecord>(r#"{"slug": "ada", "name": "Ada", "team": []}"#)
                .unwrap_err();
        assert!(unknown.to_string().contains("unknown field `team`"));
    }
}
