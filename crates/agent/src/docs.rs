//! `kiln_docs` (reference/003's always-on documentation search): Kiln's
//! own documentation searched offline, with no model and no network — the
//! README (compiled in, one section per heading), the capability manifest
//! (what a program has and its budgets) and the skills of the catalog.
//! Sections are ranked by BM25 over their words; each hit answers where it
//! is from and the part of the section around the first word that matched.

use std::collections::BTreeMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use kiln_capabilities::{CallContext, CapabilitySpec, Category, Implementation, Permit};
use kiln_store::text::{query_terms, words};
use kiln_types::skill::Skill;
use kiln_types::tool_result::ToolReply;
use serde_json::{Value, json};

use crate::codeact::tools::{builtin, failure};

/// The tool's name.
pub(crate) const KILN_DOCS: &str = "kiln_docs";

const README: &str = include_str!("../../../README.md");

/// How much of a section a hit answers, in characters.
const EXCERPT: usize = 1_200;
/// The most hits a call answers, and how many when it does not say.
const MAX_LIMIT: usize = 10;
const DEFAULT_LIMIT: usize = 4;

/// One searchable part of the documentation.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    /// Where it is: `README › Storage: memory, history and files`.
    pub source: String,
    pub text: String,
}

/// The README's sections, one per `##`/`###` heading (the text before the
/// first heading is the introduction).
fn readme() -> Vec<Section> {
    let mut sections = Vec::new();
    let mut source = "README › Kiln".to_owned();
    let mut parent = String::new();
    let mut text = String::new();
    let mut fenced = false;
    for line in README.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        let heading = if fenced {
            None
        } else if let Some(title) = line.strip_prefix("## ") {
            parent = title.trim().to_owned();
            Some(format!("README › {parent}"))
        } else {
            line.strip_prefix("### ")
                .map(|title| format!("README › {parent} › {}", title.trim()))
        };
        if let Some(heading) = heading {
            if !text.trim().is_empty() {
                sections.push(Section {
                    source: std::mem::take(&mut source),
                    text: std::mem::take(&mut text),
                });
            }
            source = heading;
            text.clear();
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    if !text.trim().is_empty() {
        sections.push(Section { source, text });
    }
    sections
}

/// Everything `kiln_docs` searches: the README, the manifest, `skills`.
pub(crate) fn sections(skills: &[Skill]) -> Vec<Section> {
    let mut all = readme();
    all.push(Section {
        source: "Manifest › what a program has".into(),
        text: kiln_types::manifest::manifest().node_help(),
    });
    // Each global and module on its own, for a contract that lists them by
    // their usages alone (a small model's) and sends the model here.
    all.extend(kiln_types::guest::GLOBALS.iter().map(|global| Section {
        source: format!("Library › {}", global.name),
        text: format!("`{}`: {}", global.usage, global.summary),
    }));
    all.extend(kiln_types::guest::MODULES.iter().map(|module| {
        let mut text = module.import_line();
        for export in module.exports {
            text.push_str(&format!("\n- `{}`: {}", export.usage, export.summary));
        }
        Section {
            source: format!("Library › {}", module.specifier),
            text,
        }
    }));
    all.extend(skills.iter().map(|skill| Section {
        source: format!("Skill › {}", skill.record.name),
        text: format!("{}\n\n{}", skill.record.description, skill.record.body),
    }));
    all
}

/// The sections that match `query` best, best first, with their scores.
pub(crate) fn search<'a>(sections: &'a [Section], query: &str, limit: usize) -> Vec<&'a Section> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let terms = query_terms(query);
    if terms.is_empty() {
        return Vec::new();
    }
    let counted: Vec<(BTreeMap<String, usize>, usize)> = sections
        .iter()
        .map(|section| {
            let mut counts = BTreeMap::new();
            let mut length = 0;
            for word in words(&format!("{} {}", section.source, section.text)) {
                length += 1;
                *counts.entry(word).or_insert(0) += 1;
            }
            (counts, length)
        })
        .collect();
    let n = sections.len() as f64;
    let average = (counted.iter().map(|(_, length)| *length).sum::<usize>() as f64
        / counted.len().max(1) as f64)
        .max(1.0);
    let idf: Vec<f64> = terms
        .iter()
        .map(|term| {
            let df = counted
                .iter()
                .filter(|(counts, _)| counts.contains_key(term))
                .count() as f64;
            ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
        })
        .collect();
    let mut scored: Vec<(f64, usize)> = counted
        .iter()
        .enumerate()
        .map(|(index, (counts, length))| {
            let score = terms
                .iter()
                .zip(&idf)
                .map(|(term, idf)| {
                    let tf = *counts.get(term).unwrap_or(&0) as f64;
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * (*length as f64) / average))
                })
                .sum();
            (score, index)
        })
        .filter(|(score, _)| *score > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored
        .into_iter()
        .take(limit)
        .map(|(_, index)| &sections[index])
        .collect()
}

