//! `kiln skills`: the skill catalog from a terminal — the system skills this
//! build ships (read-only) and the store's own (`--store DIR`): list, show,
//! create, edit, remove. The same catalog every agent turn lists
//! (`kiln_store::skills::Skills`), shipped names reserved.
//!
//! Exit codes: 0 done; 1 the store refused or has no such skill; 2 a flag's
//! value was refused, before anything was written.

use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;

use kiln_store::config::Config;
use kiln_store::skills::Skills;
use kiln_types::skill::SkillRecord;

use crate::terminal::escaped;

/// `kiln skills`' subcommands.
#[derive(clap::Args)]
pub struct SkillsArgs {
    #[command(subcommand)]
    command: SkillsCommand,
}

/// A skill's fields, as `create` and `edit` take them.
#[derive(clap::Args)]
struct SkillFlags {
    /// One line: when the skill helps.
    #[arg(long)]
    description: Option<String>,
    /// The guidance, in Markdown, from FILE (`-`: standard input).
    #[arg(long, value_name = "FILE")]
    body_file: Option<PathBuf>,
    /// A built-in tool the skill unlocks for the agents it is assigned to
    /// (`http_request`); repeat for more. Replaces the list on `edit`.
    #[arg(long = "tool", value_name = "TOOL")]
    tools: Vec<String>,
}

#[derive(clap::Subcommand)]
enum SkillsCommand {
    /// One line per skill: its name, whether it ships with Kiln, its description.
    List {
        #[arg(long)]
        json: bool,
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: Option<PathBuf>,
    },
    /// One skill whole: its description, tools and body.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: Option<PathBuf>,
    },
    /// A new skill of the store's (a system skill's name is refused).
    Create {
        name: String,
        #[command(flatten)]
        fields: SkillFlags,
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: PathBuf,
    },
    /// Change one of the store's skills; `--rename` gives it another name.
    Edit {
        name: String,
        #[arg(long, value_name = "NEW")]
        rename: Option<String>,
        #[command(flatten)]
        fields: SkillFlags,
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: PathBuf,
    },
    /// Remove one of the store's skills.
    Remove {
        name: String,
        #[arg(long, value_name = "DIR", env = "KILN_STORE")]
        store: PathBuf,
    },
}

fn catalog(store: Option<&std::path::Path>) -> anyhow::Result<Skills> {
    let Some(store) = store else {
        return Ok(Skills::new(None));
    };
    let backend: Rc<dyn kiln_store::Backend> = kiln_store::native::LogBackend::open(store)
        .map_err(|error| anyhow::anyhow!("--store {}: {}", store.display(), error.with_hint()))?;
    Ok(Skills::new(Some(Config::new(backend))))
}

fn failed(code: u8, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {}", escaped(&error.to_string()));
    ExitCode::from(code)
}

/// The body `--body-file` names, read whole (at most the longest body a skill may have).
fn body(file: &std::path::Path) -> anyhow::Result<String> {
    use std::io::Read as _;
    let limit = (kiln_types::skill::MAX_BODY * 4 + 1) as u64;
    let mut text = String::new();
    let read = if file.as_os_str() == "-" {
        std::io::stdin().take(limit).read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|open| open.take(limit).read_to_string(&mut text))
    };
    read.map_err(|error| anyhow::anyhow!("--body-file {}: {error}", file.display()))?;
    Ok(text)
}

