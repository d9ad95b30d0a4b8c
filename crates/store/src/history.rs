//! Threads, messages and job records (a run of a program, a chat, an agent's
//! job), and `search_history`: full-text recall across all of them, whoever
//! the agent was.

use std::rc::Rc;

use crate::backend::{Backend, Expect, Op, Record, Scan, Table, retry_on_conflict, stored_value};
use crate::clock::{epoch_ms, unique_ms};
use crate::error::StoreError;
use crate::ids::random_suffix;
use crate::text;
pub use kiln_types::records::{
    ContextChange, Conversation, HistoryHit, Job, Thread, ThreadMessage, TurnFailure,
};

/// The most of a job's input or output kept, in characters.
pub const MAX_JOB_TEXT_CHARS: usize = 64 * 1024;
/// The most of a message kept, in characters.
pub const MAX_MESSAGE_CHARS: usize = 256 * 1024;
const APPEND_ATTEMPTS: usize = 8;

pub(crate) fn keep(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}… [cut at {limit} characters]", &text[..cut]),
        None => text.to_owned(),
    }
}

pub(crate) fn corrupt(what: &str, record: &Record, error: &serde_json::Error) -> StoreError {
    StoreError::Corrupt {
        place: format!("{what} `{}`", record.key),
        detail: error.to_string(),
        hint: None,
    }
}

/// How many characters of a program's first line make its title.
pub const TITLE_CHARS: usize = 80;

/// A program's title for the history: its first line that is not blank and
/// not a comment (`//` lines and `/* … */` blocks), cut at [`TITLE_CHARS`]
/// and marked with `…` when cut. Every entrance titles a run with this one
/// function, so a program has one title wherever it ran.
#[must_use]
pub fn title_of_program(code: &str) -> String {
    let mut in_block = false;
    for line in code.lines() {
        let mut rest = line.trim();
        loop {
            if in_block {
                match rest.find("*/") {
                    Some(end) => {
                        rest = rest[end + 2..].trim_start();
                        in_block = false;
                    }
                    None => {
                        rest = "";
                        break;
                    }
                }
            } else if let Some(after) = rest.strip_prefix("/*") {
                rest = after;
                in_block = true;
            } else {
                break;
            }
        }
        if rest.is_empty() || rest.starts_with("//") {
            continue;
        }
        return match rest.char_indices().nth(TITLE_CHARS) {
            Some((at, _)) => format!("{}…", rest[..at].trim_end()),
            None => rest.to_owned(),
        };
    }
    "(an empty program)".to_owned()
}

/// The output of a job whose owner ended before it did.
pub const INTERRUPTED_OUTPUT: &str =
    "Interrupted: the tab or process that ran it ended before it finished.";

/// What starts a job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobStart {
    pub kind: String,
    pub agent: String,
    pub title: String,
    pub input: String,
    /// The runtime running it: [`crate::owners::Owners::owner`].
    pub owner: String,
    /// A keyed codemode run's id ([`Job::run_id`]).
    pub run_id: Option<String>,
}

fn with_version<T: serde::de::DeserializeOwned>(
    what: &str,
    record: Record,
    set: impl FnOnce(&mut T, u64),
) -> Result<T, StoreError> {
    let version = record.version;
    let mut value: T = serde_json::from_value(record.value.clone())
        .map_err(|error| corrupt(what, &record, &error))?;
    set(&mut value, version);
    Ok(value)
}

fn job_from(record: Record) -> Result<Job, StoreError> {
    with_version("job", record, |job: &mut Job, version| {
        job.version = version
    })
}

pub(crate) fn thread_from(record: Record) -> Result<Thread, StoreError> {
    with_version("thread", record, |thread: &mut Thread, version| {
        thread.version = version
    })
}

/// The excerpt of `text` around the first line holding one of `terms`.
fn excerpt(text: &str, terms: &[String]) -> String {
    let line = text
        .lines()
        .find(|line| text::words(line).any(|word| terms.contains(&word)))
        .unwrap_or_else(|| text.lines().next().unwrap_or(""));
    keep(line.trim(), 200)
}

#[derive(Clone)]
pub struct History {
    backend: Rc<dyn Backend>,
}

impl History {
    #[must_use]
    pub fn new(backend: Rc<dyn Backend>) -> Self {
        Self { backend }
    }

