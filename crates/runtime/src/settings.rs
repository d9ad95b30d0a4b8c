//! The configuration the app edits, as storage operations: the permission
//! settings (the mode and the brake in `Settings`, each tool's setting as
//! the `default` agent's autonomy, in the gate's words), the network
//! setting, the chat's providers and which one it uses. Each change reads
//! the record again and writes at its version, so a change made in another
//! tab is not overwritten blindly: a lost race reads again and retries. A
//! provider's key is written here and never read back out: the page sees
//! [`ProviderInfo`], which says only whether there is one.

use std::collections::BTreeMap;

use kiln_capabilities::{Autonomy, Mode};
use kiln_store::config::{AgentRecord, Config, ProviderRecord, StoredKey};
use kiln_store::durable::DEFAULT_AGENT;
use kiln_store::{StoreError, retry_on_conflict};
use kiln_types::records::{ConfigView, Network, ProviderInfo};
use serde::Deserialize;

use crate::ops::OpError;

/// How often a change retries when another tab wrote first.
const ATTEMPTS: usize = 4;

fn bad(message: impl Into<String>) -> OpError {
    OpError::BadRequest(message.into())
}

/// Reads the settings, lets `change` edit them, and writes them at the
/// version read; a lost race reads again and edits again. `change` answers
/// `false` when nothing needs writing.
async fn update_settings(
    config: &Config,
    change: impl Fn(&mut kiln_types::records::Settings) -> bool,
) -> Result<(), StoreError> {
    retry_on_conflict(ATTEMPTS, || async {
        let mut stored = config.settings().await?;
        if !change(&mut stored) {
            return Ok(stored.version);
        }
        config.put_settings(&stored).await
    })
    .await
    .map(drop)
}

/// The configuration without keys.
pub(crate) async fn view(config: &Config) -> Result<ConfigView, StoreError> {
    let providers = config
        .providers()
        .await?
        .into_iter()
        .map(|provider| ProviderInfo {
            has_key: provider.key.is_some(),
            name: provider.name,
            kind: provider.kind,
            base_url: provider.base_url,
            model: provider.model,
            version: provider.version,
        })
        .collect();
    Ok(ConfigView {
        settings: config.settings().await?,
        providers,
        agents: config.agents().await?,
    })
}

/// `config.permissions`: what changes of the permission settings; a field
/// left out stays as stored.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PermissionArgs {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    brake: Option<bool>,
    /// Every tool's setting (`auto`, `ask`, `block`), replacing what is
    /// stored; a tool left out follows the mode.
    #[serde(default)]
    autonomy: Option<BTreeMap<String, String>>,
}

pub(crate) async fn set_permissions(config: &Config, args: PermissionArgs) -> Result<(), OpError> {
    if let Some(mode) = &args.mode {
        mode.parse::<Mode>().map_err(bad)?;
    }
    if let Some(autonomy) = &args.autonomy {
        for (tool, setting) in autonomy {
            setting
                .parse::<Autonomy>()
                .map_err(|why| bad(format!("`{tool}`: {why}")))?;
        }
    }
    if args.mode.is_some() || args.brake.is_some() {
        update_settings(config, |stored| {
            if let Some(mode) = &args.mode {
                stored.permission_mode.clone_from(mode);
            }
            if let Some(brake) = args.brake {
                stored.brake = brake;
            }
            true
        })
        .await?;
    }
    if let Some(autonomy) = &args.autonomy {
        let autonomy: BTreeMap<String, Autonomy> = autonomy
            .iter()
            .filter_map(|(tool, setting)| Some((tool.clone(), setting.parse().ok()?)))
            .collect();
        retry_on_conflict(ATTEMPTS, || async {
            let mut agent = config
                .agent(DEFAULT_AGENT)
                .await?
                .unwrap_or_else(AgentRecord::default_agent);
            agent.autonomy.clone_from(&autonomy);
            config.put_agent(&agent).await
        })
        .await?;
    }
    Ok(())
}

/// `config.network`: what the app's programs may reach.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NetworkArgs {
    network: Network,
}

pub(crate) async fn set_network(config: &Config, args: NetworkArgs) -> Result<(), OpError> {
    if let Network::Only(origins) = &args.network {
        if origins.is_empty() {
            return Err(bad("`network.origins` names no origin"));
        }
        kiln_capabilities::NetPolicy::parse_origins(origins).map_err(bad)?;
    }
    update_settings(config, |stored| {
        stored.network = args.network.clone();
        true
    })
    .await?;
    Ok(())
}

/// `config.provider.put`: a provider saved (new at `version` 0, else
/// replacing that version), and chosen for the chat. `replacing` names the
/// record it renames, removed once the new one is written. With no `key`
/// the stored key stays.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProviderArgs {
    name: String,
    kind: String,
    base_url: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    version: u64,
    #[serde(default)]
    replacing: Option<String>,
}

/// Whether `record`'s key may go to a provider of `kind` at `base_url`.
fn key_goes_to(record: &ProviderRecord, kind: &str, base_url: &str) -> bool {
    kiln_types::chat::key_goes_to(&record.kind, &record.base_url, kind, base_url)
}