pub fn run(args: &SkillsArgs) -> ExitCode {
    let outcome: Result<ExitCode, (u8, String)> = futures::executor::block_on(async {
        match &args.command {
            SkillsCommand::List { json, store } => {
                let skills = catalog(store.as_deref()).map_err(|e| (1, format!("{e:#}")))?;
                let listed = skills
                    .list()
                    .await
                    .map_err(|e| (1, e.with_hint().to_string()))?;
                if *json {
                    crate::out::line(serde_json::to_string(&listed).unwrap_or_default());
                } else {
                    let width = listed
                        .iter()
                        .map(|s| s.record.name.len())
                        .max()
                        .unwrap_or(0);
                    for skill in &listed {
                        crate::out::line(escaped(&format!(
                            "{:width$}  {}  {}",
                            skill.record.name,
                            if skill.system { "system" } else { "yours " },
                            skill.record.description
                        )));
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
            SkillsCommand::Show { name, json, store } => {
                let skills = catalog(store.as_deref()).map_err(|e| (1, format!("{e:#}")))?;
                let Some(skill) = skills
                    .get(name)
                    .await
                    .map_err(|e| (1, e.with_hint().to_string()))?
                else {
                    let names: Vec<String> = skills
                        .list()
                        .await
                        .map_err(|e| (1, e.with_hint().to_string()))?
                        .iter()
                        .map(|skill| format!("`{}`", skill.record.name))
                        .collect();
                    return Err((
                        1,
                        format!(
                            "there is no skill `{name}`; the skills are {}",
                            names.join(", ")
                        ),
                    ));
                };
                if *json {
                    crate::out::line(serde_json::to_string(&skill).unwrap_or_default());
                } else {
                    crate::out::line(escaped(&format!(
                        "{}{}\n{}\ntools: {}\n\n{}",
                        skill.record.name,
                        if skill.system {
                            " (ships with Kiln, read-only)"
                        } else {
                            ""
                        },
                        skill.record.description,
                        if skill.record.required_tools.is_empty() {
                            "none".to_owned()
                        } else {
                            skill.record.required_tools.join(", ")
                        },
                        skill.record.body
                    )));
                }
                Ok(ExitCode::SUCCESS)
            }
            SkillsCommand::Create {
                name,
                fields,
                store,
            } => {
                let record = SkillRecord {
                    name: name.clone(),
                    description: fields.description.clone().unwrap_or_default(),
                    body: match &fields.body_file {
                        Some(file) => body(file).map_err(|e| (2, format!("{e:#}")))?,
                        None => String::new(),
                    },
                    required_tools: fields.tools.clone(),
                    version: 0,
                };
                record.check().map_err(|why| (2, why))?;
                let skills = catalog(Some(store)).map_err(|e| (1, format!("{e:#}")))?;
                skills.create(&record).await.map_err(|error| match error {
                    kiln_store::StoreError::Conflict { .. } => (
                        1,
                        format!("skill `{name}` already exists; use `kiln skills edit`"),
                    ),
                    kiln_store::StoreError::Invalid(why) => (2, why),
                    other => (1, other.with_hint().to_string()),
                })?;
                crate::out::line(format_args!("skill `{name}` created"));
                Ok(ExitCode::SUCCESS)
            }
            SkillsCommand::Edit {
                name,
                rename,
                fields,
                store,
            } => {
                let skills = catalog(Some(store)).map_err(|e| (1, format!("{e:#}")))?;
                let Some(current) = skills
                    .get(name)
                    .await
                    .map_err(|e| (1, e.with_hint().to_string()))?
                else {
                    return Err((1, format!("there is no skill `{name}`")));
                };
                let record = SkillRecord {
                    name: rename.clone().unwrap_or_else(|| name.clone()),
                    description: fields
                        .description
                        .clone()
                        .unwrap_or(current.record.description),
                    body: match &fields.body_file {
                        Some(file) => body(file).map_err(|e| (2, format!("{e:#}")))?,
                        None => current.record.body,
                    },
                    required_tools: if fields.tools.is_empty() {
                        current.record.required_tools
                    } else {
                        fields.tools.clone()
                    },
                    version: current.record.version,
                };
                record.check().map_err(|why| (2, why))?;
                skills
                    .update(name, &record)
                    .await
                    .map_err(|error| match error {
                        kiln_store::StoreError::Invalid(why) => (1, why),
                        other => (1, other.with_hint().to_string()),
                    })?;
                crate::out::line(format_args!("skill `{}` saved", record.name));
                Ok(ExitCode::SUCCESS)
            }
            SkillsCommand::Remove { name, store } => {
                let skills = catalog(Some(store)).map_err(|e| (1, format!("{e:#}")))?;
                let version = skills
                    .get(name)
                    .await
                    .map_err(|e| (1, e.with_hint().to_string()))?
                    .map_or(0, |skill| skill.record.version);
                skills
                    .delete(name, version)
                    .await
                    .map_err(|error| match error {
                        kiln_store::StoreError::Conflict { .. }
                        | kiln_store::StoreError::NotFound { .. } => {
                            (1, format!("there is no skill `{name}` of this store's"))
                        }
                        other => (1, other.with_hint().to_string()),
                    })?;
                crate::out::line(format_args!("skill `{name}` removed"));
                Ok(ExitCode::SUCCESS)
            }
        }
    });
    outcome.unwrap_or_else(|(code, message)| failed(code, &message))
}