    /// Records a job as `running`.
    pub async fn start_job(&self, start: JobStart) -> Result<Job, StoreError> {
        let now = unique_ms();
        let mut job = Job {
            id: format!("j-{now:013}-{}", random_suffix()),
            kind: start.kind,
            agent: if start.agent.is_empty() {
                crate::durable::DEFAULT_AGENT.into()
            } else {
                start.agent
            },
            title: keep(&start.title, 200),
            status: "running".into(),
            input: keep(&start.input, MAX_JOB_TEXT_CHARS),
            output: String::new(),
            started_ms: now,
            finished_ms: None,
            owner: start.owner,
            run_id: start.run_id,
            result: None,
            thread: None,
            version: 0,
        };
        self.backend
            .commit(vec![Op::put(
                Table::Jobs,
                job.id.clone(),
                stored_value(&job),
                Expect::Absent,
            )])
            .await?;
        job.version = 1;
        Ok(job)
    }

    /// Settles a job with its status and output.
    pub async fn finish_job(
        &self,
        id: &str,
        status: &str,
        output: &str,
    ) -> Result<Job, StoreError> {
        self.finish_run(id, status, output, None).await
    }

    /// Settles a job with its status, output and, for a keyed run, its whole
    /// result ([`Job::result`]).
    pub async fn finish_run(
        &self,
        id: &str,
        status: &str,
        output: &str,
        result: Option<serde_json::Value>,
    ) -> Result<Job, StoreError> {
        let mut job = self.job(id).await?;
        job.status = status.to_owned();
        job.output = keep(output, MAX_JOB_TEXT_CHARS);
        job.result = result;
        job.finished_ms = Some(epoch_ms());
        let changes = self
            .backend
            .commit(vec![Op::put(
                Table::Jobs,
                id,
                stored_value(&job),
                Expect::Version(job.version),
            )])
            .await?;
        job.version = changes
            .first()
            .and_then(|c| c.version)
            .unwrap_or(job.version + 1);
        Ok(job)
    }

    /// Notes on job `id` the conversation it was kept in.
    pub async fn link_thread(&self, id: &str, thread: &str) -> Result<(), StoreError> {
        retry_on_conflict(APPEND_ATTEMPTS, || async move {
            let mut job = self.job(id).await?;
            job.thread = Some(thread.to_owned());
            self.backend
                .commit(vec![Op::put(
                    Table::Jobs,
                    id,
                    stored_value(&job),
                    Expect::Version(job.version),
                )])
                .await
                .map(drop)
        })
        .await
    }

