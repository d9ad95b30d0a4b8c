//! The permission settings kept in the workspace's configuration: the mode
//! and the brake in `Settings`, each tool's setting in the `default` agent's
//! autonomy, in the gate's words (`auto`, `ask`, `block`); each change is one
//! storage operation, which the runtime worker writes at the record's
//! version (a change made in another tab is read again, not overwritten
//! blindly). The network setting (what `http_request` may reach, off for a
//! new workspace) is kept in `Settings` too.

use std::cell::RefCell;
use std::rc::Rc;

use kiln_types::permission::{Autonomy, GateSettings, Mode, RETURN_RESULT};
use kiln_types::records::{ConfigView, DEFAULT_AGENT};
use kiln_types::runtime::Problem;
use serde_json::{Value, json};

use crate::storage::Stores;

/// The stored permission settings.
pub(crate) struct Stored {
    pub mode: Mode,
    pub brake: bool,
    pub autonomy: Vec<(String, Option<Autonomy>)>,
}

/// Reads what is stored; settings never saved read as the defaults.
pub(crate) async fn load(stores: &Stores) -> Result<(Stored, ConfigView), Problem> {
    let config: ConfigView = stores.op("config.get", json!({})).await?;
    let agent = config
        .agents
        .iter()
        .find(|agent| agent.slug == DEFAULT_AGENT);
    let stored = Stored {
        mode: config
            .settings
            .permission_mode
            .parse()
            .unwrap_or(Mode::Default),
        brake: config.settings.brake,
        autonomy: agent
            .map(|agent| {
                agent
                    .autonomy
                    .iter()
                    .map(|(tool, setting)| (tool.clone(), Some(*setting)))
                    .collect()
            })
            .unwrap_or_default(),
    };
    Ok((stored, config))
}

/// The page's permission settings: what the panel shows and edits, and what
/// each run carries to the runtime worker's gate.
#[derive(Clone, Default)]
pub(crate) struct PageSettings(Rc<RefCell<GateSettings>>);

impl PageSettings {
    pub(crate) fn settings(&self) -> GateSettings {
        self.0.borrow().clone()
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        self.0.borrow_mut().mode = mode;
    }

    pub(crate) fn set_brake(&self, brake: bool) {
        self.0.borrow_mut().brake = brake;
    }

    /// A tool's setting (`None`: it follows the mode). `return_result`
    /// cannot be blocked: that setting is left out.
    pub(crate) fn set_autonomy(&self, tool: &str, setting: Option<Autonomy>) {
        let mut settings = self.0.borrow_mut();
        match setting {
            Some(Autonomy::Block) if tool == RETURN_RESULT => {}
            Some(setting) => {
                settings.autonomy.insert(tool.to_owned(), setting);
            }
            None => {
                settings.autonomy.remove(tool);
            }
        }
    }

    /// Takes the stored settings (a tool missing from them follows the mode).
    pub(crate) fn apply(&self, stored: &Stored) {
        self.set_mode(stored.mode);
        self.set_brake(stored.brake);
        self.0.borrow_mut().autonomy.clear();
        for (tool, setting) in &stored.autonomy {
            self.set_autonomy(tool, *setting);
        }
    }
}

/// Saves the mode and the brake. `Err` is a sentence for the page.
pub(crate) async fn save_settings(stores: &Stores, settings: &GateSettings) -> Result<(), String> {
    let change = json!({"mode": settings.mode.as_str(), "brake": settings.brake});
    stores
        .act("config.permissions", change)
        .await
        .map_err(|problem| not_saved(&problem))
}

/// Saves each tool's setting as the `default` agent's autonomy.
pub(crate) async fn save_autonomy(stores: &Stores, settings: &GateSettings) -> Result<(), String> {
    let autonomy: serde_json::Map<String, Value> = settings
        .autonomy
        .iter()
        .map(|(tool, autonomy)| (tool.clone(), autonomy.as_str().into()))
        .collect();
    stores
        .act("config.permissions", json!({"autonomy": autonomy}))
        .await
        .map_err(|problem| not_saved(&problem))
}

fn not_saved(problem: &Problem) -> String {
    crate::storage_model::ErrorText::with_prefix(
        "The permission settings were not saved: ",
        problem,
    )
    .sentence()
}

/// What the app's programs may reach: off, public addresses, named origins.
pub(crate) use kiln_types::records::Network;

/// Asks for the network in a run request's JSON as `network` says.
pub(crate) fn ask(network: &Network, request: &mut Value) {
    match network {
        Network::Off => {}
        Network::Public => request["builtins"] = json!(["http_request"]),
        Network::Only(origins) => request["allow_net"] = json!(origins),
    }
}

/// Reads the person's origins list (commas or white space between); the
/// runtime worker checks each as `http_request` will read it when the
/// setting is saved. `Err` is a sentence for the page.
pub(crate) fn parse_origins(text: &str) -> Result<Vec<String>, String> {
    let origins: Vec<String> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|origin| !origin.is_empty())
        .map(str::to_owned)
        .collect();
    if origins.is_empty() {
        return Err("Name at least one origin, such as https://api.example.com.".into());
    }
    Ok(origins)
}

/// Saves the network setting. `Err` is a sentence for the page.
pub(crate) async fn save_network(stores: &Stores, network: &Network) -> Result<(), String> {
    stores
        .act("config.network", json!({"network": network}))
        .await
        .map_err(|problem| format!("Not saved: {}", problem.message))
}
