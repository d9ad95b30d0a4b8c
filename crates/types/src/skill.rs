//! Skills (reference/000, "Skills System"): a name, a one-line description
//! and a Markdown body of guidance an agent loads when it needs it, and the
//! built-in tools the skill unlocks for the agents it is assigned to.
//!
//! Two tiers share one catalog: system skills ship in the build (a
//! `SKILL.md` with a frontmatter, read-only at run time) and user skills are
//! records in the workspace. [`SkillRecord::check`] holds either to its
//! rules; [`parse_skill_md`] reads a shipped file; [`invoked`] finds the
//! skills a message asks for with `/name`.

use serde::{Deserialize, Serialize};

use crate::profile::check_slug;

/// The longest description, in characters: one line of the catalog.
pub const MAX_DESCRIPTION: usize = 300;
/// The longest body, in characters.
pub const MAX_BODY: usize = 64_000;
/// The most tools one skill unlocks.
pub const MAX_REQUIRED_TOOLS: usize = 8;

/// A skill as the workspace keeps it (and as a shipped file reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillRecord {
    /// `a-z`, `0-9`, `-`: what `/name` and `load_skill` call it.
    pub name: String,
    /// One line: when the skill helps.
    pub description: String,
    /// The guidance, in Markdown.
    #[serde(default)]
    pub body: String,
    /// Built-in tools the skill unlocks for the agents it is assigned to
    /// (`http_request`).
    #[serde(default)]
    pub required_tools: Vec<String>,
    /// The compare-and-swap token of its next write (0: never saved).
    #[serde(default)]
    pub version: u64,
}

/// A skill as the catalog answers it: its record and its tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    #[serde(flatten)]
    pub record: SkillRecord,
    /// Shipped with the build, read-only.
    pub system: bool,
}

impl SkillRecord {
    /// Holds the record to its rules; the first problem, named by its field.
    ///
    /// # Errors
    ///
    /// A sentence naming the skill, the field and what it must be.
    pub fn check(&self) -> Result<(), String> {
        check_slug(&self.name).map_err(|why| format!("skill name {why}"))?;
        let who = &self.name;
        let description = self.description.trim();
        if description.is_empty()
            || description.chars().count() > MAX_DESCRIPTION
            || description.contains('\n')
        {
            return Err(format!(
                "skill `{who}`: `description` must be one line of 1 to {MAX_DESCRIPTION} characters saying when it helps"
            ));
        }
        let body = self.body.chars().count();
        if body > MAX_BODY {
            return Err(format!(
                "skill `{who}`: `body` is {body} characters; at most {MAX_BODY}"
            ));
        }
        if self.required_tools.len() > MAX_REQUIRED_TOOLS {
            return Err(format!(
                "skill `{who}`: `required_tools` names {} tools; at most {MAX_REQUIRED_TOOLS}",
                self.required_tools.len()
            ));
        }
        if let Some(tool) = self.required_tools.iter().find(|tool| {
            tool.is_empty()
                || tool.len() > 64
                || !tool
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        }) {
            return Err(format!(
                "skill `{who}`: `required_tools` names `{}`, which is not a tool name (`a-z`, `0-9`, `_`)",
                crate::words::clip(tool, 40)
            ));
        }
        Ok(())
    }

    /// The catalog's line for it: "`name`: description".
    #[must_use]
    pub fn line(&self) -> String {
        format!("`{}`: {}", self.name, self.description.trim())
    }
}

/// Reads a shipped `SKILL.md`: a frontmatter between `---` lines with
/// `name:`, `description:` and optionally `required_tools: [a, b]`, then the
/// body.
///
/// # Errors
///
/// What is missing or malformed, for the build to skip the file by name.
pub fn parse_skill_md(text: &str) -> Result<SkillRecord, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or("a SKILL.md starts with a `---` line opening its frontmatter")?;
    let (front, body) = rest
        .split_once("\n---\n")
        .or_else(|| rest.split_once("\r\n---\r\n"))
        .ok_or("the frontmatter has no closing `---` line")?;
    let mut name = None;
    let mut description = None;
    let mut required_tools = Vec::new();
    for line in front.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| format!("frontmatter line `{line}` is not `key: value`"))?;
        let value = value.trim().trim_matches('"');
        match key.trim() {
            "name" => name = Some(value.to_owned()),
            "description" => description = Some(value.to_owned()),
            "required_tools" => {
                let list = value
                    .strip_prefix('[')
                    .and_then(|list| list.strip_suffix(']'))
                    .ok_or("`required_tools` is a list: `[http_request]`")?;
                required_tools = list
                    .split(',')
                    .map(|tool| tool.trim().trim_matches('"').to_owned())
                    .filter(|tool| !tool.is_empty())
                    .collect();
            }
            other => return Err(format!("frontmatter key `{other}` is not known")),
        }
    }
    let record = SkillRecord {
        name: name.ok_or("the frontmatter has no `name`")?,
        description: description.ok_or("the frontmatter has no `description`")?,
        body: body.trim().to_owned(),
        required_tools,
        version: 0,
    };
    record.check()?;
    Ok(record)
}