    /// Marks `interrupted` every job left `running` by an owner that is no
    /// longer alive (its tab closed, its process died), with an output that
    /// says so; answers those jobs. A job another runtime settles meanwhile
    /// keeps its own ending.
    ///
    /// # Errors
    ///
    /// The store's, when the jobs cannot be read or one cannot be written.
    pub async fn interrupt_abandoned(
        &self,
        owners: &dyn crate::owners::Owners,
    ) -> Result<Vec<Job>, StoreError> {
        let scan = Scan {
            prefix: "",
            reverse: false,
            limit: None,
        };
        let mut interrupted = Vec::new();
        for record in self.backend.scan(Table::Jobs, scan).await? {
            // A record that does not read is left as it is, for export to show.
            let Ok(job) = job_from(record) else {
                continue;
            };
            if job.status != "running" || owners.is_alive(&job.owner).await {
                continue;
            }
            match self
                .settle_running(&job, "interrupted", INTERRUPTED_OUTPUT)
                .await
            {
                Ok(Some(job)) => interrupted.push(job),
                Ok(None) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(interrupted)
    }

    /// Settles `job` if it is still the running version read; `None` when
    /// someone else wrote it first.
    async fn settle_running(
        &self,
        job: &Job,
        status: &str,
        output: &str,
    ) -> Result<Option<Job>, StoreError> {
        let mut settled = job.clone();
        settled.status = status.to_owned();
        settled.output = keep(output, MAX_JOB_TEXT_CHARS);
        settled.finished_ms = Some(epoch_ms());
        match self
            .backend
            .commit(vec![Op::put(
                Table::Jobs,
                job.id.clone(),
                stored_value(&settled),
                Expect::Version(job.version),
            )])
            .await
        {
            Ok(changes) => {
                settled.version = changes
                    .first()
                    .and_then(|c| c.version)
                    .unwrap_or(job.version + 1);
                Ok(Some(settled))
            }
            Err(StoreError::Conflict { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The conversations over the same store.
    #[must_use]
    pub fn conversations(&self) -> crate::threads::Threads {
        crate::threads::Threads::new(self.backend.clone())
    }

    pub async fn job(&self, id: &str) -> Result<Job, StoreError> {
        match self.backend.get(Table::Jobs, id).await? {
            Some(record) => job_from(record),
            None => Err(StoreError::NotFound {
                what: "job",
                key: id.to_owned(),
            }),
        }
    }

    /// The newest jobs first.
    pub async fn jobs(&self, limit: usize) -> Result<Vec<Job>, StoreError> {
        let scan = Scan {
            prefix: "",
            reverse: true,
            limit: Some(limit),
        };
        self.backend
            .scan(Table::Jobs, scan)
            .await?
            .into_iter()
            .map(job_from)
            .collect()
    }

    /// Jobs and messages matching `words`, best first.
    pub async fn search(&self, words: &str, limit: usize) -> Result<Vec<HistoryHit>, StoreError> {
        let terms = text::query_terms(words);
        if terms.is_empty() {
            return Err(StoreError::Invalid(format!(
                "the query `{words}` has no words to search for"
            )));
        }
        let mut hits = Vec::new();
        let jobs = self.backend.search(Table::Jobs, &terms).await?;
        let n_jobs = self.backend.count(Table::Jobs).await?;
        for (score, record) in text::rank(Table::Jobs, &terms, jobs, n_jobs) {
            let job = job_from(record)?;
            let text = format!("{}\n{}\n{}", job.title, job.input, job.output);
            hits.push(HistoryHit {
                kind: "job".into(),
                excerpt: excerpt(&text, &terms),
                id: job.id,
                agent: job.agent,
                title: job.title,
                created_ms: job.started_ms,
                score,
            });
        }
        let messages = self.backend.search(Table::Messages, &terms).await?;
        let n_messages = self.backend.count(Table::Messages).await?;
        let mut titles: std::collections::BTreeMap<String, (String, String)> = Default::default();
        for (score, record) in text::rank(Table::Messages, &terms, messages, n_messages) {
            let message: ThreadMessage = serde_json::from_value(record.value.clone())
                .map_err(|error| corrupt("message", &record, &error))?;
            if !titles.contains_key(&message.thread_id) {
                let named = match self.conversations().get(&message.thread_id).await {
                    Ok(thread) => (thread.title, thread.agent),
                    Err(_) => (String::new(), String::new()),
                };
                titles.insert(message.thread_id.clone(), named);
            }
            let (title, agent) = titles.get(&message.thread_id).cloned().unwrap_or_default();
            hits.push(HistoryHit {
                kind: "message".into(),
                excerpt: excerpt(&message.text, &terms),
                id: message.thread_id,
                agent,
                title,
                created_ms: message.created_ms,
                score,
            });
        }
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| b.created_ms.cmp(&a.created_ms))
        });
        hits.truncate(limit);
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::{TITLE_CHARS, title_of_program};

    #[test]
    fn a_programs_title_is_its_first_line_of_code() {
        let cases: [(&str, &str); 7] = [
            ("return 1;", "return 1;"),
            (
                "// A comment.\n\n  const a = 1;  \nreturn a;",
                "const a = 1;",
            ),
            ("/* one\n two */\nreturn 2;", "return 2;"),
            ("/* a */ return 3; // why", "return 3; // why"),
            (
                "/* a */ /* b */\n// c\nawait tools.x();",
                "await tools.x();",
            ),
            ("", "(an empty program)"),
            ("// only\n/* comments */", "(an empty program)"),
        ];
        for (code, title) in cases {
            assert_eq!(title_of_program(code), title, "{code:?}");
        }
        let long = format!("return {};", "x".repeat(100));
        let got = title_of_program(&long);
        assert_eq!(got.chars().count(), TITLE_CHARS + 1, "{got}");
        assert!(got.ends_with('…') && got.starts_with("return xxx"), "{got}");
    }
}
