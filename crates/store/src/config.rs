//! Configuration: agents (name, slug, system prompt, model, per-tool
//! autonomy), providers with their keys, the permission mode and the brake.
//! Every record is written with compare-and-swap on its version, so an edit
//! made in two tabs at once is refused, not lost. Keys print redacted and
//! leave only with [`crate::export::ExportOptions::include_keys`].

use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, Expect, Op, Record, Scan, Table, stored_value};
use crate::error::StoreError;
pub use kiln_types::records::{AgentRecord, DEFAULT_AGENT, GraphRecord, Network, Settings};
use kiln_types::schedule::{Firing, ScheduleRecord};
use kiln_types::skill::SkillRecord;

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
    if let Some(limits) = settings.turn_limits {
        limits.check().map_err(StoreError::Invalid)?;
    }
    Ok(())
}

fn check_agent(agent: &AgentRecord) -> Result<(), StoreError> {
    agent.check().map_err(StoreError::Invalid)
}

/// A record the configuration keeps under `<PREFIX><name>`, written at its
/// version: a provider, an agent, a graph. Listing, saving, removing and
/// checking an imported one are written once over it.
pub(crate) trait Kept: Serialize + serde::de::DeserializeOwned {
    /// The key's prefix, `provider:`.
    const PREFIX: &'static str;
    /// What a message calls it: `provider`.
    const NOUN: &'static str;
    /// Its name in its key (an agent's slug).
    fn key_name(&self) -> &str;
    fn version(&self) -> u64;
    fn set_version(&mut self, version: u64);
    /// What a saved record must be.
    fn check(&self) -> Result<(), StoreError>;
}

/// `impl Kept` for a record kept under `PREFIX<name field>`, checked by `check`.
macro_rules! kept {
    ($record:ty, $prefix:literal, $noun:literal, $name:ident, $check:expr) => {
        impl Kept for $record {
            const PREFIX: &'static str = $prefix;
            const NOUN: &'static str = $noun;
            fn key_name(&self) -> &str {
                &self.$name
            }
            fn version(&self) -> u64 {
                self.version
            }
            fn set_version(&mut self, version: u64) {
                self.version = version;
            }
            fn check(&self) -> Result<(), StoreError> {
                let check: fn(&Self) -> Result<(), StoreError> = $check;
                check(self)
            }
        }
    };
}

kept!(
    ProviderRecord,
    "provider:",
    "provider",
    name,
    check_provider
);
kept!(AgentRecord, "agent:", "agent", slug, check_agent);
kept!(GraphRecord, "graph:", "graph", name, check_graph);
kept!(SkillRecord, "skill:", "skill", name, |skill| skill
    .check()
    .map_err(StoreError::Invalid));
kept!(ScheduleRecord, "schedule:", "schedule", id, |schedule| {
    schedule.check().map_err(StoreError::Invalid)
});
// A firing's key is `firing:<schedule>:<due ms>`: `check_record` holds its
// schedule part to the record's, and `schedules` writes the keys.
kept!(Firing, "firing:", "firing", schedule, |firing| {
    kiln_types::profile::check_slug(&firing.schedule).map_err(StoreError::Invalid)
});

/// An imported record under `key`, which names it `name`: it reads as an
/// `R`, holds that name, and passes `R`'s checks.
fn check_kept<R: Kept>(key: &str, name: &str, value: &serde_json::Value) -> Result<(), StoreError> {
    let record: R = serde_json::from_value(value.clone())
        .map_err(|error| StoreError::Invalid(format!("config `{key}`: {error}")))?;
    if record.key_name() != name {
        return Err(StoreError::Invalid(format!(
            "config `{key}` holds {} `{}`",
            R::NOUN,
            record.key_name()
        )));
    }
    record.check()
}

/// Checks a config record read from outside (an import), by key.
pub fn check_record(key: &str, value: &serde_json::Value) -> Result<(), StoreError> {
    let bad = |error: serde_json::Error| StoreError::Invalid(format!("config `{key}`: {error}"));
    if key == SETTINGS_KEY {
        check_settings(&serde_json::from_value(value.clone()).map_err(bad)?)
    } else if let Some(slug) = key.strip_prefix(AgentRecord::PREFIX) {
        check_kept::<AgentRecord>(key, slug, value)
    } else if let Some(name) = key.strip_prefix(ProviderRecord::PREFIX) {
        check_kept::<ProviderRecord>(key, name, value)
    } else if let Some(name) = key.strip_prefix(GraphRecord::PREFIX) {
        check_kept::<GraphRecord>(key, name, value)
    } else if let Some(id) = key.strip_prefix(<ScheduleRecord as Kept>::PREFIX) {
        check_kept::<ScheduleRecord>(key, id, value)
    } else if let Some(rest) = key.strip_prefix(<Firing as Kept>::PREFIX) {
        let schedule = rest.split(':').next().unwrap_or_default();
        check_kept::<Firing>(key, schedule, value)
    } else if let Some(name) = key.strip_prefix(<SkillRecord as Kept>::PREFIX) {
        check_kept::<SkillRecord>(key, name, value)
    } else {
        Err(StoreError::Invalid(format!(
            "config key `{key}` is not `settings`, `agent:<slug>`, `provider:<name>`, `graph:<name>`, `skill:<name>`, `schedule:<id>` or `firing:<id>:<ms>`"
        )))
    }
}

