//! `kiln secrets`: the workspace's vault from a terminal — list, set,
//! remove. A value is written once (read from the terminal without echo, or
//! from standard input) and never printed again: `list` says only where each
//! secret may go, who may use it, when it was set and last given to a job.
//! The value is sealed under a key in the OS keyring ([`crate::vault`]); the
//! agents' jobs (`kiln agent run --agent`, `kiln chat --agent`,
//! `kiln schedules run-due`) get the secrets their profile names, as in the
//! app.
//!
//! Exit codes: 0 done; 1 the store or the keyring refused, or there is no
//! such secret; 2 a flag or the value was refused, before anything was written.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;

use kiln_store::vault::Vault;
use kiln_types::Redacted;
use kiln_types::vault::{MAX_VALUE_BYTES, SecretInfo, SecretPut};

use crate::terminal::escaped;

/// `kiln secrets`' subcommands.
#[derive(clap::Args)]
pub struct SecretsArgs {
    #[command(subcommand)]
    command: SecretsCommand,
}

#[derive(clap::Subcommand)]
enum SecretsCommand {
    /// One line per secret: its name, the origins it may be sent to, the
    /// agents that may use it, when it was set and last used. Never a value.
    List {
        #[arg(long)]
        json: bool,
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: PathBuf,
    },
    /// Sets a secret's value (typed without echo on a terminal, else read
    /// from standard input; one trailing line break dropped) and its settings.
    Set {
        /// `A-Z`, `0-9`, `_`, as programs name it: `${GITHUB_TOKEN}`.
        name: String,
        /// An origin it may be sent to (`https://api.github.com`); repeat for
        /// more. Replaces the list; a new secret needs at least one.
        #[arg(long = "origin", value_name = "ORIGIN")]
        origins: Vec<String>,
        /// An agent that may use it (its profile must name it too); repeat
        /// for more. Replaces the list; none: any agent whose profile names it.
        #[arg(long = "agent", value_name = "SLUG")]
        agents: Vec<String>,
        /// Any agent whose profile names it may use it (clears `--agent`'s list).
        #[arg(long, conflicts_with = "agents")]
        any_agent: bool,
        /// Change only the settings; the stored value stays.
        #[arg(long)]
        keep_value: bool,
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: PathBuf,
    },
    /// Removes a secret (its value is gone; the key in the OS keyring stays
    /// for the workspace's other secrets).
    Remove {
        name: String,
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: PathBuf,
    },
}

/// The vault of the store in `dir`.
fn vault(dir: &std::path::Path) -> Result<Vault, (u8, String)> {
    let backend: Rc<dyn kiln_store::Backend> =
        kiln_store::native::LogBackend::open(dir).map_err(|error| {
            (
                1,
                format!("--store {}: {}", dir.display(), error.with_hint()),
            )
        })?;
    Ok(crate::vault::KeyringSealer::vault(backend))
}

fn failed(code: u8, error: &str) -> ExitCode {
    eprintln!("error: {}", escaped(error));
    ExitCode::from(code)
}

/// The value to set: typed without echo on a terminal, else standard input
/// whole (one trailing line break dropped).
fn value(name: &str) -> Result<Redacted, String> {
    let text = if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        rpassword::prompt_password(format!("Value of {name} (not shown): "))
            .map_err(|error| format!("reading the value of `{name}`: {error}"))?
    } else {
        let mut text = String::new();
        std::io::stdin()
            .take(MAX_VALUE_BYTES as u64 + 3)
            .read_to_string(&mut text)
            .map_err(|error| {
                format!("reading the value of `{name}` from standard input: {error}")
            })?;
        let kept = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .map(str::to_owned);
        kept.unwrap_or(text)
    };
    Ok(Redacted::new(text))
}

