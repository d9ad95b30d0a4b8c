//! A run's job in the workspace's history, written the same way whichever
//! entrance ran it: one title ([`kiln_store::history::title_of_program`]),
//! one recorded output (the `tool-result/v1` text a model reads), one status
//! rule ([`status_of`]).

use kiln_store::StoreError;
use kiln_store::history::{History, Job, JobStart, title_of_program};
use kiln_types::RunResult;
use kiln_types::tool_result::{ToolResult, run_id_from};

use crate::environment::Workspace;
use crate::request::RunRequest;

/// A job's status for a run's result: `cancelled` when it was cancelled,
/// `error` for any other error, else `ok`.
#[must_use]
pub fn status_of(result: &ToolResult) -> &'static str {
    match (result.is_error, result.error_code.as_deref()) {
        (true, Some("cancelled")) => "cancelled",
        (true, _) => "error",
        (false, _) => "ok",
    }
}

/// What a job is, as the history shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOf {
    /// `program` or `agent`.
    pub kind: String,
    pub title: String,
    /// What it was given: the program's text, the person's message.
    pub input: String,
    /// A keyed program run's id: the record keeps it and, once it ends, the
    /// whole result (a retry after a restart is answered from it).
    pub run_id: Option<String>,
}

impl JobOf {
    /// A program run's job.
    #[must_use]
    pub fn program(request: &RunRequest) -> Self {
        Self {
            kind: "program".into(),
            title: request
                .title
                .clone()
                .unwrap_or_else(|| title_of_program(&request.code)),
            input: request.code.clone(),
            run_id: request
                .key
                .as_ref()
                .map(|key| RunId::keyed(&request.agent, key).id),
        }
    }
}

/// A run's job, `running` until [`RunRecord::finish`].
pub struct RunRecord {
    history: History,
    job: Job,
}

impl RunRecord {
    /// Records the request's program as a running job.
    ///
    /// # Errors
    ///
    /// The store's, when the job could not be written.
    pub async fn start(workspace: &Workspace, request: &RunRequest) -> Result<Self, StoreError> {
        Self::start_job(workspace, &JobOf::program(request), &request.agent).await
    }

    /// Records `job` of `agent` as running.
    ///
    /// # Errors
    ///
    /// The store's, when the job could not be written.
    pub async fn start_job(
        workspace: &Workspace,
        job: &JobOf,
        agent: &str,
    ) -> Result<Self, StoreError> {
        let history = History::new(workspace.backend.clone());
        let job = history
            .start_job(JobStart {
                kind: job.kind.clone(),
                agent: agent.to_owned(),
                title: job.title.clone(),
                input: job.input.clone(),
                owner: workspace.owners.owner().to_owned(),
                run_id: job.run_id.clone(),
            })
            .await?;
        Ok(Self { history, job })
    }

    #[must_use]
    pub fn job_id(&self) -> &str {
        &self.job.id
    }

    /// Settles the job with the run's result.
    ///
    /// # Errors
    ///
    /// The store's; the run's answer stands either way.
    pub async fn finish(&self, result: &ToolResult) -> Result<Job, StoreError> {
        let kept = self
            .job
            .run_id
            .as_ref()
            .and_then(|_| serde_json::to_value(result).ok());
        self.history
            .finish_run(&self.job.id, status_of(result), &result.text(), kept)
            .await
    }

    /// Settles the job as `status` (`ok`, `error`, `cancelled`) with `output`.
    ///
    /// # Errors
    ///
    /// The store's; the answer stands either way.
    pub async fn settle(&self, status: &str, output: &str) -> Result<Job, StoreError> {
        self.history.finish_job(&self.job.id, status, output).await
    }
}

/// A run's id and whether a call key named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunId {
    /// `codemode:` and 16 hex digits.
    pub id: String,
    /// No call key: a lost reply cannot be recovered (the `keyless` warning).
    pub keyless: bool,
}

impl RunId {
    /// The id of `request`'s run: derived from its agent and call key when it
    /// has one (a retry with the same key names the same run), else random.
    #[must_use]
    pub fn for_request(request: &RunRequest, random: &dyn Fn() -> [u8; 8]) -> Self {
        match &request.key {
            Some(key) => Self::keyed(&request.agent, key),
            None => Self {
                id: run_id_from(random()),
                keyless: true,
            },
        }
    }

    /// The id of `agent`'s run called with `key`: the same everywhere, every time.
    #[must_use]
    pub fn keyed(agent: &str, key: &str) -> Self {
        // FNV-1a over agent, a separator and key: stable everywhere.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in agent.bytes().chain([0]).chain(key.bytes()) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        Self {
            id: run_id_from(hash.to_be_bytes()),
            keyless: false,
        }
    }

    /// The `tool-result/v1` object of `run` under this id.
    #[must_use]
    pub fn result_of(&self, run: RunResult) -> ToolResult {
        run.report
            .into_summary(
                self.id.clone(),
                run.warnings,
                run.catalog_digest,
                self.keyless,
            )
            .into_result()
    }
}
