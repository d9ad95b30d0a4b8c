//! A run's job in the workspace's history, written the same way whichever
//! entrance ran it: one title ([`kiln_store::history::title_of_program`]),
//! one recorded output (the `tool-result/v1` text a model reads), one status
//! rule ([`status_of`]).

use kiln_store::StoreError;
use kiln_store::history::{History, Job, JobStart, title_of_program};
use kiln_types::tool_result::ToolResult;

use crate::ladder::Workspace;
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
            title: title_of_program(&request.code),
            input: request.code.clone(),
            run_id: request
                .key
                .as_ref()
                .map(|key| crate::program::RunId::keyed(&request.agent, key).id),
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
                owner: workspace.custody.owner().to_owned(),
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
