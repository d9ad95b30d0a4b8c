//! What a capability is as data: the part a model, a prompt and the permission
//! ladder read without loading any implementation.

pub use kiln_types::permission::Category;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a capability comes from. Warnings and call details name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// Compiled into Kiln.
    Builtin,
    /// Declared by the host: the page's `tools`, the CLI's `--tools` catalog.
    Host { host: String },
    /// A tool of an MCP server, under the server's name.
    Mcp {
        server: String,
        tool: String,
        /// The server's endpoint: a server of the same name elsewhere is
        /// another source.
        #[serde(default)]
        url: String,
    },
}

impl Source {
    /// The module name admission and warnings use.
    #[must_use]
    pub fn module(&self) -> String {
        match self {
            Self::Builtin => "builtin".into(),
            Self::Host { host } => host.clone(),
            Self::Mcp { server, .. } => format!("mcp:{server}"),
        }
    }

    /// What identifies the source for "allow for this session": an answer
    /// given for one server's tool does not carry over to a server of the
    /// same name at another address.
    #[must_use]
    pub fn identity(&self) -> String {
        match self {
            Self::Builtin => "builtin".into(),
            Self::Host { host } => format!("host:{host}"),
            Self::Mcp { server, url, .. } => format!("mcp:{server}@{url}"),
        }
    }
}

/// A capability's spec: wire name, description, input schema, category and
/// the shape of what it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapabilitySpec {
    /// The name on `tools.<name>` and on the wire: a JavaScript identifier.
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    pub category: Category,
    /// JSON Schema of the value a successful call answers (`{}` when any).
    #[serde(default = "any_result")]
    pub result: Value,
    pub source: Source,
}

fn any_result() -> Value {
    Value::Object(serde_json::Map::new())
}

impl CapabilitySpec {
    /// The key of this capability in a session's allow-set.
    #[must_use]
    pub fn session_key(&self) -> String {
        format!("{}/{}", self.source.identity(), self.name)
    }

    /// The entry this spec makes in a sandbox run's catalog.
    #[must_use]
    pub fn catalog_entry(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "category": self.category,
        })
    }
}
