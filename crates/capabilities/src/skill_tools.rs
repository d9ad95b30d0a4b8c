//! The skill capabilities (reference/000, "Skills System"): `list_skills`
//! (names and descriptions, optionally filtered), `load_skill` (one skill's
//! whole body), and `create_skill`, `update_skill`, `delete_skill` over
//! the workspace's own skills, each a thin door onto
//! [`kiln_store::skills::Skills`], which reserves the shipped names. Every
//! answer says whether the skill is a system one.
//!
//! Reads are category `read`; the three writes are `write`, so plan mode
//! refuses them at the gate and default mode asks. An agent turn mounts
//! them ([`add_skill_tools`]); without a workspace only the reads are there.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_store::skills::Skills;
use kiln_types::skill::{Skill, SkillRecord};
use kiln_types::tool_result::ToolReply;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::dispatch::{CallContext, Permit};
use crate::registry::{Implementation, Registry};
use crate::spec::{CapabilitySpec, Category};
use crate::storage::{arguments, failure, spec, store_failure};

pub const LIST_SKILLS: &str = "list_skills";
pub const LOAD_SKILL: &str = "load_skill";
pub const CREATE_SKILL: &str = "create_skill";
pub const UPDATE_SKILL: &str = "update_skill";
pub const DELETE_SKILL: &str = "delete_skill";

/// The skill capabilities' names, reads first.
pub const SKILL_TOOLS: [&str; 5] = [
    LIST_SKILLS,
    LOAD_SKILL,
    CREATE_SKILL,
    UPDATE_SKILL,
    DELETE_SKILL,
];

fn skill_fields() -> Value {
    json!({
        "name": {"type": "string", "description": "`a-z`, `0-9` and `-`: what `/name` and load_skill call it."},
        "description": {"type": "string", "description": "One line: when the skill helps."},
        "body": {"type": "string", "description": "The guidance, in Markdown."},
        "required_tools": {"type": "array", "items": {"type": "string"}, "description": "Built-in tools the skill unlocks for the agents it is assigned to (`http_request`)."}
    })
}

fn entry(skill: &Skill, body: bool) -> Value {
    let mut value = json!({
        "name": skill.record.name,
        "description": skill.record.description,
        "system": skill.system,
        "required_tools": skill.record.required_tools,
    });
    if body {
        value["body"] = skill.record.body.clone().into();
        value["version"] = skill.record.version.into();
    }
    value
}

/// Which capability a [`SkillTool`] is.
#[derive(Clone, Copy)]
enum Verb {
    List,
    Load,
    Create,
    Update,
    Delete,
}

impl Verb {
    fn spec(self) -> CapabilitySpec {
        match self {
            Self::List => spec(
                LIST_SKILLS,
                "Lists the skills (names, one-line descriptions, whether each ships with Kiln), optionally those whose name or description has every word of `query`. Load one with load_skill before acting on it.".into(),
                Category::Read,
                json!({
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "additionalProperties": false
                }),
                json!({"type": "array"}),
            ),
            Self::Load => spec(
                LOAD_SKILL,
                "Answers one skill's whole guidance by name: {name, description, body, system, required_tools}.".into(),
                Category::Read,
                json!({
                    "type": "object",
                    "properties": {"name": {"type": "string", "minLength": 1}},
                    "required": ["name"],
                    "additionalProperties": false
                }),
                json!({"type": "object"}),
            ),
            Self::Create => spec(
                CREATE_SKILL,
                "Writes a new skill to the workspace (a name no skill has; the system skills' names are reserved). Answers {name, version}.".into(),
                Category::Write,
                json!({
                    "type": "object",
                    "properties": skill_fields(),
                    "required": ["name", "description", "body"],
                    "additionalProperties": false
                }),
                json!({"type": "object"}),
            ),
            Self::Update => spec(
                UPDATE_SKILL,
                "Changes one of the workspace's skills: its description, body or required tools, or its name (`rename`). System skills cannot be changed. Answers {name, version}.".into(),
                Category::Write,
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "description": "The skill to change."},
                        "rename": {"type": "string", "description": "Its new name."},
                        "description": {"type": "string"},
                        "body": {"type": "string"},
                        "required_tools": {"type": "array", "items": {"type": "string"}}
                    },
                    "required": ["name"],
                    "additionalProperties": false
                }),
                json!({"type": "object"}),
            ),
            Self::Delete => spec(
                DELETE_SKILL,
                "Deletes one of the workspace's skills by name. System skills cannot be deleted.".into(),
                Category::Write,
                json!({
                    "type": "object",
                    "properties": {"name": {"type": "string", "minLength": 1}},
                    "required": ["name"],
                    "additionalProperties": false
                }),
                json!({"type": "object"}),
            ),
        }
    }
}