/// The part of `text` around the first of `terms` it has, at most
/// [`EXCERPT`] characters, on line boundaries where it can.
fn excerpt(text: &str, terms: &[String]) -> String {
    let lower = text.to_lowercase();
    let at = terms
        .iter()
        .filter_map(|term| lower.find(term.as_str()))
        .min()
        .unwrap_or(0);
    let chars: Vec<char> = text.chars().collect();
    let at_char = text[..at.min(text.len())].chars().count();
    let start = at_char.saturating_sub(EXCERPT / 4);
    let end = (start + EXCERPT).min(chars.len());
    let mut part: String = chars[start..end].iter().collect();
    if start > 0 {
        if let Some(line) = part.find('\n') {
            part = part[line + 1..].to_owned();
        }
        part.insert_str(0, "… ");
    }
    if end < chars.len() {
        part.push_str(" …");
    }
    part.trim().to_owned()
}

/// `kiln_docs` over a turn's documentation.
pub(crate) struct KilnDocs(pub Rc<Vec<Section>>);

impl KilnDocs {
    pub(crate) fn spec() -> CapabilitySpec {
        builtin(
            KILN_DOCS,
            "Searches Kiln's own documentation offline (the README, what a program has and its budgets, the skills): what Kiln can do and where it is done. Answers the best sections, [{source, excerpt}].",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "Words to look for."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            Category::Read,
        )
    }
}

impl Implementation for KilnDocs {
    fn call(&self, args: Value, _: CallContext, _: Permit) -> LocalBoxFuture<'static, ToolReply> {
        let sections = self.0.clone();
        Box::pin(async move {
            let query = args
                .get("query")
                .and_then(Value::as_str)
                .filter(|query| !query.trim().is_empty())
                .ok_or_else(|| {
                    failure(
                        "invalid_arguments",
                        "kiln_docs needs `query`, words to look for".into(),
                    )
                })?;
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .map_or(DEFAULT_LIMIT, |limit| (limit as usize).clamp(1, MAX_LIMIT));
            let terms = query_terms(query);
            Ok(Value::Array(
                search(&sections, query, limit)
                    .into_iter()
                    .map(|section| {
                        json!({"source": section.source, "excerpt": excerpt(&section.text, &terms)})
                    })
                    .collect(),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_is_cut_at_its_headings_and_the_best_section_comes_first() {
        let all = sections(&[]);
        assert!(all.len() > 20, "{} sections", all.len());
        assert!(
            all.iter()
                .any(|section| section.source == "README › Embed Kiln on your site")
        );
        let found = search(&all, "embed widget iframe host page", 3);
        assert!(
            found[0]
                .source
                .starts_with("README › Embed Kiln on your site"),
            "{:?}",
            found
                .iter()
                .map(|section| &section.source)
                .collect::<Vec<_>>()
        );
        let budgets = search(&all, "js_cpu_ms budget", 5);
        assert!(
            budgets
                .iter()
                .any(|section| section.source.starts_with("Manifest"))
        );
        // A brief contract's pointers land on the library's own entries.
        for (query, source) in [
            ("kiln:csv", "Library › kiln:csv"),
            ("format.date", "Library › format"),
            ("kiln:dates toZone", "Library › kiln:dates"),
        ] {
            let found = search(&all, query, 1);
            assert_eq!(found[0].source, source, "{query}");
        }
        assert!(
            search(&all, "xyzzy plugh", 3).is_empty(),
            "no match, no hit"
        );
    }

    #[test]
    fn an_excerpt_is_around_the_match_and_bounded() {
        let text = format!(
            "{}\nthe cron line is here\n{}",
            "a\n".repeat(2_000),
            "b\n".repeat(2_000)
        );
        let part = excerpt(&text, &["cron".to_owned()]);
        assert!(part.contains("the cron line is here"), "{part}");
        assert!(part.chars().count() <= EXCERPT + 4);
        assert!(part.starts_with("… ") && part.ends_with(" …"));
    }
}