/// The names of `names` that `text` invokes as `/name`: the slash at the
/// start or after white space, the name ending the text or followed by
/// white space or a sentence's punctuation. So `src/utils` is a path, not an
/// invocation, and `/web-research,` is one. Each name once, in the order the
/// text first names it.
#[must_use]
pub fn invoked<'a>(text: &str, names: &[&'a str]) -> Vec<&'a str> {
    let mut found: Vec<(usize, &'a str)> = Vec::new();
    for name in names {
        let needle = format!("/{name}");
        let mut from = 0;
        while let Some(at) = text[from..].find(&needle) {
            let start = from + at;
            let end = start + needle.len();
            let before_ok = text[..start]
                .chars()
                .next_back()
                .is_none_or(char::is_whitespace);
            let after_ok = text[end..].chars().next().is_none_or(|c| {
                c.is_whitespace() || matches!(c, '.' | ',' | ';' | ':' | '!' | '?' | ')')
            });
            if before_ok && after_ok {
                found.push((start, name));
                break;
            }
            from = end;
        }
    }
    found.sort_by_key(|(at, _)| *at);
    found.into_iter().map(|(_, name)| name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shipped_file_reads_and_each_problem_is_named() {
        let skill = parse_skill_md(
            "---\nname: web-research\ndescription: Look things up on the web.\nrequired_tools: [http_request]\n---\n# Steps\n\n1. Search.\n",
        )
        .unwrap();
        assert_eq!(skill.name, "web-research");
        assert_eq!(skill.required_tools, ["http_request"]);
        assert_eq!(skill.body, "# Steps\n\n1. Search.");
        for (text, said) in [
            ("# no frontmatter", "starts with a `---` line"),
            ("---\nname: x\n", "no closing `---`"),
            ("---\nname: x\n---\nbody", "no `description`"),
            ("---\nname: X Y\ndescription: d\n---\n", "skill name `X Y`"),
            (
                "---\nname: x\ndescription: d\nowner: me\n---\n",
                "key `owner`",
            ),
            (
                "---\nname: x\ndescription: d\nrequired_tools: http_request\n---\n",
                "is a list",
            ),
        ] {
            let error = parse_skill_md(text).unwrap_err();
            assert!(error.contains(said), "{text:?}: {error}");
        }
    }

    #[test]
    fn a_slash_name_is_an_invocation_only_at_a_word_boundary() {
        let names = ["web-research", "utils", "notes"];
        assert_eq!(
            invoked("Use /web-research, then /notes.", &names),
            ["web-research", "notes"]
        );
        assert_eq!(invoked("/notes first", &names), ["notes"]);
        assert!(invoked("look in src/utils for it", &names).is_empty());
        assert!(invoked("/notesy is not it", &names).is_empty());
        assert!(invoked("http://x/notes", &names).is_empty());
        assert_eq!(
            invoked("twice /notes and /notes", &names),
            ["notes"],
            "once"
        );
    }

    #[test]
    fn a_record_is_held_to_its_rules() {
        let good = SkillRecord {
            name: "notes".into(),
            description: "Keep notes in files.".into(),
            body: String::new(),
            required_tools: vec!["http_request".into()],
            version: 0,
        };
        assert_eq!(good.check(), Ok(()));
        let multi = SkillRecord {
            description: "one\ntwo".into(),
            ..good.clone()
        };
        assert!(multi.check().unwrap_err().contains("must be one line"));
        let tool = SkillRecord {
            required_tools: vec!["Fetch It".into()],
            ..good
        };
        assert!(tool.check().unwrap_err().contains("`Fetch It`"));
    }
}
