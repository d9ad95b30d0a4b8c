//! Durable memory: facts an agent keeps across jobs, per workspace (one
//! database per workspace) and agent, found again by a ranked full-text
//! query and rated by use (`helpful` counts up; `outdated` demotes).

use std::rc::Rc;

use serde::Serialize;

use crate::backend::{Backend, Expect, Op, Record, Scan, Table, retry_on_conflict, stored_value};
use crate::clock::{epoch_ms, unique_ms};
use crate::error::StoreError;
use crate::ids::random_suffix;
use crate::text;
pub use kiln_types::records::{DEFAULT_AGENT, Mark, Memory};

/// The longest memory text, in characters.
pub const MAX_TEXT_CHARS: usize = 8_000;
/// The longest agent name.
pub const MAX_AGENT_CHARS: usize = 100;
/// How often a mark retries when another writer got there first.
const MARK_ATTEMPTS: usize = 8;

/// Reads a stored memory record.
pub fn memory_from_record(record: Record) -> Result<Memory, StoreError> {
    let mut memory: Memory =
        serde_json::from_value(record.value).map_err(|error| StoreError::Corrupt {
            place: format!("memory `{}`", record.key),
            detail: error.to_string(),
            hint: None,
        })?;
    memory.version = record.version;
    Ok(memory)
}

/// A query's hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    #[serde(flatten)]
    pub memory: Memory,
    pub score: f64,
}

/// The durable memories of one workspace.
#[derive(Clone)]
pub struct DurableMemory {
    backend: Rc<dyn Backend>,
}

fn check_agent(agent: &str) -> Result<&str, StoreError> {
    let agent = agent.trim();
    if agent.is_empty() {
        return Ok(DEFAULT_AGENT);
    }
    if agent.chars().count() > MAX_AGENT_CHARS || agent.chars().any(char::is_control) {
        return Err(StoreError::Invalid(format!(
            "agent name `{}` must be at most {MAX_AGENT_CHARS} characters with no control characters",
            agent.chars().take(40).collect::<String>()
        )));
    }
    Ok(agent)
}

fn check_text(text: &str) -> Result<&str, StoreError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(StoreError::Invalid("a memory's text is empty".into()));
    }
    let chars = text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(StoreError::Invalid(format!(
            "a memory's text is {chars} characters; at most {MAX_TEXT_CHARS} are kept"
        )));
    }
    Ok(text)
}

impl DurableMemory {
    #[must_use]
    pub fn new(backend: Rc<dyn Backend>) -> Self {
        Self { backend }
    }

    /// Keeps `text` for `agent` (empty: [`DEFAULT_AGENT`]); answers the new memory.
    pub async fn save(&self, agent: &str, text: &str) -> Result<Memory, StoreError> {
        let agent = check_agent(agent)?;
        let text = check_text(text)?;
        let now = unique_ms();
        let mut memory = Memory {
            id: format!("m-{now:013}-{}", random_suffix()),
            text: text.to_owned(),
            agent: agent.to_owned(),
            helpful: 0,
            outdated: false,
            created_ms: now,
            updated_ms: now,
            version: 0,
        };
        self.backend
            .commit(vec![Op::put(
                Table::Memories,
                memory.id.clone(),
                stored_value(&memory),
                Expect::Absent,
            )])
            .await?;
        memory.version = 1;
        Ok(memory)
    }

    pub async fn get(&self, id: &str) -> Result<Memory, StoreError> {
        match self.backend.get(Table::Memories, id).await? {
            Some(record) => memory_from_record(record),
            None => Err(StoreError::NotFound {
                what: "memory",
                key: id.to_owned(),
            }),
        }
    }

    /// The newest memories first (of `agent` when named), at most `limit`.
    pub async fn list(
        &self,
        agent: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<Memory>, StoreError> {
        // Without an agent the backend applies the limit; with one it filters first.
        let scan = Scan {
            prefix: "",
            reverse: true,
            limit: if agent.is_none() { limit } else { None },
        };
        let mut memories = Vec::new();
        for record in self.backend.scan(Table::Memories, scan).await? {
            let memory = memory_from_record(record)?;
            if agent.is_none_or(|agent| memory.agent == agent) {
                memories.push(memory);
                if limit.is_some_and(|limit| memories.len() >= limit) {
                    break;
                }
            }
        }
        Ok(memories)
    }

    /// Memories matching `words`, best first: BM25 over the text, lifted by
    /// helpful marks, outdated ones after every current one.
    pub async fn query(
        &self,
        words: &str,
        agent: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Hit>, StoreError> {
        let terms = text::query_terms(words);
        if terms.is_empty() {
            return Err(StoreError::Invalid(format!(
                "the query `{words}` has no words to search for"
            )));
        }
        let hits = self.backend.search(Table::Memories, &terms).await?;
        let n_records = self.backend.count(Table::Memories).await?;
        let mut found = Vec::new();
        for (score, record) in text::rank(Table::Memories, &terms, hits, n_records) {
            let memory = memory_from_record(record)?;
            if agent.is_some_and(|agent| memory.agent != agent) {
                continue;
            }
            let lift = 1.0 + 0.1 * f64::from(memory.helpful.min(20));
            found.push(Hit {
                score: score * lift,
                memory,
            });
        }
        found.sort_by(|a, b| {
            a.memory
                .outdated
                .cmp(&b.memory.outdated)
                .then_with(|| b.score.total_cmp(&a.score))
                .then_with(|| b.memory.id.cmp(&a.memory.id))
        });
        found.truncate(limit);
        Ok(found)
    }

    /// Marks a memory. Marks from several writers all count: a lost
    /// compare-and-swap reads again and retries.
    pub async fn mark(&self, id: &str, mark: Mark) -> Result<Memory, StoreError> {
        retry_on_conflict(MARK_ATTEMPTS, || async move {
            let mut memory = self.get(id).await?;
            match mark {
                Mark::Helpful => memory.helpful = memory.helpful.saturating_add(1),
                Mark::Outdated => memory.outdated = true,
            }
            memory.updated_ms = epoch_ms();
            memory.version = self.write(&memory).await?;
            Ok(memory)
        })
        .await
    }

    /// Replaces a memory's text if it is still at `version`; a newer version
    /// is a [`StoreError::Conflict`] and nothing is written.
    pub async fn edit(&self, id: &str, version: u64, text: &str) -> Result<Memory, StoreError> {
        let text = check_text(text)?;
        let mut memory = self.get(id).await?;
        memory.version = version;
        memory.text = text.to_owned();
        memory.outdated = false;
        memory.updated_ms = epoch_ms();
        memory.version = self.write(&memory).await?;
        Ok(memory)
    }

    /// Deletes a memory (only at `version`, when given).
    pub async fn remove(&self, id: &str, version: Option<u64>) -> Result<(), StoreError> {
        if self.backend.get(Table::Memories, id).await?.is_none() {
            return Err(StoreError::NotFound {
                what: "memory",
                key: id.to_owned(),
            });
        }
        let expect = version.map_or(Expect::Any, Expect::Version);
        self.backend
            .commit(vec![Op::delete(Table::Memories, id, expect)])
            .await?;
        Ok(())
    }

    /// Writes `memory` expecting its current `version`; answers the new one.
    async fn write(&self, memory: &Memory) -> Result<u64, StoreError> {
        let changes = self
            .backend
            .commit(vec![Op::put(
                Table::Memories,
                memory.id.clone(),
                stored_value(memory),
                Expect::Version(memory.version),
            )])
            .await?;
        Ok(changes
            .first()
            .and_then(|change| change.version)
            .unwrap_or(memory.version + 1))
    }
}
