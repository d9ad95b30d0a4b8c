//! The permission settings kept in the workspace's configuration: the mode
//! and the brake in `Settings`, each tool's setting in the `default` agent's
//! autonomy, in the gate's words (`auto`, `ask`, `block`); each change writes
//! one record. Saving reads the record again and writes at its version, so a
//! change made in another tab is not overwritten blindly: a lost race reads
//! again and retries. The network setting (what `http_request` may reach,
//! off for a new workspace) is kept in `Settings` too.

use kiln_capabilities::{Autonomy, Gate, GateSettings, Mode, NetPolicy};
use kiln_store::config::{AgentRecord, Config};
use kiln_store::durable::DEFAULT_AGENT;
use kiln_store::{StoreError, retry_on_conflict};
use serde_json::{Value, json};

const ATTEMPTS: usize = 4;

/// The stored permission settings.
pub(crate) struct Stored {
    pub mode: Mode,
    pub brake: bool,
    pub autonomy: Vec<(String, Option<Autonomy>)>,
}

/// Reads what is stored; settings never saved read as the defaults.
pub(crate) async fn load(config: &Config) -> Result<Stored, StoreError> {
    let settings = config.settings().await?;
    let agent = config
        .agents()
        .await?
        .into_iter()
        .find(|agent| agent.slug == DEFAULT_AGENT);
    Ok(Stored {
        mode: settings.permission_mode.parse().unwrap_or(Mode::Default),
        brake: settings.brake,
        autonomy: agent
            .map(|agent| {
                agent
                    .autonomy
                    .iter()
                    .map(|(tool, setting)| (tool.clone(), setting.parse().ok()))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// Puts the stored settings on the gate (a tool missing from them follows the mode).
pub(crate) fn apply(gate: &Gate, stored: &Stored) {
    gate.set_mode(stored.mode);
    gate.set_brake(stored.brake);
    let current: Vec<String> = gate.settings().autonomy.keys().cloned().collect();
    for tool in current {
        if !stored.autonomy.iter().any(|(name, _)| *name == tool) {
            let _ = gate.set_autonomy(&tool, None);
        }
    }
    for (tool, setting) in &stored.autonomy {
        let _ = gate.set_autonomy(tool, *setting);
    }
}

/// Saves the mode and the brake. `Err` is a sentence for the page.
pub(crate) async fn save_settings(config: &Config, settings: &GateSettings) -> Result<(), String> {
    retry_on_conflict(ATTEMPTS, || async move {
        let mut stored = config.settings().await?;
        stored.permission_mode = settings.mode.as_str().to_owned();
        stored.brake = settings.brake;
        config.put_settings(&stored).await
    })
    .await
    .map(drop)
    .map_err(not_saved)
}

/// Saves each tool's setting as the `default` agent's autonomy.
pub(crate) async fn save_autonomy(config: &Config, settings: &GateSettings) -> Result<(), String> {
    retry_on_conflict(ATTEMPTS, || async move {
        let existing = config.agents().await?;
        let mut agent = existing
            .into_iter()
            .find(|agent| agent.slug == DEFAULT_AGENT)
            .unwrap_or_else(|| AgentRecord {
                slug: DEFAULT_AGENT.into(),
                name: "Default".into(),
                system_prompt: String::new(),
                model: String::new(),
                autonomy: std::collections::BTreeMap::new(),
                version: 0,
            });
        agent.autonomy = settings
            .autonomy
            .iter()
            .map(|(tool, autonomy)| (tool.clone(), autonomy.as_str().to_owned()))
            .collect();
        config.put_agent(&agent).await
    })
    .await
    .map(drop)
    .map_err(not_saved)
}

fn not_saved(error: StoreError) -> String {
    format!(
        "The permission settings were not saved: {}",
        error.with_hint()
    )
}

/// What the app's programs may reach: off, public addresses, named origins.
pub(crate) use kiln_store::config::Network;

/// Asks for the network in a run request's JSON as `network` says.
pub(crate) fn ask(network: &Network, request: &mut Value) {
    match network {
        Network::Off => {}
        Network::Public => request["builtins"] = json!([kiln_capabilities::http_request::NAME]),
        Network::Only(origins) => request["allow_net"] = json!(origins),
    }
}

/// Reads the person's origins list (commas or white space between), checked
/// as `http_request` will read it. `Err` is a sentence for the page.
pub(crate) fn parse_origins(text: &str) -> Result<Vec<String>, String> {
    let origins: Vec<String> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|origin| !origin.is_empty())
        .map(str::to_owned)
        .collect();
    if origins.is_empty() {
        return Err("Name at least one origin, such as https://api.example.com.".into());
    }
    NetPolicy::parse_origins(&origins).map_err(|why| format!("Not saved: {why}"))?;
    Ok(origins)
}

/// Saves the network setting. `Err` is a sentence for the page.
pub(crate) async fn save_network(config: &Config, network: &Network) -> Result<(), String> {
    retry_on_conflict(ATTEMPTS, || async move {
        let mut stored = config.settings().await?;
        stored.network = network.clone();
        config.put_settings(&stored).await
    })
    .await
    .map(drop)
    .map_err(not_saved)
}
