//! Configuration: agents (name, slug, system prompt, model, per-tool
//! autonomy), providers with their keys, the permission mode and the brake.
//! Every record is written with compare-and-swap on its version, so an edit
//! made in two tabs at once is refused, not lost. Keys print redacted and
//! leave only with [`crate::export::ExportOptions::include_keys`].

use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, Expect, Op, Record, Scan, Table, stored_value};
use crate::error::StoreError;
pub use kiln_types::records::{AgentRecord, GraphRecord, Network, Settings};

/// An API key as the configuration keeps it: the one redacting string,
/// stored as the plain string.
pub type StoredKey = kiln_types::Redacted;

/// A provider, by its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderRecord {
    pub name: String,
    /// `openai`, `anthropic` or `ollama`.
    pub kind: String,
    pub base_url: String,
    #[serde(default)]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<StoredKey>,
    #[serde(default, skip_deserializing)]
    pub version: u64,
}

const SETTINGS_KEY: &str = "settings";

fn check_slug(slug: &str) -> Result<(), StoreError> {
    let good = !slug.is_empty()
        && slug.len() <= 64
        && slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !slug.starts_with('-');
    if good {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "agent slug `{slug}` must be 1 to 64 of `a-z`, `0-9` and `-`, not starting with `-`"
        )))
    }
}

fn check_provider(provider: &ProviderRecord) -> Result<(), StoreError> {
    if provider.name.trim().is_empty() || provider.name.chars().count() > 100 {
        return Err(StoreError::Invalid(
            "a provider needs a name of 1 to 100 characters".into(),
        ));
    }
    if !["openai", "anthropic", "ollama"].contains(&provider.kind.as_str()) {
        return Err(StoreError::Invalid(format!(
            "provider `{}` has kind `{}`; expected `openai`, `anthropic` or `ollama`",
            provider.name, provider.kind
        )));
    }
    Ok(())
}

fn check_graph(graph: &GraphRecord) -> Result<(), StoreError> {
    if graph.name.trim().is_empty() || graph.name.chars().count() > 100 {
        return Err(StoreError::Invalid(
            "a graph needs a name of 1 to 100 characters".into(),
        ));
    }
    Ok(())
}

fn check_settings(settings: &Settings) -> Result<(), StoreError> {
    if !["plan", "default", "auto"].contains(&settings.permission_mode.as_str()) {
        return Err(StoreError::Invalid(format!(
            "permission mode `{}` is not one of `plan`, `default`, `auto`",
            settings.permission_mode
        )));
    }
    Ok(())
}

fn check_agent(agent: &AgentRecord) -> Result<(), StoreError> {
    check_slug(&agent.slug)?;
    if let Some((tool, setting)) = agent
        .autonomy
        .iter()
        .find(|(_, setting)| !["auto", "ask", "block"].contains(&setting.as_str()))
    {
        return Err(StoreError::Invalid(format!(
            "agent `{}`: autonomy `{setting}` for `{tool}` is not one of `auto`, `ask`, `block`",
            agent.slug
        )));
    }
    Ok(())
}

/// Checks a config record read from outside (an import), by key.
pub fn check_record(key: &str, value: &serde_json::Value) -> Result<(), StoreError> {
    let bad = |error: serde_json::Error| StoreError::Invalid(format!("config `{key}`: {error}"));
    if key == SETTINGS_KEY {
        check_settings(&serde_json::from_value(value.clone()).map_err(bad)?)
    } else if let Some(slug) = key.strip_prefix("agent:") {
        let agent: AgentRecord = serde_json::from_value(value.clone()).map_err(bad)?;
        if agent.slug != slug {
            return Err(StoreError::Invalid(format!(
                "config `{key}` holds agent `{}`",
                agent.slug
            )));
        }
        check_agent(&agent)
    } else if let Some(name) = key.strip_prefix("provider:") {
        let provider: ProviderRecord = serde_json::from_value(value.clone()).map_err(bad)?;
        if provider.name != name {
            return Err(StoreError::Invalid(format!(
                "config `{key}` holds provider `{}`",
                provider.name
            )));
        }
        check_provider(&provider)
    } else if let Some(name) = key.strip_prefix("graph:") {
        let graph: GraphRecord = serde_json::from_value(value.clone()).map_err(bad)?;
        if graph.name != name {
            return Err(StoreError::Invalid(format!(
                "config `{key}` holds graph `{}`",
                graph.name
            )));
        }
        check_graph(&graph)
    } else {
        Err(StoreError::Invalid(format!(
            "config key `{key}` is not `settings`, `agent:<slug>`, `provider:<name>` or `graph:<name>`"
        )))
    }
}

