//! The skill catalog (reference/000, "Skills System"): the system skills
//! the build ships (the repository's `skills/<name>/SKILL.md`, compiled in,
//! read-only) and the workspace's own ([`Config`]'s `skill:<name>`
//! records), as one list.
//!
//! - A shipped name is reserved: creating it, renaming onto it, changing or
//!   deleting the shipped skill are refused by name. A workspace record that
//!   already held the name predates the reservation, so it wins and the
//!   shipped skill is not listed twice.
//! - A shipped file that does not read is skipped with its problem
//!   ([`Shipped::skipped`]), never fatal; this crate's tests fail on one.
//! - Without a workspace (a run with no store) the catalog is the shipped
//!   skills alone, and writes are refused saying why.

use std::sync::OnceLock;

use kiln_types::skill::{Skill, SkillRecord, parse_skill_md};

use crate::config::Config;
use crate::error::StoreError;

/// The shipped `SKILL.md` files, by folder.
const SHIPPED_FILES: [(&str, &str); 4] = [
    (
        "big-jobs",
        include_str!("../../../skills/big-jobs/SKILL.md"),
    ),
    (
        "tidy-data",
        include_str!("../../../skills/tidy-data/SKILL.md"),
    ),
    (
        "web-research",
        include_str!("../../../skills/web-research/SKILL.md"),
    ),
    (
        "workspace-notes",
        include_str!("../../../skills/workspace-notes/SKILL.md"),
    ),
];

/// The build's system skills: those that read, and why any other was skipped.
#[derive(Debug)]
pub struct Shipped {
    pub skills: Vec<SkillRecord>,
    /// `folder: problem`, for each file that did not read.
    pub skipped: Vec<String>,
}

impl Shipped {
    /// Reads `files` (`(folder, SKILL.md text)`), skipping what does not read.
    fn read(files: &[(&str, &str)]) -> Self {
        let mut skills = Vec::new();
        let mut skipped = Vec::new();
        for (folder, text) in files {
            match parse_skill_md(text) {
                Ok(skill) if skill.name == *folder => skills.push(skill),
                Ok(skill) => skipped.push(format!(
                    "{folder}: the frontmatter names `{}`, not its folder",
                    skill.name
                )),
                Err(why) => skipped.push(format!("{folder}: {why}")),
            }
        }
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        Self { skills, skipped }
    }
}

/// The system skills this build ships, read once.
#[must_use]
pub fn shipped() -> &'static Shipped {
    static SHIPPED: OnceLock<Shipped> = OnceLock::new();
    SHIPPED.get_or_init(|| Shipped::read(&SHIPPED_FILES))
}

fn reserved(name: &str) -> StoreError {
    StoreError::Invalid(format!(
        "`{name}` is a system skill that ships with Kiln: it cannot be created, changed or deleted; copy it under another name to make your own"
    ))
}

/// One catalog over the shipped skills and a workspace's own.
#[derive(Clone)]
pub struct Skills {
    config: Option<Config>,
}

impl Skills {
    /// The catalog of a workspace (`None`: the shipped skills alone).
    #[must_use]
    pub fn new(config: Option<Config>) -> Self {
        Self { config }
    }

    fn config(&self) -> Result<&Config, StoreError> {
        self.config.as_ref().ok_or_else(|| {
            StoreError::Invalid(
                "this job has no workspace to keep skills in; only the system skills can be read"
                    .into(),
            )
        })
    }

    async fn own(&self) -> Result<Vec<SkillRecord>, StoreError> {
        match &self.config {
            Some(config) => config.skills().await,
            None => Ok(Vec::new()),
        }
    }

    /// Every skill, by name: the workspace's own, and each shipped one whose
    /// name no record of the workspace holds.
    pub async fn list(&self) -> Result<Vec<Skill>, StoreError> {
        let own = self.own().await?;
        let shadowed: Vec<String> = own.iter().map(|mine| mine.name.clone()).collect();
        let mut all: Vec<Skill> = shipped()
            .skills
            .iter()
            .filter(|skill| !shadowed.contains(&skill.name))
            .map(|record| Skill {
                record: record.clone(),
                system: true,
            })
            .chain(own.into_iter().map(|record| Skill {
                record,
                system: false,
            }))
            .collect();
        all.sort_by(|a, b| a.record.name.cmp(&b.record.name));
        Ok(all)
    }

    /// The skill `name`, if the catalog has it.
    pub async fn get(&self, name: &str) -> Result<Option<Skill>, StoreError> {
        Ok(self
            .list()
            .await?
            .into_iter()
            .find(|skill| skill.record.name == name))
    }