pub fn run(args: &SecretsArgs) -> ExitCode {
    let outcome: Result<(), (u8, String)> = futures::executor::block_on(async {
        match &args.command {
            SecretsCommand::List { json, store } => {
                let listed = vault(store)?
                    .list()
                    .await
                    .map_err(|e| (1, e.with_hint().to_string()))?;
                if *json {
                    crate::out::line(serde_json::to_string(&listed).unwrap_or_default());
                } else if listed.is_empty() {
                    crate::out::line(format!(
                        "{} keeps no secrets; add one: kiln secrets set NAME --origin https://… --store {}",
                        store.display(),
                        store.display()
                    ));
                } else {
                    list(&listed);
                }
                Ok(())
            }
            SecretsCommand::Set {
                name,
                origins,
                agents,
                any_agent,
                keep_value,
                store,
            } => {
                let vault = vault(store)?;
                let before = vault
                    .list()
                    .await
                    .map_err(|e| (1, e.with_hint().to_string()))?
                    .into_iter()
                    .find(|secret| &secret.name == name);
                if *keep_value && before.is_none() {
                    return Err((
                        2,
                        format!("--keep-value: there is no secret `{name}` to keep a value of"),
                    ));
                }
                let change = SecretPut {
                    name: name.clone(),
                    value: None,
                    origins: if origins.is_empty() {
                        before
                            .as_ref()
                            .map(|b| b.origins.clone())
                            .unwrap_or_default()
                    } else {
                        origins.clone()
                    },
                    agents: match (&before, agents.is_empty() && !any_agent) {
                        (Some(before), true) => before.agents.clone(),
                        _ => agents.clone(),
                    },
                    version: before.as_ref().map_or(0, |b| b.version),
                };
                // The settings first, so a bad origin is said before the value is asked for.
                let checking = SecretPut {
                    value: Some(Redacted::new("x".to_owned())),
                    ..change.clone()
                };
                checking.check().map_err(|why| (2, why))?;
                let change = if *keep_value {
                    change
                } else {
                    SecretPut {
                        value: Some(value(name).map_err(|why| (2, why))?),
                        ..change
                    }
                };
                change.check().map_err(|why| (2, why))?;
                vault
                    .put(&change, kiln_store::clock::epoch_ms())
                    .await
                    .map_err(|e| (1, e.with_hint().to_string()))?;
                eprintln!(
                    "kiln: {} `{name}`, sent only to {}",
                    match (&before, keep_value) {
                        (None, _) => "set",
                        (Some(_), false) => "set a new value of",
                        (Some(_), true) => "changed the settings of",
                    },
                    change.origins.join(", ")
                );
                Ok(())
            }
            SecretsCommand::Remove { name, store } => {
                let vault = vault(store)?;
                let listed = vault
                    .list()
                    .await
                    .map_err(|e| (1, e.with_hint().to_string()))?;
                let Some(secret) = listed.iter().find(|secret| &secret.name == name) else {
                    return Err((1, missing(name, &listed)));
                };
                vault
                    .remove(name, secret.version)
                    .await
                    .map_err(|e| (1, e.with_hint().to_string()))?;
                eprintln!("kiln: removed the secret `{name}`");
                Ok(())
            }
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, why)) => failed(code, &why),
    }
}

/// "There is no secret `X`", with the names there are.
fn missing(name: &str, listed: &[SecretInfo]) -> String {
    if listed.is_empty() {
        return format!("there is no secret `{name}`: the vault is empty");
    }
    let names: Vec<String> = listed.iter().map(|s| format!("`{}`", s.name)).collect();
    format!(
        "there is no secret `{name}`; the secrets are {}",
        names.join(", ")
    )
}

/// One line per secret, names aligned.
fn list(listed: &[SecretInfo]) {
    let now = kiln_store::clock::epoch_ms();
    let width = listed.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for secret in listed {
        let agents = if secret.agents.is_empty() {
            "any agent that names it".to_owned()
        } else {
            secret.agents.join(", ")
        };
        let used = secret.used_ms.map_or_else(
            || "never used".to_owned(),
            |used| format!("used {}", crate::commands::chat::ago(now, used)),
        );
        crate::out::line(escaped(&format!(
            "{:width$}  to {} · for {agents} · set {} · {used}",
            secret.name,
            secret.origins.join(", "),
            crate::commands::chat::ago(now, secret.set_ms),
        )));
    }
}