fn read<T: serde::de::DeserializeOwned>(
    record: Record,
    set: impl FnOnce(&mut T, u64),
) -> Result<T, StoreError> {
    let mut value: T =
        serde_json::from_value(record.value).map_err(|error| StoreError::Corrupt {
            place: format!("config `{}`", record.key),
            detail: error.to_string(),
            hint: None,
        })?;
    set(&mut value, record.version);
    Ok(value)
}

/// Where `version` 0 means "new": the write expects the key to be absent.
fn expect(version: u64) -> Expect {
    if version == 0 {
        Expect::Absent
    } else {
        Expect::Version(version)
    }
}

#[derive(Clone)]
pub struct Config {
    backend: Rc<dyn Backend>,
}

impl Config {
    #[must_use]
    pub fn new(backend: Rc<dyn Backend>) -> Self {
        Self { backend }
    }

    async fn commit_one(
        &self,
        key: String,
        value: serde_json::Value,
        version: u64,
    ) -> Result<u64, StoreError> {
        let changes = self
            .backend
            .commit(vec![Op::put(Table::Config, key, value, expect(version))])
            .await?;
        Ok(changes
            .first()
            .and_then(|c| c.version)
            .unwrap_or(version + 1))
    }

    /// The settings and their version (0 when never saved).
    pub async fn settings(&self) -> Result<Settings, StoreError> {
        match self.backend.get(Table::Config, SETTINGS_KEY).await? {
            Some(record) => read(record, |s: &mut Settings, v| s.version = v),
            None => Ok(Settings::default()),
        }
    }

    /// Saves settings read at `settings.version`; answers the new version.
    pub async fn put_settings(&self, settings: &Settings) -> Result<u64, StoreError> {
        check_settings(settings)?;
        self.commit_one(
            SETTINGS_KEY.into(),
            stored_value(settings),
            settings.version,
        )
        .await
    }

    pub async fn providers(&self) -> Result<Vec<ProviderRecord>, StoreError> {
        let scan = Scan {
            prefix: "provider:",
            ..Scan::default()
        };
        self.backend
            .scan(Table::Config, scan)
            .await?
            .into_iter()
            .map(|record| read(record, |p: &mut ProviderRecord, v| p.version = v))
            .collect()
    }

    /// Saves a provider read at `provider.version` (0: a new one).
    pub async fn put_provider(&self, provider: &ProviderRecord) -> Result<u64, StoreError> {
        check_provider(provider)?;
        self.commit_one(
            format!("provider:{}", provider.name),
            stored_value(provider),
            provider.version,
        )
        .await
    }

    pub async fn remove_provider(&self, name: &str, version: u64) -> Result<(), StoreError> {
        self.backend
            .commit(vec![Op::delete(
                Table::Config,
                format!("provider:{name}"),
                Expect::Version(version),
            )])
            .await?;
        Ok(())
    }

    pub async fn agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
        let scan = Scan {
            prefix: "agent:",
            ..Scan::default()
        };
        self.backend
            .scan(Table::Config, scan)
            .await?
            .into_iter()
            .map(|record| read(record, |a: &mut AgentRecord, v| a.version = v))
            .collect()
    }

    /// Saves an agent read at `agent.version` (0: a new one).
    pub async fn put_agent(&self, agent: &AgentRecord) -> Result<u64, StoreError> {
        check_agent(agent)?;
        self.commit_one(
            format!("agent:{}", agent.slug),
            stored_value(agent),
            agent.version,
        )
        .await
    }

    pub async fn remove_agent(&self, slug: &str, version: u64) -> Result<(), StoreError> {
        self.backend
            .commit(vec![Op::delete(
                Table::Config,
                format!("agent:{slug}"),
                Expect::Version(version),
            )])
            .await?;
        Ok(())
    }

    /// The graphs of code nodes the app keeps, by name.
    pub async fn graphs(&self) -> Result<Vec<GraphRecord>, StoreError> {
        let scan = Scan {
            prefix: "graph:",
            ..Scan::default()
        };
        self.backend
            .scan(Table::Config, scan)
            .await?
            .into_iter()
            .map(|record| read(record, |g: &mut GraphRecord, v| g.version = v))
            .collect()
    }

    /// Saves a graph read at `graph.version` (0: a new one).
    pub async fn put_graph(&self, graph: &GraphRecord) -> Result<u64, StoreError> {
        check_graph(graph)?;
        self.commit_one(
            format!("graph:{}", graph.name),
            stored_value(graph),
            graph.version,
        )
        .await
    }

    pub async fn remove_graph(&self, name: &str, version: u64) -> Result<(), StoreError> {
        self.backend
            .commit(vec![Op::delete(
                Table::Config,
                format!("graph:{name}"),
                Expect::Version(version),
            )])
            .await?;
        Ok(())
    }
}