pub(crate) async fn put_provider(config: &Config, args: ProviderArgs) -> Result<u64, OpError> {
    let stored = config.providers().await?;
    let old_name = args.replacing.as_deref().unwrap_or(&args.name);
    let before = stored.iter().find(|provider| provider.name == old_name);
    let key = match args.key {
        Some(key) if !key.trim().is_empty() => Some(StoredKey::new(key.trim())),
        Some(_) => None,
        None => before
            .filter(|old| key_goes_to(old, &args.kind, &args.base_url))
            .and_then(|provider| provider.key.clone()),
    };
    let renamed = before.filter(|old| old.name != args.name);
    let version = config
        .put_provider(&ProviderRecord {
            name: args.name.clone(),
            kind: args.kind,
            base_url: args.base_url,
            model: args.model,
            key,
            version: if renamed.is_some() { 0 } else { args.version },
        })
        .await?;
    if let Some(old) = renamed {
        config.remove_provider(&old.name, old.version).await?;
    }
    select(config, Some(args.name)).await?;
    Ok(version)
}

/// `config.provider.remove`: a provider removed at `version`; the chat's
/// pick is cleared when it was this one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemoveProviderArgs {
    name: String,
    version: u64,
}

pub(crate) async fn remove_provider(
    config: &Config,
    args: RemoveProviderArgs,
) -> Result<(), OpError> {
    config.remove_provider(&args.name, args.version).await?;
    if config.settings().await?.selected_provider.as_deref() == Some(args.name.as_str()) {
        select(config, None).await?;
    }
    Ok(())
}

/// `config.select`: the provider the chat uses (`null`: none picked).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SelectArgs {
    provider: Option<String>,
}

pub(crate) async fn set_selection(config: &Config, args: SelectArgs) -> Result<(), OpError> {
    select(config, args.provider).await
}

/// Writes the pick over whatever another tab wrote: it is this person's
/// latest word.
async fn select(config: &Config, provider: Option<String>) -> Result<(), OpError> {
    update_settings(config, |stored| {
        if stored.selected_provider == provider && stored.version > 0 {
            return false;
        }
        stored.selected_provider.clone_from(&provider);
        true
    })
    .await?;
    Ok(())
}

/// `config.code_model`: the model code nodes are written with (`null`: the
/// chat's, else the provider's default).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CodeModelArgs {
    model: Option<String>,
}

pub(crate) async fn set_code_model(config: &Config, args: CodeModelArgs) -> Result<(), OpError> {
    let model = args
        .model
        .map(|model| model.trim().to_owned())
        .filter(|model| !model.is_empty());
    update_settings(config, |stored| {
        if stored.code_model == model && stored.version > 0 {
            return false;
        }
        stored.code_model.clone_from(&model);
        true
    })
    .await?;
    Ok(())
}

/// `config.turn_limits`: a reply's limits in the app's chat (`null`: Kiln's
/// defaults).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TurnLimitsArgs {
    limits: Option<kiln_types::records::TurnLimits>,
}

pub(crate) async fn set_turn_limits(config: &Config, args: TurnLimitsArgs) -> Result<(), OpError> {
    if let Some(limits) = args.limits {
        limits.check().map_err(OpError::BadRequest)?;
    }
    update_settings(config, |stored| {
        if stored.turn_limits == args.limits && stored.version > 0 {
            return false;
        }
        stored.turn_limits = args.limits;
        true
    })
    .await?;
    Ok(())
}

/// A sentence for an agent the workspace does not have, naming those it does.
pub(crate) async fn no_agent(config: &Config, slug: &str) -> Result<String, StoreError> {
    let slugs: Vec<String> = config
        .agents()
        .await?
        .into_iter()
        .map(|agent| format!("`{}`", agent.slug))
        .collect();
    Ok(format!(
        "there is no agent `{slug}`; this workspace has {}",
        slugs.join(", ")
    ))
}

/// `agents.put`: an agent saved at its version (0: a new one), after its
/// own checks and a check that the provider it names is kept.
pub(crate) async fn put_agent(config: &Config, agent: AgentRecord) -> Result<u64, OpError> {
    agent.check().map_err(bad)?;
    if !agent.provider.is_empty() {
        let kept = config.providers().await?;
        if !kept.iter().any(|provider| provider.name == agent.provider) {
            let names: Vec<String> = kept
                .iter()
                .map(|provider| format!("`{}`", provider.name))
                .collect();
            return Err(bad(format!(
                "agent `{}`: there is no kept provider `{}`; {}",
                agent.slug,
                agent.provider,
                if names.is_empty() {
                    "add one in Settings → Providers first, or leave `provider` empty to use the chat's".to_owned()
                } else {
                    format!("the workspace keeps {}", names.join(", "))
                }
            )));
        }
    }
    Ok(config.put_agent(&agent).await?)
}

/// `config.web_search`: the search API agents' `web_search` asks (`null`:
/// none, and no job has the tool).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WebSearchArgs {
    web_search: Option<kiln_types::search::WebSearch>,
}

pub(crate) async fn set_web_search(config: &Config, args: WebSearchArgs) -> Result<(), OpError> {
    if let Some(search) = &args.web_search {
        search.check().map_err(bad)?;
    }
    update_settings(config, |stored| {
        stored.web_search.clone_from(&args.web_search);
        true
    })
    .await?;
    Ok(())
}

/// `config.team_changes`: whether agents whose profile has `may_change_team`
/// may add agents (`create_agent`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TeamChangesArgs {
    allow: bool,
}

pub(crate) async fn set_team_changes(
    config: &Config,
    args: TeamChangesArgs,
) -> Result<(), OpError> {
    update_settings(config, |stored| {
        let changed = stored.allow_team_changes != args.allow;
        stored.allow_team_changes = args.allow;
        changed
    })
    .await?;
    Ok(())
}
