//! The provider a run, a chat turn or a model list names: given whole, or
//! one the workspace keeps, by name ([`provider_config`]), and the model a
//! kept provider was saved with ([`kept_model`]).

use kiln_store::StoreError;
use kiln_store::config::Config;
use kiln_types::chat::{ProviderConfig, ProviderKind};
use serde::Deserialize;
use serde_json::Value;

/// Why a provider field could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The field is not a provider, or names one that is not kept.
    #[error("{0}")]
    Invalid(String),
    /// The workspace's configuration could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(message: impl Into<String>) -> ProviderError {
    ProviderError::Invalid(message.into())
}

/// The model a kept provider was saved with, for a provider field naming
/// one (`{stored: NAME}`); `None` for a provider given whole, or when the
/// storage or the record is not there.
pub async fn kept_model(config: Option<&Config>, provider: &Value) -> Option<String> {
    let name = provider.get("stored")?.as_str()?;
    let providers = config?.providers().await.ok()?;
    providers
        .into_iter()
        .find(|record| record.name == name)
        .map(|record| record.model)
        .filter(|model| !model.trim().is_empty())
}

/// What the provider field of a chat turn or a model list may be.
pub const PROVIDER_SHAPE: &str = "{kind: \"openai\" | \"anthropic\" | \"ollama\", base_url, key?}, {kind: \"browser\"} (Kiln's own model), or {stored: NAME, kind?, base_url?} for a provider the workspace keeps";

/// A chat turn's or a model list's provider: given whole (`{kind,
/// base_url, key?}`), or one the workspace keeps, by name (`{stored,
/// kind?, base_url?}`: the form of a provider being edited, whose kept key
/// goes along only to the kind and origin it was saved for).
///
/// # Errors
///
/// A sentence naming what is wrong: the shape, no storage, no such provider.
pub async fn provider_config(
    config: Option<&Config>,
    value: &Value,
) -> Result<ProviderConfig, ProviderError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Stored {
        stored: String,
        #[serde(default)]
        kind: Option<String>,
        #[serde(default)]
        base_url: Option<String>,
    }
    if value.get("stored").is_none() {
        let mut given: ProviderConfig = serde_json::from_value(value.clone()).map_err(|error| {
            invalid(format!(
                "`provider` is not valid ({error}): {PROVIDER_SHAPE}"
            ))
        })?;
        if given.base_url.trim().is_empty() {
            given.base_url = given.kind.default_base_url().to_owned();
        }
        return Ok(given);
    }
    let asked: Stored = serde_json::from_value(value.clone()).map_err(|error| {
        invalid(format!(
            "`provider` is not valid ({error}): {PROVIDER_SHAPE}"
        ))
    })?;
    let config = config.ok_or_else(|| {
        invalid(format!(
            "`provider` names the kept provider `{}`, but this workspace's storage is not available",
            asked.stored
        ))
    })?;
    let record = config
        .providers()
        .await?
        .into_iter()
        .find(|provider| provider.name == asked.stored)
        .ok_or_else(|| invalid(format!("no provider named `{}` is kept", asked.stored)))?;
    let kind_text = asked.kind.unwrap_or_else(|| record.kind.clone());
    let kind = ProviderKind::parse(&kind_text).ok_or_else(|| {
        invalid(format!(
            "`{kind_text}` is not a provider kind: openai, anthropic or ollama"
        ))
    })?;
    let base_url = match asked.base_url.unwrap_or_else(|| record.base_url.clone()) {
        url if url.trim().is_empty() => kind.default_base_url().to_owned(),
        url => url.trim().to_owned(),
    };
    let key =
        kiln_types::chat::key_goes_to(&record.kind, &record.base_url, kind.as_str(), &base_url)
            .then(|| record.key.clone())
            .flatten();
    Ok(ProviderConfig {
        kind,
        base_url,
        key,
    })
}