pub(crate) fn read<T: serde::de::DeserializeOwned>(
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
    pub(crate) backend: Rc<dyn Backend>,
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

    /// Every `R` kept, by key.
    pub(crate) async fn list<R: Kept>(&self) -> Result<Vec<R>, StoreError> {
        let scan = Scan {
            prefix: R::PREFIX,
            ..Scan::default()
        };
        self.backend
            .scan(Table::Config, scan)
            .await?
            .into_iter()
            .map(|record| read(record, R::set_version))
            .collect()
    }

    /// Saves `record` read at its version (0: a new one); answers the new version.
    pub(crate) async fn put<R: Kept>(&self, record: &R) -> Result<u64, StoreError> {
        record.check()?;
        self.commit_one(
            format!("{}{}", R::PREFIX, record.key_name()),
            stored_value(record),
            record.version(),
        )
        .await
    }

    /// Removes the `R` named `name`, at `version`.
    pub(crate) async fn remove<R: Kept>(&self, name: &str, version: u64) -> Result<(), StoreError> {
        self.backend
            .commit(vec![Op::delete(
                Table::Config,
                format!("{}{name}", R::PREFIX),
                Expect::Version(version),
            )])
            .await?;
        Ok(())
    }

    pub async fn providers(&self) -> Result<Vec<ProviderRecord>, StoreError> {
        self.list().await
    }

    /// Saves a provider read at `provider.version` (0: a new one).
    pub async fn put_provider(&self, provider: &ProviderRecord) -> Result<u64, StoreError> {
        self.put(provider).await
    }

    pub async fn remove_provider(&self, name: &str, version: u64) -> Result<(), StoreError> {
        self.remove::<ProviderRecord>(name, version).await
    }

    /// Every agent: the default agent first (at version 0 until it is first
    /// saved, so a new workspace has one), then the others by slug.
    pub async fn agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
        let mut agents: Vec<AgentRecord> = self.list().await?;
        let default = match agents.iter().position(|agent| agent.slug == DEFAULT_AGENT) {
            Some(at) => agents.remove(at),
            None => AgentRecord::default_agent(),
        };
        agents.insert(0, default);
        Ok(agents)
    }

    /// The agent `slug`, if the workspace has it (the default agent always).
    pub async fn agent(&self, slug: &str) -> Result<Option<AgentRecord>, StoreError> {
        match self
            .backend
            .get(Table::Config, &format!("{}{slug}", AgentRecord::PREFIX))
            .await?
        {
            Some(record) => read(record, AgentRecord::set_version).map(Some),
            None if slug == DEFAULT_AGENT => Ok(Some(AgentRecord::default_agent())),
            None => Ok(None),
        }
    }

    /// Saves an agent read at `agent.version` (0: a new one).
    pub async fn put_agent(&self, agent: &AgentRecord) -> Result<u64, StoreError> {
        self.put(agent).await
    }

    /// Removes agent `slug` at `version`; the default agent stays (edit it instead).
    pub async fn remove_agent(&self, slug: &str, version: u64) -> Result<(), StoreError> {
        if slug == DEFAULT_AGENT {
            return Err(StoreError::Invalid(format!(
                "the `{DEFAULT_AGENT}` agent cannot be removed: every workspace has it; edit it instead"
            )));
        }
        self.remove::<AgentRecord>(slug, version).await
    }

    /// The graphs of code nodes the app keeps, by name.
    pub async fn graphs(&self) -> Result<Vec<GraphRecord>, StoreError> {
        self.list().await
    }

    /// Saves a graph read at `graph.version` (0: a new one).
    pub async fn put_graph(&self, graph: &GraphRecord) -> Result<u64, StoreError> {
        self.put(graph).await
    }

    pub async fn remove_graph(&self, name: &str, version: u64) -> Result<(), StoreError> {
        self.remove::<GraphRecord>(name, version).await
    }

    /// The workspace's own skills, by name (the shipped ones are
    /// [`crate::skills`]').
    pub async fn skills(&self) -> Result<Vec<SkillRecord>, StoreError> {
        self.list().await
    }

    /// Saves a skill read at `skill.version` (0: a new one).
    pub async fn put_skill(&self, skill: &SkillRecord) -> Result<u64, StoreError> {
        self.put(skill).await
    }

    /// Renames the skill `from` (read at `skill.version`) to `skill`, in one
    /// all-or-none commit; answers the new record's version.
    pub async fn rename_skill(&self, from: &str, skill: &SkillRecord) -> Result<u64, StoreError> {
        Kept::check(skill)?;
        let prefix = <SkillRecord as Kept>::PREFIX;
        let changes = self
            .backend
            .commit(vec![
                Op::put(
                    Table::Config,
                    format!("{prefix}{}", skill.name),
                    stored_value(&SkillRecord {
                        version: 0,
                        ..skill.clone()
                    }),
                    Expect::Absent,
                ),
                Op::delete(
                    Table::Config,
                    format!("{prefix}{from}"),
                    Expect::Version(skill.version),
                ),
            ])
            .await?;
        Ok(changes.first().and_then(|c| c.version).unwrap_or(1))
    }

    pub async fn remove_skill(&self, name: &str, version: u64) -> Result<(), StoreError> {
        self.remove::<SkillRecord>(name, version).await
    }
}