/// One skill capability over a catalog.
struct SkillTool {
    skills: Rc<Skills>,
    verb: Verb,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Query {
    #[serde(default)]
    query: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Named {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    name: String,
    #[serde(default)]
    rename: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    required_tools: Option<Vec<String>>,
}

fn not_found(name: &str, listed: &[Skill]) -> kiln_types::tool_result::ToolFailure {
    failure(
        "not_found",
        format!(
            "there is no skill `{name}`; the skills are {}",
            listed
                .iter()
                .map(|skill| format!("`{}`", skill.record.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
}

async fn run(skills: Rc<Skills>, verb: Verb, args: Value) -> ToolReply {
    match verb {
        Verb::List => {
            let Query { query } = arguments(LIST_SKILLS, args)?;
            let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
            let listed = skills.list().await.map_err(store_failure)?;
            Ok(Value::Array(
                listed
                    .iter()
                    .filter(|skill| {
                        let text = format!("{} {}", skill.record.name, skill.record.description)
                            .to_lowercase();
                        words.iter().all(|word| text.contains(word))
                    })
                    .map(|skill| entry(skill, false))
                    .collect(),
            ))
        }
        Verb::Load => {
            let Named { name } = arguments(LOAD_SKILL, args)?;
            match skills.get(&name).await.map_err(store_failure)? {
                Some(skill) => Ok(entry(&skill, true)),
                None => Err(not_found(
                    &name,
                    &skills.list().await.map_err(store_failure)?,
                )),
            }
        }
        Verb::Create => {
            let record: SkillRecord = arguments(CREATE_SKILL, args)?;
            let version = skills.create(&record).await.map_err(store_failure)?;
            Ok(json!({"name": record.name, "version": version}))
        }
        Verb::Update => {
            let change: Change = arguments(UPDATE_SKILL, args)?;
            let Some(current) = skills.get(&change.name).await.map_err(store_failure)? else {
                return Err(not_found(
                    &change.name,
                    &skills.list().await.map_err(store_failure)?,
                ));
            };
            let record = SkillRecord {
                name: change.rename.unwrap_or_else(|| change.name.clone()),
                description: change.description.unwrap_or(current.record.description),
                body: change.body.unwrap_or(current.record.body),
                required_tools: change
                    .required_tools
                    .unwrap_or(current.record.required_tools),
                version: current.record.version,
            };
            let version = skills
                .update(&change.name, &record)
                .await
                .map_err(store_failure)?;
            Ok(json!({"name": record.name, "version": version}))
        }
        Verb::Delete => {
            let Named { name } = arguments(DELETE_SKILL, args)?;
            let version = skills
                .get(&name)
                .await
                .map_err(store_failure)?
                .map_or(0, |skill| skill.record.version);
            skills.delete(&name, version).await.map_err(store_failure)?;
            Ok(json!({"deleted": name}))
        }
    }
}

impl Implementation for SkillTool {
    fn call(
        &self,
        args: Value,
        _context: CallContext,
        _permit: Permit,
    ) -> LocalBoxFuture<'static, ToolReply> {
        Box::pin(run(self.skills.clone(), self.verb, args))
    }
}

/// Every skill capability's spec.
#[must_use]
pub fn specs() -> Vec<CapabilitySpec> {
    [
        Verb::List,
        Verb::Load,
        Verb::Create,
        Verb::Update,
        Verb::Delete,
    ]
    .into_iter()
    .map(Verb::spec)
    .collect()
}

/// Mounts the skill capabilities over `skills`: the reads always, the
/// writes when `writable` (the job has a workspace to keep skills in).
pub fn add_skill_tools(registry: &mut Registry, skills: &Rc<Skills>, writable: bool) {
    let verbs: &[Verb] = if writable {
        &[
            Verb::List,
            Verb::Load,
            Verb::Create,
            Verb::Update,
            Verb::Delete,
        ]
    } else {
        &[Verb::List, Verb::Load]
    };
    for verb in verbs {
        // Built-in specs are ours and compile (tested).
        let _ = registry.add(
            verb.spec(),
            Rc::new(SkillTool {
                skills: skills.clone(),
                verb: *verb,
            }),
        );
    }
}
