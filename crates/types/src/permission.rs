//! The permission ladder's words as they cross to the page: the mode, a
//! tool's setting, a call's category, the settings a person changes, and an
//! approval card with its answer. `kiln-capabilities` decides with them; the
//! app shows and edits them.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The one tool that cannot be blocked: how a job reports that it finished or
/// got stuck.
pub const RETURN_RESULT: &str = "return_result";

/// The permission mode of a thread or run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Look, don't touch: only read-class calls run.
    Plan,
    /// Ask before anything that mutates or reaches out.
    Default,
    /// Run everything the settings allow without asking.
    Auto,
}

impl Mode {
    pub const ALL: [Self; 3] = [Self::Plan, Self::Default, Self::Auto];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Default => "default",
            Self::Auto => "auto",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|mode| mode.as_str() == text)
            .ok_or_else(|| {
                format!("unknown permission mode `{text}`; expected plan, default or auto")
            })
    }
}

/// A per-agent, per-tool rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Autonomy {
    /// Run without asking.
    Auto,
    /// Ask for approval.
    Ask,
    /// Never allow this tool.
    Block,
}

impl Autonomy {
    pub const ALL: [Self; 3] = [Self::Auto, Self::Ask, Self::Block];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ask => "ask",
            Self::Block => "block",
        }
    }
}

impl FromStr for Autonomy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|autonomy| autonomy.as_str() == text)
            .ok_or_else(|| format!("unknown tool setting `{text}`; expected auto, ask or block"))
    }
}

/// Why the ladder asks the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskReason {
    /// Default mode asks before what mutates or reaches out.
    Mode,
    /// The tool is set to ask.
    Setting,
    /// The auto-run brake is engaged and this tool executes code.
    Brake,
}

impl AskReason {
    #[must_use]
    pub fn sentence(self) -> &'static str {
        match self {
            Self::Mode => "default mode asks before a call that changes something or reaches out",
            Self::Setting => "this tool is set to ask for approval",
            Self::Brake => "the auto-run brake is engaged: code-execution tools ask every time",
        }
    }
}

/// The settings a person changes: mode, per-tool rules, the brake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSettings {
    pub mode: Mode,
    #[serde(default)]
    pub autonomy: BTreeMap<String, Autonomy>,
    #[serde(default)]
    pub brake: bool,
}

impl Default for GateSettings {
    fn default() -> Self {
        Self {
            mode: Mode::Default,
            autonomy: BTreeMap::new(),
            brake: false,
        }
    }
}

impl GateSettings {
    /// Refuses settings the ladder would not honour, by name.
    pub fn check(&self) -> Result<(), String> {
        if self.autonomy.get(RETURN_RESULT) == Some(&Autonomy::Block) {
            return Err(blocking_return_result());
        }
        Ok(())
    }
}

/// Why `return_result` cannot be blocked, in the words every refusal uses.
pub fn blocking_return_result() -> String {
    format!(
        "{RETURN_RESULT} cannot be blocked: it is how a job reports that it finished or got stuck, \
         and blocking it would leave every job unable to end"
    )
}

/// One call that needs the person's answer. Arguments arrive redacted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub call_number: u32,
    pub tool: String,
    pub category: Category,
    /// Where the tool comes from (`builtin`, `page`, `mcp:everything`).
    pub module: String,
    pub description: String,
    pub args: Value,
    pub reason: AskReason,
    /// The host whose gate asks (`page`, `kiln run`).
    pub host: String,
}

/// The person's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "answer")]
pub enum Answer {
    Approve,
    Deny,
    /// Approve, and answer the same for this tool for the rest of the session.
    AllowForSession,
    /// Nobody could be asked; `reason` names who and why.
    Unavailable {
        reason: String,
    },
}

/// What a call can do to the world. The permission ladder decides by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Reads what the run may see; changes nothing.
    Read,
    /// Changes state the person owns (files, memory, settings).
    Write,
    /// Runs code or a process.
    Execute,
    /// Reaches outside: the network, another service, a plan of many actions.
    External,
}

impl Category {
    pub const ALL: [Self; 4] = [Self::Read, Self::Write, Self::Execute, Self::External];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Execute => "execute",
            Self::External => "external",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Category {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|category| category.as_str() == text)
            .ok_or_else(|| {
                format!("unknown permission category `{text}`; expected read, write, execute or external")
            })
    }
}