    /// Whether `name` is the workspace's own record.
    async fn is_own(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.own().await?.iter().any(|mine| mine.name == name))
    }

    fn is_shipped(name: &str) -> bool {
        shipped().skills.iter().any(|skill| skill.name == name)
    }

    /// Saves a new skill; answers its version. A shipped name is refused,
    /// and so is one the workspace already has (`conflict`).
    pub async fn create(&self, record: &SkillRecord) -> Result<u64, StoreError> {
        let config = self.config()?;
        if Self::is_shipped(&record.name) {
            return Err(reserved(&record.name));
        }
        config
            .put_skill(&SkillRecord {
                version: 0,
                ..record.clone()
            })
            .await
    }

    /// Changes the workspace's skill `name` (read at `record.version`) into
    /// `record`, renaming it when the names differ; answers the new version.
    /// A shipped skill, or a rename onto a shipped name, is refused.
    pub async fn update(&self, name: &str, record: &SkillRecord) -> Result<u64, StoreError> {
        let config = self.config()?;
        if !self.is_own(name).await? {
            return Err(if Self::is_shipped(name) {
                reserved(name)
            } else {
                StoreError::NotFound {
                    what: "skill",
                    key: name.to_owned(),
                }
            });
        }
        if record.name == name {
            return config.put_skill(record).await;
        }
        if Self::is_shipped(&record.name) {
            return Err(reserved(&record.name));
        }
        config.rename_skill(name, record).await
    }

    /// Deletes the workspace's skill `name` at `version`; a shipped one is refused.
    pub async fn delete(&self, name: &str, version: u64) -> Result<(), StoreError> {
        let config = self.config()?;
        if !self.is_own(name).await? && Self::is_shipped(name) {
            return Err(reserved(name));
        }
        config.remove_skill(name, version).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::MemoryBackend;
    use futures::executor::block_on;

    #[test]
    fn every_shipped_skill_reads() {
        let shipped = shipped();
        assert!(shipped.skipped.is_empty(), "{:?}", shipped.skipped);
        assert_eq!(shipped.skills.len(), SHIPPED_FILES.len());
        let web = shipped
            .skills
            .iter()
            .find(|skill| skill.name == "web-research")
            .expect("web-research ships");
        assert_eq!(web.required_tools, ["http_request"]);
    }

    #[test]
    fn a_malformed_shipped_file_is_skipped_not_fatal() {
        let read = Shipped::read(&[
            ("good", "---\nname: good\ndescription: Fine.\n---\nbody"),
            ("bad", "no frontmatter"),
            ("moved", "---\nname: other\ndescription: Fine.\n---\n"),
        ]);
        assert_eq!(read.skills.len(), 1);
        assert_eq!(read.skipped.len(), 2);
        assert!(read.skipped[0].starts_with("bad: "), "{:?}", read.skipped);
        assert!(read.skipped[1].contains("names `other`, not its folder"));
    }

    fn record(name: &str) -> SkillRecord {
        SkillRecord {
            name: name.into(),
            description: format!("{name} helps."),
            body: "Do it well.".into(),
            required_tools: Vec::new(),
            version: 0,
        }
    }

    #[test]
    fn shipped_names_are_reserved_and_the_workspaces_own_are_kept() {
        let skills = Skills::new(Some(Config::new(MemoryBackend::new())));
        block_on(async {
            let listed = skills.list().await.unwrap();
            assert_eq!(listed.len(), SHIPPED_FILES.len());
            assert!(listed.iter().all(|skill| skill.system));
            for name in ["web-research", "big-jobs"] {
                let refused = skills.create(&record(name)).await.unwrap_err();
                assert!(
                    refused.to_string().contains("is a system skill"),
                    "{refused}"
                );
                let refused = skills.delete(name, 1).await.unwrap_err();
                assert!(
                    refused.to_string().contains("is a system skill"),
                    "{refused}"
                );
                let refused = skills.update(name, &record(name)).await.unwrap_err();
                assert!(
                    refused.to_string().contains("is a system skill"),
                    "{refused}"
                );
            }
            let mut mine = record("packing");
            mine.version = skills.create(&mine).await.unwrap();
            let again = skills.create(&record("packing")).await.unwrap_err();
            assert_eq!(again.code(), "conflict");
            // A rename onto a shipped name is refused; onto a free one it moves.
            let onto = SkillRecord {
                name: "web-research".into(),
                ..mine.clone()
            };
            assert!(
                skills
                    .update("packing", &onto)
                    .await
                    .unwrap_err()
                    .to_string()
                    .contains("is a system skill")
            );
            let moved = SkillRecord {
                name: "packing-list".into(),
                ..mine.clone()
            };
            let version = skills.update("packing", &moved).await.unwrap();
            let got = skills.get("packing-list").await.unwrap().unwrap();
            assert!(!got.system);
            assert_eq!(got.record.version, version);
            assert!(skills.get("packing").await.unwrap().is_none());
            skills.delete("packing-list", version).await.unwrap();
            assert!(skills.get("packing-list").await.unwrap().is_none());
        });
    }

    #[test]
    fn a_workspace_record_that_held_a_shipped_name_wins_and_is_listed_once() {
        let config = Config::new(MemoryBackend::new());
        // Written before the name was reserved (straight to the store).
        block_on(config.put_skill(&record("tidy-data"))).unwrap();
        let skills = Skills::new(Some(config));
        block_on(async {
            let listed = skills.list().await.unwrap();
            let tidy: Vec<&Skill> = listed
                .iter()
                .filter(|skill| skill.record.name == "tidy-data")
                .collect();
            assert_eq!(tidy.len(), 1);
            assert!(!tidy[0].system);
            assert_eq!(tidy[0].record.body, "Do it well.");
            skills
                .delete("tidy-data", tidy[0].record.version)
                .await
                .unwrap();
            assert!(skills.get("tidy-data").await.unwrap().unwrap().system);
        });
    }

    #[test]
    fn without_a_workspace_only_the_shipped_skills_are_read() {
        let skills = Skills::new(None);
        block_on(async {
            assert_eq!(skills.list().await.unwrap().len(), SHIPPED_FILES.len());
            let refused = skills.create(&record("mine")).await.unwrap_err();
            assert!(refused.to_string().contains("no workspace"), "{refused}");
        });
    }
}
