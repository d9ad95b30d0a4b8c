//! Skills in a turn (reference/000, "Skills System"): the catalog read
//! fresh for each turn and written into its system prompt one line per
//! skill (never into the thread), the bodies of the skills the person's
//! message names with `/name` put in the same block so the model needs no
//! round trip, and the built-in tools the agent's assigned skills unlock
//! added to the job's whitelist. Nothing picks a skill on its own: the
//! model reads the catalog and loads what it wants with `load_skill`.

use std::fmt::Write as _;

use kiln_run::{Builtin, RunRequest};
use kiln_types::skill::{Skill, invoked};

/// The skills block of a turn's prompt: the catalog (the agent's assigned
/// skills marked) and the bodies `message` invokes with `/name`; empty when
/// there are no skills.
#[must_use]
pub(crate) fn block(listed: &[Skill], assigned: &[String], message: &str) -> String {
    if listed.is_empty() {
        return String::new();
    }
    let mut block = String::from(
        "# Skills\n\nGuidance written for particular kinds of work. Before you act on one, load it: `await tools.load_skill({name})`",
    );
    if assigned.is_empty() {
        block.push_str(".\n");
    } else {
        block.push_str("; those assigned to you are marked (assigned).\n");
    }
    block.push_str(
        "`tools.list_skills({query?})` finds skills; with a workspace, `tools.create_skill({name, description, body, required_tools?})`, `tools.update_skill({name, rename?, description?, body?, required_tools?})` and `tools.delete_skill({name})` keep the person's own (the ones that ship with Kiln are read-only).\n\n",
    );
    for skill in listed {
        let mark = if assigned.contains(&skill.record.name) {
            " (assigned)"
        } else {
            ""
        };
        let _ = writeln!(block, "- {}{mark}", skill.record.line());
    }
    let names: Vec<&str> = listed
        .iter()
        .map(|skill| skill.record.name.as_str())
        .collect();
    let asked = invoked(message, &names);
    if !asked.is_empty() {
        block.push_str(
            "\n## Asked for in this message\n\nThe person named these skills with `/name`: follow them.\n",
        );
        for name in asked {
            if let Some(skill) = listed.iter().find(|skill| skill.record.name == name) {
                let _ = write!(
                    block,
                    "\n### {}\n\n{}\n",
                    skill.record.name,
                    skill.record.body.trim()
                );
            }
        }
    }
    block
}

/// Adds to `run` the built-in tools the `assigned` skills unlock; answers a
/// sentence for each assigned skill the catalog lacks and each tool that is
/// not a built-in Kiln can unlock.
pub(crate) fn unlock(run: &mut RunRequest, listed: &[Skill], assigned: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    for name in assigned {
        let Some(skill) = listed.iter().find(|skill| &skill.record.name == name) else {
            problems.push(format!(
                "the skill `{name}` assigned to this agent is not in the catalog any more, so it unlocks nothing"
            ));
            continue;
        };
        for tool in &skill.record.required_tools {
            match Builtin::ALL
                .into_iter()
                .find(|builtin| builtin.name() == tool)
            {
                Some(builtin) if !run.builtins.contains(&builtin) => run.builtins.push(builtin),
                Some(_) => {}
                None => problems.push(format!(
                    "the skill `{name}` asks for `{tool}`, which is not a built-in tool Kiln can unlock"
                )),
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_types::skill::SkillRecord;

    fn skill(name: &str, tools: &[&str]) -> Skill {
        Skill {
            record: SkillRecord {
                name: name.into(),
                description: format!("{name} helps."),
                body: format!("Body of {name}."),
                required_tools: tools.iter().map(|tool| (*tool).to_owned()).collect(),
                version: 0,
            },
            system: true,
        }
    }

    #[test]
    fn the_catalog_is_one_line_each_and_a_slash_name_brings_its_body() {
        let listed = [skill("notes", &[]), skill("web", &["http_request"])];
        let plain = block(&listed, &[], "Plan my trip");
        assert!(
            plain.contains("- `notes`: notes helps.\n- `web`: web helps.\n"),
            "{plain}"
        );
        assert!(!plain.contains("Body of"), "no body without /name");
        let asked = block(&listed, &["web".into()], "Use /web to plan, see src/notes");
        assert!(asked.contains("- `web`: web helps. (assigned)"), "{asked}");
        assert!(asked.contains("### web\n\nBody of web."), "{asked}");
        assert!(
            !asked.contains("Body of notes"),
            "a path is not an invocation"
        );
        assert_eq!(block(&[], &[], "/web"), "");
    }

    #[test]
    fn an_assigned_skill_unlocks_its_builtin_and_says_what_it_cannot() {
        let listed = [skill("web", &["http_request", "teleport"])];
        let mut run = RunRequest::new("");
        let problems = unlock(&mut run, &listed, &["web".into(), "gone".into()]);
        assert_eq!(run.builtins, [Builtin::HttpRequest]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("`teleport`"));
        assert!(problems[1].contains("`gone`"));
        let mut none = RunRequest::new("");
        assert!(unlock(&mut none, &listed, &[]).is_empty());
        assert!(
            none.builtins.is_empty(),
            "no skills: the always-on set only"
        );
    }
}
